import pytest

from scalefit.core.accounting import flops_per_token, mlp_hidden, param_count, swiglu_hidden
from scalefit.core.errors import ScaleFitError


def test_standard_block_is_12_w_squared_per_layer():
    for depth, width in [(1, 32), (4, 64), (12, 768)]:
        n = param_count(depth, width, vocab=50257, embeddings="excluded", norms=False)
        assert n == 12 * depth * width**2


def test_embeddings_and_norms_are_counted_exactly():
    base = param_count(3, 64, vocab=256, embeddings="excluded", norms=False)
    assert param_count(3, 64, vocab=256, embeddings="tied", norms=False) == base + 256 * 64
    assert param_count(3, 64, vocab=256, embeddings="untied", norms=False) == base + 2 * 256 * 64
    with_norms = param_count(3, 64, vocab=256, embeddings="excluded")
    assert with_norms == base + (2 * 3 + 1) * 64
    tree = param_count(3, 64, vocab=256, embeddings="excluded", tree_merges=2)
    assert tree == with_norms + 2 * 2 * 64


def test_swiglu_hidden_and_count():
    assert swiglu_hidden(768) == 2048  # LLaMA-130M of Sun et al.
    assert swiglu_hidden(32) % 8 == 0 and swiglu_hidden(32) >= 8 * 32 / 3
    n = param_count(2, 32, vocab=256, block="swiglu", embeddings="excluded", norms=False)
    assert n == 2 * (4 * 32 * 32 + 3 * 32 * swiglu_hidden(32))
    n = param_count(
        2, 32, vocab=256, block="swiglu", ffn_hidden=100, embeddings="excluded", norms=False
    )
    assert n == 2 * (4 * 32 * 32 + 3 * 32 * 100)
    assert mlp_hidden(32, mlp_ratio=2) == 64


def test_flops_per_token():
    assert flops_per_token(1e6) == 6e6
    assert flops_per_token(1e6, depth=2, width=64, seq_len=128) == 6e6 + 12 * 2 * 64 * 128


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"depth": 0, "width": 8, "vocab": 10}, "depth"),
        ({"depth": 1, "width": 8.5, "vocab": 10}, "width"),
        ({"depth": 1, "width": 8, "vocab": 10, "block": "moe"}, "block"),
        ({"depth": 1, "width": 8, "vocab": 10, "embeddings": "shared"}, "embeddings"),
        ({"depth": 1, "width": 8, "vocab": 10, "mlp_ratio": 0.1}, "mlp_ratio"),
    ],
)
def test_bad_input_names_the_option(kwargs, match):
    depth, width = kwargs.pop("depth"), kwargs.pop("width")
    with pytest.raises(ScaleFitError, match=match):
        param_count(depth, width, **kwargs)


def test_flops_needs_shape_for_attention_term():
    with pytest.raises(ScaleFitError, match="depth"):
        flops_per_token(1e6, seq_len=128)
    with pytest.raises(ScaleFitError, match="params"):
        flops_per_token(0)
