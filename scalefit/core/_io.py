"""Atomic file writes and checked readers of user files.

A reader never sees a half-written file and a kill never leaves one; TOML, JSONL texts and torch
checkpoints are read with one clear error naming the file for bad input.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import math
import os
import re
import socket
import stat
import tempfile
import time
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import ScaleFitError, one_line

#: Temporary files are named ``.<target>.<pid>@<host>.<random>.tmp``: the writer is recorded, so a
#: cleanup removes only the files of writers that are gone (never another live process's file).
_TMP_RE = re.compile(r"^\..+\.(?P<pid>\d+)@(?P<host>[A-Za-z0-9-]+)\.[A-Za-z0-9_]+\.tmp$")
#: A temporary file from another host is only removed once it is this old (seconds).
_FOREIGN_TMP_AGE_S = 24 * 3600


def user_cache() -> Path:
    """The root of scalefit's user cache, the one rule every cached file follows.

    ``$SCALEFIT_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/scalefit``, else
    ``~/.cache/scalefit``. The dataset copies live in ``data/``, the compiled programs in
    ``jax/``, the trainer's corpora and token folders in ``corpora/`` and ``tokens/``.
    """
    root = os.environ.get("SCALEFIT_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "scalefit"


def cpu_room() -> int | None:
    """Bytes this process may still allocate in main memory, or None when it cannot be told.

    The smaller of ``MemAvailable`` (``/proc/meminfo``, else ``os.sysconf``) and the room left
    under the cgroup's memory limit (v2, else v1).
    """
    found = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    return min(found) if found else None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    """Room under the cgroup memory limit (v2, else v1), or None without a limit."""
    pairs = (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    )
    for limit_path, usage_path in pairs:
        try:
            limit = Path(limit_path).read_text().strip()
            usage = int(Path(usage_path).read_text().strip())
        except (OSError, ValueError):
            continue
        if not limit.isdigit() or int(limit) >= 1 << 60:  # "max" or v1's "no limit"
            return None
        return max(0, int(limit) - usage)
    return None


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0]) or "host"


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, fsync, rename).

    Parameters
    ----------
    path : path-like
        Destination. Parent folders are created.
    data : bytes
        Content.

    Returns
    -------
    pathlib.Path
        The destination path.
    """
    path = Path(path)
    _check_target(path)
    prefix = f".{path.name}.{os.getpid()}@{_host()}."
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ScaleFitError(f"{path}: cannot write this file ({exc.strerror or exc}).") from None
    staged = _STAGED.get()
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if staged is None:
            os.replace(tmp, path)
        else:
            staged.append((tmp, path))
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # a full disk, a quota: name the file, not "a path"
            msg = f"{path}: cannot write this file ({exc.strerror or exc})."
            raise ScaleFitError(msg) from None
        raise
    return path


_STAGED: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "scalefit_staged", default=None
)


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """Hold back the files :func:`atomic_write_bytes` writes in the block until it ends.

    Each file is written in full (to its temporary name) when asked, so a full disk or a folder
    in a file's place fails at once; the files are put in place together when the block ends
    normally and removed when it raises. A command whose last output cannot be written leaves
    none of its outputs behind (the exit-code rule: exit 2 writes nothing). Code in the block
    must not read back what it wrote.
    """
    staged: list[tuple[str, Path]] = []
    token = _STAGED.set(staged)
    try:
        yield
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    finally:
        _STAGED.reset(token)
    for tmp, path in staged:
        os.replace(tmp, path)


def inside(folder: str | os.PathLike, name: str | os.PathLike, *, what: str) -> Path:
    """``folder / name``, refused when it would lead out of ``folder``: the one path policy.

    Every file or folder the package writes, or reads by a name taken from a configuration,
    inside a folder the user named (an output folder, the cache, a configuration's folder) goes
    through here.

    Parameters
    ----------
    folder : path-like
        The folder the user named.
    name : path-like
        A relative name inside it (from a configuration, a spec or the package).
    what : str
        What the path is, for the message (e.g. ``"run folder"``).

    Returns
    -------
    pathlib.Path
        ``folder / name`` (not resolved).

    Raises
    ------
    ScaleFitError
        If ``name`` is absolute, has a ``..`` part, or passes through a symbolic link that
        leads out of ``folder``.

    Examples
    --------
    >>> str(inside("runs", "a/b", what="run folder"))
    'runs/a/b'
    """
    rel = Path(name)
    where = f"{what} {str(name)!r}"
    if rel.is_absolute() or rel.drive or ".." in rel.parts:
        raise ScaleFitError(
            f"{where}: expected a name inside {folder} (no absolute path, no '..' part)."
        )
    target = Path(folder) / rel
    root = Path(folder).resolve()
    real = target.resolve()
    if real != root and root not in real.parents:
        raise ScaleFitError(
            f"{where}: {target} is a symbolic link (or passes through one) to {real}, outside "
            f"{folder}; refusing to follow it (remove the link)."
        )
    return target


