"""Loading is not executing: crafted pickles and filter strings run nothing (real CLI).

Checkpoint files are refused twice over: without checksums written by scalefit
(``checksums.json``) before any byte is parsed, and, when an attacker forges matching checksums
(anyone who can write the folder can), by the tensors-only torch loader.
"""

import io
import os
import textwrap

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, make_corpus  # noqa: E402, F401 - autouse fixture

from scalefit.cli import main  # noqa: E402
from scalefit.cli._common import load_table_arg  # noqa: E402
from scalefit.core._manifest import record  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.sweep import load_spec, run_dir_of  # noqa: E402


class _CreatesFile:
    """Unpickling this object calls ``os.mkdir(marker)``: it creates the marker (a folder).

    (A folder rather than ``open(marker, "w")``, whose file object would be left unclosed.)
    """

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def crafted(path, marker, forge=False, **plain):
    """A real torch file whose payload would create ``marker`` when unpickled.

    ``forge=True`` also writes matching checksums, as an attacker with write access could.
    """
    buf = io.BytesIO()
    torch.save({**plain, "payload": _CreatesFile(marker)}, buf)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    if forge:
        record(path.parent, written=[path.name])
    return path


#: (forge checksums?, words the refusal names)
REFUSALS = [(True, "tensors and plain data"), (False, "checksums.json")]


def one_line_error(capsys, *words):
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err and err.startswith("scalefit: error: ")
    for word in words:
        assert word in err, err
    return err


