"""Compiled solver programs reused across tables and across processes.

Two costs sit between a user's command and the solver's first iteration:

1. **Compiling for every row count.** A compiled XLA program is specific to its input shapes, so a
   table of 203 rows and one of 215 rows each paid a full compilation. Row counts are therefore
   rounded up to a *bucket* (:func:`bucket`: four sizes per doubling, at most 25 % padding; large
   tables round to whole row blocks) and the padding rows carry weight zero, which leaves every
   sum, gradient and curvature unchanged.
2. **Tracing and lowering in every process.** JAX's persistent compilation cache skips only the
   XLA compilation; turning the Python solver into a program (tracing, lowering) was repeated in
   every process. :func:`cached_program` serialises the lowered program with :mod:`jax.export`
   into the user cache (``<cache>/jax/programs``), keyed by the law, the loss, the residual scale,
   the bucket and the versions of JAX, jaxlib, scalefit and the source of the solver and the law;
   a later process deserialises it and skips tracing.

The cached files are StableHLO programs written by this package into the user's own cache folder
(atomically); they are never Python objects and are never unpickled. A file that fails to load
is rebuilt. Laws without a stable identity (a Python law that is neither registered nor written as
a formula, e.g. a lambda or a closure) are compiled in memory only.

Nothing here changes the user's JAX settings for longer than one of scalefit's own calls.
XLA's compiled executables go to JAX's persistent compilation cache only while a program of ours
is compiled (:func:`compile_cache`, entered by :func:`first_call_cached` around a program's
first call), and only when the user has not configured a cache folder of their own; afterwards
the setting is restored and JAX's cache handle reset, so the user's own programs are never
written to (or read from) our folder. Float64 is turned on by the callers with JAX's scoped
``jax.enable_x64(True)``; the cache key records whether it was on.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core._io import atomic_write_bytes, user_cache

#: Tables up to this many rows are padded to one of four sizes per doubling (at most 25 % extra).
MIN_BUCKET = 32
#: Rows per block in the blocked (large-table) solver: a start chunk's Jacobian block
#: (CHUNK x BLOCK x parameters doubles) stays in the CPU cache.
BLOCK = 1024
#: Tables with more rows than this are solved in blocks of ``BLOCK`` rows (memory bounded by a
#: block, not by the table).
BLOCKED_ABOVE = 8192
#: Programs are written to disk only when the ``SCALEFIT_JAX_CACHE`` setting allows it.
PROGRAM_DIR = "programs"


def bucket(n: int) -> int:
    """The padded row count for a table of ``n`` rows.

    ``n <= 32``: 32. Above: the next multiple of a quarter of the enclosing power of two
    (e.g. 203 -> 224, 215 -> 224, 245 -> 256), so any table pays at most 25 % padding and a table
    of similar size reuses the compiled program. Above :data:`BLOCKED_ABOVE` rows the bucket is
    also a whole number of :data:`BLOCK`-row blocks.
    """
    n = int(n)
    if n <= MIN_BUCKET:
        return MIN_BUCKET
    step = 2 ** (math.ceil(math.log2(n)) - 3)  # eighth of the next power of two = quarter below
    size = -(-n // step) * step
    if size > BLOCKED_ABOVE:
        size = -(-size // BLOCK) * BLOCK
    return size


def n_blocks(size: int) -> int:
    """Number of row blocks the solver sums over for a padded size (1 for small tables)."""
    return size // BLOCK if size > BLOCKED_ABOVE else 1


def jax_cache_dir() -> Path | None:
    """The JAX cache folder of scalefit, or None when the compile cache is turned off.

    ``SCALEFIT_JAX_CACHE`` (``0`` turns it off), else ``<cache>/jax`` beside the dataset cache
    (:func:`scalefit.core._io.user_cache`).
    """
    setting = os.environ.get("SCALEFIT_JAX_CACHE")
    if setting == "0":
        return None
    return Path(setting) if setting else user_cache() / "jax"


#: Programs that compile faster than this are not written to the persistent cache (seconds).
MIN_COMPILE_SECS = 0.2
_SCOPE = threading.Lock()
#: Number of :func:`compile_cache` blocks open in this process (all threads), and the settings
#: the outermost one replaced (None when it replaced nothing: the user has a cache of their own).
_OPEN = 0
_SAVED: tuple[Any, Any] | None = None


@contextmanager
def compile_cache() -> Iterator[None]:
    """JAX's persistent compilation cache in scalefit's folder, for the duration of the block.

    Only where the user configured no cache folder (``jax_compilation_cache_dir`` unset) and
    left the cache enabled; otherwise nothing changes and programs use the user's own cache.
    On leaving the outermost block the folder and the minimum compile time are restored and
    JAX's cache handle is reset (``jax.experimental.compilation_cache``'s public
    ``reset_cache``), so a later compilation of the user's own reads and writes no cache, as
    before. Blocks nest and may overlap across threads (counted); a program another thread
    compiles while a block is open may be cached in our folder too (JAX's setting is
    process-wide).
    """
    global _OPEN, _SAVED
    import jax

    with _SCOPE:
        if _OPEN == 0:
            _SAVED = None
            root = jax_cache_dir()
            if (
                root is not None
                and not jax.config.jax_compilation_cache_dir
                and jax.config.jax_enable_compilation_cache
            ):
                try:
                    root.mkdir(parents=True, exist_ok=True)
                except OSError:  # read-only home: compile without the cache
                    root = None
                if root is not None:
                    _SAVED = (
                        jax.config.jax_compilation_cache_dir,
                        jax.config.jax_persistent_cache_min_compile_time_secs,
                    )
                    jax.config.update("jax_compilation_cache_dir", str(root))
                    jax.config.update(
                        "jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS
                    )
        _OPEN += 1
    try:
        yield
    finally:
        with _SCOPE:
            _OPEN -= 1
            if _OPEN == 0 and _SAVED is not None:
                from jax.experimental.compilation_cache import compilation_cache as cc

                folder, min_secs = _SAVED
                _SAVED = None
                jax.config.update("jax_compilation_cache_dir", folder)
                jax.config.update("jax_persistent_cache_min_compile_time_secs", min_secs)
                cc.reset_cache()


def first_call_cached(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a jitted program used at one set of shapes) with its first call in a cache block.

    The first call compiles the program (or loads the compiled executable from the cache) inside
    :func:`compile_cache`; later calls run it directly, without touching JAX's settings.
    """
    done = False

    def call(*args):
        nonlocal done
        if done:
            return fn(*args)
        with compile_cache():
            out = fn(*args)
        done = True
        return out

    return call