def _check_target(path: Path) -> None:
    """Create the parent folders of ``path``; refuse a folder, device, FIFO or socket in the way.

    Replacing a character device or a FIFO with a regular file (as root, ``os.replace`` would)
    is never what a user meant by an output name.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ScaleFitError(f"{path}: cannot write here ({exc.strerror or exc}).") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ScaleFitError(f"{path}: is a folder; expected a file name to write to.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ScaleFitError(
            f"{path}: is {_kind(st.st_mode)}, not a regular file; refusing to replace it "
            "(choose another output name)."
        )
    ensure_folder(path.parent)


def ensure_folder(folder: str | os.PathLike) -> Path:
    """Create ``folder`` (and its parents); a file in the way is one clear error.

    Parameters
    ----------
    folder : path-like
        The folder.

    Returns
    -------
    pathlib.Path
        The folder.

    Raises
    ------
    ScaleFitError
        If ``folder`` or one of its parents is an existing file, or cannot be created.
    """
    folder = Path(folder)
    for parent in (folder, *folder.parents):
        if parent.exists() and not parent.is_dir():
            raise ScaleFitError(
                f"{folder}: cannot create this folder because {parent} is a file; expected a "
                f"folder path."
            )
        if parent.exists():
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ScaleFitError(f"{folder}: cannot create this folder ({exc.strerror}).") from None
    return folder


def remove_stale_temps(folder: str | os.PathLike) -> list[Path]:
    """Remove temporary files that killed writers left in ``folder``; keep those of live ones.

    A file is stale when its writer (recorded in its name) ran on this host and is no longer
    running, or ran on another host and the file is over a day old. Files not named by
    :func:`atomic_write_bytes` are left alone.

    Parameters
    ----------
    folder : path-like
        The folder to clean (not recursive).

    Returns
    -------
    list of pathlib.Path
        The files removed.
    """
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    host = _host()
    for path in folder.glob(".*.tmp"):
        m = _TMP_RE.match(path.name)
        if m is None:
            continue
        if m["host"] == host:
            stale = not _pid_alive(int(m["pid"]))
        else:
            try:
                stale = time.time() - path.stat().st_mtime > _FOREIGN_TMP_AGE_S
            except FileNotFoundError:
                continue
        if stale:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    # A killed process whose parent has not reaped it yet (a zombie: state Z in /proc on Linux;
    # common in containers whose first process reaps no orphans) still answers kill(pid, 0) but
    # will never finish its write.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _refuse_odd_lock(path: Path) -> None:
    """A lock file that exists but is a link, FIFO, device or folder is one clear error."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise ScaleFitError(f"{path}: is {_kind(mode)}; expected a regular lock file (delete it).")


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, *, wait: bool = True, what: str = "folder") -> Iterator:
    """Hold an exclusive OS lock (:class:`filelock.FileLock`) on ``folder/.scalefit.lock``.

    The kernel releases the lock when the holder exits or is killed, so a crash never leaves a
    folder locked. The holder writes who it is to ``.scalefit.lock.owner``; a second process
    either waits (with one warning naming the holder) or gets a
    :class:`~scalefit.core.errors.ScaleFitError`.

    Parameters
    ----------
    folder : path-like
        The folder to lock (created if missing).
    wait : bool, default True
        Wait for the holder to finish instead of raising.
    what : str
        Words for the messages (e.g. ``"sweep folder"``).

    Raises
    ------
    ScaleFitError
        If ``wait`` is false and another process holds the lock, or the lock file (or its owner
        file) is not a regular file.
    """
    from filelock import FileLock, Timeout

    folder = ensure_folder(folder)
    path, owner = folder / ".scalefit.lock", folder / ".scalefit.lock.owner"
    for file in (path, owner):
        _refuse_odd_lock(file)
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        try:
            holder = read_input_bytes(owner, what="lock owner", max_bytes=512).decode().strip()
        except (ScaleFitError, UnicodeDecodeError):
            holder = ""
        holder = holder or "another process"
        if not wait:
            raise ScaleFitError(
                f"{folder}: this {what} is in use by {holder} (lock {path.name}); wait for "
                f"it to finish or choose another output folder."
            ) from None
        warnings.warn(
            f"{folder}: this {what} is in use by {holder}; waiting for it to finish.",
            UserWarning,
            stacklevel=3,
        )
        lock.acquire()
    try:
        atomic_write_text(owner, f"pid {os.getpid()} on {socket.gethostname()}\n")
        yield path
    finally:
        owner.unlink(missing_ok=True)
        lock.release()


