"""Reproduction-report section: what the fitted laws imply for compute-optimal shapes.

``section(data_dir)`` fits ``decomposed`` to Liu et al.'s 203-row Chinchilla table and
``critical_depth`` to the Depth Delusion table (200 bootstrap resamples each, seed 0), solves the
compute-optimal allocation at 9 budgets from 1e19 to 1e25 FLOP for the point estimate and every
draw, and compares the fitted scaling exponents with the papers' statements. Everything is
computed when called; nothing here is a stored result.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

BOOT = 200
BUDGETS = np.geomspace(1e19, 1e25, 9)
CMD_DEC = (
    "`scalefit fit chinchilla --drop-highest 40 --law decomposed --bootstrap 200 --out dec.json`"
    " then `scalefit allocate dec.json --budget 1e19 --budget 1e25 --exponents`"
)
CMD_CD = (
    "`scalefit fit depth_delusion --law critical_depth --bootstrap 200 --out cd.json` then "
    "`scalefit allocate cd.json --budget 1e19 --budget 1e25 --exponents`"
)


def _fits(data_dir: str):
    from scalefit import fit
    from scalefit.core.errors import ConvergenceWarning
    from scalefit.datasets import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        dec = fit(
            load("chinchilla", data_dir, drop_highest=40),
            "decomposed",
            bootstrap=BOOT,
            seed=0,
            progress=False,
        )
        cd = fit(
            load("depth_delusion", data_dir),
            "critical_depth",
            bootstrap=BOOT,
            seed=0,
            progress=False,
        )
    return dec, cd


def _iv(row) -> str:
    return f"{row['exponent']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"


def _capacity_exponent(res) -> tuple[float, float, float]:
    """Slope of log(width term + depth term) at the optimum against log params*, per draw."""
    from scalefit.allocate import Space, solve

    space = Space.of(res.law)
    names = list(res.params)
    d = np.asarray(res.draws)
    d = d[np.all(np.isfinite(d), axis=1)]
    sets = [np.array([[res.params[k] for k in names]]), d]
    out = []
    for arr in sets:
        p = {k: arr[:, i] for i, k in enumerate(names)}
        sol = solve(space, p, BUDGETS, sets=False)
        n_set = len(arr)
        w = sol["width"].to_numpy().reshape(n_set, -1)
        ell = sol["depth"].to_numpy().reshape(n_set, -1)
        cap = (
            p["c_width"][:, None] * w ** -p["a_width"][:, None]
            + p["c_depth"][:, None] * ell ** -p["a_depth"][:, None]
        )
        x = np.log(sol["params"].to_numpy().reshape(n_set, -1))
        y = np.log(cap)
        xc = x - x.mean(axis=1, keepdims=True)
        out.append(-(xc * (y - y.mean(axis=1, keepdims=True))).sum(axis=1) / (xc**2).sum(axis=1))
    lo, hi = np.quantile(out[1], [0.025, 0.975])
    return float(out[0][0]), float(lo), float(hi)


def _decomposed_rows(dec) -> list[str]:
    from scalefit.allocate import decomposed_exponents
    from scalefit.allocate.analysis import scaling_exponents

    e = scaling_exponents(dec, BUDGETS).set_index("quantity")
    paper = decomposed_exponents(0.98, 1.2, 0.30)  # Liu et al.'s fitted exponents
    ours_asym = decomposed_exponents(
        dec.params["a_width"], dec.params["a_depth"], dec.params["a_tokens"]
    )
    cap, cap_lo, cap_hi = _capacity_exponent(dec)
    note = (
        "solver over 1e19–1e25 FLOP with N = 12·ℓ·W² + 32,000·W (tied); the closed-form "
        f"large-C limit of our fit is {float(ours_asym['depth']):.3f} (depth), "
        f"{float(ours_asym['width']):.3f} (width)"
    )
    rows = [
        f"| D* ∝ C^a (decomposed, chinchilla 203 rows) | {float(paper['depth']):.3f} implied by "
        f"a_W 0.98, a_ℓ 1.2, a_T 0.30 (no embeddings, large C) | {_iv(e.loc['depth'])} | "
        f"{CMD_DEC} | {note} |",
        f"| W* ∝ C^a | {float(paper['width']):.3f} (same derivation) | {_iv(e.loc['width'])} | "
        f"same | width grows faster than depth |",
        f"| T* ∝ C^a | {float(paper['tokens']):.3f} (same derivation) | {_iv(e.loc['tokens'])} | "
        f"same | Chinchilla's own fits give ≈ 0.5 |",
        f"| N* ∝ C^a | {float(paper['params']):.3f} (same derivation) | {_iv(e.loc['params'])} | "
        f"same | |",
        f'| W*/D* ∝ C^a | 0 ("optimal W ∝ ℓ", from a_W ≈ a_ℓ ≈ 1) | '
        f"{_iv(e.loc['width_per_depth'])} | same | a_W = {dec.params['a_width']:.2f}, "
        f"a_ℓ = {dec.params['a_depth']:.2f}: W ∝ ℓ holds only if the two exponents are equal; "
        f"our interval {'excludes' if e.loc['width_per_depth', 'lo'] > 0 else 'includes'} 0 |",
        f"| capacity term c_W/W^a_W + c_ℓ/ℓ^a_ℓ ∝ N*^(−k) along the optimum | k = 1/3 | "
        f"{cap:.3f} [{cap_lo:.3f}, {cap_hi:.3f}] | same (computed from the draws' optima) | "
        f"k = a/3 when a_W = a_ℓ = a; with embeddings N ≠ 12ℓW² at small C |",
    ]
    return rows


def _critical_rows(cd) -> list[str]:
    from scalefit.allocate import allocate
    from scalefit.allocate.analysis import scaling_exponents
    from scalefit.core.errors import ScaleFitError

    alpha, delta = 0.076, 0.095  # Kaplan et al.'s exponents used in their Appendix A.3
    eq22 = 1.0 / (2.0 * (1.0 + alpha / delta))
    paper_row = (
        f"| the paper's derivation (Appendix A.3) | D* ∝ C^0.12, W* ∝ C^0.34 | Eq. 22 with "
        f"α = 0.076, δ = 0.095 gives D* ∝ W* ∝ C^{eq22:.3f}, not 0.12/0.34 | arithmetic | "
        f"it drops Φ, after which L depends on (D, W) only through N = 12·D·W²: ∂L/∂D ∝ W² L'(N)"
        f" and ∂L/∂W ∝ 2DW L'(N) vanish together, so Eqs. 20–21 are one condition and do not "
        f"fix D/W; the 0.12/0.34 split is not implied by the ansatz |"
    )
    try:
        e = scaling_exponents(cd, BUDGETS).set_index("quantity")
        a = allocate(cd, [1e21])
    except ScaleFitError as exc:
        return [
            f"| D* ∝ C^a, W* ∝ C^a (critical_depth, depth_delusion 30 rows) | 0.12, 0.34 | "
            f"not computed: the allocator refuses this fit ({exc}) | {CMD_CD} | a fit outside "
            "the law's declared range allocates nothing; see the least-squares section's "
            "Depth Delusion rows |",
            paper_row,
        ]
    s = a.summary.iloc[0]
    kappa = cd.params["kappa"]
    lo, hi = cd.ci.get("kappa", (np.nan, np.nan))
    flat = "flat" if bool(s["flat"]) else "NOT flat"
    return [
        f"| D* ∝ C^a (critical_depth, depth_delusion 30 rows) | 0.12 | not identified: the "
        f"optimum is {flat} in depth — at 1e21 FLOP every depth from {s['depth_min_opt']:.0f} "
        f"to {s['depth_max_opt']:.1f} (95% {s['depth_max_opt_lo']:.1f}–"
        f"{s['depth_max_opt_hi']:.1f}) gives the same loss; the deepest optimal depth grows as "
        f"C^{_iv(e.loc['depth_max_opt'])} | {CMD_CD} | under Ansatz 3.4 the loss at fixed N "
        f"does not depend on depth while ℓ ≤ ℓc(W) = κ ln W (κ = {kappa:.2f} "
        f"[{lo:.2f}, {hi:.2f}], paper 2.43), so D* is a range, and its top grows only "
        f"logarithmically |",
        f"| W* ∝ C^a | 0.34 | not identified (any width on the plateau); width at the deepest "
        f"optimal depth ∝ C^{_iv(e.loc['width_at_depth_max_opt'])}; at 1e21 the optimal widths "
        f"span {s['set_width_lo']:.0f}–{s['set_width_hi']:.0f} | same | see below |",
        f"| N* ∝ C^a, T* ∝ C^a | — | N*: {_iv(e.loc['params'])}; T*: {_iv(e.loc['tokens'])} | "
        f"same | the fitted δ = {cd.params['delta']:.3f} is far below α = "
        f"{cd.params['alpha']:.3f}: the table's tokens vary little (6.4B for 18 rows, ≈ 20·N "
        f"for 12), so the data split is poorly identified; "
        f"{int(s.get('n_unbounded', 0))}/{int(s.get('n_draws', 0))} draws at 1e21 have no "
        f"interior optimum |",
        paper_row,
    ]


def section(data_dir: str | None = None) -> str:
    """Markdown for the allocation part of the reproduction report."""
    if data_dir:
        os.environ.setdefault("SCALEFIT_DATA_DIR", data_dir)
    dec, cd = _fits(data_dir)
    head = [
        "## Compute-optimal allocation",
        "",
        f"Exponents a of q* ∝ C^a are least-squares slopes of log q* on log C over {len(BUDGETS)}"
        f" budgets from 1e19 to 1e25 FLOP (C = 6·N·T), for the point estimate and each of "
        f"{BOOT} bootstrap draws (95% percentile intervals in brackets). The solver is generic "
        "(grid + projected Newton on the law's own expression); flat optima are reported as "
        "ranges.",
        "",
        "| quantity | paper's value | ours | command | explanation |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(head + _decomposed_rows(dec) + _critical_rows(cd)) + "\n"


if __name__ == "__main__":
    print(section(os.environ.get("SCALEFIT_DATA_DIR")))
