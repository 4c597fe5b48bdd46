"""The demo's workflow: which table to fit, and what the fit can recommend per budget.

``scalefit demo`` (:mod:`scalefit.cli.demo`) fits Liu et al.'s ``decomposed`` law to the
Chinchilla depth/width table when it can be found (the one lookup of
:func:`scalefit.datasets.locate`: ``--data-dir``, ``SCALEFIT_DATA_DIR``, the user cache, or the
checksummed download) and otherwise to the bundled Gemstones grid (22 real language models,
width × depth × tokens, MIT; no network needed); :func:`choose_data` says which and why. A
quantity is *recommended* only when the data pin it down: the fit names no non-identified
parameter, the optimum is not a boundary solution (on the edge of the searched depths) and the
quantity's interval spans less than a factor of :data:`PINNED_RATIO` (tokens per parameter,
``budget / (6 params²)``, is pinned when params is); otherwise :func:`recommendation_text` says
what the data cannot determine and why.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..core.accounting import flops_text
from ..core.errors import NoRecommendationWarning, ScaleFitError

CHINCHILLA = {
    "table": "chinchilla",
    "args": ["--drop-highest", "40"],
    "about": "Chinchilla depth/width table (Hoffmann et al. 2022 runs digitised by Epoch AI, "
    "width and depth from the model table, as assembled by Liu et al.), Liu et al.'s rule: "
    "the 40 highest-loss rows dropped",
    "budgets": ("1e19", "1e20", "1e21"),
    "head_dim": 128,
    "accounting": None,
}
# Gemstones' parameter count (params_active_precise) is 15 W² + 2 W per block, untied embeddings
# of a 50,304-token vocabulary and a final norm: Accounting(mlp_ratio=5.5) up to the norms
# (exact for 20 of the 22 models, within 1.5 % for the two of width 384); heads of 128.
GEMSTONES = {
    "table": "gemstones",
    "args": ["--cluster", "run"],
    "about": "bundled Gemstones grid (McLeish et al. 2025, MIT): 22 language models, width "
    "256-3072 x depth 3-80, 48M-2B parameters, checkpoints every 10B tokens to 350B; loss in "
    "nats per token; the bootstrap resamples whole runs",
    "budgets": ("1e19", "3e19", "1e20"),
    "head_dim": 128,
    "accounting": {"vocab": 50304, "embeddings": "untied", "mlp_ratio": 5.5},
    "limits": "Gemstones spans 48M-2B parameters and 10B-350B tokens; a budget whose optimum "
    "lies outside that range is an extrapolation.",
}
PINNED_RATIO = 3.0
QUANTITIES = ("depth", "width", "params", "tokens", "tokens_per_param")
LABELS = {**{q: q for q in QUANTITIES}, "tokens_per_param": "tokens/param"}


def choose_data(data_dir: str | None, download: bool, bundled: bool) -> tuple[dict, str]:
    """The table to fit and a few lines saying where it came from (or why it was not used).

    The Chinchilla table is looked for the one way :func:`scalefit.datasets.locate` looks (the
    same for ``make demo``, the ``scalefit`` command and Python); when it is not found, the lines
    name each place looked, the URL and one command that fetches it.
    """
    from ..datasets import DATASETS, PLACE_NAMES, TableNotFound, fetch_command, locate

    if bundled:
        return GEMSTONES, "--bundled was given"
    try:
        found = locate("chinchilla", data_dir, download=download)
    except TableNotFound as exc:
        looked = [
            f"{'--data-dir' if label == 'data_dir' else PLACE_NAMES[label]}: "
            f"{'not set' if folder is None else folder}"
            for label, folder in exc.places
        ]
        why = exc.why + (", --no-download was given" if not download else "")
        return GEMSTONES, "\n".join(
            [
                "the Chinchilla table was not found, so the bundled Gemstones grid is fitted "
                "instead (it needs no network)",
                "looked in " + "; ".join(looked),
                f"not downloaded: {why}",
                f"its URL: {DATASETS['chinchilla'].url}",
                f"to fetch it into the cache: {fetch_command('chinchilla')}",
            ]
        )
    except ScaleFitError as exc:  # a copy whose checksum does not match
        return GEMSTONES, f"the Chinchilla table was not used: {exc}"
    folder = found.path.parent
    where = {
        "data_dir": f"found in --data-dir {data_dir}",
        "SCALEFIT_DATA_DIR": f"found in SCALEFIT_DATA_DIR={folder}",
        "cache": f"found in the user cache {folder}",
        "download": f"downloaded from {DATASETS['chinchilla'].url} into {folder}",
    }[found.where]
    return CHINCHILLA, f"{where}, sha256 verified"


def unpinned_reasons(result) -> tuple[str, ...]:
    """Why each parameter in ``result.not_identified`` is not pinned down, one phrase each."""
    out = []
    bounds = {p.name: p.bounds for p in result.law.params}
    outside = result.diagnostics.get("boot_out_of_range_share") or {}
    for name in result.not_identified:
        lo, hi = result.ci.get(name, (np.nan, np.nan))
        b = bounds.get(name)
        if b and outside.get(name):
            out.append(
                f"{outside[name]:.0%} of the bootstrap resamples put {name} outside its declared "
                f"range [{b[0]:g}, {b[1]:g}]"
            )
        elif b and np.isfinite(lo) and (lo < b[0] or hi > b[1]):
            out.append(
                f"the bootstrap interval of {name}, [{lo:.3g}, {hi:.3g}], leaves its declared "
                f"range [{b[0]:g}, {b[1]:g}]"
            )
        else:
            out.append(f"{name} lies along a flat direction of the fit")
    return tuple(out)


def allocation(result, budgets, spec: dict):
    """The allocation the recommendation reads: the fit's draws, calibrated intervals."""
    from ..allocate import Accounting, allocate

    acc = Accounting(**spec["accounting"]) if spec["accounting"] else None
    with warnings.catch_warnings():  # the demo says why in its own words
        warnings.simplefilter("ignore", NoRecommendationWarning)
        return allocate(
            result,
            [float(b) for b in budgets],
            head_dim=spec["head_dim"],
            accounting=acc,
            interval="calibrated",
        )


