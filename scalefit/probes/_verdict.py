"""The rules of the mechanism verdict, their thresholds and where each comes from.

Liu et al.'s signatures are cited from seed 000, a third-party summary of their paper (not the
paper itself; line numbers are the summary's): "⟨θ⟩ ∝ 1/ℓ" in the middle layers (l. 31, 57),
neighbouring increments "nearly π/2" for ensemble averaging (l. 31, 58) and "correlated" for
procedural assembly (l. 14), an early-exit cluster for composition (l. 31, 56), the loss-vs-depth
exponent α_ℓ ≈ 1 for ensemble averaging and rising to 3 for converged procedural assembly (l. 36,
45, 51-53), and a warning that under-training mimics the ensemble signature (l. 59). It gives no
numeric bounds for the signatures: the bounds below are ours or sourced elsewhere; each
:class:`Threshold` says which, and every verdict carries the table.

A mechanism is named only when every check passes and the signals agree; otherwise the verdict is
``undetermined`` and the reasons say which check failed or which signals disagree. In order:

1. *scope*: the caller may refuse the model (an encoder, a post-norm stream) with a reason;
2. *trained*: each model's summary must differ from the same architecture at initialisation,
   and, where losses are given, the loss must have fallen far below the loss at initialisation
   (hidden-state statistics alone move after a handful of Adam steps);
3. *converged*, where the caller gives an earlier late checkpoint: its summaries must agree with
   the final ones (one snapshot can mislead, l. 59); without one the reasons say it is untested;
4. *residual*: middle-layer step angles must be small (one stream updated in small steps);
5. *compositional*: an early-exit cluster holding ≥ 20 % of the tokens (deepest model);
6. *increments*, on the per-token distribution: at every depth most middle token increment
   pairs (Δh_l, Δh_{l+1}) are orthogonal (ensemble) or most are correlated (procedural); a mean
   angle is not enough (tokens at cos +0.9 and −0.9 average to π/2);
7. *1/ℓ*: models of at least two depths (a factor ≥ 2 apart) whose middle step angle scales as
   ℓ^s with s in [−1.5, −0.5];
8. *α_ℓ*, where KL losses of a depth sweep are given: the exponent of loss against depth must
   read the same mechanism as the increments.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Threshold:
    """One bound of the verdict: its value, the rule it enters and its source."""

    name: str
    value: float
    rule: str
    source: str


_LIU = "Liu et al. per seed 000 (a third-party summary of the paper)"
THRESHOLDS: dict[str, Threshold] = {
    t.name: t
    for t in (
        Threshold(
            "orthogonal_cos",
            0.3,
            "a token's increment pair is orthogonal when |cos θ(Δh_l, Δh_{l+1})| ≤ 0.3 "
            "(θ in [1.27, 1.88] rad)",
            f"{_LIU} l. 31, 58: 'nearly π/2'; the bound 0.3 is ours, set on the toy: students "
            "of the independent teacher trained 2,000-12,000 steps measure a mean |cos| ≤ 0.28",
        ),
        Threshold(
            "correlated_cos",
            0.5,
            "a token's increment pair is correlated when cos θ(Δh_l, Δh_{l+1}) ≥ 0.5 (θ ≤ π/3)",
            f"{_LIU} l. 14: 'neighboring updates correlated'; the bound 0.5 is ours",
        ),
        Threshold(
            "anticorrelated_cos",
            -0.3,
            "a token's increment pair is anti-correlated when cos θ(Δh_l, Δh_{l+1}) ≤ −0.3 "
            "(θ ≥ 1.88 rad), which matches neither signature",
            "ours (the mirror of the orthogonal band)",
        ),
        Threshold(
            "increment_share",
            0.75,
            "a model's increments are in a class when ≥ 75 % of its middle token increment "
            "pairs are (pooled over tokens and middle blocks; the spread is the standard "
            "deviation of the per-block shares); ensemble: orthogonal at every depth, "
            "procedural: correlated at every depth",
            "ours: three quarters, so that a half-and-half mixture is never one class",
        ),
        Threshold(
            "slope_low",
            -1.5,
            "slope s of log ⟨θ⟩_mid on log ℓ across depths ≥ −1.5",
            f"{_LIU} l. 31, 57: '⟨θ⟩ ∝ 1/ℓ' (s = −1); the band [−1.5, −0.5] is ours",
        ),
        Threshold(
            "slope_high",
            -0.5,
            "slope s of log ⟨θ⟩_mid on log ℓ across depths ≤ −0.5",
            f"{_LIU} l. 31, 57; the band is ours",
        ),
        Threshold(
            "depth_ratio",
            2.0,
            "the 1/ℓ test needs models of ≥ 2 depths, deepest/shallowest ≥ 2",
            "ours",
        ),
        Threshold(
            "early_exit_fraction",
            0.2,
            "an early-exit cluster holding ≥ 20 % of tokens (deepest model): compositional",
            f"{_LIU} l. 31, 56 (Pythia-410m: 0.4 % early exit); the bound 0.2 is ours",
        ),
        Threshold(
            "residual_theta",
            1.0,
            "middle-layer step angle ⟨θ⟩_mid < 1 rad: consecutive states are small updates of "
            "one residual stream",
            f"ours; {_LIU} l. 57: first/last steps ≈ π/2, middle steps shrink as 1/ℓ",
        ),
        Threshold(
            "init_theta_change",
            0.25,
            "trained: ⟨θ⟩_mid differs from the same architecture at initialisation by ≥ 25 % "
            "(relative), or cos θ(Δh) by ≥ 0.1",
            f"ours; {_LIU} l. 59 warn that under-training mimics the ensemble signature",
        ),
        Threshold(
            "init_cos_change",
            0.1,
            "trained: cos θ(Δh)_mid differs from the same architecture at initialisation by ≥ 0.1",
            "ours",
        ),
        Threshold(
            "kl_ratio",
            0.01,
            "trained, where a KL loss is given (the toy): KL ≤ 1 % of the same students' KL at "
            "initialisation",
            "ours, from the toy (width 32, teacher depth 128, τ = 1, batch 256): 100 Adam "
            "steps leave 12-23 % of the initial KL, 3,000 steps 0.1-0.4 %",
        ),
        Threshold(
            "nll_ratio",
            0.4,
            "trained, where a language-model loss is given: next-token NLL ≤ 40 % of the same "
            "architecture's NLL at initialisation (≈ ln V)",
            "Fahim & Karim, The Depth Delusion (seed 003), Table 6 (bundled as depth_delusion): "
            "all 30 trained decoders end at ≤ 4.332 nats with V = 50,257, i.e. ≤ 0.400 ln V; "
            "a 4-block width-32 Llama keeps 99.9 % of its initial NLL after 5 AdamW steps and "
            "91 % after 100 on a toy corpus",
        ),
        Threshold(
            "converged_theta",
            0.1,
            "converged, where an earlier late checkpoint is given: ⟨θ⟩_mid changes by ≤ 10 % "
            "(relative) between the two and each increment share by ≤ 0.1",
            f"ours; {_LIU} l. 59: a single training snapshot can mimic a mechanism",
        ),
        Threshold(
            "alpha_ensemble",
            1.5,
            "α_ℓ (slope of −log KL on log ℓ across the depth sweep) ≤ 1.5 reads ensemble",
            f"{_LIU} l. 36, 45, 51: α_ℓ ≈ 1 for ensemble averaging (LLMs: 1.2 ± 0.3); the bound "
            "is ours",
        ),
        Threshold(
            "alpha_procedural",
            2.0,
            "α_ℓ ≥ 2 reads procedural; between 1.5 and 2 reads neither",
            f"{_LIU} l. 36, 52-53: α_ℓ rises to 3 for converged procedural assembly; the bound "
            "is ours",
        ),
    )
}


def thresholds_table() -> list[dict]:
    """Return the verdict's thresholds as JSON-safe dicts (name, value, rule, source)."""
    return [asdict(t) for t in THRESHOLDS.values()]


