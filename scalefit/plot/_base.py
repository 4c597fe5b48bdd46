"""Shared plotting helpers: a headless backend and styled figure/axes creation."""

from __future__ import annotations

import numpy as np


def pyplot():
    """Import matplotlib's pyplot with a non-interactive backend when no display is set."""
    import os

    import matplotlib

    if not os.environ.get("DISPLAY") and matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def axes(ax=None, ncols: int = 1, figsize=(5.0, 4.0), nrows: int = 1):
    """Return ``(fig, axes)``: new styled ones, or the figure owning the ``ax`` given."""
    from .style import style_axes

    plt = pyplot()
    if ax is not None:
        return ax.figure if not isinstance(ax, list | tuple) else ax[0].figure, ax
    fig, ax = plt.subplots(
        nrows,
        ncols,
        figsize=(figsize[0] * ncols, figsize[1] * nrows),
        squeeze=True,
        layout="constrained",
    )
    for a in np.atleast_1d(ax).ravel():
        style_axes(a)
    return fig, ax
