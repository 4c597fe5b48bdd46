"""Known-answer tests of the mechanism verdict on constructed hidden states: it names a mechanism
only when every signature agrees, and abstains (with the reason) on the negative controls."""

import json
import math
import warnings

import numpy as np
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.probes import mechanism_verdict, summarize_states
from scalefit.probes._verdict import THRESHOLDS, increment_class

DEPTHS = (8, 16, 32)


def _walk(depth, scale, *, tokens=200, width=64, seed=0):
    """h_l = h_0 + Σ independent Gaussian steps of size ``scale`` (a random walk)."""
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((depth, tokens, width)) * scale / math.sqrt(width)
    h0 = 3.0 * rng.standard_normal((1, tokens, width)) / math.sqrt(width)
    return np.concatenate([h0, h0 + np.cumsum(steps, axis=0)])


def _turning(depth, turn, step, *, tokens=100, width=16, seed=0):
    """Increments of size ``step`` that turn by ``turn`` rad from one block to the next."""
    rng = np.random.default_rng(seed)
    states = np.empty((depth + 1, tokens, width))
    for t in range(tokens):
        q, _ = np.linalg.qr(rng.standard_normal((width, 3)))
        h = 3.0 * q[:, 2]
        states[0, t] = h
        for layer in range(depth):
            phi = layer * turn
            h = h + step * (math.cos(phi) * q[:, 0] + math.sin(phi) * q[:, 1])
            states[layer + 1, t] = h
    return states


def _at_init(states):
    """The same residual architecture with zero-initialised branches: every state equals h_0."""
    return np.repeat(np.asarray(states)[:1], len(states), axis=0)


def _why(verdict) -> str:
    return " ".join(verdict.reasons)


def _verdict(make, **kw):
    states = {d: make(d) for d in DEPTHS}
    return mechanism_verdict(states, init={d: _at_init(s) for d, s in states.items()}, **kw)


def test_ensemble_needs_orthogonal_increments_and_one_over_depth_steps():
    v = _verdict(lambda d: _walk(d, 1.0 / d, seed=d))
    assert v.mechanism == "ensemble"
    assert v.evidence["theta_mid_slope"] == pytest.approx(-1.0, abs=0.1)
    assert set(v.evidence["increments"].values()) == {"orthogonal"}
    assert "of the middle token increment pairs are orthogonal" in _why(v)
    assert all(s["share_orthogonal"] > 0.95 for s in v.evidence["summaries"].values())


def test_procedural_needs_correlated_increments_and_one_over_depth_steps():
    v = _verdict(lambda d: _turning(d, 0.5 / d, 1.0 / d))
    assert v.mechanism == "procedural"
    assert v.evidence["theta_mid_slope"] == pytest.approx(-1.0, abs=0.05)


def test_anti_parallel_increments_are_not_read_as_orthogonal():
    # θ(Δh_l, Δh_{l+1}) = 3.0 rad exactly, steps shrinking as 1/ℓ: only the increments disagree
    v = _verdict(lambda d: _turning(d, 3.0, 1.0 / d))
    dtheta = [s["dtheta_mid"] for s in v.evidence["summaries"].values()]
    assert dtheta == pytest.approx([3.0] * 3, abs=1e-9)
    assert v.mechanism == "undetermined"
    assert set(v.evidence["increments"].values()) == {"anti-correlated"}
    assert "match no signature" in _why(v) and "anti-correlated" in _why(v)


@pytest.mark.parametrize("scale", [0.1, "sqrt"])
def test_random_walk_without_one_over_depth_shrink_is_undetermined(scale):
    # fixed steps (no shrink) or steps ∝ 1/√ℓ (the toy teacher's scaling): orthogonal increments
    # but the middle step angle does not fall as 1/ℓ
    v = _verdict(lambda d: _walk(d, 0.1 if scale == 0.1 else 1 / math.sqrt(d), seed=d))
    assert set(v.evidence["increments"].values()) == {"orthogonal"}
    assert v.mechanism == "undetermined"
    assert v.evidence["theta_mid_slope"] > -0.55
    assert "not as 1/ℓ" in _why(v)


def test_no_reference_at_initialisation_means_no_verdict():
    states = {d: _walk(d, 1.0 / d, seed=d) for d in DEPTHS}
    v = mechanism_verdict(states)
    assert v.mechanism == "undetermined"
    assert "no reference at initialisation" in v.reasons[0]


