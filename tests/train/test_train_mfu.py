"""FLOPs per token of the accounting against torch's FLOP counter; MFU in the trainer's row."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from scalefit.core.accounting import flops_per_token, param_count  # noqa: E402
from scalefit.train.mfu import mfu, peak_flops  # noqa: E402
from scalefit.train.model import ModelConfig, Transformer  # noqa: E402


@pytest.mark.parametrize(
    ("depth", "width", "seq_len", "block"),
    [(2, 64, 64, "standard"), (3, 32, 32, "swiglu"), (1, 96, 32, "standard")],
)
def test_flops_per_token_matches_torch_flop_counter(depth, width, seq_len, block):
    torch.manual_seed(0)
    cfg = ModelConfig(depth=depth, width=width, vocab=256, seq_len=seq_len, block=block)
    model = Transformer(cfg)
    x = torch.randint(0, 256, (2, seq_len))
    # The math SDPA backend runs attention as bmm ops, which the counter sees (the fused CPU
    # kernel has no FLOP formula); causal masking is not subtracted, as in the accounting.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(x, x).loss.backward()
    counted = counter.get_total_flops() / x.numel()  # forward + backward, per token
    matmul_params = param_count(
        depth, width, vocab=256, block=block, ffn_hidden=cfg.hidden, norms=False
    )
    assert counted == flops_per_token(matmul_params, depth=depth, width=width, seq_len=seq_len)
    # with the norm gains in N (the trainer's params column) the count is within 0.5 %
    full = flops_per_token(model.num_params(), depth=depth, width=width, seq_len=seq_len)
    assert full == pytest.approx(counted, rel=5e-3) and full > counted


def test_peak_table_and_mfu():
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32") == 156e12
    assert math.isnan(peak_flops("Intel Xeon", "fp32"))
    fpt = flops_per_token(10**6, depth=2, width=64, seq_len=128)
    assert mfu(1e5, 10**6, 2, 64, 128, 1e12) == pytest.approx(fpt * 1e5 / 1e12)
    assert math.isnan(mfu(1e5, 10**6, 2, 64, 128, math.nan))


def test_benchmark_matmul_peak(monkeypatch):
    """The CPU peak the benchmarks measure (``benchmarks/_harness.py``)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "_harness.py"
    spec = importlib.util.spec_from_file_location("_bench_harness", path)
    harness = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_bench_harness", harness)  # its dataclasses look it up
    spec.loader.exec_module(harness)
    assert harness.measure_matmul_peak(size=128, repeats=1) > 1e8  # any CPU does 0.1 GFLOP/s
