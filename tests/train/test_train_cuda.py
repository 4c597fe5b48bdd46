"""The trainer's CUDA path, run only where a CUDA GPU is present (CI has none; these ran on an
H100 lent to the session of 2026-11-22, see docs/performance.md "Trainer").

A grid point on CUDA trains, writes its diagnostics and its mechanism summary: the summary's token
windows come from the CPU-side token data, and ``scalefit train grid`` failed on every CUDA run
until ``mechanism_summary`` moved them to the model's device.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import tiny_settings, token_folder  # noqa: E402

from scalefit.train.diagnostics import layer_gradients, mechanism_summary  # noqa: E402
from scalefit.train.grid import run_train_task  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    return token_folder(
        tmp_path_factory.mktemp("cuda"), vocab=["to", "be", "or", "not", "that", "is"], seed=1
    )


@pytest.mark.parametrize("compile_", [False, True])
def test_a_grid_point_trains_and_diagnoses_on_cuda(token_dir, tmp_path, compile_):
    config = tiny_settings(
        token_dir, width=64, eval_tokens=512, diag_tokens=256, device="cuda", compile=compile_
    )
    row = run_train_task(config, tmp_path / "run")
    assert not row["diverged"] and math.isfinite(row["loss"])
    assert row["precision"] == "bf16"
    probes = {k: v for k, v in row.items() if k.startswith("probe_")}
    assert probes and all(math.isfinite(v) for v in probes.values() if isinstance(v, float))
    diagnostics = pd.read_csv(tmp_path / "run" / "diagnostics.csv")
    assert len(diagnostics) > 0


def test_diagnostics_take_cpu_batches_for_a_cuda_model():
    from scalefit.train.model import ModelConfig, Transformer

    model = Transformer(ModelConfig(depth=2, width=32, heads=4, vocab=16, seq_len=8)).cuda()
    x = torch.randint(0, 16, (2, 8))
    y = torch.randint(0, 16, (2, 8))
    assert len(layer_gradients(model, x, y)["params"]) == 2
    assert mechanism_summary(model, x)