def test_states_equal_to_their_initialisation_are_undetermined():
    states = {d: _walk(d, 1.0 / d, seed=d) for d in DEPTHS}
    other = {d: _walk(d, 1.0 / d, seed=d + 100) for d in DEPTHS}  # another draw, same law
    v = mechanism_verdict(states, init=other)
    assert v.mechanism == "undetermined"
    assert "indistinguishable from the same architecture at initialisation" in v.reasons[0]
    assert all(not c["trained"] for c in v.evidence["init_change"].values())


def test_losses_far_from_converged_are_under_trained():
    losses = {d: (0.02, 0.16) for d in DEPTHS}  # 12.5 % of the initial KL
    v = _verdict(lambda d: _walk(d, 1.0 / d, seed=d), losses=losses)
    assert v.mechanism == "undetermined"
    assert "under-trained" in v.reasons[0] and "12.5%" in v.reasons[0]
    ok = {d: (1e-4, 0.16) for d in DEPTHS}
    assert _verdict(lambda d: _walk(d, 1.0 / d, seed=d), losses=ok).mechanism == "ensemble"
    with pytest.raises(ScaleFitError, match="'loss_kind' parameter"):
        _verdict(lambda d: _walk(d, 1.0 / d, seed=d), losses=ok, loss_kind="mse")


def test_one_depth_cannot_test_the_one_over_depth_signature():
    states = _walk(16, 1.0 / 16)
    v = mechanism_verdict(states, init=_at_init(states))
    assert v.mechanism == "undetermined"
    assert "untested" in _why(v) and "pairs are orthogonal" in _why(v)


def test_refusal_and_non_residual_streams():
    states = {d: _walk(d, 1.0 / d, seed=d) for d in DEPTHS}
    init = {d: _at_init(s) for d, s in states.items()}
    v = mechanism_verdict(states, init=init, refusal="an encoder")
    assert v.mechanism == "undetermined" and v.reasons[0] == "not applicable: an encoder"
    # consecutive states unrelated (a plain, non-residual stack): not one residual stream
    rng = np.random.default_rng(0)
    plain = {d: rng.standard_normal((d + 1, 100, 32)) for d in DEPTHS}
    v = mechanism_verdict(plain, init={d: _at_init(s) for d, s in plain.items()})
    assert v.mechanism == "undetermined" and "not a residual stream" in _why(v)


def test_compositional_from_an_early_exit_cluster():
    rng = np.random.default_rng(0)
    depth, tokens, width = 12, 200, 16
    h = np.empty((depth + 1, tokens, width))
    h[0] = rng.standard_normal((tokens, width))
    early = np.arange(tokens) < 80  # 40 % stop updating after a third of the blocks
    for layer in range(depth):
        step = 0.15 * rng.standard_normal((tokens, width))
        if layer >= depth // 3:
            step[early] *= 1e-3
        h[layer + 1] = h[layer] + step
    v = mechanism_verdict(h, init=_at_init(h))
    assert v.mechanism == "compositional"
    assert v.evidence["early_exit_fraction"] == pytest.approx(0.4, abs=0.05)


def test_thresholds_and_sources_travel_with_the_verdict():
    v = _verdict(lambda d: _walk(d, 1.0 / d, seed=d))
    data = json.loads(json.dumps(v.to_dict()))
    names = {t["name"] for t in data["thresholds"]}
    assert names == set(THRESHOLDS)
    assert all(t["source"] for t in data["thresholds"])
    assert "seed 000" in THRESHOLDS["orthogonal_cos"].source
    assert "thresholds" in v.report() and "|cos θ(Δh_l, Δh_{l+1})| ≤ 0.3" in v.report()
    assert data["evidence"]["summaries"]["8"]["depth"] == 8


def test_summaries_of_zero_increments_are_nan_without_warnings():
    states = _at_init(_walk(8, 0.1))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        s = summarize_states(states)
    assert not record and s["theta_mid"] == 0.0 and math.isnan(s["dtheta_mid"])


# ---- issue 39: the per-token distribution, convergence, α_ℓ, the LM bound ---------------------