def _sig(value: float, digits: int = 3) -> float:
    """Round to ``digits`` significant figures (text and CSV print the same numbers)."""
    if not np.isfinite(value) or value == 0:
        return float(value)
    return float(f"{value:.{digits}g}")


def recommendation_table(alloc, unknown: tuple[str, ...] = ()):
    """One row per budget: the recommended value of each quantity with its draw interval.

    Parameters
    ----------
    alloc : Allocation
        From :func:`scalefit.allocate.allocate` on a result with draws.
    unknown : tuple of str
        Parameters the fit does not identify; when non-empty, nothing is recommended: every
        quantity is shown only by its interval.

    Returns
    -------
    pandas.DataFrame
        ``budget``, then per quantity ``q`` (depth, width, params, tokens, tokens_per_param):
        ``q`` (the recommended practical shape's value; empty when not determined), ``q_lo``,
        ``q_hi`` (the interval of the continuous optimum over the draws) and ``q_determined``;
        then ``expected_loss``, ``regret_mean``, ``regret_p95``, ``not_identified``,
        ``boundary`` (the optimum sits on the edge of the searched depths) and ``recommended``.
        A quantity is determined only when its interval spans less than a factor of
        :data:`PINNED_RATIO`, the fit identifies every parameter and the optimum is not on a
        boundary; ``tokens_per_param`` (``budget / (6 params²)``, whose interval is the square of
        params') is determined when params and tokens are. Values are rounded to 3 significant
        figures, as printed.
    """
    import pandas as pd

    s = alloc.summary
    n_bud = len(alloc.budgets)
    rows = []
    for i, budget in enumerate(alloc.budgets):
        r = s.iloc[i]
        row = {"budget": float(budget)}
        boundary = bool(r.get("boundary", False))
        usable = not unknown and not boundary and not r.get("beyond_data", "")
        ratio = None
        if alloc.draws is not None:
            sub = alloc.draws.iloc[i::n_bud]
            ratio = (sub["tokens"] / sub["params"]).to_numpy(dtype=float)
            ratio = ratio[np.isfinite(ratio)]
        for q in QUANTITIES:
            if q == "tokens_per_param":
                value = r["tokens"] / r["params"]
                lo, hi = (
                    np.quantile(ratio, [(1 - alloc.ci_prob) / 2, (1 + alloc.ci_prob) / 2])
                    if ratio is not None and len(ratio)
                    else (np.nan, np.nan)
                )
                if alloc.calibration is not None:  # tokens/params = C / (6 N²) at the budget
                    lo, hi = (budget / (6 * r[f"params_star_{e}"] ** 2) for e in ("hi", "lo"))
            else:
                value = r.get(q, np.nan)
                lo, hi = r.get(f"{q}_star_lo", np.nan), r.get(f"{q}_star_hi", np.nan)
            pinned = usable and bool(
                np.isfinite(value) and np.isfinite(lo) and lo > 0 and hi / lo < PINNED_RATIO
            )
            if q == "tokens_per_param":  # budget / (6 params²): pinned with params and tokens
                pinned = usable and row["params_determined"] and row["tokens_determined"]
            row[q] = (int(value) if q in ("depth", "width") else _sig(value)) if pinned else np.nan
            row[f"{q}_lo"], row[f"{q}_hi"] = _sig(lo), _sig(hi)
            row[f"{q}_determined"] = pinned
        for q in ("expected_loss", "regret_mean", "regret_p95"):
            row[q] = _sig(r.get(q, np.nan), 5 if q == "expected_loss" else 3)
        row["not_identified"] = " ".join(unknown)
        row["boundary"] = boundary
        row["recommended"] = usable and all(row[f"{q}_determined"] for q in QUANTITIES)
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(row, q: str) -> str:
    def num(v: float) -> str:
        return f"{int(v)}" if q in ("depth", "width") and v >= 100 else f"{v:.3g}"

    lo, hi = row[f"{q}_lo"], row[f"{q}_hi"]
    band = f"[{num(lo)}, {num(hi)}]" if np.isfinite(lo) and np.isfinite(hi) else "[no interval]"
    if row[f"{q}_determined"]:
        return f"{num(row[q])} {band}"
    return f"? {band}"


