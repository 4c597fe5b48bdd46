"""Two-step task prediction: known-truth recovery on a synthetic ladder, and refusals."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from scalefit import ScaleFitError
from scalefit.tasks import fit_task, predict, sigmoid

LAW = {"E": 0.5, "A": 300.0, "alpha": 0.3, "B": 300.0, "beta": 0.3}
SIG = {"a": 0.6, "k": -6.0, "b0": 1.6, "c": 0.25}


def _bpb(params, tokens):
    return LAW["E"] + LAW["A"] / params ** LAW["alpha"] + LAW["B"] / tokens ** LAW["beta"]


def ladder(seed: int = 0, sizes=(1e8, 2e8, 4e8, 8e8), noise: float = 0.004) -> pd.DataFrame:
    """Runs at 1, 2, 5, 10 x 20 tokens per parameter (+ a rerun at 1x), 12 checkpoints each."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for k, tag in ((1, ""), (1, "-rerun"), (2, ""), (5, ""), (10, "")):
            tokens = 20 * k * n * np.linspace(0.1, 1, 12)
            bpb = _bpb(n, tokens) * (1 + 0.002 * rng.standard_normal(12))
            acc = sigmoid(bpb, **SIG) + noise * rng.standard_normal(12)
            rows.append(
                pd.DataFrame(
                    {
                        "run": f"{n:.0e}-{k}x{tag}",
                        "params": n,
                        "tokens": tokens,
                        "bpb_toy": bpb,
                        "acc_toy": np.clip(acc, 0, 1),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_two_steps_recover_a_known_ladder_and_cover_the_truth():
    table = ladder()
    tf = fit_task(table, "toy", bootstrap=20, seed=1)
    # seed spread: the pooled sd of each (1x, 1x-rerun) pair's final accuracy, |a - b| / sqrt(2)
    last = table.sort_values("tokens").groupby("run").tail(1).set_index("run")["acc_toy"]
    pairs = [(last[r], last[f"{r}-rerun"]) for r in last.index if f"{r}-rerun" in last.index]
    assert len(pairs) == 4
    assert tf.seed_sd == pytest.approx(np.sqrt(sum((a - b) ** 2 / 2 for a, b in pairs) / 4))
    for name, value in LAW.items():
        assert tf.step1.params[name] == pytest.approx(value, rel=0.25), name
    for name, value in SIG.items():
        assert tf.step2[name] == pytest.approx(value, rel=0.1, abs=0.02), name
    assert tf.draws.shape == (20, 9) and tf.seed_sd > 0
    n, d = 3.2e9, 20 * 3.2e9 * 5  # two rungs above the ladder
    truth = float(sigmoid(_bpb(n, d), **SIG))
    out = tf.predict(n, d).iloc[0]
    assert out["bpb"] == pytest.approx(_bpb(n, d), rel=0.02)
    assert abs(out["acc"] - truth) < 0.02 and abs(out["acc_single"] - truth) < 0.03
    assert out["acc_lo"] <= truth <= out["acc_hi"]


def test_same_seed_same_numbers_and_warning_filters_untouched():
    table = ladder(seed=3)
    before = list(warnings.filters)
    a = predict(table, table[table["params"] == 8e8], bootstrap=5, seed=7)
    assert list(warnings.filters) == before
    b = predict(
        table.sample(frac=1, random_state=0), table[table["params"] == 8e8], bootstrap=5, seed=7
    )
    pd.testing.assert_frame_equal(a, b)
    assert set(a["task"]) == {"toy"} and len(a) == 5 and a["covered"].dtype == bool


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.drop(columns="bpb_toy"), r"lacks column\(s\) \['bpb_toy'\].*tasks with"),
        (lambda t: t[t["params"] == 1e8], r"at least 2 rungs .* Got 1 rung\(s\)"),
        (lambda t: t.assign(acc_toy=t["acc_toy"] * 100), r"'acc_toy' column must hold .*\[0, 1\]"),
        (lambda t: t.assign(bpb_toy=-t["bpb_toy"]), "finite and positive"),
    ],
)
def test_bad_tables_get_one_line(edit, match):
    with pytest.raises(ScaleFitError, match=match) as info:
        fit_task(edit(ladder()), "toy", bootstrap=0)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "kw", [{"ci_prob": 1.5}, {"bootstrap": -1}, {"bootstrap": True}, {"bootstrap": 2.5}]
)
def test_bad_options_are_refused(kw):
    with pytest.raises(ScaleFitError, match=f"The '{next(iter(kw))}' parameter of fit_task"):
        fit_task(ladder(), "toy", **kw)
