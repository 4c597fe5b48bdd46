"""Hostile input for the fifth round's command-line surfaces (issue 42's standard).

``plan init|ask|tell|status|run`` over a plan folder whose ``plan.json`` is broken or edited to
lead runs out of the folder, hostile tell and candidate tables, ``--budget`` 0/-1/nan;
``curves holdout`` with a held-out size above every run, NaN or one run; ``train grid
--resume-from`` naming a folder, a FIFO, a binary file or a table of 10^5 columns, and
``--max-minutes`` 0/-1/nan/inf. Each is exit 2 and one line naming the input, no traceback, no
file written outside the named folder, nothing half written, no hang.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hostile import assert_refused, cli, cli_process

#: Seconds for a child process fed a FIFO (it must refuse the FIFO, not wait on it).
FIFO_S = 60


def _candidates(path: Path) -> Path:
    """Twelve candidate runs (params x tokens), 1e16..1e19 FLOPs."""
    params = np.repeat([1e7, 3e7, 1e8, 3e8], 3)
    tokens = np.tile([2e8, 6e8, 2e9], 4)
    pd.DataFrame({"params": params, "tokens": tokens}).to_csv(path, index=False)
    return path


def _digest(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` and a checksum of its bytes (links and FIFOs by name only)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            data = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
            out[str(p.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return out


@pytest.fixture
def here(tmp_path, monkeypatch):
    """Run in ``tmp_path`` with relative names, so no message names a word by its test's path."""
    monkeypatch.chdir(tmp_path)
    return Path(".")


@pytest.fixture
def started(here, capsys):
    """A plan folder after ``init`` and one ``ask`` of 3 runs; returns (folder, asked run ids)."""
    folder = here / "p"
    cand = _candidates(here / "cand.csv")
    assert cli(capsys, ["plan", "init", folder, cand, "--budget", "1e21", "--n-boot", "4"])[0] == 0
    assert cli(capsys, ["plan", "ask", folder, "--k", "3"])[0] == 0
    state = json.loads((folder / "plan.json").read_text())
    return folder, [a["run_id"] for a in state["asked"]]


def _edit(folder: Path, change) -> None:
    state = json.loads((folder / "plan.json").read_text())
    change(state)
    (folder / "plan.json").write_text(json.dumps(state))


