"""Read torch DCP's ``.metadata`` pickle without running anything it names.

DCP (``torch.distributed.checkpoint``) writes its checkpoint index as a pickle. A pickle is a
program: ``GLOBAL``/``STACK_GLOBAL`` fetch any importable object (with protocol 4 a dotted name
walks attributes, so ``torch.distributed.checkpoint.metadata`` reaches ``subprocess.Popen``),
``REDUCE`` calls it, ``BUILD`` sets attributes (on a class object: process-wide). This reader
takes three measures:

1. The opcodes are listed before anything is built (:mod:`pickletools`, which only parses): only
   the constants, containers, memo and object opcodes a DCP index uses are accepted, memo indices
   are bounded, and persistent ids, extension codes, ``INST``/``OBJ`` and buffers are refused.
2. ``find_class`` resolves only the exact ``(module, name)`` pairs of :data:`ALLOWED` (recorded
   from real FSDP2 checkpoints of this trainer with ``pickletools``) plus the torch dtypes of
   :data:`DTYPES`; a name with a dot, a module object, a function, anything else is refused. And
   what it returns is never the torch object: it is an inert stand-in (:class:`_Stub`) of this
   module, whose class cannot be changed and whose instances only record the arguments and
   state the pickle gives them. ``BUILD`` on a stand-in class fails; nothing of torch runs.
3. The stand-ins are then checked field by field (types, sizes, file names) and turned into
   DCP's real metadata objects through their constructors. A pickle of anything else (a list,
   a dict) is one clear error.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import PurePosixPath
from typing import Any

from ..core.errors import ScaleFitError, one_line

_META = "torch.distributed.checkpoint.metadata"
#: The exact (module, qualified name) pairs a DCP ``.metadata`` of this trainer names (recorded
#: with ``pickletools`` from 2-process FSDP2 checkpoints on CPU, torch 2.13).
ALLOWED = frozenset(
    {
        (_META, "Metadata"),
        (_META, "TensorStorageMetadata"),
        (_META, "BytesStorageMetadata"),
        (_META, "ChunkStorageMetadata"),
        (_META, "TensorProperties"),
        (_META, "MetadataIndex"),
        (_META, "StorageMeta"),
        (_META, "_MEM_FORMAT_ENCODING"),
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
        ("torch", "Size"),
        ("torch.serialization", "_get_layout"),
        ("pathlib", "PosixPath"),
    }
)
#: The dtypes a tensor in the checkpoint may have (``torch.<name>``, pickled by name).
DTYPES = frozenset(
    {
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
    }
)
_OPCODES = frozenset(
    """PROTO FRAME STOP MARK POP POP_MARK DUP NONE NEWTRUE NEWFALSE BININT BININT1 BININT2 LONG1
    BINFLOAT SHORT_BINUNICODE BINUNICODE EMPTY_DICT DICT SETITEM SETITEMS EMPTY_LIST LIST APPEND
    APPENDS EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3 MEMOIZE BINPUT LONG_BINPUT BINGET LONG_BINGET
    GLOBAL STACK_GLOBAL NEWOBJ REDUCE BUILD""".split()
)
_MEMO_OPS = frozenset({"BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET"})
_MAX_DEPTH = 24
_MAX_DIMS = 64
_UNSET = object()
_PICKLE_ERRORS = (
    pickle.UnpicklingError,
    EOFError,
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    MemoryError,
    RecursionError,
)


class _Frozen(type):
    """Metaclass of the stand-ins: their class attributes cannot be set or deleted."""

    def __setattr__(cls, name, value):
        raise pickle.UnpicklingError(f"refused to set attribute {name!r} on a class")

    def __delattr__(cls, name):
        raise pickle.UnpicklingError(f"refused to delete attribute {name!r} of a class")


class _Stub(metaclass=_Frozen):
    """An object of an allowed class as the pickle describes it: arguments and state, inert."""

    __slots__ = ("args", "state")
    target: tuple[str, str] = ("", "")

    def __new__(cls, *args, **kwargs):
        if kwargs or cls is _Stub:
            raise pickle.UnpicklingError("refused: keyword arguments or the bare stand-in")
        self = object.__new__(cls)
        self.args = args
        self.state = _UNSET
        return self

    def __init__(self, *args) -> None:  # REDUCE calls the class: __new__ recorded the args
        pass

    def __setstate__(self, state) -> None:  # BUILD; on the class object itself: a TypeError
        if self.state is not _UNSET:
            raise pickle.UnpicklingError("refused: an object's state given twice")
        self.state = state

    def __reduce__(self):
        raise TypeError("a checkpoint stand-in cannot be pickled")


class _Dtype:
    """A torch dtype named by the pickle (resolved by name from :data:`DTYPES` afterwards)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __setstate__(self, state) -> None:
        raise pickle.UnpicklingError("refused: BUILD on a dtype")


