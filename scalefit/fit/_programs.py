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
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def cache_root() -> Path | None:
    """Folder of the serialised programs, or None when the compile cache is turned off."""
    setting = os.environ.get("SCALEFIT_JAX_CACHE")
    if setting == "0":
        return None
    base = Path(os.environ.get("SCALEFIT_CACHE_DIR") or Path.home() / ".cache" / "scalefit")
    root = Path(setting) if setting else base / "jax"
    return root / PROGRAM_DIR


@functools.cache
def file_hash(path: str) -> str:
    """First 16 hex digits of the SHA-256 of a file (a source file's identity in cache keys)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    import jax
    import jaxlib

    from .. import __version__

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
            "jaxlib": jaxlib.__version__,
            "scalefit": __version__,
            "x64": bool(jax.config.jax_enable_x64),
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


def signature(args: tuple) -> str:
    """Tree structure, shapes and dtypes of ``args`` (part of a program's cache key)."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    shapes = [
        (tuple(getattr(a, "shape", ())), str(getattr(a, "dtype", type(a).__name__))) for a in leaves
    ]
    return json.dumps({"tree": str(tree), "leaves": shapes})


def shape_key(args: tuple) -> tuple:
    """A hashable key of the tree structure, shapes and dtypes of ``args`` (in-memory lookups).

    The same information as :func:`signature` without building a string: the solver looks its
    program up once per call, and a streamed solve makes dozens of calls.
    """
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    return tree, tuple(
        (getattr(a, "shape", ()), getattr(a, "dtype", None) or type(a)) for a in leaves
    )


def _write_atomic(path: Path, data: bytes) -> None:
    from .._io import atomic_write_bytes

    atomic_write_bytes(path, data)


def cached_program(fn, key: str | None, args: tuple) -> Callable[..., Any]:
    """A callable equivalent to the jitted ``fn`` for arguments shaped like ``args``.

    With a ``key`` and a cache folder, the lowered program is read from (or written to) the disk
    cache, so a fresh process skips tracing; any failure to read, deserialise or write falls back
    to ``fn`` itself. Without a key, ``fn`` is returned unchanged.
    """
    root = cache_root()
    if key is None or root is None:
        return fn
    import jax

    digest = hashlib.sha256("\n".join([key, _versions(), signature(args)]).encode()).hexdigest()[
        :32
    ]
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
            exported = jax.export.export(fn)(*args)
            data = bytes(exported.serialize())
            root.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, data)
        except Exception:  # noqa: BLE001 - a program that cannot be exported runs as it is
            return fn
    call = jax.jit(exported.call)
    return call if uses_lapack(data) else _lapack_free(call)


@functools.lru_cache(maxsize=1)
def _lapack_targets() -> tuple[bytes, ...] | None:
    """Names of jaxlib's CPU LAPACK custom-call targets (None when they cannot be listed)."""
    try:
        from jaxlib.cpu import _lapack

        names = tuple(str(name).encode() for name in _lapack.registrations())
    except Exception:  # noqa: BLE001 - another jaxlib layout: assume every program needs LAPACK
        return None
    return names or None


def uses_lapack(serialized: bytes) -> bool:
    """Whether a serialised program may call one of jaxlib's CPU LAPACK routines.

    Custom-call target names are stored as plain strings in the serialised module, so a program
    none of whose bytes spell a LAPACK target name calls none. When the names cannot be listed,
    every program is assumed to need LAPACK.
    """
    targets = _lapack_targets()
    return targets is None or any(t in serialized for t in targets)


_LOWERING = threading.Lock()
#: Set on the one thread that is lowering a LAPACK-free program (see :func:`_lapack_free`).
_SKIPPING = threading.local()


def _lapack_free(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` (a jitted ``Exported.call``) lowered without initialising CPU LAPACK.

    Lowering a deserialised program on the CPU makes JAX initialise its LAPACK routines first,
    which imports ``scipy.linalg`` (0.11-0.13 CPU-s in a fresh process on the 2-core test
    machine). A program that calls no LAPACK routine (:func:`uses_lapack`) does not need it, so
    its first call (the one that lowers it) runs with that step skipped; any later program that
    does use LAPACK initialises it as usual (JAX's own linear-algebra lowering always does).
    The step is skipped only on the thread that lowers this program: JAX's initialisation is
    swapped, under a lock, for a stand-in that defers to the real one on every other thread, so a
    program lowered on another thread at the same moment (the Bayesian fitter compiles its
    sampler on a helper thread) is initialised as usual. When JAX's internals differ from the
    ones this relies on, the program is lowered the ordinary way.
    """
    try:
        from jax._src.export import _export
    except ImportError:  # pragma: no cover - another JAX layout
        return call
    if not callable(getattr(_export, "_ensure_backends_initialized", None)):
        return call  # pragma: no cover - another JAX layout
    lowered = False

    def run(*args):
        nonlocal lowered
        if lowered:
            return call(*args)
        with _LOWERING:
            saved = _export._ensure_backends_initialized
            _export._ensure_backends_initialized = _skip_on_this_thread(saved)
            _SKIPPING.on = True
            try:
                out = call(*args)
            finally:
                _SKIPPING.on = False
                _export._ensure_backends_initialized = saved
            lowered = True
        return out

    return run


def _skip_on_this_thread(init: Callable[..., Any]) -> Callable[..., Any]:
    """Stand-in for JAX's backend initialisation: skipped on the lowering thread only."""

    def ensure(platforms):
        if getattr(_SKIPPING, "on", False):
            return None
        return init(platforms)

    return ensure
