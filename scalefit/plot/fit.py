"""Figures for least-squares and Bayesian fits: data against fit, residuals, bootstrap draws."""

from __future__ import annotations

import numpy as np

from .style import PALETTE, SEQUENTIAL, axes, label, log_ticks, loss_label, suptitle, title


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
    fig, (a0, a1) = axes(ax, ncols=2, figsize=(4.6, 4.0))
    law = result.law
    y = table["loss"].to_numpy(float)
    pred = np.asarray(result.predict(table), dtype=float)
    key, colour = _colour_key(table, law)
    sc = a0.scatter(pred, y, c=colour, s=14, cmap=SEQUENTIAL, edgecolors="none")
    lo, hi = min(y.min(), pred.min()), max(y.max(), pred.max())
    a0.plot([lo, hi], [lo, hi], color="black", lw=0.8, label="observed = predicted")
    a0.set(xscale="log", yscale="log")
    a0.set_xlabel(f"predicted {loss_label(result)}")
    a0.set_ylabel(f"observed {loss_label(result)}")
    log_ticks(a0)
    a0.legend(fontsize=7, frameon=False, loc="upper left")
    fig.colorbar(sc, ax=a0, label=f"log10 of {label(key)}")
    a1.scatter(pred, np.log(y) - np.log(pred), c=colour, s=14, cmap=SEQUENTIAL, edgecolors="none")
    a1.axhline(0.0, color="black", lw=0.8)
    a1.set(xscale="log")
    a1.set_xlabel(f"predicted {loss_label(result)}")
    a1.set_ylabel("log residual, log(observed) − log(predicted)")
    log_ticks(a1)
    what = (
        f"Observed against fitted loss (mean relative error "
        f"{result.metrics.get('mean_rel_err', float('nan')):.2%})"
    )
    suptitle(fig, title(result, what))
    return fig


def _limits(values: np.ndarray, point: float) -> tuple[float, float]:
    """Robust axis limits: the central 98% of the draws and the point estimate, padded 8%."""
    lo, hi = np.nanquantile(values, [0.01, 0.99])
    lo, hi = min(lo, point), max(hi, point)
    pad = 0.08 * (hi - lo) if hi > lo else 0.05 * abs(hi) + 1e-12
    return lo - pad, hi + pad


def plot_draws(result, names=None, *, ax=None, max_points: int | None = None):
    """Corner plot of bootstrap/posterior draws: histograms on the diagonal, pairs below it.

    The point estimate is marked (lines and a cross), the ends of each parameter's interval
    (``result.ci``) are dashed on the diagonal, and the axes cover the central 98% of the draws,
    so a few outlying resamples do not squash the rest (how many fall outside is written in each
    panel).

    Parameters
    ----------
    result : FitResult
        A result with draws.
    names : sequence of str, optional
        Parameters to show (default: the exponents, else the first four).
    ax : ignored unless a grid of axes of the right size is given.
    max_points : int, optional
        Draws shown (evenly thinned; default: all).

    Returns
    -------
    matplotlib.figure.Figure
    """
    frame = result.draws_frame().dropna()
    total = len(frame)
    if max_points is not None and total > max_points:
        frame = frame.iloc[np.linspace(0, total - 1, max_points).astype(int)]
    exponents = [p.name for p in result.law.params if p.kind == "exponent"][:4]
    names = list(names or exponents or list(frame)[:4])
    k = len(names)
    side = max(2.3 if k <= 4 else 1.8, 6.0 / k)  # few parameters: larger panels, room for title
    fig, grid = axes(ax, nrows=k, ncols=k, figsize=(side, side))
    grid = np.asarray(grid).reshape(k, k)
    point = {n: float(result.params[n]) for n in names}
    lims = {n: _limits(frame[n].to_numpy(float), point[n]) for n in names}
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            ax_ = grid[i, j]
            if i < j:
                ax_.axis("off")
                continue
            x = frame[b].to_numpy(float)
            inside_x = (x >= lims[b][0]) & (x <= lims[b][1])
            if i == j:
                ax_.hist(x[inside_x], bins=30, range=lims[b], color=PALETTE[0], alpha=0.75)
                ax_.axvline(point[b], color=PALETTE[1], lw=1.5)
                for end in result.ci.get(b, ()):
                    if lims[b][0] <= end <= lims[b][1]:
                        ax_.axvline(end, color="k", lw=0.6, ls="--")
                ax_.set_yticks([])
                out = int((~inside_x).sum())
            else:
                yv = frame[a].to_numpy(float)
                inside = inside_x & (yv >= lims[a][0]) & (yv <= lims[a][1])
                ax_.scatter(x[inside], yv[inside], s=4, alpha=0.45, color=PALETTE[0], lw=0)
                ax_.axvline(point[b], color=PALETTE[1], lw=0.8)
                ax_.axhline(point[a], color=PALETTE[1], lw=0.8)
                ax_.plot(point[b], point[a], "x", color=PALETTE[1], ms=7, mew=2)
                ax_.set_ylim(*lims[a])
                out = int((~inside).sum())
            ax_.set_xlim(*lims[b])
            if k > 4:
                ax_.tick_params(labelsize=6)
            if out:
                ax_.text(0.97, 0.95, f"{out} outside", transform=ax_.transAxes, ha="right",
                         va="top", fontsize=7, color="0.35")  # fmt: skip
            if i == k - 1:
                ax_.set_xlabel(b)
            else:
                ax_.tick_params(labelbottom=False)
            if j == 0 and i != j:
                ax_.set_ylabel(a)
            elif i != j:
                ax_.tick_params(labelleft=False)
    kind = "posterior" if result.method == "bayes" else "bootstrap"
    shown = f"{len(frame)} of {total}" if len(frame) < total else f"{total}"
    dashed = f"; dashed: the {100 * result.ci_prob:g}% interval" if result.ci else ""
    of = " of the exponents" if names == exponents else ""
    what = f"{shown} {kind} draws{of}; orange: point estimate{dashed}; axes: central 98% of them"
    suptitle(fig, title(result, what))
    return fig
