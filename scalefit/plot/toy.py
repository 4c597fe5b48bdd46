"""Figures for the teacher–student toy: loss vs depth, α_ℓ vs steps and temperature, probes.

Every function takes ``ax=None`` (a new figure is made) and returns the figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .style import TITLE_SIZE, axes, estimates, log_ticks, value_ticks

TOY = "toy teacher–student (width 32)"


def _label(mode: str, rho: float) -> str:
    return f"correlated teacher, ρ = {rho:g}" if mode == "correlated" else f"{mode} teacher"


def loss_vs_depth(
    table: pd.DataFrame,
    *,
    temperature: float | None = None,
    loss_column: str = "test_loss",
    alphas: pd.DataFrame | None = None,
    ax=None,
):
    """Log–log loss against student depth, one line per teacher (mean over seeds, with spread).

    Parameters
    ----------
    table : DataFrame
        Tidy toy rows of one checkpoint (e.g. the final one).
    temperature : float, optional
        Keep only this temperature (default: all rows).
    loss_column : str
    alphas : DataFrame, optional
        Fitted groups (from :func:`~scalefit.workflows.toy.fit_depth_exponents`); their α is
        added to the legend.
    ax : matplotlib Axes, optional
    """
    fig, ax = axes(ax, figsize=(7.0, 4.6))
    if temperature is not None:
        table = table[np.isclose(table["temperature"], temperature)]
    for (mode, rho), group in table.groupby(["teacher_mode", "rho"]):
        stats = group.groupby("depth")[loss_column].agg(["mean", "min", "max"])
        label = _label(mode, rho)
        fit = _matching_fit(alphas, mode, rho, temperature, group["steps"].max())
        if fit is not None:
            label += f" (α = {fit['alpha']:.2f})"
        line = ax.loglog(stats.index, stats["mean"], "o-", label=label)[0]
        ax.fill_between(stats.index, stats["min"], stats["max"], color=line.get_color(), alpha=0.2)
        if fit is not None:
            grid = np.geomspace(stats.index.min(), stats.index.max(), 50)
            curve = fit["c"] / grid ** fit["alpha"] + fit["L0"]
            ax.loglog(grid, curve, "--", color=line.get_color(), lw=1)
    log_ticks(ax, "y")
    value_ticks(ax, values=table["depth"])
    ax.set_xlabel("student depth ℓ (blocks)")
    what = {"test_loss": "test KL(teacher ‖ student)", "train_loss": "training KL"}
    ax.set_ylabel(f"{what.get(loss_column, loss_column.replace('_', ' '))} (nats)")
    title = f"{TOY}: loss against student depth" + (
        f", τ = {temperature:g}" if temperature is not None else ""
    )
    if alphas is not None:
        title += "\nshaded: min–max over seeds; dashed: least-squares fit of c/ℓ^α + L0"
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.legend(fontsize=8, frameon=False)
    return fig


def _matching_fit(alphas, mode, rho, temperature, steps):
    if alphas is None or "alpha" not in alphas.columns:
        return None
    match = alphas[
        (alphas["teacher_mode"] == mode)
        & np.isclose(alphas["rho"], rho)
        & (alphas["steps"] == steps)
        & alphas["alpha"].notna()
    ]
    if temperature is not None:
        match = match[np.isclose(match["temperature"], temperature)]
    return None if match.empty else match.iloc[0]


def alpha_vs_steps(alphas: pd.DataFrame, *, ax=None, ylim=(0.0, 5.0)):
    """α_ℓ (with its interval) against training steps, one line per teacher and temperature.

    Fits flagged by the fitter (a warning, or α outside ``ylim``) are ringed; the
    axis is limited to ``ylim`` so that one unidentified fit does not hide the others.
    """
    fig, ax = axes(ax, figsize=(7.0, 4.6))
    for (mode, rho, tau), group in alphas.groupby(["teacher_mode", "rho", "temperature"]):
        group = group.sort_values("steps")
        lo, hi = (group.get(f"alpha_{end}") for end in ("lo", "hi"))
        line = estimates(ax, group["steps"], group["alpha"], lo, hi, fmt="o-",
                         label=f"{_label(mode, rho)}, τ = {tau:g}")  # fmt: skip
        flagged = group["alpha"].gt(ylim[1]) | group["alpha"].lt(ylim[0])
        if "warnings" in group.columns:
            flagged |= group["warnings"].fillna("").astype(str).str.len() > 0
        ax.plot(
            group.loc[flagged, "steps"], group.loc[flagged, "alpha"].clip(*ylim), "o",
            mfc="none", mec=line.get_color(), ms=11, mew=1,
        )  # fmt: skip
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.axhline(3.0, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_ylim(*ylim)
    log_ticks(ax, "x")
    ax.set_xlabel("training steps")
    ax.set_ylabel("depth exponent α_ℓ of c/ℓ^α + L0")
    ax.set_title(
        f"{TOY}: fitted depth exponent against training steps\n"
        "bars: bootstrap interval; ringed: fit flagged by the fitter; dotted: α = 1 and 3",
        fontsize=TITLE_SIZE,
    )
    ax.legend(fontsize=8, frameon=False)
    return fig


def alpha_vs_temperature(alphas: pd.DataFrame, *, ax=None):
    """Final-checkpoint α_ℓ against temperature, one line per teacher."""
    fig, ax = axes(ax, figsize=(7.0, 4.6))
    last = alphas[
        alphas["steps"] == alphas.groupby(["teacher_mode", "rho"])["steps"].transform("max")
    ]
    for (mode, rho), group in last.groupby(["teacher_mode", "rho"]):
        group = group.sort_values("temperature")
        estimates(ax, group["temperature"], group["alpha"], group["alpha_lo"], group["alpha_hi"],
                  fmt="o-", label=_label(mode, rho))  # fmt: skip
    ax.set_xscale("log")
    log_ticks(ax, "x")
    ax.set_xlabel("teacher temperature τ")
    ax.set_ylabel("depth exponent α_ℓ (final checkpoint)")
    ax.set_title(f"{TOY}: fitted depth exponent against temperature", fontsize=TITLE_SIZE)
    ax.legend(fontsize=8, frameon=False)
    return fig


def probe_summary(final: pd.DataFrame, *, ax=None):
    """Middle-layer step angle and increment angle of trained students against depth."""
    fig, ax = axes(ax, ncols=2, figsize=(4.8, 4.2)) if ax is None else axes(ax)
    left, right = ax
    for (mode, rho, tau), group in final.groupby(["teacher_mode", "rho", "temperature"]):
        stats = group.groupby("depth")[["theta_mid", "dtheta_mid"]].mean()
        label = f"{_label(mode, rho)}, τ = {tau:g}"
        left.loglog(stats.index, stats["theta_mid"], "o-", label=label)
        right.semilogx(stats.index, stats["dtheta_mid"], "o-", label=label)
    right.axhline(np.pi / 2, color="grey", lw=0.8, ls=":")
    value_ticks(left, right, values=final["depth"])
    log_ticks(left, "y")
    left.set_xlabel("student depth ℓ (blocks)")
    left.set_ylabel("angle between consecutive states θ(h_l, h_l+1) (rad)")
    right.set_xlabel("student depth ℓ (blocks)")
    right.set_ylabel("angle between consecutive increments (rad)")
    left.legend(fontsize=8, frameon=False)
    left.figure.suptitle(
        f"{TOY}: middle-layer angles of the trained students\ndotted: π/2, orthogonal increments",
        fontsize=TITLE_SIZE,
    )
    return fig


def probe_curves(layers: pd.DataFrame, *, ax=None):
    """Per-layer step angle and increment angle of each model (layer index scaled to [0, 1])."""
    fig, ax = axes(ax, ncols=2) if ax is None else axes(ax)
    left, right = ax
    for name, group in layers.groupby("model", sort=False):
        depth = group["layer"].max()
        x = group["layer"] / depth
        left.semilogy(x, group["theta"], label=name)
        right.plot(x, group["dtheta"], label=name)
    right.axhline(np.pi / 2, color="grey", lw=0.8, ls=":")
    left.set_xlabel("relative layer l/L")
    left.set_ylabel("θ(h_l, h_l+1) [rad]")
    right.set_xlabel("relative layer l/L")
    right.set_ylabel("θ(Δh_l, Δh_l+1) [rad]")
    left.legend(fontsize="small")
    return fig
