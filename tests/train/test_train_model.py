import math

import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train.model import VARIANTS, ModelConfig, Transformer, tree_parents  # noqa: E402


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block", ["standard", "swiglu"])
@pytest.mark.parametrize("embeddings", ["tied", "untied"])
def test_numel_equals_shared_accounting(variant, block, embeddings):
    for depth in (1, 2, 7, 12):
        cfg = ModelConfig(
            depth=depth,
            width=32,
            vocab=97,
            seq_len=8,
            variant=variant,
            block=block,
            embeddings=embeddings,
        )
        model = Transformer(cfg)
        assert sum(p.numel() for p in model.parameters()) == cfg.expected_params()
        assert model.num_params(embeddings=False) == cfg.expected_params("excluded")


def test_tree_matches_listing_1_and_grows_with_depth():
    assert tree_parents(12) == {1: -1, 2: 0, 4: 0, 6: 1, 8: 1}
    assert tree_parents(1) == {}
    assert tree_parents(4) == {1: -1}
    t24 = tree_parents(24)
    assert t24[10] == 2 and t24[12] == 2 and t24[20] == 6 and max(t24) == 20
    for depth in range(1, 40):
        t = tree_parents(depth)
        assert all(parent < layer - 1 or layer == 1 for layer, parent in t.items())
        assert all(layer <= depth - 4 or layer == 1 for layer in t)


def test_shapes_hidden_and_causality():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(depth=3, width=32, vocab=50, seq_len=16))
    x = torch.randint(0, 50, (2, 16))
    out = model(x, x, return_hidden=True, return_attn_io=True)
    assert out.logits.shape == (2, 16, 50)
    assert len(out.hidden) == 4 and out.hidden[0].shape == (2, 16, 32)
    assert len(out.attn_io) == 3
    assert abs(out.loss.item() - math.log(50)) < 1.0
    x2 = x.clone()
    x2[:, 10:] = (x2[:, 10:] + 1) % 50
    out2 = model(x2)
    assert torch.allclose(out.logits[:, :10], out2.logits[:, :10], atol=1e-5)
    assert not torch.allclose(out.logits[:, 10:], out2.logits[:, 10:])


def test_lns_scales_both_prenorms_by_inverse_sqrt_l_and_not_the_final_norm():
    torch.manual_seed(0)
    depth = 5
    model = Transformer(ModelConfig(depth=depth, width=32, vocab=40, seq_len=8, variant="lns"))
    seen = {}

    def keep(name):
        def hook(module, args, output=None):
            seen[name] = (args[0] if output is None else output).detach().clone()

        return hook

    for i, block in enumerate(model.blocks):
        block.norm1.register_forward_hook(keep(f"norm1_{i}"))
        block.norm2.register_forward_hook(keep(f"norm2_{i}"))
        block.attn.register_forward_pre_hook(keep(f"attn_in_{i}"))
        block.mlp.register_forward_pre_hook(keep(f"mlp_in_{i}"))
    model.norm_f.register_forward_hook(keep("final"))
    model.head.register_forward_pre_hook(keep("head_in"))
    model(torch.randint(0, 40, (2, 8)))
    for i in range(depth):
        factor = 1 / math.sqrt(i + 1)  # l counted from 1
        assert torch.allclose(seen[f"attn_in_{i}"], seen[f"norm1_{i}"] * factor, atol=1e-6)
        assert torch.allclose(seen[f"mlp_in_{i}"], seen[f"norm2_{i}"] * factor, atol=1e-6)
        ratio = (seen[f"attn_in_{i}"].norm() / seen[f"norm1_{i}"].norm()).item()
        assert ratio == pytest.approx(factor, rel=1e-5)
    assert torch.equal(seen["head_in"], seen["final"])
    # Pre-LN has no scaling at all
    assert all(b.ln_scale == 1.0 for b in Transformer(ModelConfig(depth=3, width=32)).blocks)


def test_scaled_init_shrinks_output_projections_only():
    torch.manual_seed(0)
    depth = 8
    plain = Transformer(ModelConfig(depth=depth, width=128, variant="pre_ln"))
    scaled = Transformer(ModelConfig(depth=depth, width=128, variant="scaled_init"))
    std_plain = plain.blocks[0].mlp.proj.weight.std().item()
    std_scaled = scaled.blocks[0].mlp.proj.weight.std().item()
    assert std_plain == pytest.approx(0.02, rel=0.05)
    assert std_scaled == pytest.approx(0.02 / math.sqrt(2 * depth), rel=0.05)
    assert scaled.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_post_ln_normalises_the_residual_stream():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(depth=2, width=32, vocab=30, seq_len=8, variant="post_ln"))
    out = model(torch.randint(0, 30, (2, 8)), return_hidden=True)
    rms = out.hidden[-1].pow(2).mean(-1).sqrt()
    assert torch.allclose(rms, torch.ones_like(rms), atol=1e-3)  # gains start at 1


def test_skip_makes_a_block_the_identity():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(depth=3, width=32, vocab=30, seq_len=8))
    out = model(torch.randint(0, 30, (2, 8)), return_hidden=True, skip=frozenset({1}))
    assert torch.equal(out.hidden[1], out.hidden[2])


def test_bad_configs_raise():
    with pytest.raises(ScaleFitError, match="variant"):
        ModelConfig(variant="deepnorm")
    with pytest.raises(ScaleFitError, match="divisible"):
        ModelConfig(width=30, heads=4)
    with pytest.raises(ScaleFitError, match="embeddings"):
        ModelConfig(embeddings="excluded")
