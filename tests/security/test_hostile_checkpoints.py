"""Hostile checkpoints: pickles that run code, tampered files, forged checksums.

Every gadget is driven twice: once under plain ``pickle.loads`` (the CONTROL: the payload really
fires, it writes a marker file or changes a class), and once through scalefit's DCP metadata
reader, which must refuse it with a ``ScaleFitError`` while the marker never appears. The
checksum layer is tested on its own (missing, tampered, unlisted, malformed ``checksums.json``,
kills during a save) and through the CLI. Real 2-process ``torchrun`` runs are marked slow.
"""

import io
import json
import os
import pickle
import shlex
import signal
import struct
import subprocess
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hostile import assert_refused, cli  # noqa: E402
from train_support import _one_torch_thread, make_corpus, tiny_settings, torchrun  # noqa: E402, F401

import scalefit.core._manifest as manifest  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train import dcp_metadata  # noqa: E402
from scalefit.train.dcp_metadata import load_metadata  # noqa: E402
from scalefit.train.dist import safe_reader  # noqa: E402

# The tests build real DCP step folders with dcp.save in this one process (no process group);
# torch warns that it assumes a single process, which is what these tests mean.
pytestmark = pytest.mark.filterwarnings(
    "ignore:torch.distributed is disabled, unavailable or uninitialized:UserWarning"
)

META = "torch.distributed.checkpoint.metadata"
STEP = "checkpoint.dcp/step-000000001"


# --- pickle programs written opcode by opcode (protocol 4) ---------------------------------------


def s(text: str) -> bytes:
    """SHORT_BINUNICODE / BINUNICODE of ``text``."""
    raw = text.encode()
    return (
        b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))
    ) + raw


def g(module: str, name: str) -> bytes:
    """STACK_GLOBAL module.name."""
    return s(module) + s(name) + b"\x93"


def call(func: bytes, *args: bytes) -> bytes:
    """``func(*args)`` with MARK ... TUPLE REDUCE."""
    return func + b"(" + b"".join(args) + b"tR"


def program(body: bytes) -> bytes:
    return b"\x80\x04" + body + b"."


def strlist(items) -> bytes:
    return b"](" + b"".join(s(i) for i in items) + b"e"


def bbytes(data: bytes) -> bytes:
    return b"C" + bytes([len(data)]) + data  # SHORT_BINBYTES


def _touch_cmd(marker: Path) -> list[str]:
    return [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]


def _shell(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def _dotted(target) -> str:
    """A dotted path from DCP's metadata module to ``target`` (how protocol 4 reaches it)."""
    import importlib
    import warnings

    root = importlib.import_module(META)
    queue, seen = [(root, "")], {id(root)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated torch attributes, touched
        while queue:
            obj, path = queue.pop(0)
            for key, value in list(vars(obj).items()):
                dotted = f"{path}.{key}" if path else key
                if value is target:
                    return dotted
                deeper = isinstance(value, types.ModuleType) and dotted.count(".") < 5
                if deeper and id(value) not in seen:
                    seen.add(id(value))
                    queue.append((value, dotted))
    pytest.skip(f"{target!r} is not reachable from {META} in this torch")


def popen_dotted(m):
    return program(call(g(META, _dotted(subprocess.Popen)), strlist(_touch_cmd(m))))


def popen_direct(m):
    return program(call(g("subprocess", "Popen"), strlist(_touch_cmd(m))))


def os_system_dotted(m):
    return program(call(g(META, "os.system"), s(_shell(m))))


def global_opcode_dotted(m):  # the text GLOBAL opcode resolves dotted names too under proto 4
    return program(call(b"c" + META.encode() + b"\nos.system\n", s(_shell(m))))


def ctypes_cdll(m):
    import ctypes

    libc = call(g(META, _dotted(ctypes.CDLL)), b"N")
    system = call(g("builtins", "getattr"), libc, s("system"))
    return program(call(system, bbytes(_shell(m).encode())))


def fileio_dotted(m):
    return program(call(g(META, _dotted(io.FileIO)), s(str(m)), s("w")))


def fileio_direct(m):
    return program(call(g("io", "FileIO"), s(str(m)), s("w")))


def thread_run(m):
    import threading

    thread = call(
        g(META, _dotted(threading.Thread)), b"N", g("os", "system"), b"N", s(_shell(m)) + b"\x85"
    )
    return program(call(call(g("builtins", "getattr"), thread, s("run"))))


def getattr_import(m):
    os_mod = call(g("builtins", "__import__"), s("os"))
    return program(call(call(g("builtins", "getattr"), os_mod, s("system")), s(_shell(m))))


def attrgetter(m):
    os_mod = call(g("builtins", "__import__"), s("os"))
    getter = call(g("operator", "attrgetter"), s("system"))
    return program(call(call(getter, os_mod), s(_shell(m))))


def partial(m):
    return program(call(call(g("functools", "partial"), g("os", "system"), s(_shell(m)))))


def copyreg_reconstructor(m):
    popen = g("subprocess", "Popen")
    return program(call(g("copyreg", "_reconstructor"), popen, popen, strlist(_touch_cmd(m))))


def inst_opcode(m):  # protocol 0: INST looks the class up and calls it
    return b"(" + b"V" + _shell(m).encode() + b"\nios\nsystem\n."


def build_class_attr(attr_value):
    """BUILD with slot state on the allowed class itself: setattr(Metadata, 'version', ...)."""
    state = b"N}" + s("version") + s(attr_value) + b"s\x86"
    return program(g(META, "Metadata") + state + b"b")


def build_layout_cache():
    """BUILD on torch.serialization._get_layout: replaces its lookup cache process-wide."""
    state = b"N}" + s("cache") + b"}" + s("torch.strided") + s("pwned") + b"ss\x86"
    return program(g("torch.serialization", "_get_layout") + state + b"b")


#: name -> builder(marker) of payloads that run code under plain pickle.
EXEC_GADGETS = {
    "subprocess.Popen via dotted name": popen_dotted,
    "subprocess.Popen": popen_direct,
    "os.system via dotted name": os_system_dotted,
    "GLOBAL opcode dotted name": global_opcode_dotted,
    "ctypes.CDLL + getattr": ctypes_cdll,
    "io.FileIO(path, 'w') via dotted name": fileio_dotted,
    "io.FileIO(path, 'w')": fileio_direct,
    "threading.Thread + getattr": thread_run,
    "builtins.getattr + __import__": getattr_import,
    "operator.attrgetter": attrgetter,
    "functools.partial": partial,
    "copyreg._reconstructor": copyreg_reconstructor,
    "INST opcode": inst_opcode,
}


def _plain_load(data: bytes) -> None:
    out = pickle.loads(data)
    if hasattr(out, "wait"):
        out.wait()  # a Popen: let the child write the marker
    if hasattr(out, "close"):
        out.close()


@pytest.mark.parametrize("name", EXEC_GADGETS)
def test_control_each_gadget_runs_code_under_plain_pickle(tmp_path, name):
    import torch.distributed.checkpoint.metadata  # noqa: F401 - the module the names go through

    marker = tmp_path / "control"
    _plain_load(EXEC_GADGETS[name](marker))
    assert marker.exists(), name


@pytest.mark.parametrize("name", EXEC_GADGETS)
def test_metadata_reader_refuses_each_gadget(tmp_path, name):
    marker = tmp_path / "pwned"
    with pytest.raises(ScaleFitError) as err:
        load_metadata(EXEC_GADGETS[name](marker), files={})
    assert "\n" not in str(err.value)
    assert not marker.exists()


def _forged_folder(root: Path, metadata: bytes, shards: dict | None = None) -> Path:
    """A run folder whose step folder holds ``metadata``, with checksums an attacker wrote."""
    folder = root / STEP
    folder.mkdir(parents=True)
    (folder / ".metadata").write_bytes(metadata)
    for fname, data in (shards or {}).items():
        (folder / fname).write_bytes(data)
    manifest.record(root, written=[f"{STEP}/{p.name}" for p in folder.iterdir()])
    return folder


@pytest.mark.parametrize("name", EXEC_GADGETS)
def test_dcp_reader_refuses_each_gadget_even_with_forged_checksums(tmp_path, name):
    marker = tmp_path / "pwned"
    folder = _forged_folder(tmp_path / "run", EXEC_GADGETS[name](marker))
    with pytest.raises(ScaleFitError, match=r"\.metadata: refused: .*--overwrite") as err:
        safe_reader(str(folder)).read_metadata()
    assert "\n" not in str(err.value)
    assert not marker.exists()


def _plain_build(payload: bytes, owner, attr: str):
    """CONTROL: plain pickle changes ``owner.attr`` process-wide; return it, then restore it."""
    before = getattr(owner, attr)
    try:
        pickle.loads(payload)
        return getattr(owner, attr)
    finally:
        setattr(owner, attr, before)


def test_build_on_an_allowed_class_is_refused_and_changes_nothing():
    from torch.distributed.checkpoint.metadata import Metadata

    payload = build_class_attr("pwned")
    assert _plain_build(payload, Metadata, "version") == "pwned"  # CONTROL
    assert Metadata.version is None
    stubs = {k: dict(vars(v)) for k, v in dcp_metadata._STUBS.items()}
    with pytest.raises(ScaleFitError):
        load_metadata(payload, files={})
    assert Metadata.version is None
    assert {k: dict(vars(v)) for k, v in dcp_metadata._STUBS.items()} == stubs


def test_build_on_an_allowed_function_is_refused_and_changes_nothing():
    import torch.serialization as ser

    payload = build_layout_cache()
    assert _plain_build(payload, ser._get_layout, "cache") == {"torch.strided": "pwned"}
    before = dict(ser._get_layout.cache)
    with pytest.raises(ScaleFitError):
        load_metadata(payload, files={})
    assert ser._get_layout.cache == before


@pytest.mark.parametrize("name", EXEC_GADGETS)
def test_the_name_check_alone_refuses_each_gadget(tmp_path, name):
    """Defence in depth: without the opcode scan, ``find_class`` still refuses every gadget."""
    marker = tmp_path / "pwned"
    with pytest.raises(ScaleFitError, match="is not DCP checkpoint metadata"):
        dcp_metadata._Unpickler(io.BytesIO(EXEC_GADGETS[name](marker))).load()
    assert not marker.exists()


def test_a_stand_in_class_cannot_be_changed():
    stub = dcp_metadata._STUBS[(META, "Metadata")]
    with pytest.raises(pickle.UnpicklingError):
        stub.version = "pwned"
    payload = program(g(META, "Metadata") + b"N}" + s("target") + b"N" + b"s\x86b")
    with pytest.raises(ScaleFitError):
        load_metadata(payload, files={})
    assert stub.target == (META, "Metadata")


# --- refusals that need no control: they never build anything, or build only checked data --------


def _real_metadata(relative_path="__0_0.distcp", **overrides):
    """A small metadata object of DCP's own classes (what a real save records)."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import (
        BytesStorageMetadata,
        ChunkStorageMetadata,
        Metadata,
        MetadataIndex,
        StorageMeta,
        TensorProperties,
        TensorStorageMetadata,
    )

    size = torch.Size([4, 2])
    tensor = TensorStorageMetadata(
        TensorProperties(dtype=torch.float32),
        size,
        [ChunkStorageMetadata(torch.Size([0, 0]), size)],
    )
    fields = dict(
        state_dict_metadata={"model.w": tensor, "optim.lr": BytesStorageMetadata()},
        planner_data={"model.w": ("model", "w"), "optim.lr": ("optim", "param_groups", 0, "lr")},
        storage_data={
            MetadataIndex("model.w", torch.Size([0, 0]), 0): _StorageInfo(relative_path, 0, 40),
            MetadataIndex("optim.lr"): _StorageInfo(relative_path, 40, 10),
        },
        storage_meta=StorageMeta(checkpoint_id=Path("/x/step"), save_id="abc"),
        version="1.0.0",
    )
    fields.update(overrides)
    return Metadata(**fields)


FILES = {"__0_0.distcp": 100}


def test_real_metadata_is_rebuilt_exactly():
    meta = _real_metadata()
    data = pickle.dumps(meta, protocol=4)
    got = load_metadata(data, files=FILES)
    assert type(got) is type(meta)
    assert got.state_dict_metadata == meta.state_dict_metadata
    assert got.storage_data == meta.storage_data and got.planner_data == meta.planner_data
    assert got.storage_meta.checkpoint_id == "/x/step" and got.version == "1.0.0"


def _pickled(mutate):
    meta = _real_metadata()
    mutate(meta)
    return pickle.dumps(meta, protocol=4)


def _storage(meta):
    return next(iter(meta.storage_data.values()))


MALFORMED = {
    "a list instead of metadata": (pickle.dumps([1, 2, 3]), "holds a pickled list"),
    "a dict instead of metadata": (pickle.dumps({"version": "1"}), "holds a pickled dict"),
    "a number": (pickle.dumps(3), "holds a pickled int"),
    "empty file": (b"", "not a valid pickle"),
    "truncated": (pickle.dumps(_real_metadata())[:300], "not a valid pickle"),
    "text": (b"\xff\xfenot a pickle", "not a valid pickle"),
    "text that parses as opcodes": (b"hello world", "memo index"),
    "path traversal in a storage entry": (
        _pickled(lambda m: setattr(_storage(m), "relative_path", "../../../../etc/passwd")),
        "not a file of this checkpoint folder",
    ),
    "absolute path in a storage entry": (
        _pickled(lambda m: setattr(_storage(m), "relative_path", "/dev/zero")),
        "not a file of this checkpoint folder",
    ),
    "read past the end of a shard": (
        _pickled(lambda m: setattr(_storage(m), "length", 10**9)),
        "reads bytes",
    ),
    "negative offset": (_pickled(lambda m: setattr(_storage(m), "offset", -5)), "'offset'"),
    "storage transforms": (
        _pickled(lambda m: setattr(_storage(m), "transform_descriptors", ["zstd"])),
        "transform_descriptors",
    ),
    "unknown field": (_pickled(lambda m: setattr(m, "extra", 1)), "unknown fields"),
    "wrong field type": (_pickled(lambda m: setattr(m, "version", 3)), "'version'"),
    "a tensor entry of the wrong class": (
        _pickled(lambda m: m.state_dict_metadata.update(x=m.storage_meta)),
        "state_dict_metadata",
    ),
    "a sparse layout": (
        _pickled(
            lambda m: setattr(
                m.state_dict_metadata["model.w"].properties, "layout", torch.sparse_coo
            )
        ),
        "layout",
    ),
    "an unlisted dtype": (
        _pickled(
            lambda m: setattr(m.state_dict_metadata["model.w"].properties, "dtype", torch.complex64)
        ),
        "complex64",
    ),
    "a memory-format code out of range": (
        program(g(META, "_MEM_FORMAT_ENCODING") + b"(K\x07tR"),
        "holds a pickled",
    ),
    "torch.Size of strings": (program(call(g("torch", "Size"), strlist(["a"]))), "holds a pickled"),
    "NEWOBJ with arguments": (
        program(g(META, "Metadata") + b"(K\x01t\x81"),
        "creates a Metadata with arguments",
    ),
    "metadata created with arguments": (
        program(call(g(META, "Metadata"), s("x"))),
        "creates a Metadata with arguments",
    ),
    "state given twice": (program(g(META, "Metadata") + b")\x81}b}b"), "state given twice"),
    "BUILD on a dtype": (program(g("torch", "float32") + b"}b"), "BUILD on a dtype"),
    "BUILD on a list": (program(b"]}" + s("a") + b"K\x01sb"), "not a valid pickle"),
    "a reference cycle": (
        program(g(META, "Metadata") + b")\x81\x94}" + s("planner_data") + b"h\x00sb"),
        "cycle",
    ),
    "deep nesting": (program(b"]" * 5000 + b"a" * 4999), "holds a pickled list"),
    "deep nesting inside metadata": (
        program(
            g(META, "Metadata") + b")\x81}" + s("planner_data") + b"]" * 200 + b"a" * 199 + b"sb"
        ),
        "nested deeper",
    ),
    "persistent id": (program(s("x") + b"Q"), "BINPERSID"),
    "extension code": (program(b"\x82\x01"), "EXT1"),
    "memo index far out of range": (program(b"N" + b"r" + struct.pack("<I", 0xFFFFFFF0)), "memo"),
    "bytes object": (program(bbytes(b"x")), "SHORT_BINBYTES"),
    "a set": (pickle.dumps({1, 2}, protocol=4), "EMPTY_SET"),
    "NEWOBJ_EX": (program(g(META, "Metadata") + b")}\x92"), "NEWOBJ_EX"),
    "name with a dot on an allowed class": (
        program(g(META, "Metadata.__init__")),
        "Metadata.__init__",
    ),
    "module object": (program(g("torch", "distributed")), "torch.distributed"),
    "a function of an allowed module": (program(g("torch", "load")), "torch.load"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_metadata_is_one_clean_error(name):
    data, match = MALFORMED[name]
    with pytest.raises(ScaleFitError, match=match.replace("(", r"\(").replace(".", r"\.")) as err:
        load_metadata(data, files=FILES)
    assert "\n" not in str(err.value)


# --- the shards' non-tensor items: torch's planner unpickles them with weights_only=False --------


class _CreatesFile:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _dcp_with_payload(root: Path, marker: Path) -> Path:
    """A single-process DCP save whose byte item ``b.x`` is replaced by a payload."""
    import torch.distributed.checkpoint as dcp

    folder = root / STEP
    dcp.save({"a": torch.arange(3.0), "b": {"x": 1.5}}, checkpoint_id=str(folder))
    meta = load_metadata((folder / ".metadata").read_bytes(), files=_sizes(folder))
    (index,) = [i for i in meta.storage_data if i.fqn == "b.x"]
    info = meta.storage_data[index]
    shard = folder / info.relative_path
    evil = io.BytesIO()
    torch.save(_CreatesFile(marker), evil)
    info.offset, info.length = shard.stat().st_size, len(evil.getvalue())
    shard.write_bytes(shard.read_bytes() + evil.getvalue())
    (folder / ".metadata").write_bytes(pickle.dumps(meta, protocol=4))
    manifest.record(root, written=[f"{STEP}/{p.name}" for p in folder.iterdir()])
    return folder


def _sizes(folder: Path) -> dict:
    return {p.name: p.stat().st_size for p in folder.iterdir()}


# The control's payload opens the marker file and drops it unclosed: that warning is the payload's.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_shard_byte_items_are_loaded_as_plain_data_only(tmp_path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from scalefit.train.dist import _planner

    marker = tmp_path / "pwned"
    folder = _dcp_with_payload(tmp_path / "run", marker)
    with pytest.raises(CheckpointException, match="holds more than tensors and plain data"):
        dcp.load(
            {"a": torch.zeros(3), "b": {"x": 0.0}},
            storage_reader=safe_reader(str(folder), files=_sizes(folder)),
            planner=_planner(),
        )
    assert not marker.exists()
    dcp.load({"a": torch.zeros(3), "b": {"x": 0.0}}, checkpoint_id=str(folder))  # CONTROL
    assert marker.exists()


def _dcp_folder(root: Path) -> Path:
    """A real single-process DCP save with the checksums scalefit records."""
    import torch.distributed.checkpoint as dcp

    folder = root / STEP
    dcp.save({"a": torch.arange(3.0), "b": {"x": 1.5}}, checkpoint_id=str(folder))
    manifest.record(root, written=[f"{STEP}/{p.name}" for p in folder.iterdir()])
    return folder


def _extra_file(folder):
    (folder / "extra.distcp").write_bytes(b"x")


def _subfolder(folder):
    (folder / "sub").mkdir()


def _linked_shard(folder):
    shard = next(p for p in folder.iterdir() if p.suffix == ".distcp")
    target = folder.parent / "elsewhere"
    shard.rename(target)
    shard.symlink_to(target)


def _missing_shard(folder):
    next(p for p in folder.iterdir() if p.suffix == ".distcp").unlink()


FOLDER_CASES = {
    "an extra file": (_extra_file, STEP, "does not list"),
    "a subfolder": (_subfolder, STEP, "not a regular file"),
    "a shard that is a link": (_linked_shard, STEP, "not a regular file"),
    "a shard missing": (_missing_shard, STEP, "incomplete"),
    "metadata missing": (lambda f: (f / ".metadata").unlink(), STEP, "incomplete"),
    "no checksums": (lambda f: (f.parents[1] / "checksums.json").unlink(), STEP, "checksums.json"),
    "a name that climbs out": (None, STEP + "/../../../etc", "names the distributed checkpoint"),
    "a short name": (None, "checkpoint.dcp/step-1", "names the distributed checkpoint"),
    "a number for a name": (None, 5, "names the distributed checkpoint"),
    "an absolute name": (None, "/etc", "names the distributed checkpoint"),
    "a folder that is not there": (None, "checkpoint.dcp/step-000000002", "missing"),
}


@pytest.mark.parametrize("name", FOLDER_CASES)
def test_dcp_folder_is_checked_before_torch_reads_it(tmp_path, name):
    from scalefit.train.dist import verify_folder

    edit, rel, words = FOLDER_CASES[name]
    folder = _dcp_folder(tmp_path / "run")
    assert set(verify_folder(tmp_path / "run", STEP)) == {p.name for p in folder.iterdir()}
    if edit:
        edit(folder)
    with pytest.raises(ScaleFitError, match=words) as err:
        verify_folder(tmp_path / "run", rel)
    assert "\n" not in str(err.value) and "--overwrite" in str(err.value)


# --- checksums -----------------------------------------------------------------------------------


def _saved(folder: Path, name="state.pt", value=1.0) -> Path:
    buf = io.BytesIO()
    torch.save({"w": torch.full((3,), value)}, buf)
    manifest.record(folder, write={name: buf.getvalue()})
    return folder / name


def _load(path):
    from scalefit.core._manifest import load_torch

    return load_torch(path, what="toy training state", remedy="delete it.")


def test_a_file_scalefit_wrote_loads(tmp_path):
    path = _saved(tmp_path)
    assert float(_load(path)["w"][0]) == 1.0


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def _write_manifest_text(folder: Path, text: str) -> None:
    (folder / manifest.MANIFEST_FILE).write_text(text)


def _manifest_doc(folder: Path) -> dict:
    return json.loads((folder / manifest.MANIFEST_FILE).read_text())


CHECKSUM_CASES = {
    "one byte changed": (_flip_last_byte, "does not match"),
    "file replaced": (lambda p: p.write_bytes(b"junk"), "does not match"),
    "no checksums.json": (
        lambda p: (p.parent / manifest.MANIFEST_FILE).unlink(),
        "no checksums.json",
    ),
    "file not listed": (
        lambda p: _write_manifest_text(
            p.parent,
            json.dumps(
                {
                    "format": "scalefit-checksums",
                    "version": 1,
                    "files": {"other.pt": manifest.digest_bytes(p.read_bytes())},
                }
            ),
        ),
        "does not list",
    ),
    "checksums.json not JSON": (
        lambda p: _write_manifest_text(p.parent, "{not json"),
        "not a valid checksum file",
    ),
    "checksums.json of another format": (
        lambda p: _write_manifest_text(p.parent, '{"format": "x", "version": 1, "files": {}}'),
        "not a scalefit checksum file",
    ),
    "checksums.json of a future version": (
        lambda p: _write_manifest_text(
            p.parent, '{"format": "scalefit-checksums", "version": 99, "files": {}}'
        ),
        "not a scalefit checksum file",
    ),
    "checksums.json with a bad digest": (
        lambda p: _write_manifest_text(
            p.parent,
            '{"format": "scalefit-checksums", "version": 1, "files": '
            '{"state.pt": {"sha256": "zz", "bytes": 1}}}',
        ),
        "not a scalefit checksum file",
    ),
    "checksums.json nested 10k deep": (
        lambda p: _write_manifest_text(p.parent, "[" * 10000 + "]" * 10000),
        "nested deeper",
    ),
    "checksums.json a FIFO": (
        lambda p: (
            (p.parent / manifest.MANIFEST_FILE).unlink()
            or os.mkfifo(p.parent / manifest.MANIFEST_FILE)
        ),
        "FIFO",
    ),
    "checksums.json a link to /dev/zero": (
        lambda p: (
            (p.parent / manifest.MANIFEST_FILE).unlink()
            or (p.parent / manifest.MANIFEST_FILE).symlink_to("/dev/zero")
        ),
        "character device",
    ),
    "checkpoint a link to /dev/zero": (
        lambda p: p.unlink() or p.symlink_to("/dev/zero"),
        "character device",
    ),
    "checkpoint a FIFO": (lambda p: p.unlink() or os.mkfifo(p), "FIFO"),
    "checkpoint a folder": (lambda p: p.unlink() or p.mkdir(), "folder"),
}


@pytest.mark.parametrize("name", CHECKSUM_CASES)
def test_checksum_refusals_are_one_line_before_parsing(tmp_path, name):
    edit, match = CHECKSUM_CASES[name]
    path = _saved(tmp_path)
    edit(path)
    with pytest.raises(ScaleFitError, match=match) as err:
        _load(path)
    assert "\n" not in str(err.value) and str(path.parent) in str(err.value)


def test_a_pending_save_accepts_the_previous_and_the_new_file(tmp_path):
    """The state a kill leaves between announcing a new digest and replacing the file."""
    old = _saved(tmp_path, value=1.0)
    doc = _manifest_doc(tmp_path)
    buf = io.BytesIO()
    torch.save({"w": torch.full((3,), 2.0)}, buf)
    doc["pending"] = {"state.pt": manifest.digest_bytes(buf.getvalue())}
    (tmp_path / manifest.MANIFEST_FILE).write_text(json.dumps(doc))
    assert float(_load(old)["w"][0]) == 1.0  # killed before the replace
    old.write_bytes(buf.getvalue())
    assert float(_load(old)["w"][0]) == 2.0  # killed after the replace
    _flip_last_byte(old)
    with pytest.raises(ScaleFitError, match="does not match"):
        _load(old)


_SAVER = """
import sys
from scalefit.core._manifest import record
i = 0
while True:
    i += 1
    record(sys.argv[1], write={"state.pt": str(i).encode() * 200_000})
    print(i, flush=True)
"""


def test_a_kill_at_any_moment_of_saving_leaves_a_loadable_checkpoint(tmp_path):
    """SIGKILL a process that saves in a loop, 5 times at different moments; each time the
    checkpoint left behind loads (the previous or the new one)."""
    script = tmp_path / "saver.py"
    script.write_text(_SAVER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    for n in range(5):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True
        )
        for _ in range(3 + n):  # let it save a few times, then kill it mid-stride
            proc.stdout.readline()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        path = tmp_path / "state.pt"
        with manifest.open_verified(path, what="state", remedy="", max_bytes=1 << 30) as fh:
            data = fh.read()
        assert len(set(data)) <= 2 and len(data) >= 200_000  # one whole save, not a mix
    assert manifest.recorded_names(tmp_path) == ["state.pt"]


# --- through the CLI -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished tiny single-process trainer run folder and its config file."""
    from scalefit.train.data import build_tokens

    root = tmp_path_factory.mktemp("trained")
    corpus = make_corpus(root / "c", vocab=["to", "be", "or", "not"], words=800)
    tokens = build_tokens(corpus, root / "t", val_fraction=0.25)
    config = root / "run.toml"
    config.write_text(
        f'data = "{tokens}"\ndepth = 1\nwidth = 16\nseq_len = 16\nbatch_size = 4\n'
        "tokens = 256\neval_tokens = 64\ndiagnose = false\n"
    )
    from scalefit.cli import main

    assert main(["train", "run", str(config), "--out", str(root / "run"), "--no-progress"]) == 0
    return root / "run", config


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    (dst / ".scalefit.lock").unlink(missing_ok=True)
    return dst


def test_cli_train_diagnose_refuses_a_tampered_checkpoint(tmp_path, capsys, trained):
    run = _copy(trained[0], tmp_path / "run")
    _flip_last_byte(run / "checkpoint.pt")
    line = assert_refused(
        cli(capsys, ["train", "diagnose", run / "checkpoint.pt"]), "checkpoint.pt"
    )
    assert "SHA-256" in line and "does not match" in line


def test_cli_train_run_refuses_then_overwrite_starts_afresh(tmp_path, capsys, trained):
    run, config = _copy(trained[0], tmp_path / "run"), trained[1]
    (run / manifest.MANIFEST_FILE).unlink()  # an old folder, or one scalefit did not write
    (run / "train_config.json").unlink()
    args = ["train", "run", config, "--out", run, "--no-progress"]
    line = assert_refused(cli(capsys, args), "checkpoint.pt")
    assert "--overwrite" in line and "checksums.json" in line
    code, _out, err = cli(capsys, [*args, "--overwrite"])
    assert code == 0, err
    assert "checkpoint.pt" in manifest.recorded_names(run)


def _forged_state(run: Path, mutate) -> None:
    """Rewrite ``checkpoint.pt`` with ``mutate(state)`` and matching (forged) checksums."""
    import copy

    state = copy.deepcopy(torch.load(run / "checkpoint.pt", weights_only=True))
    buf = io.BytesIO()
    torch.save(mutate(state), buf)
    manifest.record(run, write={"checkpoint.pt": buf.getvalue()})


def _set(**kw):
    return lambda st: {**st, **kw}


#: Well-checksummed trainer checkpoints whose plain data is wrong: (mutation, words).
BAD_STATES = {
    "a list": (lambda st: [1, 2], "holds a list"),
    "history of strings": (lambda st: {**st, "history": ["x"] * st["step"]}, "history row 0"),
    "negative step": (_set(step=-3, history=[]), "step -3"),
    "step beyond the run": (_set(step=10**6), "step 1000000"),
    "boolean step": (_set(step=True), "step True"),
    "bad RNG state": (_set(torch_rng=torch.zeros(3)), "RNG state"),
    "weights of other shapes": (
        lambda st: {**st, "model": {k: torch.zeros(2) for k in st["model"]}},
        "size mismatch",
    ),
    "optimizer junk": (_set(optimizer={"state": 1}), "does not fit"),
    "dcp path escape": (_set(dcp="../../etc"), "sharded"),
    "model not a table": (_set(model=[1]), "model"),
}


@pytest.mark.parametrize("name", BAD_STATES)
def test_cli_train_run_names_a_malformed_checkpoint(tmp_path, capsys, trained, name):
    mutate, words = BAD_STATES[name]
    run, config = _copy(trained[0], tmp_path / "run"), trained[1]
    _forged_state(run, mutate)
    args = ["train", "run", config, "--out", run, "--no-progress"]
    line = assert_refused(cli(capsys, args), "checkpoint.pt", case=name)
    assert words in line, line


@pytest.mark.parametrize("name", ["a list", "weights of other shapes", "model not a table"])
def test_cli_train_diagnose_names_a_malformed_checkpoint(tmp_path, capsys, trained, name):
    run = _copy(trained[0], tmp_path / "run")
    _forged_state(run, BAD_STATES[name][0])
    assert_refused(cli(capsys, ["train", "diagnose", run / "checkpoint.pt"]), "checkpoint.pt")


@pytest.fixture(scope="module")
def toy_state(tmp_path_factory):
    """A toy run's config and its resumable ``state.pt`` (saved at step 10 of 20)."""
    from scalefit.sim.sweep_task import build_config
    from scalefit.sim.train import train_toy

    root = tmp_path_factory.mktemp("toy")
    cfg = build_config(
        {"preset": "cpu", "teacher_depth": 4, "depths": [2], "batch": 16, "steps": 20,
         "eval_steps": [10, 20], "test_size": 64}
    )  # fmt: skip
    train_toy(cfg, root)
    return cfg, torch.load(root / "state.pt", weights_only=True)


BAD_TOY_STATES = {
    "rows of strings": lambda st: {**st, "rows": ["x"]},
    "rows not a list": lambda st: {**st, "rows": {"a": 1}},
    "a row missing its test loss": lambda st: {
        **st,
        "rows": [{k: v for k, v in r.items() if k != "test_loss"} for r in st["rows"]],
    },
    "curve of numbers": lambda st: {**st, "curve": [1, 2]},
    "step beyond the run": lambda st: {**st, "step": 10**6},
    "students of other shapes": lambda st: {
        **st,
        "students": {k: torch.zeros(1) for k in st["students"]},
    },
    "students that would broadcast": lambda st: {
        **st,
        "students": [torch.zeros(1) for _ in st["students"]],
    },
    "adam junk": lambda st: {**st, "adam": "x"},
    "adam moments that would broadcast": lambda st: {
        **st,
        "adam": {**st["adam"], "m": [torch.zeros(1) for _ in st["adam"]["m"]]},
    },
    "accumulators that would broadcast": lambda st: {
        **st,
        "acc": {k: torch.zeros((), dtype=torch.float64) for k in st["acc"]},
    },
    "data state junk": lambda st: {**st, "data": torch.zeros(2)},
}


@pytest.mark.parametrize("name", BAD_TOY_STATES)
def test_toy_resume_names_a_malformed_state(tmp_path, toy_state, name):
    from scalefit.sim.train import train_toy

    cfg, state = toy_state
    buf = io.BytesIO()
    torch.save(BAD_TOY_STATES[name](dict(state)), buf)
    manifest.record(tmp_path, write={"state.pt": buf.getvalue()})
    with pytest.raises(ScaleFitError, match="not a resumable toy state") as err:
        train_toy(cfg, tmp_path)
    assert "\n" not in str(err.value)


def test_cli_probe_refuses_a_tampered_toy_model(tmp_path, capsys):
    from scalefit.sim.sweep_task import run_toy

    config = {"preset": "cpu", "teacher_depth": 4, "depths": [2], "batch": 16, "steps": 10}
    run_toy({**config, "eval_steps": [10], "test_size": 64}, tmp_path / "run")
    assert manifest.recorded_names(tmp_path / "run") == ["model.pt"]  # state.pt is gone
    code, out, _ = cli(capsys, ["probe", tmp_path / "run"])
    assert code == 0 and out
    _flip_last_byte(tmp_path / "run" / "model.pt")
    assert "does not match" in assert_refused(cli(capsys, ["probe", tmp_path / "run"]), "model.pt")


# --- end to end: 2-process torchrun, FSDP2 checkpoints -------------------------------------------


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory):
    """A 2-process FSDP2 run stopped after 6 of 12 steps, and a CLI config that resumes it."""
    import json

    root = tmp_path_factory.mktemp("fsdp")
    corpus = make_corpus(root / "corpus", vocab=["fa", "so", "la", "ti"], n_docs=4, words=3000)
    from scalefit.train.data import build_tokens

    tokens = build_tokens(corpus, root / "tokens", val_fraction=0.25)
    settings = tiny_settings(tokens, parallel="fsdp")
    (root / "settings.json").write_text(json.dumps(settings))
    script = root / "stop.py"
    script.write_text(
        "import json, sys\nfrom scalefit.train.loop import config_from_dict, train\n"
        "train(config_from_dict(json.load(open(sys.argv[1]))), sys.argv[2], stop_after=6)\n"
    )
    torchrun(script, root / "settings.json", root / "base")
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in settings.items()]
    (root / "run.toml").write_text("\n".join(lines + ["diagnose = false"]) + "\n")
    return root


