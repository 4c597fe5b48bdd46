"""Figures for least-squares and Bayesian fits: data against fit, residuals, bootstrap draws."""

from __future__ import annotations

import numpy as np

from ._base import axes


def _colour_key(table, law):
    for col in ("flops", "params", "tokens", "depth"):
        if col in table.columns:
            return col, np.log10(table[col].to_numpy(float))
    return law.inputs[0], np.log10(table[law.inputs[0]].to_numpy(float))


def plot_fit(result, table, *, ax=None):
    """Observed against predicted loss (log–log) and log residuals against prediction.

    Parameters
    ----------
    result : FitResult
        The fit.
    table : DataFrame
        The fitted table (canonical columns).
    ax : sequence of two Axes, optional
        Axes to draw into.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (a0, a1) = axes(ax, ncols=2)
    law = result.law
    y = table["loss"].to_numpy(float)
    pred = np.asarray(result.predict(table), dtype=float)
    key, colour = _colour_key(table, law)
    sc = a0.scatter(pred, y, c=colour, s=12, cmap="viridis")
    lo, hi = min(y.min(), pred.min()), max(y.max(), pred.max())
    a0.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    a0.set(
        xscale="log",
        yscale="log",
        xlabel="predicted loss",
        ylabel="observed loss",
        title=f"{result.law_name} ({result.method})",
    )
    fig.colorbar(sc, ax=a0, label=f"log10 {key}")
    a1.scatter(pred, np.log(y) - np.log(pred), c=colour, s=12, cmap="viridis")
    a1.axhline(0.0, color="k", lw=0.8)
    a1.set(
        xscale="log",
        xlabel="predicted loss",
        ylabel="log residual (obs − fit)",
        title=f"mean rel. err {result.metrics['mean_rel_err']:.2%}",
    )
    return fig


def plot_draws(result, names=None, *, ax=None):
    """Pairwise scatter of bootstrap/posterior draws for up to four parameters.

    Parameters
    ----------
    result : FitResult
        A result with draws.
    names : sequence of str, optional
        Parameters to show (default: the exponents, else the first four).
    ax : ignored unless a grid of axes of the right size is given.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ._base import pyplot

    frame = result.draws_frame().dropna()
    if names is None:
        law = result.law
        names = [p.name for p in law.params if p.kind == "exponent"][:4] or list(frame)[:4]
    k = len(names)
    plt = pyplot()
    fig, grid = plt.subplots(k, k, figsize=(2.2 * k, 2.2 * k), layout="constrained", squeeze=False)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            ax_ = grid[i, j]
            if i == j:
                ax_.hist(frame[a], bins=30, color="C0")
            elif i > j:
                ax_.scatter(frame[b], frame[a], s=3, alpha=0.4)
            else:
                ax_.axis("off")
            if i == k - 1:
                ax_.set_xlabel(b)
            if j == 0 and i != j:
                ax_.set_ylabel(a)
    fig.suptitle(f"{result.law_name}: {len(frame)} draws")
    return fig
