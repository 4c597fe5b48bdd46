"""Every frozen result's mapping fields are read-only; the result still writes out and copies."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

import scalefit
from scalefit.core._readonly import ReadOnlyDict
from scalefit.fit.discrepancy import Discrepancy
from scalefit.fit.synthetic import simulate_table
from scalefit.isoflop import approach2, synthetic_isoflops
from scalefit.probes._assemble import HFProbeResult
from scalefit.probes.mechanism import Verdict

DECOMPOSED = {"c_width": 274.7, "a_width": 0.945, "c_depth": 6.72, "a_depth": 1.325}
DECOMPOSED |= {"c_tokens": 529.3, "a_tokens": 0.299, "L0": 1.7536}


def _train_results():
    pytest.importorskip("torch")
    from scalefit.train.branches import CooldownResult
    from scalefit.train.loop import TrainResult

    main = TrainResult(row={"loss": 3.0, "diverged": False}, history=[], model=None, data=None)
    return [main, CooldownResult(main, 100, {200: {"loss": 2.5, "branch": "cooldown"}})]


@pytest.fixture(scope="module")
def results():
    tab = simulate_table("chinchilla", n=40, seed=1)
    res = scalefit.fit(tab, "chinchilla", starts=8, seed=0, holdout=0.25, progress=False)
    frames = {k: pd.DataFrame({"layer": [1]}) for k in ("layers", "distances", "pruning")}
    return [
        res,
        scalefit.allocate("decomposed", [1e20], params=DECOMPOSED),
        approach2(synthetic_isoflops(seed=0)),
        Discrepancy(0.01, 0.1, 0.0, 0.02, 40.0, 42.0, ("depth",), details={"n": 3}),
        HFProbeResult(**frames, split={"share": 0.5}, verdict=Verdict("undetermined"), summary={}),
        *_train_results(),
    ]


def test_every_mapping_field_refuses_changes_in_place(results):
    seen = set()
    for result in results:
        for f in dataclasses.fields(result):
            value = getattr(result, f.name)
            if isinstance(value, dict):
                seen.add(f"{type(result).__name__}.{f.name}")
                assert isinstance(value, ReadOnlyDict), (type(result).__name__, f.name)
                with pytest.raises(TypeError, match="read-only"):
                    value["x"] = 1
                with pytest.raises(TypeError, match="read-only"):
                    value.update(x=1)
        assert copy.deepcopy(result) is not result
    assert {"FitResult.params", "FitResult.holdout", "Allocation.shapes"} <= seen
    assert {"IsoFLOPResult.bias", "Discrepancy.details", "HFProbeResult.split"} <= seen


def test_results_still_write_out_and_refine(results, tmp_path):
    res = results[0]
    back = scalefit.FitResult.load(res.save(tmp_path / "r.json"))
    assert back.params == res.params and back.holdout == res.holdout
    assert isinstance(back.params, ReadOnlyDict) and isinstance(back.conventions, ReadOnlyDict)
    out = res.to_dict()
    out["params"]["E"] = 0.0  # to_dict is the caller's own, plain dict
    assert res.params["E"] != 0.0
    new = dataclasses.replace(res, params=res.params | {"E": 1.0})
    assert isinstance(new.params, ReadOnlyDict) and new.params["E"] == 1.0
    assert list(res.summary().index) == list(res.params)
    for result in results[2:4]:
        json.dumps(result.to_dict())
    probe = results[4]
    probe.save(tmp_path / "probe")
    saved = json.loads((tmp_path / "probe" / "summary.json").read_text())
    assert saved["split"] == {"share": 0.5}


def _frozen_dict_results(root: Path) -> set[str]:
    """Names of the frozen dataclasses named ``*Result``/``Allocation``/... with a dict field."""
    out = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or "frozen=True" not in str(
                [ast.unparse(d) for d in node.decorator_list]
            ):
                continue
            fields = [ast.unparse(s.annotation) for s in node.body if isinstance(s, ast.AnnAssign)]
            named = node.name.endswith(("Result", "Allocation")) or node.name == "Discrepancy"
            if named and any("dict" in a.lower() for a in fields):
                out.add(node.name)
    return out


def test_the_loop_above_covers_every_result_type_with_a_mapping_field(results):
    root = Path(scalefit.__file__).parent
    assert _frozen_dict_results(root) <= {type(r).__name__ for r in results}
