"""Checks of a Bayesian fit: R-hat, ESS, divergences, BFMI, PSIS-LOO/WAIC, predictive coverage."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

RHAT_MAX = 1.01
BFMI_MIN = 0.3
PARETO_K_BAD = 0.7


def diagnose(idata, names: list[str], chains: int) -> tuple[dict[str, Any], list[str]]:
    """R-hat, bulk/tail ESS, divergences and BFMI, with warning texts."""
    import arviz as az

    warn: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = az.summary(idata, var_names=names, kind="diagnostics")
        bfmi = np.atleast_1d(az.bfmi(idata)) if "energy" in idata.sample_stats else np.array([])
    div = int(np.asarray(idata.sample_stats["diverging"]).sum())
    rhat = tab["r_hat"].to_dict()
    bulk, tail = tab["ess_bulk"].to_dict(), tab["ess_tail"].to_dict()
    diag = {
        "r_hat_max": float(np.nanmax(list(rhat.values()))) if chains > 1 else float("nan"),
        "ess_bulk_min": float(min(bulk.values())),
        "ess_tail_min": float(min(tail.values())),
        "divergences": div,
        "bfmi_min": float(bfmi.min()) if bfmi.size else float("nan"),
        "r_hat": rhat,
        "ess_bulk": bulk,
        "ess_tail": tail,
    }
    for n in names:
        if chains > 1 and rhat[n] > RHAT_MAX:
            warn.append(
                f"R-hat of {n} is {rhat[n]:.3f} (> {RHAT_MAX}): the chains disagree; "
                f"run more warm-up/draws or tighten the priors."
            )
        if bulk[n] < 100 * chains or tail[n] < 100 * chains:
            warn.append(
                f"ESS of {n} is low (bulk {bulk[n]:.0f}, tail {tail[n]:.0f} < "
                f"{100 * chains}): intervals are noisy; run more draws."
            )
    if div:
        warn.append(
            f"{div} divergent transition(s) after warm-up: the posterior has regions the "
            f"sampler cannot follow; results may be biased (reparametrise or tighten "
            f"priors)."
        )
    for k, b in enumerate(bfmi):
        if b < BFMI_MIN:
            warn.append(f"chain {k} has BFMI {b:.2f} (< {BFMI_MIN}): poor energy exploration.")
    return diag, warn


def loo(idata) -> tuple[dict[str, Any], list[str]]:
    """PSIS-LOO and WAIC summaries with Pareto-k counts."""
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(idata, pointwise=True)
        waic = az.waic(idata)
    k = np.asarray(loo.pareto_k)
    n_bad = int(np.sum(k > PARETO_K_BAD))
    out = {
        "elpd_loo": float(loo.elpd_loo),
        "se": float(loo.se),
        "p_loo": float(loo.p_loo),
        "pareto_k_max": float(np.max(k)),
        "n_pareto_k_bad": n_bad,
        "elpd_waic": float(waic.elpd_waic),
        "p_waic": float(waic.p_waic),
    }
    warn = []
    if n_bad:
        warn.append(
            f"PSIS-LOO: {n_bad} row(s) with Pareto k > {PARETO_K_BAD} (max "
            f"{out['pareto_k_max']:.2f}): those rows are influential and elpd_loo is "
            f"unreliable for them."
        )
    return out, warn


def ppc(idata, logy: np.ndarray) -> dict[str, float]:
    """Share of rows inside central posterior- and prior-predictive intervals of log loss."""
    out: dict[str, float] = {}
    groups = (("posterior", "posterior_predictive"), ("prior", "prior_predictive"))
    for label, group in groups:
        if group not in idata.groups():
            continue
        sims = np.asarray(idata[group]["log_loss"]).reshape(-1, len(logy))
        for prob in (0.5, 0.9):
            lo, hi = np.nanquantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
            out[f"{label}_coverage_{int(prob * 100)}"] = float(np.mean((logy >= lo) & (logy <= hi)))
    return out
