"""The GPU depth grid (configs/grid_gpu_depth.toml), checked on the CPU before any GPU runs it.

The cost projection and the simulated-fit study live in docs/studies/gpu_depth_grid.py; these
tests hold the design to issue 29's terms: depth from 2 to >= 24 at >= 3 widths, projected to fit
25 minutes of one H100 with compilation, every run a valid trainer configuration, and (slow) a
simulated grid at our noise level that pins a_depth.
"""

from pathlib import Path

import numpy as np
import pytest
from conftest import load_study

from scalefit.sweep import load_spec
from scalefit.train.grid import TASK_KEYS
from scalefit.train.loop import config_from_dict

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "configs" / "grid_gpu_depth.toml"


def _study():
    return load_study("gpu_depth_grid")


def test_grid_spans_depth_widths_and_tokens():
    runs = [r.config for r in load_spec(SPEC).runs()]
    depths = sorted({c["depth"] for c in runs})
    assert depths[0] == 2 and depths[-1] >= 24
    assert len({c["width"] for c in runs}) >= 3
    # the data and width terms have two parameters each: three levels of each identify them
    assert len({c["tokens"] for c in runs}) >= 3
    for config in runs:
        trainer = {k: v for k, v in config.items() if k not in TASK_KEYS}
        config_from_dict(trainer)  # a valid trainer configuration (raises otherwise)


def test_projected_h100_time_fits_the_budget_with_compilation():
    study = _study()
    runs = study.grid_runs(SPEC)
    assert runs["seconds"].sum() <= study.BUDGET_S
    # every shape pays one cold compilation, later runs of the shape a warm one
    cold = runs.drop_duplicates(["depth", "width"])
    assert len(cold) == len({(r.depth, r.width) for r in runs.itertuples()})
    assert runs["steps"].min() >= 366  # more steps than the CPU grid's longest deep runs


def test_cost_model_reproduces_the_measured_h100_point():
    study = _study()
    # 12 x 768 at sequence 1024, byte vocabulary: 595,033 tokens/s measured (37.6 % MFU)
    cost = study.run_cost(
        {"depth": 12, "width": 768, "seq_len": 1024, "batch_size": 32, "tokens": 1e6,
         "tokenizer": "byte", "compile": True}
    )  # fmt: skip
    assert cost["tokens_per_s"] == pytest.approx(595_033, rel=0.02)


@pytest.mark.slow
def test_simulated_grid_pins_the_depth_exponent(chinchilla203):
    study = _study()
    runs = study.grid_runs(SPEC)
    truth = study.truth_params(starts=32)
    sigma = study.cpu_noise(starts=32)
    assert 0.01 < sigma < 0.1
    rows = [study.replicate(runs, truth, sigma, s, bootstrap=60, starts=32) for s in range(3)]
    assert sum(r["identified"] for r in rows) >= 2
    assert np.median([r["rel_half_width"] for r in rows]) < 0.5