def test_the_crafted_file_really_runs_code_under_plain_unpickling(tmp_path):
    """Control: without weights_only the payload does create the marker (the test can fail)."""
    marker = tmp_path / "control"
    path = crafted(tmp_path / "x.pt", marker)
    torch.load(path, weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize(("forge", "words"), REFUSALS)
def test_probe_refuses_a_crafted_model(tmp_path, capsys, forge, words):
    marker = tmp_path / "pwned"
    run = tmp_path / "run"
    crafted(run / "model.pt", marker, forge, config={"width": 32})
    assert main(["probe", str(run)]) == 2
    one_line_error(capsys, "model.pt", words)
    assert not marker.exists()


def test_probe_names_a_csv_given_as_model(tmp_path, capsys):
    path = tmp_path / "table.csv"
    path.write_text("params,tokens,loss\n1,2,3\n")
    assert main(["probe", str(path)]) == 2
    one_line_error(capsys, "table.csv", "toy model")


@pytest.mark.parametrize(("forge", "words"), REFUSALS)
def test_train_diagnose_refuses_a_crafted_checkpoint(tmp_path, capsys, forge, words):
    marker = tmp_path / "pwned"
    ckpt = crafted(tmp_path / "run" / "checkpoint.pt", marker, forge, step=3)
    assert main(["train", "diagnose", str(ckpt)]) == 2
    one_line_error(capsys, "checkpoint.pt", words)
    assert not marker.exists()


@pytest.mark.parametrize(("forge", "words"), REFUSALS)
def test_train_run_refuses_to_resume_a_crafted_checkpoint(tmp_path, capsys, forge, words):
    from scalefit.train.data import build_tokens

    corpus = make_corpus(tmp_path / "c", vocab=["to", "be", "or", "not"], words=800)
    tokens = build_tokens(corpus, tmp_path / "t", val_fraction=0.25)
    config = tmp_path / "run.toml"
    config.write_text(
        f'data = "{tokens}"\ndepth = 1\nwidth = 16\nseq_len = 16\nbatch_size = 4\n'
        "tokens = 256\neval_tokens = 64\ndiagnose = false\n"
    )
    marker = tmp_path / "pwned"
    out = tmp_path / "out"
    crafted(out / "checkpoint.pt", marker, forge, step=2)
    assert main(["train", "run", str(config), "--out", str(out), "--no-progress"]) == 2
    one_line_error(capsys, "checkpoint.pt", words, *([] if forge else ["--overwrite"]))
    assert not marker.exists() and not (out / "result.json").exists()


TOY_SPEC = """
[sweep]
name = "crafted"
task = "toy"

[fixed]
preset = "cpu"
teacher_depth = 4
depths = [2, 3]
batch = 16
steps = 20
eval_steps = [10, 20]
test_size = 64

[grid]
seed = [0]
"""


@pytest.mark.parametrize(("forge", "words"), REFUSALS)
def test_toy_run_refuses_to_resume_a_crafted_state(tmp_path, capsys, forge, words):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(textwrap.dedent(TOY_SPEC))
    out = tmp_path / "out"
    (run,) = load_spec(spec_path).runs()
    marker = tmp_path / "pwned"
    crafted(run_dir_of(out, run) / "state.pt", marker, forge, step=10)
    code = main(["toy", "run", str(spec_path), "--out", str(out), "--workers", "0", "--quiet"])
    assert code == 2
    one_line_error(capsys, "state.pt", words)
    assert not marker.exists() and not (run_dir_of(out, run) / "result.json").exists()


@pytest.fixture
def table_args(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame(
        {
            "variant": ["pre_ln", "lns", "pre_ln", "lns"],
            "depth": [1, 2, 4, 8],
            "width": [32, 32, 64, 64],
            "tokens": [1e6, 1e6, 2e6, 2e6],
            "loss": [4.0, 3.5, 3.0, 2.8],
        }
    ).to_csv(path, index=False)

    def make(where):
        import argparse

        return argparse.Namespace(
            table=str(path), where=where, drop_highest=0, data_dir=None, columns=None
        )

    return make


@pytest.mark.parametrize(
    "where",
    [
        "@pd.io.common.os.system('touch {marker}') == 0",
        "__import__('os').system('touch {marker}') == 0",
        "open('{marker}', 'w') is None",
        "depth.__class__.__base__ == 1",
        "[x for x in ().__class__.__base__.__subclasses__()] == 1",
        "lambda: open('{marker}', 'w')",
        "depth[0] == 1",
    ],
)
def test_where_runs_no_code(tmp_path, table_args, capsys, where):
    marker = tmp_path / "pwned"
    text = where.format(marker=marker)
    with pytest.raises(ScaleFitError, match="--where"):
        load_table_arg(table_args(text))
    code = main(["fit", table_args(text).table, "--law", "chinchilla", "--where", text])
    assert code == 2
    one_line_error(capsys, "--where")
    assert not marker.exists()


def test_where_reads_no_file_into_the_message(tmp_path, table_args, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    text = f"@Path('{secret}').read_text() == 'x'"
    assert main(["fit", table_args(text).table, "--law", "chinchilla", "--where", text]) == 2
    assert "TOP-SECRET" not in one_line_error(capsys, "--where")


def test_where_filters_with_the_grammar(table_args):
    kept = load_table_arg(table_args("variant == 'pre_ln' and depth >= 2"))
    assert list(kept["depth"]) == [4.0]
    kept = load_table_arg(table_args("variant in ['lns'] or not width > 32"))
    assert list(kept["depth"]) == [1.0, 2.0, 8.0]
    assert kept.attrs["scalefit"]["where"] == "variant in ['lns'] or not width > 32"
    with pytest.raises(ScaleFitError, match="keeps no rows"):
        load_table_arg(table_args("depth > 100"))
    with pytest.raises(ScaleFitError, match="unknown column 'dpth'. Did you mean 'depth'"):
        load_table_arg(table_args("dpth > 1"))


def _tiny_toy_run(tmp_path):
    from scalefit.sim.sweep_task import run_toy

    config = {"preset": "cpu", "teacher_depth": 4, "depths": [2, 3], "batch": 16, "steps": 10}
    run_toy({**config, "eval_steps": [5, 10], "test_size": 64}, tmp_path / "run")
    return torch.load(tmp_path / "run" / "model.pt", weights_only=True)


@pytest.mark.parametrize(
    ("label", "edit", "match"),
    [
        ("layers", lambda g: g["teacher"].update(layers="x"), "teacher layers must be a table"),
        ("head", lambda g: g["teacher"].update(head=torch.zeros(3, 3)), r"shape \(32, 128\)"),
        ("student", lambda g: g["students"]["2_0"].pop("fc_w"), r"student 2_0 'fc_w' must be"),
        ("key", lambda g: g["students"].update(abc={}), "student key 'abc'"),
        ("none", lambda g: g.update(students={}), "holds no student"),
        ("nan", lambda g: g["teacher"]["head"].fill_(float("nan")), "NaN or infinite"),
        ("dtype", lambda g: g["teacher"].update(head=g["teacher"]["head"].double()), "mix dtypes"),
    ],
)
def test_probe_names_a_malformed_model(tmp_path, capsys, label, edit, match):
    """Tensors-only files can still be malformed: every shape is checked against the config."""
    payload = _tiny_toy_run(tmp_path)
    edit(payload)
    buf = io.BytesIO()
    torch.save(payload, buf)
    record(tmp_path / "run", write={"model.pt": buf.getvalue()})  # well-formed checksums
    assert main(["probe", str(tmp_path / "run")]) == 2
    import re

    assert re.search(match, one_line_error(capsys, "model.pt")), label


def test_toy_run_names_a_malformed_state(tmp_path, capsys):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(textwrap.dedent(TOY_SPEC))
    out = tmp_path / "out"
    (run,) = load_spec(spec_path).runs()
    state = run_dir_of(out, run) / "state.pt"
    state.parent.mkdir(parents=True)
    buf = io.BytesIO()
    from scalefit.sim.sweep_task import build_config

    torch.save({"config": build_config(run.config).to_dict(), "step": 5, "students": {}}, buf)
    record(state.parent, write={state.name: buf.getvalue()})
    code = main(["toy", "run", str(spec_path), "--out", str(out), "--workers", "0", "--quiet"])
    assert code == 2
    one_line_error(capsys, "state.pt", "not a resumable toy state", "delete it")