#: Largest input file read by default (bytes): tables, result files, configurations.
MAX_INPUT_BYTES = 1 << 30
#: Deepest nesting of arrays and objects accepted in a JSON or TOML input.
MAX_NESTING = 64
#: Most digits accepted in one JSON integer literal (larger ones are refused, not rounded).
MAX_INT_DIGITS = 30
#: Largest configuration file (TOML) read (bytes).
MAX_CONFIG_BYTES = 16 << 20


def _kind(mode: int) -> str:
    """Words for a file type that is not a regular file."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def check_input_file(
    path: str | os.PathLike, *, what: str, max_bytes: int = MAX_INPUT_BYTES
) -> os.stat_result:
    """Check that ``path`` names a readable regular file of at most ``max_bytes`` bytes.

    Symbolic links are followed, so a link to ``/dev/zero`` is refused as a device. FIFOs,
    devices and sockets are refused at once (reading them could block or never end).

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages (e.g. ``"fit result (JSON)"``).
    max_bytes : int
        The largest size accepted.

    Returns
    -------
    os.stat_result
        The file's status.

    Raises
    ------
    ScaleFitError
        Naming the file and why it cannot be read.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ScaleFitError(f"{path}: no such file; expected a {what}.") from None
    except OSError as exc:  # name too long, permission, loop of links, ...
        raise ScaleFitError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    if not stat.S_ISREG(st.st_mode):
        raise ScaleFitError(f"{path}: is {_kind(st.st_mode)}; expected a {what} (a regular file).")
    if st.st_size > max_bytes:
        raise ScaleFitError(
            f"{path}: {st.st_size:,} bytes, over the {max_bytes:,}-byte limit for a {what}."
        )
    return st


def read_input_bytes(
    path: str | os.PathLike, *, what: str, max_bytes: int = MAX_INPUT_BYTES
) -> bytes:
    """Read a user file's bytes after :func:`check_input_file`; never blocks, never unbounded.

    The file is opened non-blocking and checked again through its descriptor, so a file swapped
    for a FIFO after the check cannot block, and at most ``max_bytes`` bytes are read.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages.
    max_bytes : int
        The largest size accepted.

    Returns
    -------
    bytes
        The content.

    Raises
    ------
    ScaleFitError
        Naming the file and why it cannot be read.
    """
    with open_input(path, what=what, max_bytes=max_bytes) as fh:
        try:
            # read what fstat reports (+1 to see growth), then any growth in bounded chunks: a
            # read(max_bytes + 1) would reserve the whole limit (1 GiB) for a small file
            size = min(max_bytes, os.fstat(fh.fileno()).st_size)
            data = fh.read(size + 1)
            while size < len(data) <= max_bytes:
                more = fh.read(min(1 << 20, max_bytes + 1 - len(data)))
                if not more:
                    break
                data += more
        except OSError as exc:
            raise ScaleFitError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    if len(data) > max_bytes:
        raise ScaleFitError(f"{path}: over the {max_bytes:,}-byte limit for a {what}.")
    return data