_STUBS = {
    key: _Frozen(f"_{key[1].lstrip('_')}", (_Stub,), {"__slots__": (), "target": key})
    for key in ALLOWED
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        key = (module, name)
        if key in _STUBS:
            return _STUBS[key]
        if module == "torch" and name in DTYPES:
            return _Dtype(name)
        raise ScaleFitError(f"refers to {module}.{name}, which is not DCP checkpoint metadata")

    def persistent_load(self, pid):
        raise ScaleFitError("holds a persistent reference, which DCP checkpoint metadata never has")


def _scan(data: bytes) -> None:
    """Refuse opcodes a DCP index does not use, before anything is built."""
    count = 0
    for op, arg, _pos in pickletools.genops(io.BytesIO(data)):
        count += 1
        if op.name not in _OPCODES:
            raise ScaleFitError(f"uses the pickle opcode {op.name}, which DCP metadata never has")
        if op.name in _MEMO_OPS and not 0 <= arg <= count:
            raise ScaleFitError(f"memo index {arg} out of range")


def load_metadata(data: bytes, *, files: dict[str, int]):
    """Parse a DCP ``.metadata`` into torch's ``Metadata``, running nothing from it.

    Parameters
    ----------
    data : bytes
        The file's bytes (already checked against the checkpoint's checksums).
    files : dict
        ``{file name: size}`` of the checkpoint folder: every storage entry must point into one.

    Returns
    -------
    torch.distributed.checkpoint.metadata.Metadata

    Raises
    ------
    ScaleFitError
        Naming what is wrong (the caller prefixes the file).
    """
    try:
        _scan(data)
        raw = _Unpickler(io.BytesIO(data)).load()
    except ScaleFitError:
        raise
    except _PICKLE_ERRORS as exc:
        detail = one_line(exc, 160, whole=True)
        raise ScaleFitError(f"not a valid pickle of DCP metadata ({detail})") from None
    if not (isinstance(raw, _Stub) and raw.target == (_META, "Metadata")):
        raise ScaleFitError(
            f"holds a pickled {_kind(raw)}, expected DCP checkpoint metadata (Metadata)"
        )
    try:
        return _Builder(files).build(raw, 0)
    except (TypeError, ValueError, RuntimeError) as exc:  # e.g. an unhashable key once built
        detail = one_line(exc, 160, whole=True)
        raise ScaleFitError(f"not valid DCP metadata ({detail})") from None


def _kind(obj) -> str:
    if isinstance(obj, _Stub):
        return ".".join(obj.target)
    return type(obj).__name__


class _Builder:
    """Turn checked stand-ins into DCP's metadata objects (shared objects built once)."""

    def __init__(self, files: dict[str, int]) -> None:
        import torch
        import torch.distributed.checkpoint.metadata as md
        from torch.distributed.checkpoint.filesystem import _StorageInfo

        self.files = files
        self.memo: dict[int, Any] = {}
        self.active: set[int] = set()
        self.torch, self.md, self.storage_info = torch, md, _StorageInfo

    def build(self, obj, depth: int):
        if obj is None or type(obj) in (bool, int, float, str):
            return obj
        if depth > _MAX_DEPTH:
            raise ScaleFitError(f"nested deeper than {_MAX_DEPTH} levels")
        key = id(obj)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            raise ScaleFitError("holds a reference cycle")
        self.active.add(key)
        try:
            value = self._convert(obj, depth + 1)
        finally:
            self.active.discard(key)
        self.memo[key] = value
        return value

    def _convert(self, obj, depth: int):
        if type(obj) is list:
            return [self.build(v, depth) for v in obj]
        if type(obj) is tuple:
            return tuple(self.build(v, depth) for v in obj)
        if type(obj) is dict:
            return {self.build(k, depth): self.build(v, depth) for k, v in obj.items()}
        if isinstance(obj, _Dtype):
            return getattr(self.torch, obj.name)
        if isinstance(obj, _Stub):
            return self._object(obj, depth)
        raise ScaleFitError(f"holds a {type(obj).__name__}, which DCP metadata never has")

    def _object(self, stub: _Stub, depth: int):
        name = stub.target[1]
        args = [self.build(a, depth) for a in stub.args]
        if name in ("Size", "PosixPath", "_get_layout", "_MEM_FORMAT_ENCODING"):
            if stub.state is not _UNSET:
                raise ScaleFitError(f"sets the state of a {name}")
            return self._called(name, args)
        if args:
            raise ScaleFitError(f"creates a {name} with arguments {_short(args)}")
        state = None if stub.state is _UNSET else self.build(stub.state, depth)
        if name == "TensorProperties":
            return self._properties(state)
        if state is not None and type(state) is not dict:
            raise ScaleFitError(f"gives a {name} the state {_short(state)}; expected its fields")
        return self._dataclass(name, state or {})

    def _called(self, name: str, args: list):
        torch = self.torch
        if name == "Size":
            if len(args) != 1 or not _ints(args[0]) or len(args[0]) > _MAX_DIMS:
                raise ScaleFitError(f"a torch.Size of {_short(args)}; expected up to 64 sizes")
            return torch.Size(args[0])
        if name == "PosixPath":
            if not args or not all(type(a) is str for a in args):
                raise ScaleFitError(f"a path of {_short(args)}")
            return str(PurePosixPath(*args))
        if name == "_get_layout":
            if args != ["torch.strided"]:
                raise ScaleFitError(f"a tensor layout {_short(args)}; expected torch.strided")
            return torch.strided
        if len(args) != 1 or type(args[0]) is not int or args[0] not in (0, 1, 2):
            raise ScaleFitError(f"a memory-format code {_short(args)}; expected 0, 1 or 2")
        return self.md._MEM_FORMAT_ENCODING(args[0])

    def _properties(self, state):
        torch, md = self.torch, self.md
        ok = type(state) is tuple and len(state) == 5
        if ok:
            dtype, layout, grad, fmt, pin = state
            ok = (
                isinstance(dtype, torch.dtype)
                and layout is torch.strided
                and type(grad) is bool
                and isinstance(fmt, md._MEM_FORMAT_ENCODING)
                and type(pin) is bool
            )
        if not ok:
            raise ScaleFitError(f"tensor properties {_short(state)}; expected 5 checked fields")
        formats = (torch.contiguous_format, torch.channels_last, torch.preserve_format)
        return md.TensorProperties(
            dtype=dtype,
            layout=layout,
            requires_grad=grad,
            memory_format=formats[fmt.value],
            pin_memory=pin,
        )

    def _dataclass(self, name: str, state: dict):
        checks = self._fields()[name]
        unknown = sorted(str(k) for k in state if k not in checks)
        if unknown:
            raise ScaleFitError(f"gives a {name} the unknown fields {unknown[:5]}")
        for field, (check, required) in checks.items():
            if field not in state and required:
                raise ScaleFitError(f"a {name} without its field {field!r}")
            if field in state and not check(state[field]):
                raise ScaleFitError(f"a {name} whose {field!r} is {_short(state[field])}")
        if name == "_StorageInfo":
            self._check_storage(state)
        cls = self.storage_info if name == "_StorageInfo" else getattr(self.md, name)
        return cls(**state)

    def _check_storage(self, state: dict) -> None:
        path, offset, length = state["relative_path"], state["offset"], state["length"]
        size = self.files.get(path)
        if size is None:
            raise ScaleFitError(
                f"points at {path!r}, which is not a file of this checkpoint folder"
            )
        if offset + length > size:
            raise ScaleFitError(f"reads bytes {offset}..{offset + length} of {path!r} ({size})")

    def _fields(self) -> dict:
        torch, md = self.torch, self.md

        def opt(check):
            return lambda v: v is None or check(v)

        def is_(*types):
            return lambda v: type(v) in types

        def of(cls):
            return lambda v: type(v) is cls

        def size(v):
            return isinstance(v, torch.Size)

        def nat(v):
            return type(v) is int and 0 <= v < 1 << 62

        def dict_of(kcheck, vcheck):
            return lambda v: type(v) is dict and all(kcheck(a) and vcheck(b) for a, b in v.items())

        def list_of(check):
            return lambda v: type(v) is list and all(check(x) for x in v)

        storage = lambda v: type(v) in (md.TensorStorageMetadata, md.BytesStorageMetadata)  # noqa: E731
        plan = lambda v: type(v) is tuple and all(type(x) in (str, int) for x in v)  # noqa: E731
        return {
            "Metadata": {
                "state_dict_metadata": (dict_of(is_(str), storage), True),
                "planner_data": (opt(dict_of(is_(str), plan)), False),
                "storage_data": (dict_of(of(md.MetadataIndex), of(self.storage_info)), True),
                "storage_meta": (opt(of(md.StorageMeta)), False),
                "version": (opt(is_(str)), False),
            },
            "TensorStorageMetadata": {
                "properties": (of(md.TensorProperties), True),
                "size": (size, True),
                "chunks": (list_of(of(md.ChunkStorageMetadata)), True),
            },
            "BytesStorageMetadata": {},
            "ChunkStorageMetadata": {"offsets": (size, True), "sizes": (size, True)},
            "StorageMeta": {
                "checkpoint_id": (opt(is_(str)), False),
                "save_id": (opt(is_(str)), False),
                "load_id": (opt(is_(str)), False),
                "modules": (list_of(is_(str)), False),
            },
            "MetadataIndex": {
                "fqn": (is_(str), True),
                "offset": (opt(size), False),
                "index": (opt(nat), False),
            },
            "_StorageInfo": {
                "relative_path": (is_(str), True),
                "offset": (nat, True),
                "length": (nat, True),
                "transform_descriptors": (lambda v: v is None or v == [] or v == (), False),
            },
        }


def _ints(v) -> bool:
    return type(v) in (list, tuple) and all(type(x) is int and 0 <= x < 1 << 62 for x in v)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
