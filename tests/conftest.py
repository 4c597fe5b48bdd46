"""Test configuration: public reference tables from SCALEFIT_DATA_DIR, JAX on the CPU, seeded.

The public tables (Chinchilla, the IsoFLOP sweeps, Gemstones, NIST StRD) are not redistributed;
tests that need one skip, naming the file and where it is published, when SCALEFIT_DATA_DIR does
not hold it. A development checkout with a ``shared/data`` folder beside it uses that folder.
"""

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
    reason="needs the public Chinchilla table chinchilla_depth_width.csv (not redistributed; "
    "github.com/liuyz0/DepthScaling, Scaling/get_fitting_data_chinchilla.csv) in a folder named "
    "by SCALEFIT_DATA_DIR",
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
    from scalefit.core.errors import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    others = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not (issubclass(w.category, ConvergenceWarning) and "correlate" in str(w.message))
    ]
    assert not others, others


def assert_png(path, *, min_width: int = 300, min_height: int = 200):
    """Check that ``path`` is a drawn figure, not just a file, and return its pixels.

    The PNG must decode (matplotlib's own reader), be at least ``min_width`` × ``min_height``
    pixels, have a plain light background, dark ink (text, axes) on 0.1 % to 50 % of its pixels,
    and something drawn (more than 0.5 % of the pixels differ from the background) without being
    one block of colour. Returns the image as an (height, width, channels) float array.
    """
    import numpy as np
    from matplotlib import image

    img = image.imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4), (path, img.shape)
    height, width = img.shape[:2]
    assert width >= min_width and height >= min_height, (path, img.shape)
    rgb = img[..., :3].astype(float)
    background = rgb[0, 0]
    assert background.min() > 0.8, (path, background)  # white or light grey corner
    drawn = np.abs(rgb - background).max(axis=-1) > 0.1
    assert 0.005 < drawn.mean() < 0.9, (path, drawn.mean())
    ink = rgb.max(axis=-1) < 0.35
    assert 0.001 < ink.mean() < 0.5, (path, ink.mean())
    return img


def load_study(name: str):
    """The study script ``docs/studies/<name>.py`` as a module (loaded once)."""
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "docs" / "studies" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def public_folder(env: str, sha256: dict, what: str) -> Path:
    """The folder ``$env`` names, holding every file of ``sha256`` as published; else skip.

    Public sweeps are kept outside the repository: a test of one runs only where its files are.
    """
    import hashlib

    given = os.environ.get(env)
    if not given:
        pytest.skip(f"set {env} to the {what} folder to run this test")
    for name, digest in sha256.items():
        path = Path(given) / name
        if not path.is_file():
            pytest.skip(f"{path} not found (the {what} files are kept outside the repository)")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            pytest.skip(f"{path} is not the published file (sha256 differs)")
    return Path(given)