@functools.cache
def file_hash(path: str) -> str:
    """First 16 hex digits of the SHA-256 of a file (a source file's identity in cache keys)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    from importlib.metadata import version

    import jax

    from .._version import __version__

    here = Path(__file__).resolve().parent
    sources = [
        here / "engine.py",
        here / "observation.py",
        here / "_programs.py",
        here.parent / "laws" / "base.py",
        here.parent / "expr.py",
    ]
    return json.dumps(
        {
            "jax": jax.__version__,
            "jaxlib": version("jaxlib"),
            "scalefit": __version__,
            "backend": jax.default_backend(),
            "src": [file_hash(str(p)) for p in sources],
        },
        sort_keys=True,
    )


def law_identity(law) -> str | None:
    """A string that identifies the law's function across processes, or None when it has none.

    Formula laws: their formula, inputs and parameter kinds. Registered laws: name, options,
    parameters and the source file of their expression. Anything else (a lambda, a closure, a
    class built in ``__main__``): None, and its program stays in memory only.
    """
    params = [repr(p) for p in law.params]
    if law.spec is not None:
        fn = {k: law.spec.get(k) for k in ("formula", "inputs")}
        return json.dumps({"spec": fn, "params": params}, sort_keys=True, default=str)
    try:
        from ..laws import get_law, list_laws

        if law.name not in list_laws():
            return None
        ref = get_law(law.name, **law.options)
        expr = law.expr
        if (
            ref.formula != law.formula
            or [repr(p) for p in ref.params] != params
            or getattr(ref.expr, "__qualname__", None) != getattr(expr, "__qualname__", 1)
            or getattr(ref.expr, "__module__", None) != getattr(expr, "__module__", 1)
            or ref.inputs != law.inputs
        ):
            return None
        src = inspect.getsourcefile(expr)
        feats = inspect.getsourcefile(law.features) if law.features is not None else None
        opts = json.dumps(law.options, sort_keys=True)
    except Exception:  # noqa: BLE001 - any doubt about identity: no disk cache
        return None
    if src is None:
        return None
    return json.dumps(
        {
            "name": law.name,
            "options": opts,
            "params": params,
            "inputs": list(law.inputs),
            "expr": f"{expr.__module__}.{expr.__qualname__}",
            "src": file_hash(src),
            "features": file_hash(feats) if feats else None,
        },
        sort_keys=True,
    )


def shape_key(args: tuple) -> tuple:
    """A hashable key of the tree structure, shapes and dtypes of ``args``.

    The solver looks its program up by it once per call (a streamed solve makes dozens of
    calls); its ``repr`` is part of a program's file name on disk.
    """
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    return tree, tuple(
        (getattr(a, "shape", ()), getattr(a, "dtype", None) or type(a)) for a in leaves
    )


def cached_program(fn, key: str | None, args: tuple) -> Callable[..., Any]:
    """A callable equivalent to the jitted ``fn`` for arguments shaped like ``args``.

    With a ``key`` and a cache folder, the lowered program is read from (or written to) the disk
    cache, so a fresh process skips tracing, and its first call (the compilation) runs in
    :func:`compile_cache`; any failure to read, deserialise or write falls back to ``fn`` itself.
    Without a key, ``fn`` is returned unchanged. The key records whether float64 is on (call it
    inside the same ``jax.enable_x64`` scope as the program's calls).
    """
    root = jax_cache_dir()
    if key is None or root is None:
        return fn
    root = root / PROGRAM_DIR
    import jax

    # float64 is scoped (``jax.enable_x64``), so it is read at every call, not once per process
    x64 = f"x64={bool(jax.config.jax_enable_x64)}"
    from .device import forced_platform

    platform = forced_platform()  # a block moved to the CPU on a GPU machine (fit.device)
    where = f"platform={platform or 'default'}"
    text = "\n".join([key, _versions(), x64, where, repr(shape_key(args))])
    digest = hashlib.sha256(text.encode()).hexdigest()[:32]
    path = root / f"{digest}.jaxexport"
    exported, data = None, b""
    if path.exists():
        try:
            data = path.read_bytes()
            exported = jax.export.deserialize(bytearray(data))
        except Exception:  # noqa: BLE001 - corrupt or foreign file: rebuild it
            exported = None
    if exported is None:
        try:
            platforms = None if platform is None else (platform,)
            exported = jax.export.export(fn, platforms=platforms)(*args)
            data = bytes(exported.serialize())
            root.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        except Exception:  # noqa: BLE001 - a program that cannot be exported runs as it is
            return fn
    return first_call_cached(jax.jit(exported.call))
