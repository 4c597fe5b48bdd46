"""Early-exit split (PCA of per-token angle vectors) and the mechanism verdict with its evidence.

Liu et al.'s three candidate mechanisms and their hidden-state signatures:

- *ensemble averaging*: middle-layer step angles shrink like 1/ℓ and neighbouring increments are
  nearly orthogonal (θ(Δh_l, Δh_{l+1}) ≈ π/2);
- *procedural* (smooth, ODE-like): step angles shrink like 1/ℓ and neighbouring increments are
  correlated (θ(Δh_l, Δh_{l+1}) well below π/2);
- *compositional*: tokens stop updating at different depths (early exit), which shows as a
  separate cluster in the PCA of per-token angle vectors.

The verdict names a mechanism only when the evidence agrees: the model is trained (it differs
from the same architecture at initialisation), its stream is residual, and either an early-exit
cluster is large or, at every depth, most token increment pairs fall in one class *and* the
middle step angle shrinks as 1/ℓ across depths *and* (where KL losses of a depth sweep are given)
the loss-vs-depth exponent α_ℓ reads the same mechanism. Otherwise it says ``undetermined`` and
why. The rules, their thresholds and their sources are in :mod:`scalefit.probes._verdict`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core._io import _json_safe
from ..core._validation import Options, validate
from ..core.errors import ScaleFitError
from ._verdict import apply_rules, thresholds_table
from .angles import nanmean_rows, summarize_states, token_angles


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
        "profile_early": nanmean_rows(theta[is_early].T),  # NaN for an empty group
        "profile_uniform": nanmean_rows(theta[~is_early].T),
    }


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
    """A mechanism verdict, the evidence it rests on and the thresholds it used.

    Attributes
    ----------
    mechanism : str
        ``"ensemble"``, ``"procedural"``, ``"compositional"`` or ``"undetermined"``.
    evidence : dict
        The measured numbers (per-depth summaries, slope across depths, increment classes,
        change from initialisation, early-exit fraction).
    reasons : list of str
        One sentence per check; for ``"undetermined"`` the first ones say what failed.
    thresholds : list of dict
        Every bound the rules use, with the rule and its source (see
        :data:`scalefit.probes._verdict.THRESHOLDS`).
    """

    mechanism: str
    evidence: dict = field(default_factory=dict)
    reasons: list = field(default_factory=list)
    thresholds: list = field(default_factory=thresholds_table)

    def report(self, *, thresholds: bool = True) -> str:
        """Return a text report: the mechanism, the reasons and (by default) the thresholds."""
        lines = [f"mechanism: {self.mechanism}"] + [f"  - {r}" for r in self.reasons]
        if thresholds:
            lines.append("  thresholds (ours unless a source is named; sources in to_dict()):")
            lines += [f"    {t['rule']}" for t in self.thresholds]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Return a JSON-safe dict."""
        return {
            "mechanism": self.mechanism,
            "evidence": _json_safe(self.evidence),
            "reasons": list(self.reasons),
            "thresholds": list(self.thresholds),
        }


def mechanism_verdict(
    states_by_depth, *, init=None, losses=None, loss_kind: str = "kl", refusal=None, previous=None
) -> Verdict:
    """Read the mechanism off the hidden states of one or more trained models, or abstain.

    Parameters
    ----------
    states_by_depth : array-like or dict
        One model's states, or ``{depth: states}`` for models of several depths trained on the
        same task. Ensemble and procedural verdicts need at least two depths (the ⟨θ⟩ ∝ 1/ℓ
        signature is measured across depths).
    init : array-like or dict, optional
        The same architecture(s) at initialisation: states (or :func:`summarize_states` dicts),
        keyed like ``states_by_depth``. Without it the verdict is ``undetermined``: a random or
        barely trained model can show either increment signature.
    losses : dict, optional
        ``{depth: (loss, loss_at_init)}``; when given, a model must have brought its loss far
        below the loss at initialisation (see :data:`~scalefit.probes._verdict.THRESHOLDS`).
        KL losses of depths a factor ≥ 2 apart also give α_ℓ, which must read the same
        mechanism as the increments.
    loss_kind : {"kl", "nll"}
        ``"kl"``: a divergence that can reach 0 (the toy; bound 1 %); ``"nll"``: a language
        model's cross-entropy (bound 40 %).
    refusal : str, optional
        A reason the signatures do not apply to this model (an encoder, a post-norm stream);
        the verdict is then ``undetermined`` with this reason first.
    previous : array-like or dict, optional
        The same models at an earlier late checkpoint (states or summaries, keyed like
        ``states_by_depth``): the verdict abstains unless both checkpoints agree. Without it
        the reasons say convergence is untested.

    Returns
    -------
    Verdict
        See :mod:`scalefit.probes._verdict` for the checks, in order, and their thresholds.

    Examples
    --------
    >>> v = mechanism_verdict({8: states8, 16: states16}, init={8: init8, 16: init16})
    ... # doctest: +SKIP
    >>> v.mechanism  # doctest: +SKIP
    'ensemble'
    """
    single = not isinstance(states_by_depth, dict)
    if single:
        states_by_depth = {None: states_by_depth}
    summaries = {}
    for key, states in states_by_depth.items():
        s = summarize_states(states)
        summaries[int(s["depth"]) if key is None else key] = s
    first = next(iter(summaries))
    refs = {}
    for name, ref in (("init", init), ("previous", previous)):
        if ref is not None:
            ref = {None: ref} if single else ref
            refs[name] = {
                (first if k is None else k): (v if isinstance(v, dict) else summarize_states(v))
                for k, v in ref.items()
            }
    deepest = max(summaries, key=lambda k: summaries[k]["depth"])
    split = early_exit_split(states_by_depth[None if single else deepest])
    return verdict_from_evidence(
        summaries, split, losses=losses, loss_kind=loss_kind, refusal=refusal, **refs
    )


def verdict_from_evidence(
    summaries: dict,
    split: dict,
    *,
    init=None,
    losses=None,
    loss_kind: str = "kl",
    refusal=None,
    previous=None,
) -> Verdict:
    """Apply the verdict's checks to already reduced evidence.

    Parameters
    ----------
    summaries : dict
        ``{key: summary}`` with the dicts of :func:`~scalefit.probes.summarize_states` (or
        :func:`~scalefit.probes.angles.summarize_table`), one per model.
    split : dict
        The deepest model's early-exit split (:func:`early_exit_split` or
        :func:`split_token_angles`).
    init : dict, optional
        ``{key: summary}`` of the same architectures at initialisation (keys as in
        ``summaries``, or depths).
    previous : dict, optional
        ``{key: summary}`` of the same models at an earlier late checkpoint.
    losses, loss_kind, refusal
        As in :func:`mechanism_verdict`.

    Returns
    -------
    Verdict
        The mechanism (or ``"undetermined"``), its evidence, the reasons and the thresholds.
    """
    validate("verdict_from_evidence", locals(), {"loss_kind": [Options({"kl", "nll"})]})
    mechanism, reasons, extra = apply_rules(
        summaries,
        split,
        init=init,
        losses=losses,
        loss_kind=loss_kind,
        refusal=refusal,
        previous=previous,
    )
    evidence = {
        "summaries": summaries,
        "early_exit_fraction": split["early_exit_fraction"],
        "split_separation": split["separation"],
        "dtheta_mid": float(nanmean_rows(np.array([s["dtheta_mid"] for s in summaries.values()]))),
        **extra,
    }
    return Verdict(mechanism, evidence, reasons)