def _t(name: str) -> float:
    return THRESHOLDS[name].value


def _cos(theta: float) -> float:
    return math.cos(theta) if math.isfinite(theta) else math.nan


def init_change(summary: dict, init: dict) -> dict:
    """How far one model's summary lies from the same architecture's at initialisation.

    Returns ``theta_change`` (|θ − θ₀| / max(θ, θ₀), 0 when both are 0), ``cos_change``
    (|cos θ(Δh) − cos θ₀(Δh)|; 1 when exactly one of them is undefined) and ``trained``.
    """
    th, th0 = summary["theta_mid"], init["theta_mid"]
    top = max(th, th0)
    theta_change = abs(th - th0) / top if top > 0 else 0.0
    c, c0 = _cos(summary["dtheta_mid"]), _cos(init["dtheta_mid"])
    if math.isnan(c) and math.isnan(c0):
        cos_change = 0.0
    elif math.isnan(c) or math.isnan(c0):
        cos_change = 1.0
    else:
        cos_change = abs(c - c0)
    trained = theta_change >= _t("init_theta_change") or cos_change >= _t("init_cos_change")
    return {"theta_change": theta_change, "cos_change": cos_change, "trained": bool(trained)}


#: Classes of one token's increment pair (Δh_l, Δh_{l+1}); a summary holds each class's share.
CLASSES = ("orthogonal", "correlated", "anti-correlated")