def open_input(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_INPUT_BYTES):
    """Open a user file for streaming after :func:`check_input_file`; never blocks.

    The file is opened non-blocking and checked again through its descriptor, as in
    :func:`read_input_bytes`, for readers that stream a large file instead of reading it whole.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages.
    max_bytes : int
        The largest size accepted.

    Returns
    -------
    io.BufferedReader
        The open file (binary); the caller closes it.

    Raises
    ------
    ScaleFitError
        Naming the file and why it cannot be read.
    """
    check_input_file(path, what=what, max_bytes=max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ScaleFitError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    fh = os.fdopen(fd, "rb")
    mode = os.fstat(fh.fileno()).st_mode
    if not stat.S_ISREG(mode):
        fh.close()
        raise ScaleFitError(f"{path}: is {_kind(mode)}; expected a {what}.")
    return fh


def _depth(obj: Any, limit: int) -> int:
    """Nesting depth of lists and dicts in ``obj`` (stops counting past ``limit``); no recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, level + 1) for c in children if isinstance(c, dict | list))
    return deepest


def _bounded_int(text: str, limit: int = MAX_INT_DIGITS) -> int:
    digits = len(text.lstrip("-"))
    if digits > limit:
        raise ScaleFitError(f"an integer of {digits} digits (at most {limit} accepted)")
    return int(text)


def _refuse_constant(text: str) -> float:
    raise ScaleFitError(f"{text} is not JSON (write null for a missing number)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different (parsers disagree on which of two equal keys wins)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ScaleFitError(f"the key {dup!r} appears twice in one object")
    return out


def parse_json_text(
    text: str,
    *,
    path: str | os.PathLike,
    what: str,
    max_nesting: int = MAX_NESTING,
    max_int_digits: int = MAX_INT_DIGITS,
) -> Any:
    """Parse JSON text from a user file with bounded nesting and integer size.

    Parameters
    ----------
    text : str
        The JSON text.
    path : path-like
        The file, for messages.
    what : str
        What the file should be, for messages.
    max_nesting : int
        The deepest nesting of arrays and objects accepted.
    max_int_digits : int
        The most digits of an integer literal (a random generator's state needs 39).

    Returns
    -------
    object
        The parsed value.

    Raises
    ------
    ScaleFitError
        Naming the file and what is wrong (malformed JSON, nesting too deep, an integer too
        long, ``NaN``/``Infinity`` literals, a key repeated in one object).
    """
    try:
        value = json.loads(
            text,
            parse_int=lambda t: _bounded_int(t, max_int_digits),
            parse_constant=_refuse_constant,
            object_pairs_hook=_unique_keys,
        )
    except ScaleFitError as exc:
        raise ScaleFitError(f"{path}: not a valid {what} ({exc}).") from None
    except RecursionError:
        raise ScaleFitError(
            f"{path}: not a valid {what} (nested deeper than {max_nesting} levels)."
        ) from None
    except (json.JSONDecodeError, ValueError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else one_line(exc)
        raise ScaleFitError(f"{path}: not a valid {what} (JSON: {msg}).") from None
    if _depth(value, max_nesting) > max_nesting:
        raise ScaleFitError(
            f"{path}: not a valid {what} (nested deeper than {max_nesting} levels)."
        )
    return value


def read_json(
    path: str | os.PathLike,
    *,
    what: str,
    max_bytes: int = MAX_INPUT_BYTES,
    max_nesting: int = MAX_NESTING,
    max_int_digits: int = MAX_INT_DIGITS,
) -> Any:
    """Read a user's UTF-8 JSON file: a regular file of bounded size, nesting and integers.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages (e.g. ``"fit result"``).
    max_bytes : int
        The largest size accepted.
    max_nesting : int
        The deepest nesting of arrays and objects accepted.
    max_int_digits : int
        The most digits of an integer literal (a random generator's state needs 39).

    Returns
    -------
    object
        The parsed value.

    Raises
    ------
    ScaleFitError
        Naming the file and what is wrong with it.
    """
    raw = read_input_bytes(path, what=what, max_bytes=max_bytes)
    text = decode_utf8(path, raw, expected=f"a {what} as UTF-8 JSON")
    return parse_json_text(
        text, path=path, what=what, max_nesting=max_nesting, max_int_digits=max_int_digits
    )


def decode_utf8(path: str | os.PathLike, raw: bytes, *, expected: str) -> str:
    """Decode a user file's bytes as UTF-8 (a byte-order mark is dropped).

    Parameters
    ----------
    path : path-like
        The file, for the message.
    raw : bytes
        Its content.
    expected : str
        What the file should be, for the message (e.g. ``"a UTF-8 CSV"``).

    Returns
    -------
    str
        The text.

    Raises
    ------
    ScaleFitError
        Naming the file, the line and the first byte that is not UTF-8.
    """
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ScaleFitError(
            f"{path}: line {line}: byte 0x{raw[exc.start]:02x} is not valid UTF-8 (a Latin-1 or "
            f"binary file?); expected {expected} (re-save it as UTF-8)."
        ) from None


def read_toml(path: str | os.PathLike, *, what: str = "configuration") -> dict:
    """Read a UTF-8 TOML file; a missing, binary, non-UTF-8 or malformed file is one clear error.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file is, for messages.

    Returns
    -------
    dict
        The parsed table.

    Raises
    ------
    ScaleFitError
        Naming the file and what is wrong with it.
    """
    path = Path(path)
    raw = read_input_bytes(path, what=f"{what} (TOML file)", max_bytes=MAX_CONFIG_BYTES)
    if raw[:2] == b"\x1f\x8b" or b"\x00" in raw[:4096]:
        raise ScaleFitError(
            f"{path}: a binary, compressed or UTF-16 file; expected a {what} as UTF-8 TOML text."
        )
    text = decode_utf8(path, raw, expected=f"a {what} as UTF-8 TOML text")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScaleFitError(f"{path}: not valid TOML ({exc}); expected a {what}.") from None
    except RecursionError:
        data = None
    if data is None or _depth(data, MAX_NESTING) > MAX_NESTING:
        raise ScaleFitError(f"{path}: a {what} nested deeper than {MAX_NESTING} levels.")
    return data


#: Longest line (characters) of a streamed text or JSONL file.
MAX_LINE_CHARS = 64 << 20


def iter_input_lines(
    path: str | os.PathLike,
    *,
    what: str,
    max_bytes: int = 1 << 40,
    max_line: int = MAX_LINE_CHARS,
) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)`` of a user's text file, streamed, each line bounded.

    The file is opened with :func:`open_input` (a regular file, never blocks); bytes that are not
    UTF-8 are replaced; a line longer than ``max_line`` characters is refused rather than held
    in memory.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be, for messages.
    max_bytes : int
        The largest file accepted.
    max_line : int
        The longest line accepted (characters).

    Raises
    ------
    ScaleFitError
        Naming the file (and the line) when it cannot be read.
    """
    raw = open_input(path, what=what, max_bytes=max_bytes)
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as fh:
        number = 0
        while True:
            line = fh.readline(max_line + 1)
            if not line:
                return
            number += 1
            if len(line) > max_line:
                raise ScaleFitError(
                    f"{path}, line {number}: longer than {max_line:,} characters; expected a "
                    f"{what} with one record or line of text per line."
                )
            yield number, line


def iter_jsonl_texts(path: str | os.PathLike, field: str = "text") -> Iterator[str]:
    """Yield the string ``field`` of every JSON object in a JSONL file, in file order.

    Blank lines are skipped; bytes that are not UTF-8 are replaced (as the text readers of the
    corpora do). Empty texts are yielded: filtering them is the caller's choice.

    Parameters
    ----------
    path : path-like
        The ``.jsonl`` file.
    field : str
        The field holding the text.

    Raises
    ------
    ScaleFitError
        Naming the file and line of a line that is not JSON, or not an object with a string
        ``field``.
    """
    path = Path(path)
    for number, line in iter_input_lines(path, what="JSONL text file"):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_int=_bounded_int, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise ScaleFitError(f"{path}, line {number}: not valid JSON ({exc.msg}).") from None
        except (ScaleFitError, ValueError) as exc:
            raise ScaleFitError(f"{path}, line {number}: not valid JSON ({exc}).") from None
        except RecursionError:
            raise ScaleFitError(
                f"{path}, line {number}: not valid JSON (nested too deep)."
            ) from None
        text = record.get(field) if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise ScaleFitError(
                f"{path}, line {number}: expected a JSON object with a string field {field!r}."
            )
        yield text


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; see :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (NaN and inf written as null)."""
    return atomic_write_text(path, json.dumps(_json_safe(obj), indent=2, allow_nan=False) + "\n")


def atomic_write_csv(path: str | os.PathLike, frame) -> Path:
    """Write a pandas DataFrame to CSV atomically (no index column)."""
    return atomic_write_text(path, frame.to_csv(index=False))


def atomic_savefig(fig, path: str | os.PathLike, *, close: bool = True, **kwargs) -> Path:
    """Save a matplotlib figure atomically; the format follows the file's suffix.

    The figure is closed afterwards (``close=False`` keeps it open), so commands that write many
    figures do not pile them up in pyplot's registry.
    """
    path = Path(path)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=path.suffix.lstrip(".") or "png", **kwargs)
    finally:
        if close:
            import matplotlib.pyplot as plt

            plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def _json_safe(obj: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe values."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        return _json_safe(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj
