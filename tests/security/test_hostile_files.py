"""Hostile files corpus: every reader of a user file × every kind of file that is not one.

Each row is a command (or a library reader), the file slot it reads, and a kind of hostile file
put there: a FIFO with no writer, links to ``/dev/zero``, ``/dev/urandom`` and ``/dev/null``, a
folder, an empty file, a 300-character name, binary garbage, a sparse file over the size limit,
UTF-16, gzip, a dangling link, a link loop, a file without read permission. The verdict asserted
is always the same: exit 2, one ``scalefit: error:`` line naming the file, no output written,
never a hang (FIFOs and devices are refused from their ``stat``, never opened for reading).

The output side: ``--out``/``--plots``-like options naming a link to ``/dev/null``, a FIFO, a
folder where a file is expected, a file where a folder is expected, a path under a file, a name
too long for the file system: refused before any work, the path left as it was, and no other
output of the command written.

In-process cases run under :func:`no_hang` (an alarm that turns a blocked case into a failure);
the child-process cases (:func:`hostile.cli_process`) check the same FIFOs and devices end to end.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import signal
import stat
import struct
from pathlib import Path

import pytest
from hostile import GPT2, assert_refused, cli, cli_process  # noqa: E402

from scalefit.core._io import MAX_CONFIG_BYTES, MAX_INPUT_BYTES  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False

# --------------------------------------------------------------------------------------------
# Hostile files
# --------------------------------------------------------------------------------------------

DEVICE_KINDS = ["fifo", "dev_zero", "dev_urandom", "dev_null"]
PATH_KINDS = ["folder", "long_name", "dangling", "loop", "no_permission"]
CONTENT_KINDS = ["empty", "garbage", "huge_sparse", "utf16", "gzip"]
ALL_KINDS = DEVICE_KINDS + PATH_KINDS + CONTENT_KINDS


def make_hostile(folder: Path, kind: str, *, name: str, limit: int, text: bytes = b"x") -> Path:
    """Create a hostile file of ``kind`` named ``name`` in ``folder`` and return its path.

    ``limit`` is the size limit of the reader (the sparse file is one byte over it); ``text``
    is a valid content that the UTF-16 and gzip kinds encode.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind.startswith("dev_"):
        path.symlink_to(f"/dev/{kind[4:]}")
    elif kind == "folder":
        path.mkdir()
    elif kind == "long_name":
        path = folder / ("n" * 300 + Path(name).suffix)
    elif kind == "dangling":
        path.symlink_to(folder / "missing-target")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "no_permission":
        path.write_bytes(text)
        path.chmod(0)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(random.Random(0).randbytes(4096))
    elif kind == "huge_sparse":
        with open(path, "wb") as fh:
            fh.truncate(limit + 1)
    elif kind == "utf16":
        path.write_bytes(text.decode("utf-8").encode("utf-16"))
    elif kind == "gzip":
        path.write_bytes(gzip.compress(text))
    else:  # pragma: no cover - a typo in the table
        raise AssertionError(kind)
    return path


def names_of(path: Path) -> tuple[str, ...]:
    """Words of which the error line must contain one: the file's name (or its start)."""
    return (path.name[:40],)


class Hang(BaseException):
    """Raised by :func:`no_hang` in a case that blocks (not an Exception: nothing catches it)."""


