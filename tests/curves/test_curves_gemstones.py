"""The Gemstones curves (a public sweep kept outside the repository), read as published.

Runs only where ``$SCALEFIT_GEMSTONES`` names a folder holding the three files that
``docs/studies/curves_gemstones.py`` reads, each with its published sha256.
"""

import numpy as np
import pytest
from conftest import load_study, public_folder


def _study():
    return load_study("curves_gemstones")


def _folder():
    return public_folder("SCALEFIT_GEMSTONES", _study().SHA256, "Gemstones")


def test_gemstones_read_unedited_with_branches_as_runs():
    study = _study()
    hot, cool = study.load(_folder())
    assert hot["run"].nunique() == 22 and cool["model"].nunique() == 20
    per_run = hot.groupby("run").size()
    assert set(per_run) == {50 + 25}  # every 2B tokens to 100B, then every 10B to 350B
    assert len(cool) == 199 and cool["run"].is_unique  # one branch end per run
    end = cool[cool["run"] == "PyGemma-256x23_pretrain/2622"]
    assert end["schedule"].iloc[0] == "wsd:lr=1.0,steps=2622,decay=0.0904,final_lr=0.0"
    assert np.allclose(hot["tokens"], 4194304 * hot["step"])
    assert np.allclose(cool["tokens"], 4194304 * cool["step"])
    gains = study.cooldown_gains(hot, cool).set_index(["model", "fork_tokens"])["gain"]
    assert len(gains) == 199
    # docs/studies/curves_public.md: 0.073 to 0.097 nats for 256x80, 10B fork to 100B
    assert gains["PyGemma-256x80_pretrain", 1e10] == pytest.approx(0.073, abs=5e-4)
    assert gains["PyGemma-256x80_pretrain", 1e11] == pytest.approx(0.097, abs=5e-4)
    curves, train_cool, held = study.split(hot, cool, "base")
    assert set(held["model"]) == set(study.HELD_OUT) and len(held) == 29
    assert not set(curves["model"]) & set(study.HELD_OUT)
    assert curves.loc[curves["run"] == curves["model"], "step"].min() > study.FIRST_FORK


def test_gemstones_curves_predict_the_largest_shapes_as_well_as_their_final_losses():
    """The acceptance item of issue 26 on this sweep, for the base training set (no bootstrap)."""
    study = _study()
    hot, cool = study.load(_folder())
    curves, train_cool, held = study.split(hot, cool, "base")
    sized = study.fit_curve_law(curves, None, study.SIZED, bootstrap=0)
    finals = study.fit_finals(train_cool, bootstrap=0)
    assert sized.converged and finals.converged

    def error(res, is_curve):
        pred = study.predict(res, held, is_curve).merge(held[["run", "loss"]], on="run")
        return float(np.abs(pred["predicted"] / pred["loss"] - 1).mean())

    curve_err, final_err = error(sized, True), error(finals, False)
    # docs/studies/curves_public.md: 0.87 % from the curves, 1.12 % from the final losses
    assert curve_err == pytest.approx(0.0087, abs=0.001)
    assert final_err == pytest.approx(0.0112, abs=0.001)
    assert curve_err <= final_err