#: What a process may print after its error line while it exits: gloo's teardown aborted in 2 of
#: 18 such runs (the C++ runtime's message; the error line was printed before, every time).
GLOO_TEARDOWN = {"terminate called without an active exception"}


def _torchrun_cli(root: Path, out: Path, logs: Path):
    """``torchrun -m scalefit train run`` with each process's stderr in its own file."""
    from train_support import free_port

    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}", f"--log-dir={logs}",
        "--redirects=3", "-m", "scalefit", "train", "run", str(root / "run.toml"), "--out",
        str(out), "--no-progress",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    errs = sorted(logs.rglob("stderr.log"))
    return proc, [p.read_text() for p in errs]


def _replace_metadata(run: Path, data: bytes, forge: bool) -> None:
    folder = run / "checkpoint.dcp" / "step-000000006"
    (folder / ".metadata").write_bytes(data)
    if forge:
        manifest.record(
            run, written=[f"checkpoint.dcp/step-000000006/{p.name}" for p in folder.iterdir()]
        )


def _tamper_shard(run: Path) -> None:
    _flip_last_byte(run / "checkpoint.dcp" / "step-000000006" / "__1_0.distcp")


E2E = {
    "metadata payload, forged checksums": (
        lambda run, m: _replace_metadata(run, popen_dotted(m), True),
        "is not DCP checkpoint metadata",
    ),
    "metadata payload, checksums left": (
        lambda run, m: _replace_metadata(run, popen_dotted(m), False),
        "does not match",
    ),
    "tampered shard": (lambda run, m: _tamper_shard(run), "does not match"),
    "tampered checkpoint.pt": (
        lambda run, m: _flip_last_byte(run / "checkpoint.pt"),
        "does not match",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", E2E)
def test_torchrun_resume_refuses_a_hostile_checkpoint_on_every_rank(tmp_path, fsdp_run, name):
    edit, words = E2E[name]
    marker = tmp_path / "pwned"
    run = _copy(fsdp_run / "base", tmp_path / "run")
    edit(run, marker)
    proc, errs = _torchrun_cli(fsdp_run, run, tmp_path / "logs")
    assert proc.returncode != 0 and len(errs) == 2
    for err in errs:  # each process: one line, no traceback
        lines = [ln for ln in err.splitlines() if ln.strip() and ln not in GLOO_TEARDOWN]
        assert len(lines) == 1 and lines[0].startswith("scalefit: error: "), err[-3000:]
        if name != "tampered checkpoint.pt":  # rank 1 reads the verdict of all ranks
            assert words in lines[0] or "refused by another process" in lines[0], lines[0]
    assert any(words in err for err in errs), errs
    assert "Traceback" not in "".join(errs)
    assert not marker.exists()
    assert not (run / "result.json").exists()
