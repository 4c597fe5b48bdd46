"""Figures for Bayesian fits: rank/trace plots, a corner plot and predictive bands."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .style import PALETTE, axes, label, log_ticks, loss_label, ordered_colours, suptitle, title


def _chains(result, name: str) -> np.ndarray:
    """Draws of one parameter as (chains, draws)."""
    idata = result.extras.get("inference_data")
    if idata is not None:
        from ..fit._arviz import values

        return values(idata, name)
    chains = int(result.diagnostics.get("chains", 1))
    col = result.draws_frame()[name].to_numpy()
    return col.reshape(chains, -1)


def plot_trace(result, names=None):
    """Trace (left) and rank histogram per chain (right) for each parameter.

    Rank histograms (Vehtari et al. 2021) are flat when the chains mix: every chain should cover
    every rank equally often.

    Parameters
    ----------
    result : FitResult
        A Bayesian fit (``method="bayes"``).
    names : sequence of str, optional
        Parameters to show (default: all).

    Returns
    -------
    matplotlib.figure.Figure
    """
    names = list(names or result.params)
    fig, grid = axes(nrows=len(names), ncols=2, figsize=(4.6, 1.7))
    grid = np.asarray(grid).reshape(len(names), 2)
    for i, name in enumerate(names):
        x = _chains(result, name)
        n_chain, n_draw = x.shape
        colours = ordered_colours(n_chain)
        ranks = np.argsort(np.argsort(x.reshape(-1))).reshape(x.shape)
        bins = np.linspace(0, x.size, 21)
        for c in range(n_chain):
            grid[i, 0].plot(x[c], lw=0.4, alpha=0.8, color=colours[c], label=f"chain {c + 1}")
            grid[i, 1].hist(ranks[c], bins=bins, histtype="step", color=colours[c])
        grid[i, 1].axhline(n_draw / 20, color="k", lw=0.6, ls="--")
        rhat = result.diagnostics.get("r_hat", {}).get(name, float("nan"))
        grid[i, 0].set_ylabel(name)
        grid[i, 1].set_title(f"ranks, R-hat {rhat:.3f}", fontsize=8)
        grid[i, 1].set_yticks([])
    grid[-1, 0].set_xlabel("draw")
    grid[-1, 1].set_xlabel("rank over all chains")
    grid[0, 0].legend(fontsize=6, frameon=False, ncols=min(4, n_chain), loc="upper right")
    what = "Chains: traces (left) and rank histograms (right, flat when the chains mix)"
    suptitle(fig, title(result, what))
    return fig


def plot_corner(result, names=None, *, max_points: int = 2000):
    """Pairwise posterior scatter (lower triangle) and marginal histograms (diagonal).

    :func:`scalefit.plot.fit.plot_draws` over every parameter, with the draws thinned.

    Parameters
    ----------
    result : FitResult
        A fit with draws.
    names : sequence of str, optional
        Parameters to show (default: all).
    max_points : int, default 2000
        Draws shown (evenly thinned).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .fit import plot_draws

    return plot_draws(result, list(names or result.params), max_points=max_points)


def plot_predictive(result, table, *, ci_prob: float = 0.9, ax=None, seed: int = 0):
    """Observed loss against compute with posterior-predictive intervals per row.

    Parameters
    ----------
    result : FitResult
        A Bayesian fit.
    table : DataFrame
        Rows to show (canonical columns; the fitted table or new rows).
    ci_prob : float, default 0.9
        Probability of the predictive interval (likelihood noise included).
    ax : Axes, optional
        Axes to draw into.
    seed : int, default 0
        Seed of the noise draws.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ..fit.bayes import predictive_draws
    from ..fit.split import compute_key

    fig, ax = axes(ax, figsize=(5.6, 4.2))
    key, xval = compute_key(table, result.law)
    sims = predictive_draws(result, table, noise=True, seed=seed)
    lo, med, hi = np.quantile(sims, [(1 - ci_prob) / 2, 0.5, (1 + ci_prob) / 2], axis=0)
    y = table["loss"].to_numpy(float)
    inside = (y >= lo) & (y <= hi)
    ax.errorbar(
        xval,
        med,
        yerr=[med - lo, hi - med],
        fmt="none",
        ecolor=PALETTE[0],
        alpha=0.5,
        lw=0.8,
        label=f"{100 * ci_prob:g}% predictive interval",
    )
    ax.scatter(xval[inside], y[inside], s=8, color="black", label="observed, inside")
    ax.scatter(xval[~inside], y[~inside], s=12, color=PALETTE[1], label="observed, outside")
    ax.set(xscale="log", yscale="log")
    ax.set_xlabel(label(key))
    ax.set_ylabel(loss_label(result))
    log_ticks(ax)
    ax.legend(fontsize=7, frameon=False)
    what = (
        f"Posterior predictive: {inside.mean():.0%} of rows inside the {100 * ci_prob:g}% interval"
    )
    suptitle(fig, title(result, what))
    return fig


def plot_bands(result, grid, along: str, *, ci_prob: float = 0.9, noise: bool = False, ax=None):
    """Posterior median and band of the loss along one input of a grid of new inputs.

    Parameters
    ----------
    result : FitResult
        A fit with draws.
    grid : DataFrame
        Inputs (every input of the law) at which to predict.
    along : str
        Column for the x axis.
    ci_prob : float, default 0.9
        Band probability.
    noise : bool, default False
        Include the likelihood noise (a predictive rather than a mean band).
    ax : Axes, optional
        Axes to draw into.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ..fit.bayes import predictive_draws

    fig, ax = axes(ax)
    sims = predictive_draws(result, grid, noise=noise)
    lo, med, hi = np.quantile(sims, [(1 - ci_prob) / 2, 0.5, (1 + ci_prob) / 2], axis=0)
    x = grid[along].to_numpy(float)
    order = np.argsort(x)
    kind = "predictive" if noise else "mean"
    ax.fill_between(x[order], lo[order], hi[order], alpha=0.3, color=PALETTE[0], lw=0,
                    label=f"{100 * ci_prob:g}% {kind} band")  # fmt: skip
    ax.plot(x[order], med[order], color=PALETTE[0], label="median")
    ax.set(xscale="log")
    ax.set_xlabel(label(along))
    ax.set_ylabel(f"predicted {loss_label(result)}")
    log_ticks(ax)
    ax.legend(fontsize=7, frameon=False)
    suptitle(fig, title(result, f"Predicted loss along {label(along)}"))
    return fig


def write_bayes_plots(result, table, folder) -> list[Path]:
    """Write trace/rank, corner and predictive figures into ``folder``; returns the paths."""
    from . import write_figures

    law = result.law_name
    figures = {f"trace_{law}.png": plot_trace(result), f"corner_{law}.png": plot_corner(result)}
    figures[f"predictive_{law}.png"] = plot_predictive(result, table)
    return write_figures(folder, figures, dpi=110)
