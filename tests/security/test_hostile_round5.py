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
    "deep nesting": lambda text: text.replace('"n_boot": 4', '"n_boot": ' + "[" * 5000 + "]" * 5000),
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
        {"run_id": s["asked"][0]["run_id"], "params": 1e7, "tokens": 2e8, "depth": None,
         "width": None, "flops": "x", "loss": 3.0}  # fmt: skip
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
        state["candidates"]["run_id"] = [bad if r == ids[0] else r for r in state["candidates"]["run_id"]]
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
