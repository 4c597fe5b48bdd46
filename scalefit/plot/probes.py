"""Figures of a language-model probe: angles, distances, pruning drop, the early-exit split.

Each takes a :class:`~scalefit.probes.hf.HFProbeResult` (from :func:`scalefit.probes.hf.probe_hf`);
:func:`write_probe_plots` saves them beside the result's tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .style import TITLE_SIZE, axes, estimates, suptitle


def _short(name: str) -> str:
    """The last two parts of a model path (``org/model`` or ``package/model``)."""
    parts = [p for p in str(name).replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:]) if parts else "model"


def _integer_ticks(*axs) -> None:
    from matplotlib.ticker import MaxNLocator

    for ax in axs:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _band(ax, x, frame, col, label, color=None):
    lo, hi = (frame.get(f"{col}_{end}") for end in ("lo", "hi"))
    estimates(ax, x, frame[col], lo, hi, fmt="o-", band={"alpha": 0.25}, ms=3, label=label,
              color=color)  # fmt: skip


def angles_figure(result):
    """Step angle, increment angle and angular distance against depth (95% bootstrap bands)."""
    name = _short(result.summary.get("model", "model"))
    layers = result.layers
    fig, (ax1, ax2) = axes(ncols=2, figsize=(5.5, 4.0))
    x = layers["layer"]
    _band(ax1, x, layers, "theta", "θ(h_{l−1}, h_l): step angle")
    _band(ax1, x, layers, "dtheta", "θ(Δh_{l−1}, Δh_l): increment angle")
    ax1.axhline(np.pi / 2, color="grey", ls=":", lw=1, label="π/2 (orthogonal)")
    ax1.set_xlabel("block l")
    ax1.set_ylabel("angle (rad)")
    ax1.set_title("hidden-state angles per block", fontsize=TITLE_SIZE)
    suptitle(fig, f"{name}: {result.summary.get('tokens', '?')} tokens, 95% bootstrap bands")
    ax1.legend(fontsize=8)
    for n, grp in result.distances.groupby("n"):
        _band(ax2, grp["layer"], grp.reset_index(drop=True), "distance", f"n = {n}")
    # Sun et al. quote 0.2 as a level deep Pre-LN layers fall below; they define no threshold
    ax2.axhline(0.2, color="grey", ls=":", lw=1, label="0.2 (a level Sun et al. quote)")
    ax2.set_xlabel("first block l of the span")
    ax2.set_ylabel("angular distance d(l, l+n) = θ/π")
    ax2.set_title("angular distance between block inputs l and l+n", fontsize=TITLE_SIZE)
    ax2.legend(fontsize=8)
    _integer_ticks(ax1, ax2)
    return fig


def pruning_figure(result):
    """Pruning drop (metric without block l minus full) against depth."""
    metric = result.summary.get("prune_metric", "metric")
    fig, ax = axes(figsize=(6.0, 4.0))
    ax.plot(result.layers["layer"], result.layers["prune_drop"], marker="o")
    ax.axhline(0, color="grey", lw=1)
    ax.set_xlabel("removed block l")
    ax.set_ylabel(
        "θ/π of the final state to the full model's"
        if metric.startswith("angular")
        else f"drop in {metric}"
    )
    name = _short(result.summary.get("model", "model"))
    ax.set_title(f"{name}: one block removed, no fine-tuning", fontsize=TITLE_SIZE)
    _integer_ticks(ax)
    return fig


def split_figure(result):
    """Mean per-layer step angle of the two groups of the early-exit split."""
    split = result.split
    fig, ax = axes(figsize=(6.0, 4.0))
    x = range(1, len(split["profile_uniform"]) + 1)
    share = split["raw_fraction"]
    ax.plot(x, split["profile_uniform"], marker="o", label=f"uniform update ({1 - share:.1%})")
    early = "early-exit group" if split["separated"] else "smaller-late-angle half (no real split)"
    ax.plot(x, split["profile_early"], marker="s", label=f"{early} ({share:.1%})")
    sep = "separated" if split["separated"] else "not separated"
    ax.set_xlabel("block l")
    ax.set_ylabel("mean step angle θ(h_{l−1}, h_l) (rad)")
    ax.set_title(f"PCA split of {split['tokens']} sampled tokens ({sep})", fontsize=TITLE_SIZE)
    ax.legend(fontsize=8)
    _integer_ticks(ax)
    return fig


def write_probe_plots(result, folder: str | Path) -> list[Path]:
    """Write ``angles.png``, ``split.png`` and (if pruned) ``pruning.png`` into ``folder``."""
    from . import write_figures

    figures = {"angles.png": angles_figure(result), "split.png": split_figure(result)}
    if result.layers["prune_drop"].notna().any():
        figures["pruning.png"] = pruning_figure(result)
    return write_figures(folder, figures, dpi=110)
