"""Shared plotting helpers: a headless backend and figure/axes creation."""

from __future__ import annotations


def pyplot():
    """Import matplotlib's pyplot with a non-interactive backend when no display is set."""
    import os

    import matplotlib

    if not os.environ.get("DISPLAY") and matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def axes(ax=None, ncols: int = 1, figsize=(5.0, 4.0)):
    """Return ``(fig, axes)``: new ones, or the figure owning the ``ax`` given."""
    plt = pyplot()
    if ax is not None:
        return ax.figure if not isinstance(ax, list | tuple) else ax[0].figure, ax
    fig, ax = plt.subplots(
        1, ncols, figsize=(figsize[0] * ncols, figsize[1]), squeeze=True, layout="constrained"
    )
    return fig, ax
