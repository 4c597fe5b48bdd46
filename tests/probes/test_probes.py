import math

import numpy as np
import pytest

from scalefit.core.errors import ScaleFitError
from scalefit.probes import (
    angle,
    as_states,
    early_exit_split,
    layer_table,
    mechanism_verdict,
    middle_layers,
    summarize_states,
    token_angles,
)


def _circle(depth: int, step: float, tokens: int = 8, width: int = 6, seed: int = 0):
    """States rotating by a fixed angle per layer in a random plane per token (smooth path)."""
    rng = np.random.default_rng(seed)
    states = np.empty((depth + 1, tokens, width))
    for t in range(tokens):
        q, _ = np.linalg.qr(rng.standard_normal((width, 2)))
        for layer in range(depth + 1):
            phi = layer * step
            states[layer, t] = 3.0 * (np.cos(phi) * q[:, 0] + np.sin(phi) * q[:, 1])
    return states


def _random_walk(depth: int, tokens: int = 200, width: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((depth, tokens, width)) / math.sqrt(depth)
    h0 = rng.standard_normal((1, tokens, width))
    return np.concatenate([h0, h0 + np.cumsum(steps, axis=0)])


def test_angle_is_accurate_at_tiny_and_large_angles():
    for theta in (1e-7, 1e-3, 0.5, math.pi / 2, 3.0):
        a = np.array([1.0, 0.0, 0.0])
        b = np.array([math.cos(theta), math.sin(theta), 0.0]) * 7.0
        assert float(angle(a, b)) == pytest.approx(theta, rel=1e-9)
    assert np.isnan(angle(np.zeros(3), np.ones(3)))


def test_layer_table_on_a_known_rotation():
    step = 0.05
    table = layer_table(_circle(10, step))
    assert list(table["layer"]) == list(range(11))
    assert np.allclose(table["theta"][:-1], step, rtol=1e-9)
    assert np.isnan(table["theta"].iloc[-1])
    assert np.allclose(table["dtheta"][:-2], step, rtol=1e-6)  # increments of a circle turn too
    assert np.allclose(table["angle_to_final"], step * (10 - np.arange(11)), rtol=1e-9)
    assert np.allclose(table["norm"], 3.0)
    assert np.allclose(table["angular_distance"][:-1], step / math.pi)


def test_random_walk_increments_are_orthogonal_and_angles_shrink_with_depth():
    s16, s64 = (summarize_states(_random_walk(d)) for d in (16, 64))
    assert abs(s16["dtheta_mid"] - math.pi / 2) < 0.1
    assert abs(s64["dtheta_mid"] - math.pi / 2) < 0.1
    assert s64["theta_mid"] < s16["theta_mid"] / 1.7  # ~ 1/sqrt(depth) step, angle ~ 1/√ℓ·...


def test_torch_float32_input_is_upcast_and_matches_numpy():
    torch = pytest.importorskip("torch")
    states = _random_walk(8, tokens=16, width=8).astype(np.float32)
    from_torch = layer_table(torch.from_numpy(states))
    from_numpy = layer_table(states.astype(np.float64))
    assert as_states(torch.from_numpy(states)).dtype == np.float64
    assert np.allclose(from_torch["theta"][:-1], from_numpy["theta"][:-1], rtol=1e-12)
    listed = layer_table(list(torch.from_numpy(states)))
    assert np.allclose(listed["theta"][:-1], from_numpy["theta"][:-1], rtol=1e-12)


def test_token_angles_shape_and_middle_layers():
    assert token_angles(_circle(5, 0.1, tokens=3)).shape == (3, 5)
    assert middle_layers(6) == slice(1, 5)
    assert middle_layers(1) == slice(0, 1)
    assert middle_layers(48) == slice(12, 36)


def _early_exit_states(frac: float, depth: int = 24, tokens: int = 400, seed: int = 1):
    """A fraction of tokens stops updating after depth/3 blocks; the rest keep walking."""
    states = _random_walk(depth, tokens=tokens, seed=seed)
    n_early = int(frac * tokens)
    stop = depth // 3
    states[stop + 1 :, :n_early] = states[stop, :n_early]
    return states, n_early


def test_early_exit_split_finds_the_cluster():
    states, n_early = _early_exit_states(0.3)
    split = early_exit_split(states)
    assert split["separated"]
    assert split["early_exit_fraction"] == pytest.approx(0.3, abs=0.02)
    assert split["labels"][:n_early].mean() > 0.95
    assert split["profile_early"][-1] < 0.1 * split["profile_uniform"][-1]


def test_early_exit_split_reports_none_for_uniform_tokens():
    split = early_exit_split(_random_walk(24, tokens=400))
    assert not split["separated"]
    assert split["early_exit_fraction"] == 0.0


def test_verdicts_for_the_three_signatures():
    def at_init(states):  # zero-initialised branches: every state is h_0
        return np.repeat(states[:1], len(states), axis=0)

    def shrinking_walk(depth):  # steps ∝ 1/ℓ, independent directions
        walk = _random_walk(depth, seed=depth)
        return walk[:1] + (walk - walk[:1]) / math.sqrt(depth)

    walks = {d: shrinking_walk(d) for d in (8, 16, 32)}
    ensemble = mechanism_verdict(walks, init={d: at_init(s) for d, s in walks.items()})
    assert ensemble.mechanism == "ensemble"
    assert ensemble.evidence["theta_mid_slope"] < -0.8
    assert "orthogonal" in ensemble.report()
    circles = {d: _circle(d, 1.0 / d, tokens=50) for d in (8, 16, 32)}
    procedural = mechanism_verdict(circles, init={d: at_init(s) for d, s in circles.items()})
    assert procedural.mechanism == "procedural"
    assert procedural.evidence["theta_mid_slope"] == pytest.approx(-1.0, abs=1e-6)
    states = _early_exit_states(0.4)[0]
    compositional = mechanism_verdict(states, init=at_init(states))
    assert compositional.mechanism == "compositional"
    assert compositional.to_dict()["evidence"]["early_exit_fraction"] > 0.35
    # without a reference at initialisation nothing is named
    assert mechanism_verdict(walks).mechanism == "undetermined"


def test_teacher_increments_show_but_a_random_teacher_gets_no_verdict():
    torch = pytest.importorskip("torch")
    from scalefit.sim import ToyConfig
    from scalefit.sim.model import Teacher

    x = torch.randn(256, 32, generator=torch.Generator().manual_seed(0))
    for mode, expected in (("independent", "orthogonal"), ("tied", "correlated")):
        states = Teacher(ToyConfig(teacher_mode=mode, teacher_depth=64)).hidden(x, all_states=True)
        other = Teacher(ToyConfig(teacher_mode=mode, teacher_depth=64, seed=1))
        verdict = mechanism_verdict(states, init=other.hidden(x, all_states=True))
        assert verdict.mechanism == "undetermined"  # a random network, never trained
        assert "initialisation" in verdict.reasons[0]
        assert verdict.evidence["increments"] == {64: expected}


def test_capture_residual_states_with_hooks():
    torch = pytest.importorskip("torch")
    from _sim_baseline import PlainNet

    from scalefit.probes import capture_residual_states
    from scalefit.sim.model import rmsnorm

    torch.manual_seed(0)
    net = PlainNet(depth=5, width=8, classes=4)
    x = torch.randn(3, 7, 8)  # (batch, sequence, width): flattened into 21 tokens
    states = capture_residual_states(net, net.blocks, x)
    assert states.shape == (6, 21, 8) and states.dtype == torch.float32
    h = rmsnorm(x)
    with torch.no_grad():
        for block in net.blocks:
            h = block(h)
    assert torch.allclose(states[-1], h.reshape(-1, 8))
    assert not net.blocks[0]._forward_pre_hooks  # hooks removed


@pytest.mark.parametrize(
    ("states", "match"),
    [
        (np.zeros((1, 4, 3)), "at least 2"),
        (np.zeros((3, 4, 3, 2)), "shape"),
        (np.full((3, 4, 3), np.nan), "NaN"),
    ],
)
def test_bad_states_raise(states, match):
    with pytest.raises(ScaleFitError, match=match):
        layer_table(states)


def test_early_exit_needs_tokens():
    with pytest.raises(ScaleFitError, match="4 tokens"):
        early_exit_split(np.random.default_rng(0).standard_normal((5, 2, 3)))
