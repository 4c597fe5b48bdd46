import math

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture
from train_support import make_corpus as _make_corpus  # noqa: E402

from scalefit.train.data import build_tokens  # noqa: E402
from scalefit.train.diagnostics import (  # noqa: E402
    COLUMNS,
    METRICS,
    diagnose,
    grad_decay_rate,
    grad_decay_tau,
    hidden_state_metrics,
    layer_gradients,
    mechanism_summary,
    tau_width_exponent,
)
from scalefit.train.loop import config_from_dict, train  # noqa: E402


def make_corpus(folder):
    return _make_corpus(
        folder,
        vocab=["now", "is", "the", "winter", "of", "our", "discontent", "made", "glorious"],
        n_docs=4,
        words=3000,
        seed=2,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("diag")
    tokens = build_tokens(make_corpus(root / "c"), root / "t", val_fraction=0.25)
    cfg = config_from_dict(
        dict(
            data=str(tokens),
            depth=3,
            width=32,
            seq_len=32,
            batch_size=8,
            tokens=8 * 32 * 20,
            eval_tokens=1024,
            seed=0,
        )
    )
    return train(cfg)


def test_diagnose_produces_the_documented_columns_and_metrics(trained):
    frame = diagnose(trained.model, trained.data, eval_tokens=512, batch_size=8)
    assert list(frame.columns) == COLUMNS
    assert set(frame["metric"]) == set(METRICS)
    for metric, rows in frame.groupby("metric"):
        expected = [2, 3] if metric == "increment_angle" else [1, 2, 3]
        assert sorted(rows["layer"]) == expected, metric
    assert np.isfinite(frame["value"]).all()
    ad = frame[frame.metric.str.startswith("angular_distance")]["value"]
    assert ((ad >= 0) & (ad <= 1)).all()
    for kind in ("hidden", "params"):
        rel = frame[frame.metric == f"grad_norm_{kind}_rel"].set_index("layer")["value"]
        assert rel[3] == pytest.approx(1.0)
    cr = frame[frame.metric == "cr"]["value"]
    assert ((cr >= 0) & (cr <= 1)).all()
    assert (frame[frame.metric == "cr_debiased"]["value"] <= cr.to_numpy() + 1e-9).all()
    assert (frame[frame.metric == "prune_drop"]["value"] > 0).any()
    summary = mechanism_summary(trained.model, next(iter(trained.data.val_batches(256, 4)))[0])
    assert {"probe_theta_mid", "probe_dtheta_mid"} <= set(summary)


def test_hidden_state_gradient_is_the_gradient_with_respect_to_the_block_output(trained):
    """Depth Delusion's ‖∇_l L‖ (seed 003, Eq. 2): rerun blocks l+1…D from a leaf copy of h_l and
    differentiate the loss with respect to that leaf; the parameter-gradient norm differs."""
    model, data = trained.model, trained.data
    x, y = data.batch(0, 4)
    got = layer_gradients(model, x, y)
    assert got["hidden"].shape == got["params"].shape == (model.cfg.depth,)
    with torch.no_grad():
        hidden = model(x, return_hidden=True).hidden
    for layer in (1, 2, 3):
        h = hidden[layer].clone().requires_grad_(True)
        out = h
        for block in model.blocks[layer:]:
            out = block(out, model.rope_cos, model.rope_sin)
        logits = model.head(model.norm_f(out))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        (grad,) = torch.autograd.grad(loss, h)
        assert got["hidden"][layer - 1] == pytest.approx(float(grad.double().norm()), rel=1e-4)
    assert not np.allclose(got["hidden"], got["params"])


def test_angles_on_known_states():
    e = torch.eye(4)
    h0, h1 = e[0].expand(1, 2, 4), e[1].expand(1, 2, 4)  # (B, T, W)
    h2 = (e[1] + e[2]).expand(1, 2, 4)
    rows = pd.DataFrame(hidden_state_metrics([h0, h1, h2]), columns=COLUMNS)
    get = rows.set_index(["metric", "layer"])["value"]
    assert get["angular_distance", 1] == pytest.approx(0.5)
    assert get["angular_distance", 2] == pytest.approx(0.25)
    assert get["angular_distance_last", 1] == pytest.approx(0.5)
    # increments e1 - e0 and e2 are orthogonal
    assert get["increment_angle", 2] == pytest.approx(math.pi / 2)
    assert get["output_variance", 2] == pytest.approx(float(h2.var()))


def test_grad_decay_fit_recovers_tau():
    depth, tau = 12, 3.7
    layers = np.arange(1, depth + 1)
    assert grad_decay_tau(2.0 * np.exp(-(depth - layers) / tau)) == pytest.approx(tau)
    assert grad_decay_rate(np.exp((depth - layers) / 5.0)) == pytest.approx(-0.2)
    assert grad_decay_tau(np.exp((depth - layers) / 5.0)) == math.inf
    assert math.isnan(grad_decay_tau([1.0]))


def test_tau_width_exponent_recovers_a_power_law():
    widths = np.array([64, 128, 256, 512])
    frame = pd.DataFrame({"width": np.repeat(widths, 2), "tau": np.repeat(2.06 * widths**0.44, 2)})
    fit = tau_width_exponent(frame)
    assert fit["a"] == pytest.approx(0.44) and fit["c"] == pytest.approx(2.06)
    assert fit["r2"] == pytest.approx(1.0) and fit["n_widths"] == 4
    assert math.isnan(tau_width_exponent(frame[frame.width == 64])["a"])


def test_plots_from_tidy_diagnostics(trained):
    pytest.importorskip("matplotlib")
    from scalefit.plot.train import plot_layer_metric, plot_loss_grid, plot_variant_comparison

    frame = diagnose(trained.model, trained.data, eval_tokens=256, batch_size=4)
    from figure_layout import layout_problems

    both = pd.concat(
        [frame.assign(variant="pre_ln", depth=3), frame.assign(variant="lns", depth=3)]
    )

    fig = plot_variant_comparison(both, depth=3)
    assert len(fig.axes) == 3
    assert not layout_problems(fig)
    fig = plot_layer_metric(both, "cr", by="variant")
    assert len(fig.axes[0].lines) == 2
    assert not layout_problems(fig)
    with pytest.raises(Exception, match="No diagnostics rows"):
        plot_layer_metric(both, "cr", depth=99)
    table = pd.DataFrame(
        {
            "depth": [1, 2, 1, 2],
            "width": [16, 16, 32, 32],
            "tokens": [1e5] * 4,
            "loss": [3.0, 2.9, 2.8, 2.7],
            "variant": ["pre_ln"] * 4,
            "diverged": [False] * 4,
        }
    )
    fig = plot_loss_grid(table)
    assert len(fig.axes[0].lines) == 2
    assert not layout_problems(fig)