def recommendation_text(
    table, alloc, spec: dict, unknown: tuple[str, ...] = (), why: tuple[str, ...] = ()
) -> str:
    """The demo's closing section: the per-budget table and one plain-language paragraph.

    ``why`` holds one phrase per parameter in ``unknown`` saying why it is not pinned down
    (see :func:`unpinned_reasons`).
    """
    pct = f"{100 * alloc.ci_prob:g}%"
    n = 0 if alloc.draws is None else int(alloc.draws["set"].max()) + 1
    what = (
        f"over {n} bootstrap draws + the law's misfit in N*"
        if alloc.calibration is not None
        else f"over {n} bootstrap draws (the parameters' uncertainty only)"
    )
    lines = [
        "== what to train: the practical shape with the lowest expected loss over the draws",
        f"   [{pct} interval of the optimum {what}];",
        f"   a value is given only where the interval spans less than a factor of "
        f"{PINNED_RATIO:g}; '?' marks what the data do not determine",
    ]
    if unknown:
        lines.append(f"   the data do not pin down {', '.join(unknown)}: no shape is recommended")
    budgets, depths = _edges(table, alloc)
    if budgets:
        lines.append(
            f"   boundary solution at {budgets} FLOP: the optimum sits at depth {depths}, the "
            f"edge of the\n   searched depths; the law would go past it, so no shape is "
            f"recommended there"
        )
    width = 32
    head = "".join(f"{flops_text(b) + ' FLOP':<{width}}" for b in table["budget"])
    lines.append(f"   {'':<14}{head}".rstrip())
    for q in QUANTITIES:
        cells = "".join(f"{_cell(row, q):<{width}}" for _, row in table.iterrows())
        lines.append(f"   {LABELS[q]:<14}{cells}".rstrip())
    if table["regret_mean"].notna().any() and table["recommended"].any() and not unknown:
        cells = "".join(
            f"{f'{r.regret_mean:.2g} (p95 {r.regret_p95:.2g})':<{width}}"
            for r in table.itertuples()
        )
        lines.append(f"   {'regret (nats)':<14}{cells}".rstrip())
    lines.extend(_outside(table))
    lines.append("")
    lines.append(_paragraph(table, alloc, spec, unknown, why))
    return "\n".join(lines)


