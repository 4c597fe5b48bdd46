"""The oracle-replay study (``docs/studies/plan_replay.py``): its ``plan`` arm drives scalefit.plan.

The recorded rows are in docs/studies/results/plan_replay_rounds.csv; this replays the arm on one
small public grid (Marin dclm, two tells, about a second) and checks it against the oracle and
against the recording.
"""

from pathlib import Path

import numpy as np
import pandas as pd
from conftest import load_study, needs_reference_data

from scalefit import datasets

pytestmark = needs_reference_data
GRID = "marin_202603__dclm__llama_2"


def test_plan_arm_asks_tells_and_stops_like_the_recording():
    study = load_study("plan_replay")
    d = datasets.load("isoflops", experiment=GRID)
    pool, held, target, seed_mask = study._split(d.assign(score=d["loss"]))
    rows = pd.DataFrame(study.replay(GRID, pool, held, target, "plan", 0, seed_mask))
    # the first ask is as large as the seed set; each later ask at most k runs
    assert rows["runs"].iloc[0] == seed_mask.sum()
    assert (np.diff(rows["runs"]) <= max(4, len(pool) // 10)).all()
    assert (np.diff(rows["share"]) > 0).all() and rows["share"].iloc[-1] <= 1
    # it stopped by its own rule, on a decision inside its calibrated interval
    assert rows["stop"].iloc[-1] == "interval" and (rows["stop"].iloc[:-1] == "").all()
    assert rows["ratio"].iloc[-1] <= study.STOP_RATIO < rows["ratio"].iloc[:-1].min()
    assert rows["inside"].all() and np.isfinite(rows["regret"]).all()
    path = Path(study.__file__).parent / "results" / "plan_replay_rounds.csv"
    rec = pd.read_csv(path).query("grid == @GRID and arm == 'plan'")
    np.testing.assert_allclose(rows["share"], rec["share"], rtol=1e-9)
    np.testing.assert_allclose(rows["nstar"], rec["nstar"], rtol=1e-6)
    np.testing.assert_allclose(rows["regret"], rec["regret"], atol=1e-12)
