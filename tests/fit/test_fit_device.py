"""Small fits run on the CPU where JAX defaults to a GPU (scalefit.fit.device).

There is no GPU here: the choice is tested with the backend named explicitly, and the CPU path of
a moved block (``jax.default_device`` plus CPU-only exported programs) runs for real on the CPU.
"""

import jax
import numpy as np
import pytest

import scalefit
from scalefit.core.errors import ScaleFitError
from scalefit.fit import device

# the Depth Delusion table puts Chinchilla's E on its bound: scalefit warns; both fits must agree
pytestmark = pytest.mark.filterwarnings("ignore::scalefit.core.errors.ConvergenceWarning")


def test_the_cpu_is_chosen_for_small_fits_only_where_the_default_is_an_accelerator(monkeypatch):
    monkeypatch.delenv("SCALEFIT_FIT_DEVICE", raising=False)
    assert device.fit_device(203, 256, backend="cpu") is None
    small = device.fit_device(203, 256, backend="gpu")
    assert small is not None and small.platform == "cpu"
    big_rows = device.GPU_MIN_WORK // 256 + 1
    assert device.fit_device(big_rows, 256, backend="gpu") is None
    monkeypatch.setenv("SCALEFIT_FIT_DEVICE", "default")
    assert device.fit_device(203, 256, backend="gpu") is None
    monkeypatch.setenv("SCALEFIT_FIT_DEVICE", "cpu")
    assert device.fit_device(big_rows, 256, backend="gpu").platform == "cpu"
    monkeypatch.setenv("SCALEFIT_FIT_DEVICE", "tpu")
    with pytest.raises(ScaleFitError, match="SCALEFIT_FIT_DEVICE must be one of"):
        device.fit_device(203, 256, backend="gpu")


def test_a_block_moved_to_the_cpu_fits_the_same_and_leaves_nothing_behind():
    table = scalefit.datasets.load("depth_delusion")
    plain = scalefit.fit(table, "chinchilla", starts=16, seed=0, progress=False)
    cpu = jax.devices("cpu")[0]
    assert device.forced_platform() is None
    with device.on_device(cpu):
        assert device.forced_platform() == "cpu"
        moved = scalefit.fit(table, "chinchilla", starts=16, seed=0, progress=False)
    assert device.forced_platform() is None
    assert jax.config.jax_default_device is None  # nothing changed for the process
    assert moved.converged == plain.converged
    for name, value in plain.params.items():
        assert moved.params[name] == pytest.approx(value, rel=1e-9)
    assert np.isclose(moved.objective, plain.objective, rtol=1e-12)


def test_no_device_is_a_no_op():
    with device.on_device(None):
        assert device.forced_platform() is None
