"""Every figure of scalefit (matplotlib, imported lazily).

Each drawing function takes ``ax=None`` and returns the figure; a ``write_*_plots`` function saves
a result's standard figures into a folder. ``fit`` (data against fit, draws), ``bayes`` (chains,
corner, predictive), ``allocate`` (iso-FLOP depth curves, frontier), ``isoflop`` (Approach 2
profiles, exponents by approach), ``design`` (next runs), ``curves`` (loss curves, forecasts),
``probes`` (a language model's hidden-state angles), ``toy`` and ``train``; ``style`` is the one
style they share.
"""

from __future__ import annotations

from pathlib import Path


def write_figures(folder: str | Path, figures: dict, *, dpi: int = 120) -> list[Path]:
    """Save ``{file name: figure}`` into ``folder`` atomically, closing each; returns the paths."""
    from ..core._io import atomic_savefig, inside

    return [
        atomic_savefig(fig, inside(folder, name, what="figure"), dpi=dpi)
        for name, fig in figures.items()
    ]
