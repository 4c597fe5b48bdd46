"""Test configuration: reference data from ../shared/data, JAX on the CPU, seeded."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if _SHARED.exists():
    os.environ.setdefault("SCALEFIT_DATA_DIR", str(_SHARED))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")


def _has_reference_data() -> bool:
    d = os.environ.get("SCALEFIT_DATA_DIR")
    return bool(d) and (Path(d) / "chinchilla_depth_width.csv").exists()


needs_reference_data = pytest.mark.skipif(
    not _has_reference_data(),
    reason="reference tables not found: set SCALEFIT_DATA_DIR to ../shared/data",
)


@pytest.fixture(scope="session")
def chinchilla203():
    """Liu et al.'s 203-row Chinchilla table (40 highest losses dropped)."""
    if not _has_reference_data():
        pytest.skip("reference tables not available")
    from scalefit.datasets import load

    return load("chinchilla", drop_highest=40)


@contextmanager
def flat_directions_only() -> Iterator[list]:
    """Let a fit warn that two parameters are strongly correlated, and nothing else.

    A correlated pair (a flat direction the data barely pin down) is a property of the data that
    scalefit reports with a ``ConvergenceWarning``; any other warning fails the test as usual.
    """
    from scalefit.errors import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    others = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not (issubclass(w.category, ConvergenceWarning) and "correlate" in str(w.message))
    ]
    assert not others, others
