import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, tiny_settings  # noqa: E402, F401 - autouse fixture
from train_support import make_corpus as _make_corpus  # noqa: E402

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train.data import build_tokens  # noqa: E402
from scalefit.train.loop import config_from_dict, load_checkpoint, train  # noqa: E402
from scalefit.train.model import VARIANTS  # noqa: E402


def make_corpus(folder):
    return _make_corpus(
        folder,
        vocab=["the", "cat", "dog", "sat", "on", "mat", "and", "ran", "to", "a", "big", "red"],
        n_docs=5,
        words=4000,
        seed=0,
    )


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    return str(build_tokens(make_corpus(root / "corpus"), root / "tokens", val_fraction=0.2))


def tiny(token_dir, **kw):
    return config_from_dict(tiny_settings(token_dir, **{"tokens": 8 * 32 * 40, "seed": 0, **kw}))


@pytest.mark.parametrize(
    "extra",
    [{"variant": v} for v in VARIANTS]
    + [
        {"variant": "cr_tree", "cr_loss": True, "ortho_loss": True},
        {"variant": "pre_ln", "block": "swiglu", "embeddings": "untied"},
    ],
    ids=[*VARIANTS, "cr_tree+losses", "swiglu_untied"],
)
def test_every_variant_trains_and_its_loss_falls(token_dir, extra):
    depth = 6 if extra.get("cr_loss") or extra["variant"] == "cr_tree" else 2
    res = train(tiny(token_dir, depth=depth, **extra))
    losses = [h["loss"] for h in res.history]
    assert len(losses) == 40 and not res.row["diverged"]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 1.0
    assert res.row["loss"] < math.log(256) - 1.5  # validation, nats/token
    assert res.row["bpb"] == pytest.approx(res.row["loss"] / math.log(2))
    assert res.row["params"] == res.model.cfg.expected_params()
    assert res.row["flops"] == 6 * res.row["params"] * res.row["tokens"]


def test_checkpoint_resume_reproduces_the_loss_sequence_exactly(token_dir, tmp_path):
    cfg = tiny(token_dir, tokens=8 * 32 * 16, checkpoint_every=5)
    full = train(cfg, tmp_path / "full")
    part = train(cfg, tmp_path / "resumed", stop_after=7)
    assert len(part.history) == 7
    assert load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")["step"] == 7
    resumed = train(cfg, tmp_path / "resumed")
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    assert resumed.row["loss"] == full.row["loss"]
    again = train(cfg, tmp_path / "resumed")  # finished: nothing more to do
    assert len(again.history) == 16 and again.row["loss"] == full.row["loss"]


def test_divergence_is_detected_and_recorded(token_dir):
    res = train(tiny(token_dir, lr=50.0, warmup_frac=0.0, grad_clip=1e9, tokens=8 * 32 * 30))
    assert res.row["diverged"] is True
    assert math.isnan(res.row["loss"]) and math.isnan(res.row["bpb"])
    assert res.history[-1]["diverged"] and len(res.history) < 30


def test_schedule_warms_up_then_decays_to_the_floor(token_dir):
    cfg = tiny(token_dir, tokens=8 * 32 * 100, lr=1e-3, warmup_frac=0.1, min_lr_ratio=0.1)
    lrs = cfg.lr_schedule().sequence().tolist()
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert lrs[-1] == pytest.approx(1e-4, rel=1e-2)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))


def test_weight_decay_only_on_matrices(token_dir):
    from scalefit.train.loop import make_optimizer
    from scalefit.train.model import Transformer

    cfg = tiny(token_dir)
    opt = make_optimizer(Transformer(cfg.model), cfg, torch.device("cpu"))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() == 1 for p in no_decay["params"])


def test_unknown_config_key_is_named():
    with pytest.raises(ScaleFitError, match="learning_rate"):
        config_from_dict({"learning_rate": 1e-3})


def test_bpe_tokens_train_and_report_bits_per_byte(tmp_path):
    pytest.importorskip("tokenizers")
    tok = build_tokens(
        make_corpus(tmp_path / "c"),
        tmp_path / "bpe",
        tokenizer="bpe",
        vocab_size=300,
        val_fraction=0.2,
    )
    res = train(
        config_from_dict(
            dict(
                data=str(tok),
                depth=1,
                width=32,
                seq_len=16,
                batch_size=4,
                tokens=4 * 16 * 10,
                eval_tokens=256,
            )
        )
    )
    assert res.model.cfg.vocab == res.data.vocab > 256  # the model follows the tokenizer
    assert res.row["vocab"] == res.data.vocab
    expected = res.row["loss"] / math.log(2) / res.data.bytes_per_token
    assert res.row["bpb"] == pytest.approx(expected) and res.row["bpb"] < res.row["loss"]


def test_reading_losses_back_every_k_steps_changes_no_number(token_dir, tmp_path):
    """``sync_every`` only moves the host's reads: the history and final loss are identical."""
    every = train(tiny(token_dir, tokens=8 * 32 * 12, sync_every=1))
    batched = train(tiny(token_dir, tokens=8 * 32 * 12, sync_every=5))
    keys = ("step", "lr", "loss", "grad_norm", "diverged")
    assert [[h[k] for k in keys] for h in batched.history] == [
        [h[k] for k in keys] for h in every.history
    ]
    assert batched.row["loss"] == every.row["loss"]
    # a resume with batched reads and checkpoints between reads loses and repeats nothing
    cfg = tiny(token_dir, tokens=8 * 32 * 12, sync_every=5, checkpoint_every=3)
    part = train(cfg, tmp_path / "run", stop_after=7)
    assert [h["step"] for h in part.history] == list(range(7))
    resumed = train(cfg, tmp_path / "run")
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in every.history]


def test_divergence_found_at_a_batched_read_stops_the_history_at_the_first_bad_step(token_dir):
    kw = {"lr": 50.0, "warmup_frac": 0.0, "grad_clip": 1e9, "tokens": 8 * 32 * 30}
    every = train(tiny(token_dir, **kw, sync_every=1))
    batched = train(tiny(token_dir, **kw, sync_every=8))
    assert batched.row["diverged"] is True and math.isnan(batched.row["loss"])
    assert [h["loss"] for h in batched.history] == [h["loss"] for h in every.history]
    assert batched.history[-1]["diverged"] and not any(h["diverged"] for h in batched.history[:-1])


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs"])
def test_compile_modes_are_accepted_and_checked(token_dir, mode):
    cfg = tiny(token_dir, compile_mode=mode)
    assert cfg.compile_mode == mode
    with pytest.raises(ScaleFitError, match="compile_mode"):
        tiny(token_dir, compile_mode="fastest")
    with pytest.raises(ScaleFitError, match="sync_every"):
        tiny(token_dir, sync_every=0)