# -- plan.json itself -----------------------------------------------------------------------------
BROKEN = {
    "truncated": lambda text: text[: len(text) // 2],
    "not JSON": lambda text: "this is not json\n",
    "empty": lambda text: "",
    "a JSON array": lambda text: "[1, 2, 3]",
    "binary": lambda text: "\x00\xff\xfe" * 100,
    "NaN literal": lambda text: text.replace('"stop_width": 1.5', '"stop_width": NaN'),
    "Infinity literal": lambda text: text.replace('"n_boot": 4', '"n_boot": Infinity'),
    "huge float": lambda text: text.replace('"stop_width": 1.5', '"stop_width": 1e999'),
    "huge int": lambda text: text.replace('"n_boot": 4', '"n_boot": ' + "9" * 5000),
    "deep nesting": lambda text: text.replace(
        '"n_boot": 4', '"n_boot": ' + "[" * 5000 + "]" * 5000
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
@pytest.mark.parametrize("action", ["status", "ask", "tell"])
def test_a_broken_plan_file_is_one_line(started, capsys, case, action):
    folder, ids = started
    path = folder / "plan.json"
    path.write_text(BROKEN[case](path.read_text()), encoding="latin-1")
    before = _digest(folder.parent)
    extra = [_tell_csv(folder.parent / "t.csv", ids[:1])] if action == "tell" else []
    before = _digest(folder.parent)
    assert_refused(cli(capsys, ["plan", action, folder, *extra]), "plan", case=case)
    assert _digest(folder.parent) == before, case


def _tell_csv(path: Path, ids, loss=3.0) -> Path:
    pd.DataFrame({"run_id": ids, "loss": [loss] * len(ids)}).to_csv(path, index=False)
    return path


WRONG_TYPES = {
    "schema 2": lambda s: s.update(schema=2),
    "settings a list": lambda s: s.update(settings=[1, 2]),
    "settings missing law": lambda s: s["settings"].pop("law"),
    "unknown law": lambda s: s["settings"].update(law="no_such_law"),
    "budget a string": lambda s: s["settings"].update(target_budget="big"),
    "budget negative": lambda s: s["settings"].update(target_budget=-1.0),
    "stop_width a dict": lambda s: s["settings"].update(stop_width={}),
    "n_boot a float": lambda s: s["settings"].update(n_boot=2.5),
    "n_boot huge": lambda s: s["settings"].update(n_boot=10**15),
    "total_flops text": lambda s: s["settings"].update(total_flops="lots"),
    "trainer a list": lambda s: s["settings"].update(trainer=[1]),
    "candidates a string": lambda s: s.update(candidates="x"),
    "candidates ragged": lambda s: s["candidates"]["params"].pop(),
    "candidate params text": lambda s: s["candidates"]["params"].__setitem__(0, "big"),
    "candidate params negative": lambda s: s["candidates"]["params"].__setitem__(0, -1.0),
    "candidate params 1e308": lambda s: s["candidates"]["params"].__setitem__(0, 1e308),
    "candidates without run_id": lambda s: s["candidates"].pop("run_id"),
    "candidate run_id a number": lambda s: s["candidates"]["run_id"].__setitem__(0, 7),
    "asked a dict": lambda s: s.update(asked={"a": 1}),
    "asked entry a string": lambda s: s["asked"].__setitem__(0, "x"),
    "asked round text": lambda s: s["asked"][0].update(round="one"),
    "asked unknown run": lambda s: s["asked"][0].update(run_id="nope"),
    "results entry a list": lambda s: s["results"].append([1, 2]),
    "results flops text": lambda s: s["results"].append(
        {
            "run_id": s["asked"][0]["run_id"],
            "params": 1e7,
            "tokens": 2e8,
            "depth": None,
            "width": None,
            "flops": "x",
            "loss": 3.0,
        }  # fmt: skip
    ),
    "decisions a number": lambda s: s.update(decisions=3),
    "decision a string": lambda s: s["decisions"].append("x"),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
@pytest.mark.parametrize("action", ["status", "ask"])
def test_a_plan_file_with_wrong_types_is_one_line(started, capsys, case, action):
    folder, _ = started
    _edit(folder, WRONG_TYPES[case])
    before = _digest(folder.parent)
    assert_refused(cli(capsys, ["plan", action, folder]), "plan.json", case=case)
    assert _digest(folder.parent) == before, case


ESCAPES = {
    "run_id with ..": "../../escaped",
    "run_id absolute": "/tmp/escaped-0123456789",
    "run_id with a slash": "a/b-0123456789",
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
@pytest.mark.parametrize("action", ["status", "ask", "run"])
def test_a_run_id_edited_to_leave_the_folder_is_refused(started, capsys, case, action):
    folder, ids = started
    bad = ESCAPES[case]

    def change(state):
        state["candidates"]["run_id"] = [
            bad if r == ids[0] else r for r in state["candidates"]["run_id"]
        ]
        state["asked"][0]["run_id"] = bad

    _edit(folder, change)
    before = _digest(folder.parent)
    assert_refused(cli(capsys, ["plan", action, folder]), "plan.json", "run_id", case=case)
    assert _digest(folder.parent) == before, case


def test_a_plan_file_linked_from_outside_is_refused(started, capsys, tmp_path):
    folder, _ = started
    outside = tmp_path / "elsewhere.json"
    (folder / "plan.json").rename(outside)
    (folder / "plan.json").symlink_to(outside)
    before = outside.read_bytes()
    for action in ("status", "ask"):
        assert_refused(cli(capsys, ["plan", action, folder]), "plan", case=action)
    assert outside.read_bytes() == before


def test_a_fit_file_linked_from_outside_is_refused(started, capsys, tmp_path):
    folder, _ = started
    decoy = tmp_path / "decoy.json"
    decoy.write_text("{}")
    (folder / "fit.json").symlink_to(decoy)
    assert_refused(cli(capsys, ["plan", "ask", folder]), "fit.json", "plan", case="fit link")
    assert decoy.read_text() == "{}"


def test_a_plan_file_that_is_a_fifo_does_not_block(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    os.mkfifo(folder / "plan.json")
    for action in ("status", "ask"):
        result = cli_process(["plan", action, folder], timeout=FIFO_S)
        assert_refused(result, "plan", case=action)
    result = cli_process(
        ["plan", "init", folder, _candidates(tmp_path / "c.csv"), "--budget", "1e21"],
        timeout=FIFO_S,
    )
    assert_refused(result, "plan", case="init over a FIFO")


def test_a_plan_folder_that_is_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "p").write_text("x")
    cand = _candidates(tmp_path / "c.csv")
    for args in (["status", tmp_path / "p"], ["init", tmp_path / "p", cand, "--budget", "1e21"]):
        assert_refused(cli(capsys, ["plan", *args]), "p", case=args[0])


# -- tell and candidate tables, --budget ------------------------------------------------------
def _tell_rows(ids: list[str]) -> dict[str, pd.DataFrame]:
    one = ids[:1]
    return {
        "text loss": pd.DataFrame({"run_id": one, "loss": ["low"]}),
        "negative loss": pd.DataFrame({"run_id": one, "loss": [-3.0]}),
        "zero loss": pd.DataFrame({"run_id": one, "loss": [0.0]}),
        "-inf loss": pd.DataFrame({"run_id": one, "loss": [-np.inf]}),
        "duplicate run_id": pd.DataFrame({"run_id": [ids[0], ids[0]], "loss": [3.0, 3.1]}),
        "unknown run_id": pd.DataFrame({"run_id": ["../../x"], "loss": [3.0]}),
        "no loss column": pd.DataFrame({"run_id": one, "lost": [3.0]}),
        "text params": pd.DataFrame({"params": ["big"], "tokens": [2e8], "loss": [3.0]}),
        "text tokens with run_id": pd.DataFrame({"run_id": one, "tokens": ["x"], "loss": [3.0]}),
        "negative params with run_id": pd.DataFrame(
            {"run_id": one, "params": [-1.0], "loss": [3.0]}
        ),
        "inf tokens with run_id": pd.DataFrame({"run_id": one, "tokens": [np.inf], "loss": [3.0]}),
        "no rows": pd.DataFrame({"run_id": [], "loss": []}),
    }


@pytest.mark.parametrize("case", sorted(_tell_rows(["a"])))
def test_a_hostile_tell_table_is_one_line_and_leaves_the_plan_as_it_was(started, capsys, case):
    folder, ids = started
    _tell_rows(ids)[case].to_csv("t.csv", index=False)
    before = _digest(folder)
    assert_refused(
        cli(capsys, ["plan", "tell", folder, "t.csv"]), "t.csv", "loss", "run", case=case
    )
    assert _digest(folder) == before, case


def test_a_nan_loss_is_a_diverged_run_not_an_error(started, capsys):
    folder, ids = started
    pd.DataFrame({"run_id": ids[:1], "loss": [np.nan]}).to_csv("t.csv", index=False)
    assert cli(capsys, ["plan", "tell", folder, "t.csv"])[0] == 0
    state = json.loads((folder / "plan.json").read_text())
    assert state["results"][0]["loss"] is None and state["results"][0]["run_id"] == ids[0]


@pytest.mark.parametrize("rows", [10**5, pytest.param(10**6, marks=pytest.mark.slow)])
def test_a_tell_table_of_a_million_rows_is_refused_in_seconds(started, capsys, rows):
    folder, ids = started  # 10**6 rows: 4 s, in the strict CSV reader's checks (linear)
    Path("t.csv").write_text("run_id,loss\n" + "".join(f"{ids[i % 3]},3.0\n" for i in range(rows)))
    before = _digest(folder)
    assert_refused(cli(capsys, ["plan", "tell", folder, "t.csv"]), "already told", "t.csv")
    assert _digest(folder) == before


CANDIDATES = {
    "zero params": {"params": [0.0, 1e8], "tokens": [1e9, 1e9]},
    "negative params": {"params": [-1e7, 1e8], "tokens": [1e9, 1e9]},
    "inf tokens": {"params": [1e7, 1e8], "tokens": [np.inf, 1e9]},
    "text params": {"params": ["big", 1e8], "tokens": [1e9, 1e9]},
    "params 1e308": {"params": [1e308, 1e8], "tokens": [1e9, 1e9]},
    "no tokens column": {"params": [1e7, 1e8]},
    "no rows": {"params": [], "tokens": []},
    "text depth with a trainer": {"params": [1e7], "tokens": [1e9], "depth": ["x"], "width": [64]},
}


@pytest.mark.parametrize("case", sorted(CANDIDATES))
def test_a_hostile_candidates_table_is_one_line_and_writes_no_plan(here, capsys, case):
    pd.DataFrame(CANDIDATES[case]).to_csv("c.csv", index=False)
    extra = []
    if "trainer" in case:
        Path("t.toml").write_text("lr = 1e-3\n")
        extra = ["--trainer", "t.toml"]
    result = cli(capsys, ["plan", "init", "p", "c.csv", "--budget", "1e21", *extra])
    assert_refused(result, "candidate", "params", "tokens", "depth", "c.csv", case=case)
    assert not (here / "p" / "plan.json").exists()


@pytest.mark.parametrize("budget", ["0", "-1", "nan", "inf", "-inf", "1e400", "big", ""])
def test_a_hostile_budget_is_one_line_and_writes_nothing(here, capsys, budget):
    _candidates(here / "c.csv")
    result = cli(capsys, ["plan", "init", "p", "c.csv", f"--budget={budget}"])
    assert_refused(result, "--budget", case=budget)
    assert not (here / "p").exists()


# -- curves holdout ---------------------------------------------------------------------------
def _curves_csv(path: Path, sizes=(1e6, 2e6, 5e6, 1e7)) -> Path:
    from scalefit.curves import synthetic_curves

    truth = {"L0": 1.8, "A": 1.0, "alpha": 0.5, "C": 0.3, "B": 100.0, "beta": 0.3}
    sched = "wsd:lr=0.003,steps=400,warmup=20,decay=0.2"
    curves = synthetic_curves(
        truth, [sched] * len(sizes), law="lr_annealing_params", params=list(sizes), every=100,
        noise=0.003, seed=0,
    )  # fmt: skip
    curves.assign(tokens=curves["step"] * 4096.0).to_csv(path, index=False)
    return path


HELD_OUT = {
    "above every run": ("1e12", "held"),
    "below every run": ("1", "held"),
    "nan": ("nan", "--held-out-params"),
    "inf": ("inf", "--held-out-params"),
    "zero": ("0", "--held-out-params"),
    "negative": ("-1e6", "--held-out-params"),
    "text": ("big", "--held-out-params"),
}


@pytest.mark.parametrize("case", sorted(HELD_OUT))
def test_a_hostile_held_out_size_is_one_line_and_writes_nothing(here, capsys, case):
    _curves_csv(here / "c.csv")
    value, name = HELD_OUT[case]
    args = ["curves", "holdout", "c.csv", f"--held-out-params={value}", "--out", "rows.csv"]
    assert_refused(cli(capsys, args), name, outputs=["rows.csv"], case=case)


CURVES = {
    "one run": lambda c: c[c["run"] == c["run"].iloc[0]],
    "one size": lambda c: c.assign(params=1e6),
    "nan params": lambda c: c.assign(params=np.where(c["params"] > 5e6, np.nan, c["params"])),
    "negative params": lambda c: c.assign(params=-c["params"]),
    "text loss": lambda c: c.assign(loss=c["loss"].astype(object).where(c["step"] < 300, "x")),
    "no schedule": lambda c: c.drop(columns="schedule"),
    "no rows": lambda c: c.iloc[:0],
}


@pytest.mark.parametrize("case", sorted(CURVES))
def test_a_hostile_curves_file_for_holdout_is_one_line(here, capsys, case):
    curves = pd.read_csv(_curves_csv(here / "c.csv"))
    CURVES[case](curves).to_csv("c.csv", index=False)
    args = ["curves", "holdout", "c.csv", "--held-out-params", "5e6", "--out", "rows.csv"]
    args += ["--bootstrap", "4", "--starts", "2"]
    result = cli(capsys, args)
    assert_refused(
        result,
        "c.csv",
        "params",
        "held",
        "run",
        "loss",
        "schedule",
        outputs=["rows.csv"],
        case=case,
    )


def test_holdout_output_under_a_file_or_over_a_folder_is_refused_before_any_fit(here, capsys):
    _curves_csv(here / "c.csv")
    Path("taken").mkdir()
    for out in ("c.csv/rows.csv", "taken"):
        args = ["curves", "holdout", "c.csv", "--held-out-params", "5e6", "--out", out]
        assert_refused(cli(capsys, args), out, "--out", case=out)
    assert list(Path("taken").iterdir()) == []


# -- train grid --resume-from / --max-minutes -------------------------------------------------
@pytest.fixture(scope="module")
def grid_tokens(tmp_path_factory):
    pytest.importorskip("torch")
    from train_support import token_folder

    return token_folder(tmp_path_factory.mktemp("round5"), vocab=["ab", "cd"], seed=5, words=500)


def _grid(here: Path, tokens: str) -> list[str]:
    Path("grid.toml").write_text(
        f'[sweep]\nname = "g"\ntask = "train"\n[fixed]\ndata = "{tokens}"\nseq_len = 16\n'
        "batch_size = 4\neval_tokens = 64\ndiagnose = false\n[grid]\ndepth = [1]\nwidth = [16]\n"
        "tokens = [128, 256]\n"
    )
    return ["train", "grid", "grid.toml", "--out", "o", "--workers", "0"]


def _resume_from(kind: str) -> str:
    path = Path("table.csv")
    if kind == "a folder":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "10^5 columns":
        cols = [f"c{i}" for i in range(10**5)]
        path.write_text(",".join(cols) + "\n" + ",".join("1" for _ in cols) + "\n")
    elif kind == "under a file":
        path.write_text("x")
        return "table.csv/t.csv"
    return str(path)


@pytest.mark.parametrize("kind", ["a folder", "binary", "10^5 columns", "under a file"])
def test_a_hostile_resume_table_is_one_line_and_trains_nothing(here, capsys, grid_tokens, kind):
    args = [*_grid(here, grid_tokens), "--resume-from", _resume_from(kind)]
    before = _digest(here)
    assert_refused(cli(capsys, args), "table.csv", "--resume-from", case=kind)
    assert _digest(here) == before, kind


def test_a_resume_table_that_is_a_fifo_does_not_block(here, grid_tokens):
    os.mkfifo("table.csv")
    args = [*_grid(here, grid_tokens), "--resume-from", "table.csv"]
    result = cli_process(args, timeout=FIFO_S)
    assert_refused(result, "table.csv", "--resume-from")
    assert not Path("o").exists()


@pytest.mark.parametrize("minutes", ["0", "-1", "nan", "inf", "-inf", "1e400", "soon"])
def test_a_hostile_time_limit_is_one_line_and_trains_nothing(here, capsys, grid_tokens, minutes):
    args = [*_grid(here, grid_tokens), "--resume-from", "t.csv", f"--max-minutes={minutes}"]
    assert_refused(cli(capsys, args), "--max-minutes", outputs=["t.csv", "o"], case=minutes)


# -- curves fit --law lr_optimum ----------------------------------------------------------------
def _rates_csv(path: Path, bad_lr: str) -> Path:
    """Curves at three peak rates and two sizes; the last rate's schedule text says ``bad_lr``."""
    from scalefit.curves import synthetic_curves

    truth = {"L0": 1.8, "A": 1.0, "alpha": 0.5, "C": 0.3, "B": 100.0, "beta": 0.3}
    scheds = [f"wsd:lr={lr},steps=200,warmup=20,decay=0.2" for lr in (5e-4, 1.5e-3, 4.5e-3)]
    curves = synthetic_curves(
        truth, scheds * 2, law="lr_annealing_params", params=[1e6] * 3 + [1e7] * 3, every=50,
        seed=0,
    )  # fmt: skip
    curves["schedule"] = curves["schedule"].str.replace("lr=0.0045", f"lr={bad_lr}")
    curves.assign(tokens=curves["step"] * 8192.0).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("bad_lr", ["nan", "inf", "0", "-1e-3", "x", "1e400"])
def test_a_hostile_peak_rate_for_lr_optimum_is_one_line(here, capsys, bad_lr):
    _rates_csv(here / "c.csv", bad_lr)
    args = ["curves", "fit", "c.csv", "--law", "lr_optimum", "--out", "r.json", "--bootstrap", "0"]
    assert_refused(cli(capsys, args), "lr", "c.csv", outputs=["r.json"], case=bad_lr)


# -- plan run: trainer settings edited in plan.json --------------------------------------------
TRAINER_EDITS = {
    "absolute name": lambda t, decoy: t.update(name=str(decoy.resolve() / "run")),
    "name with ..": lambda t, decoy: t.update(name="../../decoy/run"),
    "unknown key": lambda t, decoy: t.update(exec="import os"),
    "batch_size 0": lambda t, decoy: t.update(batch_size=0),
    "lr text": lambda t, decoy: t.update(lr="fast"),
}


def _trainer_plan(here: Path, capsys, extra: str = "") -> int:
    """``plan init p`` over two tiny trainer runs, the trainer TOML ending with ``extra``."""
    from train_support import token_folder

    from scalefit.core.accounting import param_count

    tokens = token_folder(here / "tok", vocab=["ab", "cd"], seed=6, words=300)
    rows = [{"depth": 1, "width": 16, "tokens": t, "params": param_count(1, 16, vocab=256)}
            for t in (128, 256)]  # fmt: skip
    pd.DataFrame(rows).to_csv("c.csv", index=False)
    Path("t.toml").write_text(
        f'data = "{tokens}"\nseq_len = 16\nbatch_size = 4\neval_tokens = 64\ndiagnose = false\n'
        f'device = "cpu"\n{extra}'
    )
    init = ["plan", "init", "p", "c.csv", "--budget", "1e9", "--trainer", "t.toml"]
    return cli(capsys, [*init, "--n-boot", "4"])[0]


@pytest.mark.parametrize("case", sorted(TRAINER_EDITS))
def test_plan_run_with_edited_trainer_settings_writes_nothing_outside(here, capsys, case):
    pytest.importorskip("torch")
    assert _trainer_plan(here, capsys) == 0
    decoy = here / "decoy"
    decoy.mkdir()
    _edit(Path("p"), lambda s: TRAINER_EDITS[case](s["settings"]["trainer"], decoy))
    before = _digest(decoy)
    result = cli(capsys, ["plan", "run", "p", "--k", "1", "--rounds", "1"])
    assert_refused(result, "plan.json", case=case)
    assert _digest(decoy) == before and not Path("p/runs").exists()


@pytest.mark.slow  # trains one tiny run: 3.4 s
@pytest.mark.parametrize("name", ["absolute", "../decoy/run"])
def test_a_trainer_name_leading_out_trains_inside_the_plan_folder(here, capsys, name):
    pytest.importorskip("torch")
    decoy = here / "decoy"
    decoy.mkdir()
    name = str(decoy.resolve() / "run") if name == "absolute" else name
    assert _trainer_plan(here, capsys, f'name = "{name}"\n') == 0
    assert cli(capsys, ["plan", "run", "p", "--k", "1", "--rounds", "1"])[0] == 0
    assert list(decoy.iterdir()) == []
    (run,) = Path("p/runs").iterdir()
    assert (run / "result.json").is_file()


OPTIONS = [
    ("ask", "--k", "0"),
    ("ask", "--k", "-1"),
    ("ask", "--k", "nan"),
    ("ask", "--k", "1e9"),
    ("run", "--rounds", "0"),
    ("run", "--rounds", "-1"),
    ("run", "--workers", "-1"),
    ("run", "--k", "inf"),
]


@pytest.mark.parametrize(("action", "flag", "value"), OPTIONS)
def test_a_hostile_plan_option_is_one_line_and_changes_nothing(
    started, capsys, action, flag, value
):
    folder, _ = started
    before = _digest(folder)
    assert_refused(cli(capsys, ["plan", action, folder, f"{flag}={value}"]), flag, case=value)
    assert _digest(folder) == before


def test_an_exhaustive_design_with_a_huge_k_is_bounded_by_the_candidates():
    # k = 10**20 used to count subsets over 10**20 sizes (a hang); now at most n sizes
    from scalefit.core.errors import ScaleFitError
    from scalefit.design._update import Ensemble, exhaustive

    small = Ensemble(np.eye(4), 1.0)
    chosen, _ = exhaustive(small, np.ones(3), 2.0, 10**20)
    assert len(chosen) <= 2
    with pytest.raises(ScaleFitError, match=r"exceed the exhaustive limit .* \(--k\)"):
        exhaustive(Ensemble(np.eye(41), 1.0), np.ones(40), 100.0, 10**20)


def test_status_of_a_decision_without_an_interval_says_so(started, capsys):
    # a fit whose draws gave no interval saves its bounds as null; status printed a traceback
    folder, _ = started
    decision = {"runs": 3, "flops_spent": 1e17, "notes": [], "params": 2e8, "params_lo": None}
    decision.update(params_hi=None, ratio=None, depth=None, width=None, tokens=1e10)
    decision.update(converged=True, inside=False)
    _edit(folder, lambda s: s["decisions"].append(decision))
    code, out, err = cli(capsys, ["plan", "status", folder])
    assert code == 0 and not err, err
    assert "decision: N* 2e+08 [n/a, n/a] (draws hi/lo n/a, stop at 1.5), tokens 1e+10" in out


def test_fifo_inputs_of_the_new_commands_do_not_block(started, here):
    from concurrent.futures import ThreadPoolExecutor

    folder, _ = started
    for name in ("cand.fifo", "tell.fifo", "curves.fifo"):
        os.mkfifo(name)
    cases = {
        "candidates": ["plan", "init", "q", "cand.fifo", "--budget", "1e21"],
        "results": ["plan", "tell", folder, "tell.fifo"],
        "curves": ["curves", "holdout", "curves.fifo", "--held-out-params", "1e7"],
    }
    with ThreadPoolExecutor(len(cases)) as pool:
        runs = {k: pool.submit(cli_process, v, timeout=FIFO_S) for k, v in cases.items()}
    for case, run in runs.items():
        assert_refused(run.result(), "fifo", case=case)
    assert not (here / "q").exists()


@pytest.mark.parametrize("entry", ["runs", "results.csv"])
def test_plan_run_refuses_a_sweep_entry_linked_out_of_the_plan_folder(here, capsys, entry):
    pytest.importorskip("torch")
    assert _trainer_plan(here, capsys) == 0
    decoy = here / "decoy"
    decoy.mkdir()
    target = decoy if entry == "runs" else decoy / "results.csv"
    if entry != "runs":
        target.write_text("keep\n")
    os.symlink(target.resolve(), Path("p") / entry)
    before = _digest(decoy)
    result = cli(capsys, ["plan", "run", "p", "--k", "1", "--rounds", "1"])
    assert_refused(result, entry, case=entry)
    assert _digest(decoy) == before


@pytest.mark.parametrize("kind", ["not JSON", "a JSON array", "a fit of another schema"])
def test_a_broken_fit_file_in_a_plan_is_one_line(started, capsys, kind):
    folder, _ = started
    text = {"not JSON": "{{{", "a JSON array": "[]", "a fit of another schema": '{"schema": 99}'}
    (folder / "fit.json").write_text(text[kind])
    before = _digest(folder)
    assert_refused(cli(capsys, ["plan", "ask", folder]), "fit.json", case=kind)
    assert _digest(folder) == before