def share_key(cls: str) -> str:
    """Summary key of a class's share, e.g. ``share_anticorrelated``."""
    return "share_" + cls.replace("-", "")


def increment_indicators(dtheta) -> dict[str, np.ndarray]:
    """Per-token class indicators of increment angles: 1.0 or 0.0, NaN where undefined.

    Keys are :func:`share_key` of each of :data:`CLASSES`; their means are the classes' shares.
    """
    d = np.asarray(dtheta, dtype=np.float64)
    c = np.cos(d)
    masks = (
        np.abs(c) <= _t("orthogonal_cos"),
        c >= _t("correlated_cos"),
        c <= _t("anticorrelated_cos"),
    )
    return {
        share_key(k): np.where(np.isfinite(d), m.astype(np.float64), np.nan)
        for k, m in zip(CLASSES, masks, strict=True)
    }


def increment_class(summary: dict) -> str:
    """Class of one model's middle increments from its per-token shares (see the thresholds).

    ``"orthogonal"``, ``"correlated"`` or ``"anti-correlated"`` when that class holds at least
    the ``increment_share`` of the token pairs, ``"mixed"`` when none does, ``"undefined"``
    without shares.
    """
    shares = {k: summary.get(share_key(k), math.nan) for k in CLASSES}
    finite = {k: v for k, v in shares.items() if math.isfinite(v)}
    if not finite:
        return "undefined"
    best = max(finite, key=finite.get)
    return best if finite[best] >= _t("increment_share") else "mixed"


def _shares_text(s: dict) -> str:
    parts = [
        f"{s.get(share_key(k), math.nan):.0%} ± {s.get(share_key(k) + '_sd', math.nan):.0%} {k}"
        for k in CLASSES
    ]
    return f"ℓ={s['depth']}: " + ", ".join(parts) + f" (mean θ {s['dtheta_mid']:.2f} rad)"


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y on log x over the points where both are finite and > 0.

    NaN with fewer than two distinct usable x.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if np.unique(x[ok]).size < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def depth_exponent(losses, loss_kind: str) -> tuple[float, str]:
    """α_ℓ, the slope of −log KL on log ℓ across a depth sweep, or NaN and why it is untested."""
    if loss_kind != "kl":
        return math.nan, (
            "α_ℓ untested: a language model's NLL has an irreducible part that one loss per "
            "depth cannot separate"
        )
    pts = sorted((d, v[0]) for d, v in (losses or {}).items() if d and d > 0 and v[0] > 0)
    depths = [d for d, _ in pts]
    if len(set(depths)) < 2 or max(depths) < _t("depth_ratio") * min(depths):
        return math.nan, "α_ℓ untested: it needs KL losses of ≥ 2 depths a factor ≥ 2 apart"
    return -loglog_slope(*zip(*pts, strict=True)), ""


