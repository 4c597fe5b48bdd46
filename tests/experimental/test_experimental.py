"""Moved modules (scalefit.experimental, scalefit.fit.holdout): the old paths warn and forward."""

from __future__ import annotations

import importlib

import pytest

from scalefit.experimental import discrepancy, extrapolation
from scalefit.fit import holdout, observation


@pytest.mark.parametrize(
    ("old", "name", "new"),
    [
        ("scalefit.fit.discrepancy", "fit_discrepancy", discrepancy),
        ("scalefit.fit.discrepancy", "calibrated_holdout", discrepancy),
        ("scalefit.fit.discrepancy", "score_holdout", observation),
        ("scalefit.fit.discrepancy", "Mixture", observation),
        ("scalefit.validate", "extrapolation_check", extrapolation),
        ("scalefit.fit.validate", "holdout_check", holdout),
        ("scalefit.fit.validate", "split_by_compute", holdout),
    ],
)
def test_an_old_path_forwards_and_names_the_new_one(old, name, new):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"moved to {new.__name__}\.{name};") as caught:
        value = getattr(module, name)
    assert value is getattr(new, name)
    assert len(caught) == 1 and caught[0].filename == __file__  # points at the caller's line


def test_an_unknown_name_on_an_old_path_is_an_attribute_error():
    module = importlib.import_module("scalefit.fit.discrepancy")
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
