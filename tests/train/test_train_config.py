"""Trainer settings are validated before any work; run folders are locked and refuse changes."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread, make_corpus  # noqa: E402, F401 - autouse fixture

from scalefit.cli import main  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train.config import config_diff  # noqa: E402
from scalefit.train.data import build_tokens  # noqa: E402
from scalefit.train.loop import config_from_dict, train  # noqa: E402
from scalefit.train.rundir import claim  # noqa: E402

BAD = [
    (
        {"depth": "two"},
        r"'depth' key of trainer config must be an int in the range \[1, 4096\]\. Got 'two'",
    ),
    ({"heads": 0}, r"'heads' key .* must be None or an int in the range \[1, 65536\]\. Got 0"),
    ({"batch_size": -8}, r"'batch_size' key .* an int in the range \[1, 16777216\]\. Got -8"),
    ({"lr": float("nan")}, r"'lr' key .* a finite float > 0\. Got nan"),
    ({"lr": float("inf")}, r"'lr' key .* a finite float > 0\. Got inf"),
    ({"device": "tpu"}, r"'device' key .* 'cuda:<index>'\. Got 'tpu'"),
    ({"tokens": 0}, r"'tokens' key .* an int in the range \[1, 100000000000000\]\. Got 0"),
    (
        {"tokens": 1.5e6},
        r"'tokens' key .* an int in the range \[1, 100000000000000\]\. Got 1500000\.0",
    ),
    ({"grad_clip": -1.0}, r"'grad_clip' key .* a float >= 0\. Got -1\.0"),
    ({"warmup_frac": 2.0}, r"'warmup_frac' key .* in the range \[0, 1\]\. Got 2\.0"),
    ({"checkpoint_every": -5}, r"'checkpoint_every' key .* an int >= 0\. Got -5"),
    ({"precision": "fp16"}, r"'precision' key .* one of 'auto', 'bf16', 'fp32'\. Got 'fp16'"),
    ({"optimizer_impl": "fast"}, r"'optimizer_impl' key .* Got 'fast'"),
    ({"compile": "yes"}, r"'compile' key .* a bool or one of 'auto'\. Got 'yes'"),
    ({"cr_loss": 1}, r"'cr_loss' key .* a bool\. Got 1"),
    ({"variant": "preln"}, r"'variant' key .* Did you mean 'pre_ln'\?"),
    ({"width": 48, "heads": 5}, r"'width' \(48\) must be divisible by 'heads' \(5\)"),
    ({"width": 64, "heads": 2, "head_dim": 16}, r"'heads' × 'head_dim' \(2 × 16\)"),
    ({"learning_rate": 1e-3}, r"unknown key 'learning_rate'"),
    ({"width": 15, "heads": 1}, r"'width' \(15\) with 1 head\(s\) gives a head dimension of 15"),
]


@pytest.mark.parametrize(("bad", "message"), BAD, ids=[next(iter(b)) for b, _ in BAD])
def test_bad_setting_is_one_clear_error(bad, message):
    with pytest.raises(ScaleFitError, match=message):
        config_from_dict({"depth": 2, "width": 64, **bad})


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cfg")
    corpus = make_corpus(root / "c", vocab=["x", "yy", "zzz", "w"], n_docs=3, words=2000, seed=4)
    return str(build_tokens(corpus, root / "tokens", val_fraction=0.34))


def tiny(token_dir, **kw):
    base = dict(data=token_dir, depth=1, width=32, seq_len=16, batch_size=4, tokens=4 * 16 * 6)
    return config_from_dict({**base, "eval_tokens": 256, "device": "cpu", **kw})


def write_toml(path, settings):
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("override", "message"),
    [("depth='two'", "'depth' key"), ("heads=0", "'heads' key"), ("device='tpu'", "'device'")],
)
def test_cli_bad_setting_is_one_line_and_exit_2_before_any_work(
    tmp_path, token_dir, capsys, override, message
):
    config = write_toml(tmp_path / "run.toml", {"data": token_dir, "depth": 1, "width": 32})
    out = tmp_path / "run"
    code = main(["train", "run", str(config), "--out", str(out), "--set", override])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err
    assert not out.exists()  # nothing started


def test_changed_settings_on_a_run_folder_are_refused_naming_the_keys(tmp_path, token_dir):
    first = train(tiny(token_dir), tmp_path / "run", stop_after=3)
    assert len(first.history) == 3
    with pytest.raises(
        ScaleFitError, match=r"other settings: lr \(0\.003 → 0\.01\), seed \(0 → 1\)"
    ):
        train(tiny(token_dir, lr=1e-2, seed=1), tmp_path / "run")
    with pytest.raises(ScaleFitError, match=r"width \(32 → 64\)"):
        train(tiny(token_dir, width=64), tmp_path / "run")
    finished = train(tiny(token_dir), tmp_path / "run")  # same settings: resumes
    assert len(finished.history) == 6 and finished.history[:3] == first.history
    with pytest.raises(ScaleFitError, match="lr"):  # a finished folder too
        train(tiny(token_dir, lr=1e-2), tmp_path / "run")
    fresh = train(tiny(token_dir, lr=1e-2), tmp_path / "run", overwrite=True)
    assert fresh.history[0]["lr"] != first.history[0]["lr"] and len(fresh.history) == 6
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert config_diff(saved, tiny(token_dir, lr=1e-2).to_dict()) == []


def test_resume_free_settings_may_change(tmp_path, token_dir):
    train(tiny(token_dir), tmp_path / "run", stop_after=2)
    res = train(tiny(token_dir, checkpoint_every=1, threads=1), tmp_path / "run")
    assert len(res.history) == 6


def test_legacy_checkpoint_without_config_json_is_compared_too(tmp_path, token_dir):
    train(tiny(token_dir), tmp_path / "run", stop_after=2)
    (tmp_path / "run" / "train_config.json").unlink()
    with pytest.raises(ScaleFitError, match="seed"):
        train(tiny(token_dir, seed=5), tmp_path / "run")


def test_a_second_process_cannot_train_into_a_locked_run_folder(tmp_path, token_dir):
    settings = dict(data=token_dir, depth=1, width=32, seq_len=16, batch_size=4, tokens=64)
    cfg = config_from_dict(settings)
    config = write_toml(tmp_path / "run.toml", settings)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "scalefit", "train", "run", str(config), "--out", str(out)]
    with claim(out, cfg):  # this process holds the folder (an fcntl lock, as a training run does)
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "training run folder is in use by pid" in proc.stderr
    assert not (out / "checkpoint.pt").exists()
    with claim(out, cfg):  # released when the holder let go
        pass


def test_grid_task_keys_are_validated_too():
    from scalefit.train.grid import validate_config

    with pytest.raises(ScaleFitError, match=r"'diagnose' key .* must be a bool\. Got 'yes'"):
        validate_config({"depth": 2, "diagnose": "yes"})
    with pytest.raises(ScaleFitError, match=r"'diag_tokens' key .* an int >= 1\. Got 0"):
        validate_config({"depth": 2, "diag_tokens": 0})
    with pytest.raises(ScaleFitError, match=r"'warmup_frac' key"):
        validate_config({"depth": 2, "warmup_frac": 2.0})
    validate_config({"depth": 2, "diagnose": False})