def depth_slope(summaries: dict) -> float:
    """Slope of log ⟨θ⟩_mid on log ℓ over the models (NaN with fewer than two usable depths)."""
    models = list(summaries.values())
    return loglog_slope([s["depth"] for s in models], [s["theta_mid"] for s in models])


def apply_rules(
    summaries, split, *, init, losses, loss_kind, refusal, previous=None
) -> tuple[str, list[str], dict]:
    """Run the checks of the module docstring; return (mechanism, reasons, evidence)."""
    depths = sorted(s["depth"] for s in summaries.values())
    reasons: list[str] = []
    evidence: dict = {"theta_mid_slope": depth_slope(summaries)}
    fails: list[str] = []
    if refusal:
        fails.append(f"not applicable: {refusal}")
    else:
        fails += _trained_checks(summaries, init, losses, loss_kind, evidence)
    converged = _convergence(summaries, previous, evidence)
    fails += [converged] if converged.startswith("not converged") else []
    theta_mid = {k: s["theta_mid"] for k, s in summaries.items()}
    big = [k for k, th in theta_mid.items() if not th < _t("residual_theta")]
    if big:
        fails.append(
            "not a residual stream of small updates: middle step angle ⟨θ⟩ = "
            + ", ".join(f"{theta_mid[k]:.2f}" for k in big)
            + f" rad ≥ {_t('residual_theta'):g} rad"
        )
    classes = {s["depth"]: increment_class(s) for s in summaries.values()}
    evidence["increments"] = classes
    shares = "; ".join(
        _shares_text(s) for s in sorted(summaries.values(), key=lambda s: s["depth"])
    )
    if fails:
        return "undetermined", fails + [f"middle token increment pairs: {shares}"], evidence
    frac = split["early_exit_fraction"]
    if frac >= _t("early_exit_fraction"):
        reasons.append(f"{frac:.0%} of tokens form an early-exit cluster (≥ 20 %)")
        return "compositional", reasons, evidence
    reasons.append(f"early-exit cluster holds {frac:.1%} of tokens (< 20 %)")
    kinds = set(classes.values())
    share = f"{_t('increment_share'):.0%}"
    if kinds in ({"orthogonal"}, {"correlated"}):
        candidate = "ensemble" if kinds == {"orthogonal"} else "procedural"
        reasons.append(
            f"at every depth ≥ {share} of the middle token increment pairs are "
            f"{kinds.pop()}: {shares}"
        )
    else:
        reasons.append(
            f"neighbouring increments match no signature (no class holds ≥ {share} of the "
            f"token pairs at every depth: {', '.join(f'ℓ={d}: {c}' for d, c in classes.items())}"
            f"): {shares}"
        )
        return "undetermined", reasons, evidence
    ok, line = _scaling_check(depths, evidence)
    reasons.append(line)
    agree, line = _alpha_check(candidate, losses, loss_kind, evidence)
    reasons.append(line)
    reasons.append(converged)
    return (candidate if ok and agree else "undetermined"), reasons, evidence


def _alpha_check(candidate: str, losses, loss_kind: str, evidence: dict) -> tuple[bool, str]:
    """Whether α_ℓ (where measurable) reads the same mechanism as the increments."""
    alpha, why = depth_exponent(losses, loss_kind)
    evidence["alpha_depth"] = alpha
    if not math.isfinite(alpha):
        return True, why
    lo, hi = _t("alpha_ensemble"), _t("alpha_procedural")
    reads = "ensemble" if alpha <= lo else "procedural" if alpha >= hi else "neither"
    bands = f"ensemble ≤ {lo:g}, procedural ≥ {hi:g}; seed 000: ≈ 1 and → 3"
    if reads == candidate:
        return True, f"loss against depth: α_ℓ = {alpha:.2f} reads {reads} too ({bands})"
    return False, (
        f"the signals disagree: the increments read {candidate}, the loss against depth "
        f"(α_ℓ = {alpha:.2f}) reads {reads} ({bands})"
    )


