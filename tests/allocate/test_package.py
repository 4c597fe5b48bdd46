"""The package ``scalefit.allocate``: callable as its ``allocate()``, its classes as attributes."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd

import scalefit
from scalefit.allocate import api, space
from scalefit.fit.synthetic import simulate_table


def test_the_package_and_its_classes_are_attributes_of_scalefit():
    assert scalefit.allocate.Space is space.Space
    assert scalefit.allocate.Accounting is space.Accounting
    assert scalefit.allocate.Allocation is api.Allocation
    assert scalefit.allocate.allocate is api.allocate
    assert "allocate" in scalefit.__all__ and callable(scalefit.allocate)


def test_calling_the_package_is_calling_allocate():
    tab = simulate_table("chinchilla", n=40, seed=1)
    res = scalefit.fit(tab, "chinchilla", starts=8, seed=0, progress=False)
    got, want = scalefit.allocate(res, [1e19]), api.allocate(res, [1e19])
    assert type(got) is api.Allocation
    pd.testing.assert_frame_equal(got.summary, want.summary)
    np.testing.assert_array_equal(got.budgets, [1e19])
    assert scalefit.allocate(res, [1e19], ci_prob=0.9).ci_prob == 0.9


def test_the_package_shows_allocates_signature():
    assert inspect.signature(scalefit.allocate) == inspect.signature(api.allocate)
    assert "callable" in scalefit.allocate.__doc__
