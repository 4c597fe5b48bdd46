"""Early-exit split (PCA of per-token angle vectors) and the mechanism verdict with its evidence.

Liu et al.'s three candidate mechanisms and their hidden-state signatures:

- *ensemble averaging*: middle-layer step angles shrink like 1/ℓ and neighbouring increments are
  nearly orthogonal (θ(Δh_l, Δh_{l+1}) ≈ π/2);
- *procedural* (smooth, ODE-like): step angles shrink like 1/ℓ and neighbouring increments are
  correlated (θ(Δh_l, Δh_{l+1}) well below π/2);
- *compositional*: tokens stop updating at different depths (early exit), which shows as a
  separate cluster in the PCA of per-token angle vectors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ScaleFitError
from .angles import summarize_states, token_angles

#: θ(Δh_l, Δh_{l+1}) below this (cos > 0.5) counts as correlated increments (procedural).
PROCEDURAL_BELOW = math.pi / 3
#: θ(Δh_l, Δh_{l+1}) above this (cos < 0.2) counts as orthogonal increments (ensemble).
ENSEMBLE_ABOVE = math.acos(0.2)
#: An early-exit cluster holding at least this fraction of tokens counts as compositional.
COMPOSITIONAL_FRACTION = 0.2


def early_exit_split(states, *, min_separation: float = 2.0) -> dict:
    """Split tokens into an early-exit and a uniform-update group.

    Each token's vector of step angles θ_t(h_l, h_{l+1}) over layers is projected on its first
    principal component; the scores are split in two by the 1-D 2-means threshold. The group
    whose late-layer angles (last half of the blocks) are smaller is the early-exit group.

    Parameters
    ----------
    states : array-like
        ``(L+1, tokens, width)`` residual states (see :mod:`scalefit.probes.angles`).
    min_separation : float, default 2.0
        The split counts as real (``separated``) only if the two groups' PC1 means differ by at
        least this many pooled standard deviations and the early-exit group's late angles are
        below half of the other group's.

    Returns
    -------
    dict
        ``early_exit_fraction`` (0 when not separated), ``raw_fraction``, ``separated``,
        ``separation``, ``explained_variance`` (PC1 share), ``labels`` (1 = early exit),
        ``profile_early`` / ``profile_uniform`` (mean angle per layer in each group).
    """
    return split_token_angles(token_angles(states), min_separation=min_separation)


def split_token_angles(theta, *, min_separation: float = 2.0) -> dict:
    """Early-exit split of per-token step-angle vectors (see :func:`early_exit_split`).

    Parameters
    ----------
    theta : array-like
        ``(tokens, L)`` step angles θ_t(h_l, h_{l+1}), e.g. a fixed-size sample of tokens kept by
        a streaming probe; NaN counts as 0.
    min_separation : float, default 2.0
        As in :func:`early_exit_split`.

    Returns
    -------
    dict
        As :func:`early_exit_split`.
    """
    theta = np.nan_to_num(np.asarray(theta, dtype=np.float64), nan=0.0)
    if theta.ndim != 2:
        raise ScaleFitError(f"token angles must have shape (tokens, L), got {theta.shape}.")
    tokens, depth = theta.shape
    if tokens < 4:
        raise ScaleFitError(f"the early-exit split needs at least 4 tokens, got {tokens}.")
    centred = theta - theta.mean(axis=0)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    total = float((sing**2).sum())
    scores = centred @ vt[0]
    labels, separation = _two_means(scores)
    late = slice(depth // 2, depth)
    late_mean = [
        theta[labels == k][:, late].mean() if (labels == k).any() else np.inf for k in (0, 1)
    ]
    early = int(np.argmin(late_mean))
    is_early = labels == early
    separated = bool(
        separation >= min_separation
        and is_early.any()
        and late_mean[early] < 0.5 * late_mean[1 - early]
    )
    frac = float(is_early.mean())
    return {
        "early_exit_fraction": frac if separated else 0.0,
        "raw_fraction": frac,
        "separated": separated,
        "separation": float(separation),
        "explained_variance": float(sing[0] ** 2 / total) if total > 0 else math.nan,
        "labels": is_early.astype(int),
        "profile_early": theta[is_early].mean(axis=0) if is_early.any() else np.full(depth, np.nan),
        "profile_uniform": theta[~is_early].mean(axis=0)
        if (~is_early).any()
        else np.full(depth, np.nan),
    }


def _nanmean(values) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(values[np.isfinite(values)].mean()) if np.isfinite(values).any() else math.nan


def _two_means(x: np.ndarray) -> tuple[np.ndarray, float]:
    """Optimal 1-D two-cluster split (exhaustive over sorted thresholds); labels and d'."""
    order = np.sort(x)
    n = order.size
    csum, csq = np.cumsum(order), np.cumsum(order**2)
    best, cut = np.inf, 1
    for i in range(1, n):
        left = csq[i - 1] - csum[i - 1] ** 2 / i
        right = (csq[-1] - csq[i - 1]) - (csum[-1] - csum[i - 1]) ** 2 / (n - i)
        if left + right < best:
            best, cut = left + right, i
    threshold = order[cut - 1]
    labels = (x > threshold).astype(int)
    a, b = x[labels == 0], x[labels == 1]
    if a.size == 0 or b.size == 0:
        return labels, 0.0
    pooled = math.sqrt(best / max(n - 2, 1))
    return labels, float(abs(b.mean() - a.mean()) / pooled) if pooled > 0 else math.inf


