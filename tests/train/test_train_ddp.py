import json

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, tiny_settings, torchrun  # noqa: E402, F401 - autouse fixture
from train_support import make_corpus as _make_corpus  # noqa: E402

from scalefit.train.data import build_tokens  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402


def make_corpus(folder):
    return _make_corpus(
        folder,
        vocab=["to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis"],
        n_docs=4,
        words=3000,
        seed=1,
    )


def test_two_process_gloo_torchrun_matches_single_process(tmp_path):
    tokens = build_tokens(make_corpus(tmp_path / "corpus"), tmp_path / "tokens", val_fraction=0.25)
    settings = tiny_settings(tokens)
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in settings.items()]
    config = tmp_path / "ddp.toml"
    config.write_text("\n".join(lines + ["diagnose = false"]) + "\n")
    out = tmp_path / "ddp_run"
    torchrun("-m", "scalefit", "train", "run", config, "--out", out, "--no-progress")
    ddp = pd.read_csv(out / "history.csv")
    single = train(config_from_dict(settings))
    ref = np.array([h["loss"] for h in single.history])
    assert len(ddp) == len(ref) == 12
    np.testing.assert_allclose(ddp["loss"].to_numpy(), ref, rtol=1e-4, atol=1e-5)
    assert ref[-1] < ref[0]
    row = json.loads((out / "result.json").read_text())["result"]
    assert row["world"] == 2 and row["tokens"] == single.row["tokens"]
    assert row["loss"] == pytest.approx(single.row["loss"], rel=1e-4)