def _outside(table) -> list[str]:
    """A line for each printed value outside its own printed interval, saying why."""
    out = []
    for r in table.itertuples():
        for q in QUANTITIES:
            v, lo, hi = getattr(r, q), getattr(r, f"{q}_lo"), getattr(r, f"{q}_hi")
            if getattr(r, f"{q}_determined") and not lo <= v <= hi:
                out.append(
                    f"   note: at {flops_text(r.budget)} FLOP the shape's {LABELS[q]} {v:.3g} lies "
                    f"outside the interval of the continuous optimum: a practical shape has an "
                    f"integer depth and a width on the head-size grid"
                )
    return out


def _edges(table, alloc) -> tuple[str, str]:
    """The budgets whose optimum is a boundary solution (``1e13, 1e14``) and its depths."""
    depth = alloc.summary["depth"].to_numpy(dtype=float)
    edge = [(b, d) for b, d, e in zip(table["budget"], depth, table["boundary"], strict=True) if e]
    budgets = ", ".join(flops_text(b) for b, _ in edge)
    return budgets, " or ".join(sorted({str(int(d)) for _, d in edge if np.isfinite(d)}))


def _covers(alloc) -> str:
    """What the printed intervals include, in words."""
    if alloc.calibration is not None:
        head = (
            "The intervals include how far the optimum could move if the runs were repeated "
            "and the law's own error in placing the optimal size, as measured out of sample on "
            "eight public IsoFLOP sweeps (wider past the table's largest compute)"
        )
    else:
        head = "The intervals say how far the optimum could move if the runs were repeated"
    return (
        f"{head}; they do not cover a change of data, tokenizer or architecture, and budgets "
        f"outside the table's range are extrapolations."
    )


def _paragraph(table, alloc, spec: dict, unknown: tuple[str, ...], why=()) -> str:
    import textwrap

    last = table.iloc[-1]
    budget = f"{flops_text(last['budget'])} FLOP"
    if bool(table["recommended"].iloc[-1]) and not unknown:
        text = (
            f"In plain words: with {budget} of training compute, build a transformer "
            f"{int(last['depth'])} blocks deep and {int(last['width'])} wide "
            f"({last['params']:.3g} parameters) and train it on {last['tokens']:.3g} tokens, "
            f"about {last['tokens_per_param']:.3g} tokens per parameter. That shape has the "
            f"lowest expected loss over the fit's bootstrap draws; on average it is "
            f"{last['regret_mean']:.2g} nats worse than the best shape each draw would pick "
            f"(95th percentile {last['regret_p95']:.2g}), far less than the differences the "
            f"data can resolve, so the neighbouring shapes listed by `scalefit allocate` are "
            f"just as good in practice. {_covers(alloc)}"
            + (" " + spec["limits"] if spec.get("limits") else "")
        )
        return textwrap.fill(text, width=100)
    reasons = []
    if unknown:
        reasons.append(
            f"the fit does not pin down {', '.join(unknown)}"
            + (f" ({'; '.join(why)})" if why else "; see the fit's warnings")
        )
    budgets, depths = _edges(table, alloc)
    if budgets:
        reasons.append(
            f"at {budgets} FLOP the optimum sits at depth {depths}, the edge of the searched "
            f"depths: a boundary solution, not an optimum"
        )
    missing = [LABELS[q] for q in QUANTITIES if not last[f"{q}_determined"]]
    if not reasons:
        reasons.append(
            f"the intervals of {', '.join(missing)} at {budget} span more than a factor of "
            f"{PINNED_RATIO:g}, so any single number would be a guess"
        )
    known = [LABELS[q] for q in QUANTITIES if last[f"{q}_determined"]]
    text = (
        f"In plain words: the {spec['table']} table recommends no shape, because "
        + "; and ".join(reasons)
        + ". "
        + (
            f"What it does pin down at {budget}: {', '.join(known)}, shown with intervals above. "
            if known
            else "The intervals above show only how far the optimum moves over the draws"
            + (" and the law's misfit in N*. " if alloc.calibration is not None else ". ")
        )
        + (spec["limits"] + " " if spec.get("limits") else "")
        + "Fitting a table with more depths, widths and token budgets, for example "
        "Chinchilla's through --data-dir DIR, is what would narrow them."
    )
    return textwrap.fill(text, width=100)