def _mixture(depth, *, tokens=200, seed=0):
    """Half the tokens turn by arccos(+0.9) per block, half by arccos(−0.9); steps ∝ 1/ℓ."""
    plus = _turning(depth, math.acos(0.9), 1.0 / depth, tokens=tokens // 2, seed=seed)
    minus = _turning(depth, math.acos(-0.9), 1.0 / depth, tokens=tokens // 2, seed=seed + 1)
    return np.concatenate([plus, minus], axis=1)


def test_a_half_and_half_mixture_is_not_read_from_its_mean_angle():
    """cos +0.9 and −0.9 average to θ = π/2, the ensemble's mean; the tokens are not orthogonal."""
    v = _verdict(_mixture)
    for s in v.evidence["summaries"].values():
        assert s["dtheta_mid"] == pytest.approx(math.pi / 2, abs=1e-6)  # the mean looks orthogonal
        assert s["share_orthogonal"] == 0.0
        assert s["share_correlated"] == pytest.approx(0.5)
        assert s["share_anticorrelated"] == pytest.approx(0.5)
        assert s["share_correlated_sd"] == pytest.approx(0.0)
    assert v.mechanism == "undetermined"
    assert set(v.evidence["increments"].values()) == {"mixed"}
    assert "match no signature" in _why(v) and "50% ± 0% correlated" in _why(v)


def test_increment_class_reads_the_shares():
    share = THRESHOLDS["increment_share"].value
    assert increment_class({"share_orthogonal": share, "share_correlated": 0.1}) == "orthogonal"
    assert increment_class({"share_orthogonal": 0.5, "share_anticorrelated": 0.5}) == "mixed"
    assert increment_class({"dtheta_mid": math.pi / 2}) == "undefined"  # a mean alone: no class


def _kl_sweep(alpha):
    return {d: (1e-3 * (8 / d) ** alpha, 4.0) for d in DEPTHS}


def test_loss_against_depth_must_read_the_same_mechanism():
    walk = lambda d: _walk(d, 1.0 / d, seed=d)  # noqa: E731 - ensemble increments
    agree = _verdict(walk, losses=_kl_sweep(1.0))
    assert agree.mechanism == "ensemble"
    assert agree.evidence["alpha_depth"] == pytest.approx(1.0)
    assert "α_ℓ = 1.00 reads ensemble too" in _why(agree)
    clash = _verdict(walk, losses=_kl_sweep(3.0))
    assert clash.mechanism == "undetermined"
    assert "the signals disagree" in _why(clash) and "α_ℓ = 3.00) reads procedural" in _why(clash)
    between = _verdict(walk, losses=_kl_sweep(1.7))
    assert between.mechanism == "undetermined" and "reads neither" in _why(between)
    # an NLL has an irreducible part: α_ℓ is not read from it, and the verdict says so
    nll = _verdict(walk, losses={d: (1.0, 10.8) for d in DEPTHS}, loss_kind="nll")
    assert math.isnan(nll.evidence["alpha_depth"]) and "α_ℓ untested" in _why(nll)


def test_two_late_checkpoints_must_agree():
    states = {d: _walk(d, 1.0 / d, seed=d) for d in DEPTHS}
    init = {d: _at_init(s) for d, s in states.items()}
    same = mechanism_verdict(states, init=init, previous=states)
    assert same.mechanism == "ensemble" and "converged: the two late checkpoints agree" in _why(
        same
    )
    earlier = {d: _walk(d, 2.0 / d, seed=d) for d in DEPTHS}  # steps twice as large
    moving = mechanism_verdict(states, init=init, previous=earlier)
    assert moving.mechanism == "undetermined"
    assert moving.reasons[0].startswith("not converged between the two late checkpoints")
    assert all(c["theta_change"] > 0.4 for c in moving.evidence["convergence"].values())
    alone = mechanism_verdict(states, init=init)
    assert alone.mechanism == "ensemble" and "convergence untested" in _why(alone)


def test_the_language_model_bound_is_stricter_and_sourced():
    bound = THRESHOLDS["nll_ratio"]
    assert bound.value == 0.4 and "Depth Delusion" in bound.source
    walk = lambda d: _walk(d, 1.0 / d, seed=d)  # noqa: E731
    half = _verdict(walk, losses={d: (0.5 * 10.8, 10.8) for d in DEPTHS}, loss_kind="nll")
    assert half.mechanism == "undetermined" and "under-trained: the NLL" in half.reasons[0]


def test_citations_name_seed_000_as_a_third_party_summary():
    for t in THRESHOLDS.values():
        if "seed 000" in t.source:
            assert "third-party summary" in t.source