@contextlib.contextmanager
def no_hang(seconds: int = 120):
    """Turn a case that blocks (a FIFO opened for reading, a device read) into a failure."""

    def alarm(signum, frame):
        raise Hang(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def skip_if_root(kind: str) -> None:
    if kind == "no_permission" and ROOT:
        pytest.skip("root reads a file without permissions: chmod 000 denies nothing")


# --------------------------------------------------------------------------------------------
# Valid companions of the hostile file (the other arguments of a command)
# --------------------------------------------------------------------------------------------

TRUTH = (1.69, 406.4, 410.7, 0.34, 0.28)
CSV = "params,tokens,loss\n" + "".join(
    f"{n:g},{t:g},{TRUTH[0] + TRUTH[1] / n ** TRUTH[3] + TRUTH[2] / t ** TRUTH[4]:.6f}\n"
    for n in (1e8, 3e8, 1e9, 3e9)
    for t in (2e9, 6e9, 2e10, 6e10)
)
LAW_PARAMS = "E=1.69,A=406.4,B=410.7,alpha=0.34,beta=0.28"
SPEC = '[sweep]\nname = "s"\ntask = "toy"\n[grid]\ndepth = [1]\n'


@pytest.fixture
def ok(tmp_path):
    """Valid files for the other slots of a command."""
    folder = tmp_path / "ok"
    folder.mkdir()
    (folder / "t.csv").write_text(CSV)
    (folder / "r.json").write_text("{}\n")  # a regular file: the hostile slot is refused first
    (folder / "docs.txt").write_text("one document\n\nanother document\n")
    (folder / "docs.jsonl").write_text('{"text": "one document"}\n{"text": "another one"}\n')
    (folder / "grid").mkdir()
    return folder


# --------------------------------------------------------------------------------------------
# Inputs: command × file slot × hostile kind
# --------------------------------------------------------------------------------------------

# (case id, file name, size limit, valid content, kinds, argv with {F} for the hostile file and
# {OK} for the folder of valid companions, outputs that must not exist afterwards)
TABLE_KINDS = ALL_KINDS
TOML_KINDS = DEVICE_KINDS + PATH_KINDS + ["garbage", "huge_sparse", "utf16", "gzip"]
JSON_KINDS = DEVICE_KINDS + PATH_KINDS + ["huge_sparse"]
PATH_ONLY = DEVICE_KINDS + ["long_name", "dangling", "loop"]
CASES = [
    (
        "fit",
        "t.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        ["fit", "{F}", "--law", "chinchilla", "--out", "{OK}/o.json"],
        ["o.json"],
    ),
    (
        "bayes",
        "t.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        [
            "bayes",
            "{F}",
            "--law",
            "chinchilla",
            "--chains",
            "1",
            "--draws",
            "10",
            "--warmup",
            "10",
            "--out",
            "{OK}/o.json",
        ],
        ["o.json"],
    ),
    (
        "compare",
        "t.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        [
            "compare",
            "{F}",
            "--laws",
            "chinchilla,depth_power",
            "--chains",
            "1",
            "--draws",
            "10",
            "--warmup",
            "10",
            "--out",
            "{OK}/o.csv",
        ],
        ["o.csv"],
    ),
    (
        "isoflop",
        "t.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        ["isoflop", "{F}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "isoflop-curves",
        "long.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        ["isoflop", "{OK}/t.csv", "--curves", "{F}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "isoflop-result",
        "r.json",
        MAX_INPUT_BYTES,
        "{}",
        JSON_KINDS,
        ["isoflop", "{OK}/t.csv", "--result", "{F}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "design-candidates",
        "c.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        [
            "design",
            "{OK}/r.json",
            "--target",
            "1e21",
            "--compute",
            "1e19",
            "--candidates",
            "{F}",
            "--out",
            "{OK}/o.csv",
        ],
        ["o.csv"],
    ),
    (
        "design-result",
        "r.json",
        MAX_INPUT_BYTES,
        "{}",
        JSON_KINDS,
        ["design", "{F}", "--target", "1e21", "--compute", "1e19", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "allocate-result",
        "r.json",
        MAX_INPUT_BYTES,
        "{}",
        JSON_KINDS,
        ["allocate", "{F}", "--budget", "1e21", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "toy-fit",
        "results.csv",
        MAX_INPUT_BYTES,
        CSV,
        TABLE_KINDS,
        ["toy", "fit", "{F}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "toy-run",
        "spec.toml",
        MAX_CONFIG_BYTES,
        SPEC,
        TOML_KINDS,
        ["toy", "run", "{F}", "--out", "{OK}/runs"],
        ["runs"],
    ),
    (
        "train-grid",
        "grid.toml",
        MAX_CONFIG_BYTES,
        SPEC,
        TOML_KINDS,
        ["train", "grid", "{F}", "--out", "{OK}/runs"],
        ["runs"],
    ),
    (
        "train-run",
        "cfg.toml",
        MAX_CONFIG_BYTES,
        "depth = 1\n",
        TOML_KINDS,
        ["train", "run", "{F}", "--out", "{OK}/run"],
        ["run"],
    ),
    (
        "bayes-priors",
        "priors.toml",
        MAX_CONFIG_BYTES,
        "[E]\n",
        TOML_KINDS,
        [
            "bayes",
            "{OK}/t.csv",
            "--law",
            "chinchilla",
            "--priors",
            "{F}",
            "--chains",
            "1",
            "--draws",
            "10",
            "--warmup",
            "10",
            "--out",
            "{OK}/o.json",
        ],
        ["o.json"],
    ),
    (
        "data-prepare",
        "corpus.txt",
        4 * MAX_INPUT_BYTES,
        "a\n\nb\n",
        PATH_ONLY,
        ["data", "prepare", "{F}"],
        [],
    ),
    (
        "data-prepare-shards",
        "corpus.jsonl",
        1 << 40,
        '{"text": "a"}\n',
        PATH_ONLY,
        ["data", "prepare", "{F}", "--shards", "--out", "{OK}/shards"],
        ["shards"],
    ),
    (
        "data-prepare-tokenizer",
        "tokenizer.json",
        1 << 28,
        "{}",
        PATH_ONLY + ["garbage", "gzip"],
        [
            "data",
            "prepare",
            "{OK}/docs.jsonl",
            "--shards",
            "--tokenizer",
            "{F}",
            "--out",
            "{OK}/shards",
        ],
        ["shards/manifest.json"],
    ),
    (
        "probe-hf-text",
        "docs.txt",
        1 << 40,
        "a\n\nb\n",
        PATH_ONLY + ["folder"],
        ["probe", "hf", "{OK}/model", "--text", "{F}", "--out", "{OK}/probe"],
        ["probe"],
    ),
    (
        "probe-toy",
        "model.pt",
        MAX_INPUT_BYTES,
        "x",
        PATH_ONLY + ["empty", "garbage", "gzip"],
        ["probe", "{F}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "train-diagnose",
        "checkpoint.pt",
        MAX_INPUT_BYTES,
        "x",
        PATH_ONLY + ["garbage"],
        ["train", "diagnose", "{F}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "train-report-with",
        "extra.csv",
        MAX_INPUT_BYTES,
        CSV,
        PATH_ONLY + ["folder"],
        ["train", "report", "{OK}/grid", "--with", "{F}", "--table", "{OK}/o.csv"],
        ["o.csv"],
    ),
]
INPUT_ROWS = [
    pytest.param(case, kind, id=f"{case[0]}-{kind}") for case in CASES for kind in case[4]
]


def _argv(template, hostile: Path, ok: Path) -> list[str]:
    return [a.replace("{F}", str(hostile)).replace("{OK}", str(ok)) for a in template]


@pytest.mark.parametrize(("case", "kind"), INPUT_ROWS)
def test_hostile_input_is_one_line_and_no_output(tmp_path, ok, capsys, case, kind):
    label, name, limit, text, _, template, outputs = case
    skip_if_root(kind)
    hostile = make_hostile(tmp_path / "in", kind, name=name, limit=limit, text=text.encode())
    with no_hang():
        result = cli(capsys, _argv(template, hostile, ok))
    assert_refused(result, *names_of(hostile), outputs=[ok / o for o in outputs], case=label)
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(hostile).st_mode)  # never replaced, never consumed


# One child process per reader family: a FIFO with no writer and an endless device, end to end.
PROCESS_ROWS = [
    ("fit", "fifo"),
    ("fit", "dev_zero"),
    ("toy-run", "dev_urandom"),
    ("allocate-result", "fifo"),
    ("bayes-priors", "fifo"),
    ("probe-hf-text", "dev_zero"),
]


@pytest.mark.parametrize(("label", "kind"), PROCESS_ROWS)
def test_fifo_and_devices_never_block_a_real_process(tmp_path, ok, label, kind):
    case = next(c for c in CASES if c[0] == label)
    hostile = make_hostile(tmp_path / "in", kind, name=case[1], limit=case[2])
    result = cli_process(_argv(case[5], hostile, ok), timeout=120)
    assert_refused(result, *names_of(hostile), outputs=[ok / o for o in case[6]], case=label)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "kind"),
    [pytest.param(c, k, id=f"{c[0]}-{k}") for c in CASES for k in DEVICE_KINDS],
)
def test_every_fifo_and_device_row_in_a_real_process(tmp_path, ok, case, kind):
    hostile = make_hostile(tmp_path / "in", kind, name=case[1], limit=case[2])
    result = cli_process(_argv(case[5], hostile, ok), timeout=120)
    assert_refused(result, *names_of(hostile), outputs=[ok / o for o in case[6]], case=case[0])


# --------------------------------------------------------------------------------------------
# Outputs: option × hostile kind of path
# --------------------------------------------------------------------------------------------

OUT_FILE_KINDS = ["dev_null", "fifo", "folder", "under_file", "long_name", "loop", "dangling"]
OUT_DIR_KINDS = ["dev_null", "fifo", "file", "under_file", "long_name", "loop"]
BAYES_QUICK = ["--law", "chinchilla", "--chains", "1", "--draws", "10", "--warmup", "10"]
ALLOC = ["allocate", "--law", "chinchilla", "--params", LAW_PARAMS, "--budget", "1e21"]

# (case id, "file" or "folder", argv with {O} for the hostile path, other outputs that must
# not be written)
OUT_CASES = [
    (
        "fit --out",
        "file",
        ["fit", "{OK}/t.csv", "--law", "chinchilla", "--out", "{O}", "--plots", "{OK}/plots"],
        ["plots"],
    ),
    (
        "fit --plots",
        "folder",
        ["fit", "{OK}/t.csv", "--law", "chinchilla", "--plots", "{O}", "--out", "{OK}/o.json"],
        ["o.json"],
    ),
    (
        "bayes --out",
        "file",
        ["bayes", "{OK}/t.csv", *BAYES_QUICK, "--out", "{O}", "--plots", "{OK}/plots"],
        ["plots"],
    ),
    (
        "bayes --netcdf",
        "file",
        ["bayes", "{OK}/t.csv", *BAYES_QUICK, "--netcdf", "{O}", "--out", "{OK}/o.json"],
        ["o.json"],
    ),
    (
        "compare --out",
        "file",
        [
            "compare",
            "{OK}/t.csv",
            "--laws",
            "chinchilla,depth_power",
            "--chains",
            "1",
            "--draws",
            "10",
            "--warmup",
            "10",
            "--out",
            "{O}",
        ],
        [],
    ),
    ("allocate --out", "file", [*ALLOC, "--out", "{O}", "--plots", "{OK}/plots"], ["plots"]),
    (
        "allocate --shapes-out",
        "file",
        [*ALLOC, "--shapes-out", "{O}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    ("allocate --plots", "folder", [*ALLOC, "--plots", "{O}", "--out", "{OK}/o.csv"], ["o.csv"]),
    (
        "isoflop --out",
        "file",
        ["isoflop", "{OK}/t.csv", "--out", "{O}", "--plots", "{OK}/plots"],
        ["plots"],
    ),
    (
        "isoflop --plots",
        "folder",
        ["isoflop", "{OK}/t.csv", "--plots", "{O}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "design --out",
        "file",
        [
            "design",
            "{OK}/r.json",
            "--target",
            "1e21",
            "--compute",
            "1e19",
            "--out",
            "{O}",
            "--plots",
            "{OK}/plots",
        ],
        ["plots"],
    ),
    (
        "design --plots",
        "folder",
        [
            "design",
            "{OK}/r.json",
            "--target",
            "1e21",
            "--compute",
            "1e19",
            "--plots",
            "{O}",
            "--out",
            "{OK}/o.csv",
        ],
        ["o.csv"],
    ),
    ("toy run --out", "folder", ["toy", "run", "{OK}/spec.toml", "--out", "{O}"], []),
    ("toy fit --out", "file", ["toy", "fit", "{OK}/t.csv", "--out", "{O}"], ["plots"]),
    ("train run --out", "folder", ["train", "run", "{OK}/cfg.toml", "--out", "{O}"], []),
    ("train grid --out", "folder", ["train", "grid", "{OK}/spec.toml", "--out", "{O}"], []),
    (
        "train grid --table",
        "file",
        ["train", "grid", "{OK}/spec.toml", "--table", "{O}", "--out", "{OK}/runs"],
        ["runs"],
    ),
    (
        "train report --table",
        "file",
        ["train", "report", "{OK}/grid", "--table", "{O}", "--plots", "{OK}/img"],
        ["img"],
    ),
    (
        "train report --plots",
        "folder",
        ["train", "report", "{OK}/grid", "--plots", "{O}", "--table", "{OK}/o.csv"],
        ["o.csv"],
    ),
    ("train diagnose --out", "file", ["train", "diagnose", "{OK}/r.json", "--out", "{O}"], []),
    (
        "data prepare --out",
        "folder",
        ["data", "prepare", "{OK}/docs.txt", "--shards", "--out", "{O}"],
        [],
    ),
    (
        "probe toy --out",
        "file",
        ["probe", "{OK}/r.json", "--out", "{O}", "--plots", "{OK}/plots"],
        ["plots"],
    ),
    (
        "probe toy --plots",
        "folder",
        ["probe", "{OK}/r.json", "--plots", "{O}", "--out", "{OK}/o.csv"],
        ["o.csv"],
    ),
    (
        "probe hf --out",
        "folder",
        ["probe", "hf", "{OK}/model", "--text", "{OK}/docs.txt", "--out", "{O}"],
        [],
    ),
    ("demo --out", "folder", ["demo", "--bundled", "--out", "{O}"], []),
]
OUTPUT_ROWS = [
    pytest.param(case, kind, id=f"{case[0]}-{kind}")
    for case in OUT_CASES
    for kind in (OUT_FILE_KINDS if case[1] == "file" else OUT_DIR_KINDS)
]


def make_hostile_output(folder: Path, kind: str) -> Path:
    """An output path of ``kind``; ``file`` is a regular file where a folder is expected."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "under_file":
        (folder / "plain").write_text("x")
        return folder / "plain" / "out.csv"
    if kind == "file":
        path = folder / "out"
        path.write_text("keep me\n")
        return path
    return make_hostile(folder, kind, name="out.csv", limit=0)


def _snapshot(path: Path):
    """What is at ``path`` (kind and content), to show a refused output left it alone."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # a name too long
        return exc.errno
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    content = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
    return stat.S_IFMT(st.st_mode), link, content


@pytest.mark.parametrize(("case", "kind"), OUTPUT_ROWS)
def test_hostile_output_is_refused_before_any_work(tmp_path, ok, capsys, case, kind):
    label, _, template, others = case
    (ok / "spec.toml").write_text(SPEC)
    (ok / "cfg.toml").write_text("depth = 1\n")
    target = make_hostile_output(tmp_path / "out", kind)
    before = _snapshot(target)
    argv = [a.replace("{O}", str(target)).replace("{OK}", str(ok)) for a in template]
    with no_hang():
        result = cli(capsys, argv)
    option = label.split()[-1]
    line = assert_refused(result, option, target.name[:40], outputs=[ok / o for o in others])
    assert _snapshot(target) == before, f"{label} {kind}: the path was changed ({line})"


# --------------------------------------------------------------------------------------------
# Hugging Face model folders: what transformers would read, checked first
# --------------------------------------------------------------------------------------------


def _safetensors(header: dict, data: bytes = b"", *, length: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def _tensor(shape, offsets, dtype="F32"):
    return {"w": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}


def _deep(n: int) -> str:
    return "[" * n + "]" * n


# (case id, {file name: bytes, or a kind of hostile file}, words of the error line)
HF_CASES = [
    ("config FIFO", {"config.json": "fifo"}, "config.json"),
    ("config /dev/zero", {"config.json": "dev_zero"}, "config.json"),
    ("config /dev/urandom", {"config.json": "dev_urandom"}, "config.json"),
    ("config folder", {"config.json": "folder"}, "config.json"),
    ("config dangling", {"config.json": "dangling"}, "config.json"),
    ("config loop", {"config.json": "loop"}, "config.json"),
    ("config huge", {"config.json": "huge_sparse"}, "config.json"),
    ("config garbage", {"config.json": "garbage"}, "config.json"),
    ("config UTF-16", {"config.json": "utf16"}, "config.json"),
    ("config a list", {"config.json": b"[1, 2]"}, "config.json"),
    ("config a string", {"config.json": b'"gpt2"'}, "config.json"),
    ("config nested 100k", {"config.json": _deep(100_000).encode()}, "config.json"),
    ("config 5000-digit int", {"config.json": b'{"n_layer": ' + b"9" * 5000 + b"}"}, "config.json"),
    ("config NaN", {"config.json": b'{"model_type": "gpt2", "n_embd": NaN}'}, "config.json"),
    ("config 1e9 layers", {"config.json": {**GPT2, "n_layer": 10**9}}, "n_layer"),
    ("config float layers", {"config.json": {**GPT2, "n_layer": 2.5}}, "n_layer"),
    ("config bool heads", {"config.json": {**GPT2, "n_head": True}}, "n_head"),
    ("config negative width", {"config.json": {**GPT2, "n_embd": -32}}, "n_embd"),
    ("config vocab 2^40", {"config.json": {**GPT2, "vocab_size": 1 << 40}}, "vocab_size"),
    (
        "config too big for memory",
        {"config.json": {**GPT2, "n_layer": 1024, "n_embd": 65536, "n_head": 64}},
        "GiB",
    ),
    ("config auto_map", {"config.json": {**GPT2, "auto_map": {"AutoModel": "m.M"}}}, "auto_map"),
    ("config no model_type", {"config.json": {"n_layer": 2}}, "model_type"),
    (
        "tokenizer_config auto_map",
        {"tokenizer_config.json": {"auto_map": {"AutoTokenizer": ["t.T", None]}}},
        "auto_map",
    ),
    ("tokenizer.json FIFO", {"tokenizer.json": "fifo"}, "tokenizer.json"),
    ("tokenizer.json /dev/zero", {"tokenizer.json": "dev_zero"}, "tokenizer.json"),
    ("tokenizer.json nested", {"tokenizer.json": _deep(1000).encode()}, "tokenizer.json"),
    ("tokenizer.json garbage", {"tokenizer.json": "garbage"}, "tokenizer.json"),
    ("merges.txt FIFO", {"merges.txt": "fifo"}, "merges.txt"),
    ("vocab.json a list", {"vocab.json": b"[]"}, "vocab.json"),
    ("stray FIFO", {"notes.md": "fifo"}, "notes.md"),
    ("weights FIFO", {"model.safetensors": "fifo"}, "model.safetensors"),
    ("weights /dev/zero", {"model.safetensors": "dev_zero"}, "model.safetensors"),
    ("weights folder", {"model.safetensors": "folder"}, "model.safetensors"),
    ("weights empty", {"model.safetensors": b""}, "model.safetensors"),
    (
        "header 2^60 bytes",
        {"model.safetensors": _safetensors({}, length=1 << 60)},
        "model.safetensors",
    ),
    (
        "header longer than file",
        {"model.safetensors": _safetensors({}, length=1000)},
        "model.safetensors",
    ),
    (
        "header not JSON",
        {"model.safetensors": struct.pack("<Q", 4) + b"\xff\xfe\x00{"},
        "model.safetensors",
    ),
    ("header a list", {"model.safetensors": struct.pack("<Q", 2) + b"[]"}, "model.safetensors"),
    (
        "header nested",
        {"model.safetensors": struct.pack("<Q", 2000) + _deep(1000).encode()},
        "model.safetensors",
    ),
    (
        "tensor past the end",
        {"model.safetensors": _safetensors(_tensor([4], [0, 16]), b"\0" * 8)},
        "model.safetensors",
    ),
    (
        "tensor shape lies",
        {"model.safetensors": _safetensors(_tensor([1000], [0, 8]), b"\0" * 8)},
        "shape",
    ),
    (
        "tensor negative shape",
        {"model.safetensors": _safetensors(_tensor([-2], [0, 8]), b"\0" * 8)},
        "model.safetensors",
    ),
    (
        "tensor unknown dtype",
        {"model.safetensors": _safetensors(_tensor([2], [0, 8], "F128"), b"\0" * 8)},
        "F128",
    ),
    ("weights .bin FIFO", {"pytorch_model.bin": "fifo"}, "pytorch_model.bin"),
    (
        "index escapes the folder",
        {"model.safetensors.index.json": {"weight_map": {"w": "../../etc/passwd"}}},
        "weight_map",
    ),
    (
        "index names a FIFO",
        {"model.safetensors.index.json": {"weight_map": {"w": "part.bin"}}, "part.bin": "fifo"},
        "part.bin",
    ),
]


def _hf_folder(root: Path, files: dict) -> Path:
    folder = root / "model"
    folder.mkdir(parents=True)
    files = {"config.json": GPT2, **files}
    for name, content in files.items():
        if isinstance(content, str):
            make_hostile(folder, content, name=name, limit=1 << 28, text=b"{}")
        elif isinstance(content, dict):
            (folder / name).write_text(json.dumps(content))
        else:
            (folder / name).write_bytes(content)
    return folder


@pytest.mark.parametrize(("label", "files", "word"), HF_CASES, ids=[c[0] for c in HF_CASES])
def test_hostile_model_folder_is_refused_before_transformers_reads_it(
    tmp_path, capsys, label, files, word
):
    pytest.importorskip("transformers")
    folder = _hf_folder(tmp_path, files)
    text = tmp_path / "docs.txt"
    text.write_text("one\n\ntwo\n")
    out = tmp_path / "probe"
    with no_hang():
        result = cli(capsys, ["probe", "hf", folder, "--text", text, "--out", out])
    assert_refused(result, word, outputs=[out], case=label)


def test_a_real_safetensors_file_passes_the_header_check(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from scalefit.probes._hfcheck import check_safetensors

    path = tmp_path / "model.safetensors"
    save_file({"a": torch.zeros(3, 4), "b": torch.ones(2, dtype=torch.bfloat16)}, str(path))
    check_safetensors(path)  # the library's own file passes the library's checks
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # one byte short: the last tensor ends past the file
    with pytest.raises(ScaleFitError, match="model.safetensors: refused by safetensors"):
        check_safetensors(path)


# --------------------------------------------------------------------------------------------
# Token folders read by the trainer (library level: a trainer config names the folder)
# --------------------------------------------------------------------------------------------

META = {"dtype": "uint8", "vocab": 256, "train_tokens": 64, "val_tokens": 64, "val_bytes": 64}


def _token_folder(root: Path, meta, *, train=bytes(range(64)), val=bytes(range(64))) -> Path:
    folder = root / "tokens"
    folder.mkdir()
    if isinstance(meta, str):
        make_hostile(folder, meta, name="meta.json", limit=MAX_CONFIG_BYTES, text=b"{}")
    else:
        (folder / "meta.json").write_text(json.dumps(meta))
    for name, content in (("train.bin", train), ("val.bin", val)):
        if isinstance(content, str):
            make_hostile(folder, content, name=name, limit=1 << 44)
        else:
            (folder / name).write_bytes(content)
    return folder


TOKEN_CASES = [
    ("meta FIFO", "fifo", {}, "meta.json"),
    ("meta /dev/zero", "dev_zero", {}, "meta.json"),
    ("meta garbage", "garbage", {}, "meta.json"),
    ("meta huge", "huge_sparse", {}, "meta.json"),
    ("meta a list", [1], {}, "meta.json"),
    ("meta float dtype", {**META, "dtype": "float64"}, {}, "dtype"),
    ("meta object dtype", {**META, "dtype": "object"}, {}, "dtype"),
    ("meta vocab 1e12", {**META, "dtype": "uint32", "vocab": 10**12}, {}, "vocab"),
    ("meta vocab over dtype", {**META, "vocab": 300}, {}, "vocab"),
    ("meta vocab a string", {**META, "vocab": "256"}, {}, "vocab"),
    ("meta no val_tokens", {k: v for k, v in META.items() if k != "val_tokens"}, {}, "val_tokens"),
    ("meta zero train_tokens", {**META, "train_tokens": 0}, {}, "train_tokens"),
    ("train.bin FIFO", META, {"train": "fifo"}, "train.bin"),
    ("train.bin /dev/zero", META, {"train": "dev_zero"}, "train.bin"),
    ("train.bin folder", META, {"train": "folder"}, "train.bin"),
    ("train.bin empty", META, {"train": b""}, "train.bin"),
    ("val.bin odd size", {**META, "dtype": "uint16"}, {"val": b"\0" * 63}, "val.bin"),
]


@pytest.mark.parametrize(
    ("label", "meta", "files", "word"), TOKEN_CASES, ids=[c[0] for c in TOKEN_CASES]
)
def test_hostile_token_folder_is_one_clear_error(tmp_path, label, meta, files, word):
    from scalefit.train.data import TokenData

    folder = _token_folder(tmp_path, meta, **files)
    with no_hang(), pytest.raises(ScaleFitError, match=word):
        TokenData(folder, 8)


def test_token_ids_beyond_the_vocabulary_are_refused_at_the_batch(tmp_path):
    pytest.importorskip("torch")
    from scalefit.train.data import TokenData

    folder = _token_folder(tmp_path, {**META, "vocab": 16})
    data = TokenData(folder, 8)
    with pytest.raises(ScaleFitError, match="outside the vocabulary of 16"):
        data.batch(0, 4)


MANIFEST = {
    "format": "scalefit-shards-1",
    "dtype": "uint16",
    "vocab": 300,
    "train_tokens": 32,
    "val_tokens": 32,
    "val_bytes": 32,
    "train": [{"file": "train_00000.bin", "tokens": 32, "sha256": "0"}],
    "val": [{"file": "val_00000.bin", "tokens": 32, "sha256": "0"}],
}


def _shard_folder(root: Path, manifest, shard="plain") -> Path:
    folder = root / "shards"
    folder.mkdir()
    if isinstance(manifest, str):
        make_hostile(folder, manifest, name="manifest.json", limit=MAX_CONFIG_BYTES)
    else:
        (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "val_00000.bin").write_bytes(b"\1\0" * 32)
    if shard == "plain":
        (folder / "train_00000.bin").write_bytes(b"\1\0" * 32)
    else:
        make_hostile(folder, shard, name="train_00000.bin", limit=1 << 44)
    return folder


def _shards(**changes):
    return {**MANIFEST, **changes}


SHARD_CASES = [
    ("manifest FIFO", "fifo", "plain", "manifest.json"),
    ("manifest /dev/urandom", "dev_urandom", "plain", "manifest.json"),
    ("manifest nested", _deep(500), "plain", "manifest.json"),
    (
        "shard escapes the folder",
        _shards(train=[{"file": "../../etc/passwd", "tokens": 32, "sha256": "0"}]),
        "plain",
        "plain 'file' name",
    ),
    (
        "shard absolute path",
        _shards(train=[{"file": "/dev/zero", "tokens": 32, "sha256": "0"}]),
        "plain",
        "plain 'file' name",
    ),
    (
        "shard tokens a string",
        _shards(train=[{"file": "train_00000.bin", "tokens": "32", "sha256": "0"}]),
        "plain",
        "tokens",
    ),
    ("no train shards", _shards(train=[]), "plain", "'train'"),
    ("shards not a list", _shards(val={"file": "val_00000.bin"}), "plain", "'val'"),
    ("shard FIFO", MANIFEST, "fifo", "train_00000.bin"),
    ("shard /dev/zero", MANIFEST, "dev_zero", "train_00000.bin"),
]


@pytest.mark.parametrize(
    ("label", "manifest", "shard", "word"), SHARD_CASES, ids=[c[0] for c in SHARD_CASES]
)
def test_hostile_shard_folder_is_one_clear_error(tmp_path, label, manifest, shard, word):
    from scalefit.train.shards import ShardData

    if isinstance(manifest, str) and manifest.startswith("["):
        folder = _shard_folder(tmp_path, MANIFEST, shard)
        (folder / "manifest.json").write_text(manifest)
    else:
        folder = _shard_folder(tmp_path, manifest, shard)
    with no_hang(), pytest.raises(ScaleFitError, match=word):
        ShardData(folder, 8)


# --------------------------------------------------------------------------------------------
# Text corpora streamed by the probes and the shard writer
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "word"),
    [
        ("c.jsonl", b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "line 1"),
        ("c.jsonl", b'{"text": "a", "n": ' + b"9" * 5000 + b"}\n", "line 1"),
        ("c.jsonl", b'{"text": "a", "n": NaN}\n', "line 1"),
        ("c.jsonl", b'["not", "an", "object"]\n', "line 1"),
    ],
    ids=["nested", "long int", "NaN", "list"],
)
def test_hostile_jsonl_lines_are_one_line(tmp_path, name, content, word):
    from scalefit.probes._text import iter_documents

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ScaleFitError, match=word):
        list(iter_documents(path))


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_a_corpus_folder_with_a_fifo_or_device_is_refused(tmp_path, kind):
    from scalefit.train.data import read_documents
    from scalefit.train.shards import iter_documents

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("a document\n")
    make_hostile(folder, kind, name="b.txt", limit=0)
    with no_hang():
        with pytest.raises(ScaleFitError, match="b.txt"):
            read_documents(folder)
        with pytest.raises(ScaleFitError, match="b.txt"):
            list(iter_documents(folder))


def test_dataset_file_that_is_a_fifo_is_refused(tmp_path):
    from scalefit.datasets import DATASETS, resolve

    name = next(n for n, d in DATASETS.items() if not d.bundled)
    os.mkfifo(tmp_path / DATASETS[name].filename)
    with no_hang(), pytest.raises(ScaleFitError, match="FIFO"):
        resolve(name, tmp_path, download=False)


# --------------------------------------------------------------------------------------------
# Configuration contents: valid TOML that is not a valid priors file or sweep spec
# --------------------------------------------------------------------------------------------

PRIORS_CASES = [
    ("priors a number", "priors = 1\n"),
    ("priors a list", "priors = [1, 2]\n"),
    ("dist a list", "[E]\ndist = [1]\nloc = 1.0\nscale = 1.0\n"),
    ("dist a table", "[E]\ndist = {a = 1}\nloc = 1.0\nscale = 1.0\n"),
    ("loc a huge integer", '[E]\ndist = "normal"\nloc = ' + "9" * 400 + "\nscale = 1.0\n"),
    ("scale a string", '[E]\ndist = "lognormal"\nloc = 0.0\nscale = "1"\n'),
    ("scale infinite", '[E]\ndist = "lognormal"\nloc = 0.0\nscale = inf\n'),
    ("a value, not a table", "E = 1.0\n"),
    ("unknown parameter", '[nope]\ndist = "normal"\nloc = 0.0\nscale = 1.0\n'),
    ("nested 1000 deep", "E = " + "[" * 1000 + "]" * 1000 + "\n"),
]


@pytest.mark.parametrize("text", [c[1] for c in PRIORS_CASES], ids=[c[0] for c in PRIORS_CASES])
def test_bad_priors_contents_are_one_line(tmp_path, ok, capsys, text):
    priors = tmp_path / "priors.toml"
    priors.write_text(text)
    argv = ["bayes", ok / "t.csv", "--law", "chinchilla", "--priors", priors, "--chains", "1"]
    argv += ["--draws", "10", "--warmup", "10", "--out", ok / "o.json"]
    with no_hang():
        result = cli(capsys, argv)
    assert_refused(result, "priors.toml", "prior for", outputs=[ok / "o.json"])


SPEC_CASES = [
    ("sweep a string", 'sweep = "x"\n'),
    ("grid nested 1000 deep", SPEC + "other = " + "[" * 1000 + "]" * 1000 + "\n"),
    ("name escapes", SPEC.replace('name = "s"', 'name = "../../x"')),
    ("task a module", SPEC.replace('task = "toy"', 'task = "os:system"')),
    ("grid a number", '[sweep]\nname = "s"\ntask = "toy"\ngrid = 1\n'),
]


@pytest.mark.parametrize("text", [c[1] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_bad_sweep_spec_contents_are_one_line(tmp_path, ok, capsys, text):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    with no_hang():
        result = cli(capsys, ["toy", "run", spec, "--out", ok / "runs", "--workers", "0"])
    assert_refused(result, "spec.toml", outputs=[ok / "runs"])


# --------------------------------------------------------------------------------------------
# Model folders that pass the file checks but that transformers cannot build
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A tiny GPT-2 saved by transformers with a word-level tokenizer."""
    tf = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    docs = [f"document {i} has words w{i % 7} and w{i % 5}" for i in range(30)]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(docs, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>"]))
    fast = tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>")
    config = tf.GPT2Config(vocab_size=len(fast), n_positions=64, n_embd=32, n_layer=2, n_head=4)
    folder = tmp_path_factory.mktemp("gpt2") / "model"
    tf.GPT2LMHeadModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    (folder.parent / "docs.txt").write_text("\n\n".join(docs))
    return folder


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _shrink_a_tensor(folder: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    name = next(k for k, v in weights.items() if v.dim() == 2)
    weights[name] = torch.zeros(3, 3)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _tokenizer_model(model: dict, **changes) -> str:
    """A tokenizer.json with every top-level field and the given model (tokenizers' format)."""
    fields = ["truncation", "padding", "normalizer", "pre_tokenizer", "post_processor", "decoder"]
    data = {"version": "1.0", "added_tokens": [], **dict.fromkeys(fields), "model": model}
    return json.dumps({**data, **changes})


BUILD_CASES = [
    ("heads do not divide width", lambda f: _edit_json(f / "config.json", n_head=3)),
    ("epsilon a string", lambda f: _edit_json(f / "config.json", layer_norm_epsilon="x")),
    ("dtype float128", lambda f: _edit_json(f / "config.json", dtype="float128")),
    (
        "activation a module path",
        lambda f: _edit_json(f / "config.json", activation_function="os.system"),
    ),
    ("tensor of the wrong shape", _shrink_a_tensor),
    ("no weights", lambda f: (f / "model.safetensors").unlink()),
    (
        "BPE vocabulary a number",
        lambda f: (f / "tokenizer.json").write_text(
            _tokenizer_model({"type": "BPE", "vocab": 5, "merges": []})
        ),
    ),
    (
        "added token id a string",
        lambda f: (f / "tokenizer.json").write_text(
            _tokenizer_model(
                {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
                added_tokens=[{"id": "x"}],
            )
        ),
    ),
    (
        "tokenizer model unknown",
        lambda f: (f / "tokenizer.json").write_text('{"model": {"type": "Nope"}}'),
    ),
]


@pytest.mark.parametrize("edit", [c[1] for c in BUILD_CASES], ids=[c[0] for c in BUILD_CASES])
def test_model_folder_transformers_cannot_build_is_one_line(gpt2_folder, tmp_path, capsys, edit):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(gpt2_folder, folder)
    edit(folder)
    out = tmp_path / "probe"
    argv = ["probe", "hf", folder, "--text", gpt2_folder.parent / "docs.txt", "--out", out]
    argv += ["--tokens", "64", "--seq-len", "16", "--bootstrap", "0", "--prune-tokens", "0"]
    with no_hang():
        result = cli(capsys, [*argv, "--quiet", "--no-plots"])
    assert_refused(result, "model", outputs=[out])


# --------------------------------------------------------------------------------------------
# A sweep folder's lock file replaced by something that is not a file
# --------------------------------------------------------------------------------------------


TOY_SPEC = """[sweep]
name = "lock"
task = "toy"
[fixed]
preset = "cpu"
teacher_depth = 2
depths = [2]
batch = 8
steps = 2
eval_steps = [2]
test_size = 16
checkpoint_every = 0
[grid]
replicas = [1]
"""


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "dev_null", "folder", "dangling"])
def test_a_lock_file_that_is_not_a_file_is_one_line(tmp_path, ok, capsys, kind):
    out = tmp_path / "runs"
    lock = make_hostile(out, kind, name=".scalefit.lock", limit=0)
    before = _snapshot(lock)
    (ok / "spec.toml").write_text(TOY_SPEC)
    with no_hang():
        result = cli(capsys, ["toy", "run", ok / "spec.toml", "--out", out, "--quiet"])
    assert_refused(result, ".scalefit.lock", outputs=[out / "results.csv"])
    assert _snapshot(lock) == before


# --------------------------------------------------------------------------------------------
# An output folder holding a FIFO or a device link where the command writes a file
# --------------------------------------------------------------------------------------------

INSIDE_CASES = [
    ("fit --plots", "fit_chinchilla.png", ["fit", "{OK}/t.csv", "--law", "chinchilla"]),
    ("probe hf --out", "layers.csv", ["probe", "hf", "{OK}/model", "--text", "{OK}/docs.txt"]),
    ("toy run --out", "results.csv", ["toy", "run", "{OK}/spec.toml", "--quiet"]),
    ("data prepare --out", "manifest.json", ["data", "prepare", "{OK}/docs.jsonl", "--shards"]),
]


@pytest.mark.parametrize("kind", ["fifo", "dev_null", "dev_zero"])
@pytest.mark.parametrize(
    ("option", "name", "template"), INSIDE_CASES, ids=[c[0] for c in INSIDE_CASES]
)
def test_an_output_folder_holding_a_fifo_or_device_is_refused_first(
    tmp_path, ok, capsys, option, name, template, kind
):
    (ok / "spec.toml").write_text(TOY_SPEC)
    folder = tmp_path / "outdir"
    target = make_hostile(folder, kind, name=name, limit=0)
    argv = [a.replace("{OK}", str(ok)) for a in template] + [option.split()[-1], str(folder)]
    with no_hang():
        result = cli(capsys, argv)
    assert_refused(result, name, outputs=[])
    assert sorted(os.listdir(folder)) == [name] and _snapshot(target) is not None


@pytest.mark.parametrize(
    ("name", "line"), [("c.txt", "x" * 5000), ("c.jsonl", json.dumps({"text": "x" * 5000}))]
)
def test_a_line_too_long_to_hold_is_refused(tmp_path, name, line):
    from scalefit.core._io import iter_input_lines
    from scalefit.probes._text import iter_documents

    path = tmp_path / name
    path.write_text(line + "\n")
    with pytest.raises(ScaleFitError, match="line 1: longer than 1,000 characters"):
        list(iter_input_lines(path, what="text file", max_line=1000))
    assert [len(d) for d in iter_documents(path)] == [5000]  # under the default limit (64 Mi)


def test_a_small_input_does_not_reserve_the_size_limit(tmp_path):
    """Reading a 1 kB table reserves about 1 kB, not the 1 GiB input limit."""
    import tracemalloc

    from scalefit.core._io import read_input_bytes

    path = tmp_path / "t.csv"
    path.write_text("params,tokens,loss\n" + "1,2,3\n" * 150)
    tracemalloc.start()
    try:
        data = read_input_bytes(path, what="table")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == path.read_bytes() and peak < 1 << 20
