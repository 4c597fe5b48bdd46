"""Checks of a Bayesian fit: R-hat, ESS, divergences, BFMI, PSIS-LOO/WAIC, predictive coverage."""

from __future__ import annotations

from typing import Any

import numpy as np

from .bayes_model import OBS

RHAT_MAX = 1.01
BFMI_MIN = 0.3
PARETO_K_BAD = 0.7


def diagnose(idata, names: list[str], chains: int) -> tuple[dict[str, Any], list[str]]:
    """R-hat, bulk/tail ESS, divergences and BFMI, with warning texts."""
    from . import _arviz

    warn: list[str] = []
    post = _arviz.group(idata, "posterior")
    stats = _arviz.group(idata, "sample_stats")
    nan = dict.fromkeys(names, float("nan"))
    rhat = _arviz.rhat(post, names) if chains > 1 else nan  # R-hat needs two chains
    bulk, tail = _arviz.ess(post, names, "bulk"), _arviz.ess(post, names, "tail")
    bfmi = _arviz.bfmi(stats["energy"]) if "energy" in stats else np.array([])
    div = int(np.asarray(stats["diverging"]).sum())
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
    """PSIS-LOO (ArviZ) and WAIC summaries with Pareto-k counts."""
    from . import _arviz

    res = _arviz.loo(idata)
    waic = _arviz.waic(_arviz.values(idata, OBS, "log_likelihood"))
    k = res["pareto_k"]
    n_bad = int(np.sum(k > PARETO_K_BAD))
    out = {
        "elpd_loo": res["elpd_loo"],
        "se": res["se"],
        "p_loo": res["p_loo"],
        "pareto_k_max": float(np.max(k)),
        "n_pareto_k_bad": n_bad,
        "elpd_waic": waic["elpd_waic"],
        "p_waic": waic["p_waic"],
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
    from . import _arviz

    out: dict[str, float] = {}
    groups = (("posterior", "posterior_predictive"), ("prior", "prior_predictive"))
    for label, group in groups:
        if group not in _arviz.group_names(idata):
            continue
        sims = _arviz.values(idata, OBS, group).reshape(-1, len(logy))
        for prob in (0.5, 0.9):
            lo, hi = np.nanquantile(sims, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
            out[f"{label}_coverage_{int(prob * 100)}"] = float(np.mean((logy >= lo) & (logy <= hi)))
    return out
