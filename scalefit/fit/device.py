"""Where a least-squares fit runs: small problems on the CPU even where JAX defaults to a GPU.

A scaling-law fit is a few hundred rows and a few hundred starts: on a GPU, launching kernels
costs more than the arithmetic (on one H100, ``scalefit fit chinchilla --law decomposed
--drop-highest 40 --bootstrap 200`` took 9.8 s and 7.2 s on JAX's GPU backend against 5.9 s and
4.5 s with ``JAX_PLATFORMS=cpu``; docs/performance.md). :func:`fit_device` therefore picks the CPU
for problems below :data:`GPU_MIN_WORK` row-starts when the default backend is not the CPU, and
:func:`on_device` runs a block there (``jax.default_device``, scoped to the block; nothing is
changed for the process). ``SCALEFIT_FIT_DEVICE`` overrides the choice: ``auto`` (default),
``cpu`` (always the CPU) or ``default`` (JAX's default device, whatever the size).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Any

from ..core.errors import ScaleFitError

#: Rows × starts below which a fit runs on the CPU when JAX's default device is an accelerator.
#: One measured point (203 rows × 256 starts ≈ 5·10⁴: the CPU was 1.6× faster on an H100 machine);
#: the crossover itself has not been measured on a GPU, so the threshold is set well above it.
GPU_MIN_WORK = 50_000_000

#: The platform a block of fits was moved to (``"cpu"``), read by the program cache.
_FORCED: contextvars.ContextVar[str | None] = contextvars.ContextVar("scalefit_fit_platform")

CHOICES = ("auto", "cpu", "default")


def fit_device(n_rows: int, starts: int, *, backend: str | None = None) -> Any:
    """The device a fit of ``n_rows`` rows and ``starts`` starts should run on, or None.

    None means JAX's default device (nothing to change): always when the default backend is the
    CPU, or for a problem of at least :data:`GPU_MIN_WORK` row-starts, or with
    ``SCALEFIT_FIT_DEVICE=default``. Otherwise the first CPU device; None too when this JAX has no
    CPU backend (``JAX_PLATFORMS`` without ``cpu``).

    Parameters
    ----------
    n_rows, starts : int
        Size of the problem.
    backend : str, optional
        JAX's default backend (default: ``jax.default_backend()``).

    Raises
    ------
    ScaleFitError
        When ``SCALEFIT_FIT_DEVICE`` is not one of ``auto``, ``cpu``, ``default``.
    """
    import jax

    mode = os.environ.get("SCALEFIT_FIT_DEVICE", "auto").strip().lower() or "auto"
    if mode not in CHOICES:
        raise ScaleFitError(
            f"SCALEFIT_FIT_DEVICE must be one of {', '.join(CHOICES)}. Got {mode!r} instead."
        )
    backend = jax.default_backend() if backend is None else backend
    if backend == "cpu" or mode == "default":
        return None
    if mode == "auto" and int(n_rows) * max(int(starts), 1) >= GPU_MIN_WORK:
        return None
    try:
        return jax.devices("cpu")[0]
    except RuntimeError:  # no CPU backend in this process
        return None


@contextlib.contextmanager
def on_device(device: Any) -> Iterator[None]:
    """Run the block on ``device`` (``jax.default_device``); a no-op for None."""
    if device is None:
        yield
        return
    import jax

    token = _FORCED.set(device.platform)
    try:
        with jax.default_device(device):
            yield
    finally:
        _FORCED.reset(token)


def forced_platform() -> str | None:
    """The platform :func:`on_device` moved the current block to, or None."""
    return _FORCED.get(None)
