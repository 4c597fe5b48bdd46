"""Turn a finished trainer grid into its loss table, a decomposed-law fit and comparison figures.

``scalefit train report DIR`` calls :func:`grid_report`; the Shakespeare mini-grid's
``data/lm_grid_shakespeare.csv`` and ``docs/img/lm_*.png`` are written this way.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..core._io import atomic_write_csv
from ..core.errors import ScaleFitError
from ..train.grid import TABLE_COLUMNS, collect_diagnostics

EXTRA_COLUMNS = [
    "train_loss",
    "steps",
    "tokens_per_s",
    "grad_decay_rate",
    "probe_theta_mid",
    "probe_dtheta_mid",
    "seq_len",
    "batch_size",
    "lr",
    "block",
    "embeddings",
    "vocab",
]


def loss_table(out_dir: str | Path) -> pd.DataFrame:
    """Every finished run of a sweep folder as a loss table (canonical columns first, sorted)."""
    from ..sweep import collect_results

    table = collect_results(out_dir)
    if table.empty:
        raise ScaleFitError(f"No finished runs under {out_dir}/runs.")
    missing = [c for c in TABLE_COLUMNS if c not in table.columns]
    if missing:
        raise ScaleFitError(f"{out_dir}: runs lack the loss-table columns {missing}.")
    cols = TABLE_COLUMNS + [c for c in EXTRA_COLUMNS if c in table.columns]
    return table[cols].sort_values(["variant", "tokens", "depth", "width"]).reset_index(drop=True)


def fit_decomposed(table: pd.DataFrame, *, variant: str = "pre_ln", **kwargs):
    """Fit the ``decomposed`` law to one variant's finite-loss rows with :func:`scalefit.fit`."""
    from ..core.table import read_table
    from ..fit import fit

    rows = table[(table["variant"] == variant) & ~table["diverged"].astype(bool)]
    rows = rows.dropna(subset=["loss"])
    if len(rows) < 8:
        raise ScaleFitError(f"decomposed has 7 parameters; only {len(rows)} {variant} rows.")
    return fit(read_table(rows.reset_index(drop=True)), "decomposed", **kwargs)


def comparison_figures(out_dir: str | Path, img_dir: str | Path, *, tokens: int, points) -> list:
    """Draw Pre-LN vs LNS per-layer panels at (depth, width) points; return the PNG paths."""
    from ..plot import write_figures
    from ..plot.train import plot_variant_comparison

    diag = collect_diagnostics(out_dir)
    diag = diag[diag["tokens"] == tokens]
    figures = {}
    for depth, width in points:
        sel = diag[(diag["depth"] == depth) & (diag["width"] == width)]
        if set(sel["variant"]) < {"pre_ln", "lns"}:
            continue
        figures[f"lm_preln_vs_lns_d{depth}_w{width}.png"] = plot_variant_comparison(
            sel[sel["variant"].isin(["pre_ln", "lns"])],
            metrics=("output_variance", "angular_distance", "prune_drop"),
            depth=depth,
            width=width,
        )
    return write_figures(img_dir, figures, dpi=110)


def variant_summary(out_dir: str | Path, *, tokens: int) -> pd.DataFrame:
    """Per-run depth summaries at one budget, for comparing variants on the same points.

    Columns: ``variant, depth, width, loss``, ``var_growth`` (output variance of the last block
    over the first), ``ad_deep`` and ``prune_deep`` (mean angular distance and pruning drop over
    the deeper half of the blocks), ``ad_first`` (block 1's angular distance).
    """
    diag = collect_diagnostics(out_dir)
    diag = diag[(diag["tokens"] == tokens) & (diag["depth"] >= 2)]
    table = loss_table(out_dir).set_index(["variant", "depth", "width", "tokens"])["loss"]
    rows = []
    for (variant, depth, width), d in diag.groupby(["variant", "depth", "width"]):
        m = d.pivot_table(index="layer", columns="metric", values="value")
        deep = m.index > depth / 2
        rows.append({
            "variant": variant, "depth": depth, "width": width,
            "loss": table.get((variant, depth, width, tokens), float("nan")),
            "var_growth": m["output_variance"].iloc[-1] / m["output_variance"].iloc[0],
            "ad_first": m["angular_distance"].iloc[0],
            "ad_deep": m.loc[deep, "angular_distance"].mean(),
            "prune_deep": m.loc[deep, "prune_drop"].mean(),
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values(["depth", "width", "variant"]).reset_index(drop=True)


def grid_report(
    out_dir,
    *,
    table_path=None,
    img_dir=None,
    points=((8, 128), (8, 64), (8, 32), (4, 64)),
    extra_tables=(),
    bootstrap: int = 0,
    seed: int = 0,
):
    """Write the loss table, fit ``decomposed`` to the Pre-LN rows and draw the figures.

    Parameters
    ----------
    extra_tables : sequence of path-like
        Loss tables (CSV) of earlier grids with the same settings whose rows join the fit (not
        the written table), e.g. the shallow rows of ``data/lm_grid_shakespeare.csv``.
    bootstrap : int
        Row resamples for percentile intervals of the fit (0: none).
    seed : int
        Seed of the fit and the bootstrap.

    Returns
    -------
    dict
        ``table`` (DataFrame), ``fit`` (FitResult or None when too few rows), ``figures`` and
        ``variants`` (:func:`variant_summary` at the LNS budget, or None without LNS runs or
        without diagnostics).
    """
    from ..core.table import read_csv

    extra = [read_csv(p) for p in extra_tables]  # checked files, before any output is written
    table = loss_table(out_dir)
    if table_path is not None:
        atomic_write_csv(table_path, table)
    joined = pd.concat([table, *extra], ignore_index=True)
    try:
        fit = fit_decomposed(joined, seed=seed, bootstrap=bootstrap)
    except ScaleFitError:
        fit = None
    lns = table[table["variant"] == "lns"]
    budget = int(lns["tokens"].max()) if not lns.empty else None
    figures = []
    if img_dir is not None:
        from ..plot import write_figures
        from ..plot.train import plot_loss_grid

        grid = plot_loss_grid(table, variant="pre_ln")
        figures += write_figures(img_dir, {"lm_loss_grid.png": grid}, dpi=110)
        if budget is not None and _has_diagnostics(out_dir):
            figures += comparison_figures(out_dir, img_dir, tokens=budget, points=points)
    summary = None
    if budget is not None and _has_diagnostics(out_dir):
        summary = variant_summary(out_dir, tokens=budget)
    return {"table": table, "fit": fit, "figures": figures, "variants": summary}


def _has_diagnostics(out_dir) -> bool:
    return any(Path(out_dir).glob("runs/*/diagnostics.csv"))