def _convergence(summaries, previous, evidence: dict) -> str:
    """Compare the summaries with an earlier late checkpoint's, in words."""
    if previous is None:
        return (
            "convergence untested: no earlier late checkpoint was given (a single snapshot can "
            "mimic a mechanism)"
        )
    bound = _t("converged_theta")
    changes, moved = {}, []
    for key, s in summaries.items():
        p = previous.get(key, previous.get(s["depth"]))
        if p is None:
            moved.append(f"ℓ={s['depth']}: no earlier checkpoint")
            continue
        top = max(s["theta_mid"], p["theta_mid"])
        theta = abs(s["theta_mid"] - p["theta_mid"]) / top if top > 0 else 0.0
        share = max(
            (abs(s.get(k, math.nan) - p.get(k, math.nan)) for k in map(share_key, CLASSES)),
            key=lambda v: -1.0 if math.isnan(v) else v,
        )
        changes[s["depth"]] = {"theta_change": theta, "share_change": share}
        if not (theta <= bound and not share > bound):
            moved.append(f"ℓ={s['depth']}: ⟨θ⟩ moved {theta:.0%}, a share by {share:.2f}")
    evidence["convergence"] = changes
    if moved:
        return (
            "not converged between the two late checkpoints (need ≤ 10 % and ≤ 0.1; a single "
            "snapshot can mimic a mechanism): " + "; ".join(moved)
        )
    return "converged: the two late checkpoints agree (⟨θ⟩ within 10 %, shares within 0.1)"


def _trained_checks(summaries, init, losses, loss_kind, evidence) -> list[str]:
    if init is None:
        return [
            "no reference at initialisation was given, so a trained model cannot be told "
            "from an untrained one"
        ]
    fails = []
    changes = {}
    for key, s in summaries.items():
        ref = init.get(key, init.get(s["depth"])) if isinstance(init, dict) else None
        if ref is None:
            fails.append(f"no reference at initialisation for depth {s['depth']}")
            continue
        changes[s["depth"]] = init_change(s, ref)
    evidence["init_change"] = changes
    same = [d for d, c in changes.items() if not c["trained"]]
    if same:
        detail = "; ".join(
            f"ℓ={d}: ⟨θ⟩ changed {changes[d]['theta_change']:.0%}, cos θ(Δh) by "
            f"{changes[d]['cos_change']:.2f}"
            for d in same
        )
        fails.append(
            "indistinguishable from the same architecture at initialisation (untrained or "
            f"barely trained; need ≥ 25 % or ≥ 0.1): {detail}"
        )
    if losses:
        bound = _t(f"{loss_kind}_ratio")
        ratios = {d: loss / loss0 for d, (loss, loss0) in losses.items() if loss0 > 0}
        evidence["loss_ratio"] = ratios
        short = {d: r for d, r in ratios.items() if not r <= bound}
        if short:
            detail = ", ".join(f"ℓ={d}: {r:.1%}" for d, r in sorted(short.items()))
            fails.append(
                f"under-trained: the {loss_kind.upper()} is still above {bound:.0%} of its "
                f"value at initialisation ({detail}); Liu et al. (seed 000 l. 59) warn that "
                "under-training mimics a signature"
            )
    return fails


def _scaling_check(depths, evidence) -> tuple[bool, str]:
    if len(set(depths)) < 2 or max(depths) < _t("depth_ratio") * min(depths):
        return False, (
            f"the ⟨θ⟩ ∝ 1/ℓ signature is untested: it needs models of ≥ 2 depths a factor ≥ 2 "
            f"apart, got depth(s) {sorted(set(depths))}"
        )
    slope = evidence["theta_mid_slope"]
    if _t("slope_low") <= slope <= _t("slope_high"):
        return True, f"middle step angle scales as ℓ^{slope:.2f} (1/ℓ: −1; accepted [−1.5, −0.5])"
    return False, (
        f"middle step angle scales as ℓ^{slope:.2f}, not as 1/ℓ (accepted [−1.5, −0.5]): "
        "the steps do not shrink with depth as both signatures require"
    )