@dataclass
class Verdict:
    """A mechanism verdict and the evidence it rests on.

    Attributes
    ----------
    mechanism : str
        ``"ensemble"``, ``"procedural"``, ``"compositional"`` or ``"undetermined"``.
    evidence : dict
        The measured numbers (per-depth summaries, slopes, fractions).
    reasons : list of str
        One sentence per rule that fired.
    """

    mechanism: str
    evidence: dict = field(default_factory=dict)
    reasons: list = field(default_factory=list)

    def report(self) -> str:
        """Return a short text report."""
        lines = [f"mechanism: {self.mechanism}"] + [f"  - {r}" for r in self.reasons]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Return a JSON-safe dict."""
        return {"mechanism": self.mechanism, "evidence": self.evidence, "reasons": self.reasons}


def mechanism_verdict(states_by_depth) -> Verdict:
    """Read the mechanism off the hidden states of one or more models.

    Parameters
    ----------
    states_by_depth : array-like or dict
        One model's states, or ``{depth: states}`` for models of several depths trained on the
        same task (then the 1/ℓ scaling of the middle step angle is measured too).

    Returns
    -------
    Verdict
        Rules, in order: an early-exit cluster with ≥ 20% of tokens (in the deepest model) →
        compositional; else middle increment angle < π/3 → procedural; > arccos 0.2 (≈ 1.37 rad)
        → ensemble; otherwise undetermined. The slope of log θ_mid against log ℓ is reported as
        supporting evidence (≈ −1 for both ensemble and procedural).
    """
    if not isinstance(states_by_depth, dict):
        states_by_depth = {None: states_by_depth}
    summaries = {}
    for key, states in states_by_depth.items():
        s = summarize_states(states)
        summaries[int(s["depth"]) if key is None else key] = s
    deepest = max(summaries, key=lambda k: summaries[k]["depth"])
    split = early_exit_split(states_by_depth[deepest if None not in states_by_depth else None])
    return verdict_from_evidence(summaries, split)


def verdict_from_evidence(summaries: dict, split: dict) -> Verdict:
    """Apply the verdict rules of :func:`mechanism_verdict` to already reduced evidence.

    Parameters
    ----------
    summaries : dict
        ``{key: summary}`` with the dicts of :func:`~scalefit.probes.summarize_states` (or
        :func:`~scalefit.probes.angles.summarize_table`), one per model; with two or more
        depths the slope of log θ_mid against log ℓ is reported.
    split : dict
        The deepest model's early-exit split (:func:`early_exit_split` or
        :func:`split_token_angles`).

    Returns
    -------
    Verdict
        The mechanism, its evidence and the reasons.
    """
    evidence = {
        "summaries": summaries,
        "early_exit_fraction": split["early_exit_fraction"],
        "split_separation": split["separation"],
        "dtheta_mid": _nanmean([s["dtheta_mid"] for s in summaries.values()]),
    }
    reasons = []
    if len(summaries) >= 2:
        depths = np.array([s["depth"] for s in summaries.values()], dtype=float)
        thetas = np.array([s["theta_mid"] for s in summaries.values()])
        slope = float(np.polyfit(np.log(depths), np.log(thetas), 1)[0])
        evidence["theta_mid_slope"] = slope
        reasons.append(f"middle step angle scales as ℓ^{slope:.2f} (1/ℓ would be −1)")
    frac, dtheta = evidence["early_exit_fraction"], evidence["dtheta_mid"]
    if frac >= COMPOSITIONAL_FRACTION:
        reasons.insert(0, f"{frac:.0%} of tokens form an early-exit cluster (≥ 20%)")
        return Verdict("compositional", evidence, reasons)
    reasons.insert(0, f"early-exit cluster holds {frac:.1%} of tokens (< 20%)")
    if dtheta < PROCEDURAL_BELOW:
        reasons.insert(1, f"neighbouring increments correlated: θ(Δh) = {dtheta:.3f} rad < π/3")
        return Verdict("procedural", evidence, reasons)
    if dtheta > ENSEMBLE_ABOVE:
        reasons.insert(1, f"neighbouring increments ≈ orthogonal: θ(Δh) = {dtheta:.3f} rad")
        return Verdict("ensemble", evidence, reasons)
    reasons.insert(1, f"θ(Δh) = {dtheta:.3f} rad lies between the two signatures")
    return Verdict("undetermined", evidence, reasons)
