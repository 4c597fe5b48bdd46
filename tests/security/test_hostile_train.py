"""Hostile-input corpus, trainer and toy: sizes that cannot fit, absurd values, multi-line --set.

One row per case. A refused case exits 2 with one ``scalefit: error:`` line naming the setting or
option, no traceback, and leaves no run folder behind: validation and the memory check
(:mod:`scalefit.train.memory`) both run before anything is allocated or written. The memory
estimate itself is checked against what a real training step keeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hostile import assert_refused, cli  # noqa: E402
from train_support import _one_torch_thread, tiny_settings, token_folder  # noqa: E402, F401

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train.config import config_from_dict  # noqa: E402
from scalefit.train.loop import make_optimizer  # noqa: E402
from scalefit.train.memory import (  # noqa: E402
    available_memory,
    check_run_memory,
    data_vocab,
    estimate_memory,
)
from scalefit.train.model import Transformer  # noqa: E402


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return token_folder(tmp_path_factory.mktemp("hostile_train"), vocab=["ab", "cd", "e"], seed=1)


def _config(tmp_path, tokens, text: str = ""):
    base = {k: v for k, v in tiny_settings(tokens).items()}
    lines = [f"{k} = {json.dumps(v)}" for k, v in base.items()]
    path = tmp_path / "run.toml"
    path.write_text("\n".join(lines) + "\n" + text, encoding="utf-8")
    return path


# --set KEY=VALUE -> words of which one must be in the error line
SET_REFUSED = [
    # sizes that do not fit in memory (inside the validation bounds): refused with the estimate
    ("width=65536", ("width", "needs about")),
    ("batch_size=16000000", ("batch_size", "needs about")),
    ("seq_len=1048576", ("seq_len", "needs about")),
    ("width=16384", ("width", "needs about")),
    # absurd or mistyped values: refused by the declared constraints
    ("batch_size=1e9", ("batch_size",)),
    ("batch_size=1000000000", ("batch_size",)),
    ("batch_size=0", ("batch_size",)),
    ("batch_size=8.5", ("batch_size",)),
    ("width=0", ("width",)),
    ("width=-1", ("width",)),
    ("width=1e12", ("width",)),
    ("width=64.0", ("width",)),
    ("width='64'", ("width",)),
    ("width=sixty-four", ("width",)),
    ("width=nan", ("width",)),
    ("width=inf", ("width",)),
    ("width=true", ("width",)),
    ("width=[64]", ("width",)),
    ("width={a=1}", ("width",)),
    ("width=1_000_000", ("width",)),
    ("width=99999999999999999999999", ("width",)),
    ("depth=100000", ("depth",)),
    ("depth=0", ("depth",)),
    ("depth=2.5", ("depth",)),
    ("depth=2**10", ("depth",)),
    ("seq_len=2097152", ("seq_len",)),
    ("seq_len=0", ("seq_len",)),
    ("vocab=1073741824", ("vocab",)),
    ("vocab=1", ("vocab",)),
    ("vocab='big'", ("vocab",)),
    ("heads=0", ("heads",)),
    ("heads=3", ("heads",)),
    ("head_dim=1000000000", ("head_dim",)),
    ("mlp_ratio=1e6", ("mlp_ratio",)),
    ("mlp_ratio=nan", ("mlp_ratio",)),
    ("ffn_hidden=1073741824", ("ffn_hidden",)),
    ("tokens=1e20", ("tokens",)),
    ("tokens=100000000000000000000", ("tokens",)),
    ("tokens=-1", ("tokens",)),
    ("eval_tokens=10000000000000", ("eval_tokens",)),
    ("threads=1000000", ("threads",)),
    ("seed=-1", ("seed",)),
    ("seed=18446744073709551616", ("seed",)),
    ("lr=nan", ("lr",)),
    ("lr=-1", ("lr",)),
    ("lr=inf", ("lr",)),
    ("device='tpu'", ("device",)),
    ("device='cuda:999'", ("device",)),
    ('name="a\\nb"', ("name",)),
    ('data="x\\u0000y"', ("data",)),
    ("lerning_rate=1e-3", ("lerning_rate",)),
    # --set itself: one KEY=VALUE line
    ("depth=2\nwidth=65536", ("--set",)),
    ("depth=2\r", ("--set",)),
    ("depth=2\twidth=3", ("--set",)),
    ("\x1b[31mdepth=2", ("--set",)),
    ("depth=2\x7f", ("--set",)),
    ("width=64\u0085", ("--set",)),
    ("depth", ("--set",)),
    ("=2", ("--set",)),
    ("1depth=2", ("--set",)),
    ("de-pth=2", ("--set",)),
    ("model.width=64", ("--set",)),
    ("x=1]\n[y", ("--set",)),
]


@pytest.mark.parametrize(("item", "names"), SET_REFUSED, ids=[repr(i)[:40] for i, _ in SET_REFUSED])
def test_train_run_set_is_refused_before_any_work(tmp_path, tokens, capsys, item, names):
    config, out = _config(tmp_path, tokens), tmp_path / "run"
    result = cli(capsys, ["train", "run", config, "--out", out, "--set", item, "--no-progress"])
    assert_refused(result, *names, outputs=[out], case=item)


TOML_REFUSED = [
    ("width = 65536", ("width", "needs about")),
    ("batch_size = 1e9", ("batch_size",)),
    ("depth = 1e400", ("depth",)),
    ("width = 99999999999999999999", ("width",)),
    ("depth = nan", ("depth",)),
    ('name = "a\\u0000b"', ("name",)),
    ('data = "tokens\\u001b[2J"', ("data",)),
    ('name = """two\nlines"""', ("name",)),
    ("[model]\nwidth = 64", ("model",)),
]


@pytest.mark.parametrize(("text", "names"), TOML_REFUSED, ids=[t[:30] for t, _ in TOML_REFUSED])
def test_train_run_config_file_is_refused_before_any_work(tmp_path, tokens, capsys, text, names):
    config = _config(tmp_path, tokens)
    settings = {k: v for k, v in tiny_settings(tokens).items() if k not in text.split("=")[0]}
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    config.write_text("\n".join(lines) + "\n" + text + "\n", encoding="utf-8")
    out = tmp_path / "run"
    result = cli(capsys, ["train", "run", config, "--out", out, "--no-progress"])
    assert_refused(result, *names, outputs=[out], case=text)


def test_tiny_run_is_not_refused_and_set_keeps_working(tmp_path, tokens, capsys):
    config, out = _config(tmp_path, tokens), tmp_path / "run"
    args = ["train", "run", config, "--out", out, "--no-progress"]
    code, text, err = cli(capsys, [*args, "--set", "depth = 1", "--set", "name='tiny-1'"])
    assert code == 0, err
    saved = json.loads((out / "result.json").read_text())["config"]
    assert saved["depth"] == 1 and "tiny-1" not in text


def test_memory_refusal_states_the_estimate(tmp_path, tokens, capsys):
    config, out = _config(tmp_path, tokens), tmp_path / "run"
    args = ["train", "run", config, "--out", out, "--set", "width=65536"]
    line = assert_refused(cli(capsys, args), "width", outputs=[out])
    assert "103G parameters" in line and "TB" in line and "available on cpu" in line


# ------------------------------------------------------------------ the estimate is an upper bound
SHAPES = [
    dict(depth=2, width=32, seq_len=32, batch_size=8),
    dict(depth=3, width=64, seq_len=64, batch_size=8, block="swiglu"),
    dict(depth=6, width=64, seq_len=64, batch_size=4, variant="cr_tree"),
    dict(depth=2, width=128, seq_len=128, batch_size=4, vocab=2048, embeddings="untied"),
    dict(depth=6, width=32, seq_len=32, batch_size=4, cr_loss=True, ortho_loss=True),
    dict(depth=2, width=64, seq_len=64, batch_size=4, variant="post_ln", mlp_ratio=2.0),
]


def _measured(cfg) -> tuple[int, int]:
    """Bytes a real step keeps: tensors saved for backward, and weights + grads + AdamW state."""
    from scalefit.train.cr import regulariser

    torch.manual_seed(0)
    model = Transformer(cfg.model)
    opt = make_optimizer(model, cfg, "cpu")
    x = torch.randint(0, cfg.model.vocab, (cfg.batch_size, cfg.model.seq_len))
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    aux = cfg.cr_loss or cfg.ortho_loss
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x, x, return_attn_io=aux)
        loss = out.loss
        if aux:
            loss = loss + regulariser(out.attn_io, 0, use_cr=cfg.cr_loss, use_ortho=cfg.ortho_loss)
    loss.backward()
    opt.step()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    state = sum(
        v.numel() * v.element_size()
        for s in opt.state.values()
        for v in s.values()
        if torch.is_tensor(v)
    )
    return sum(storages.values()), 2 * weights + state


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_estimate_bounds_what_a_training_step_keeps(shape):
    cfg = config_from_dict({**shape, "device": "cpu"})
    est = estimate_memory(cfg, checkpoint=False)
    saved, states = _measured(cfg)
    assert est.params == Transformer(cfg.model).num_params()
    assert est.activations >= saved
    assert est.states >= states >= 16 * est.params
    assert est.total >= saved + states


def test_estimate_grows_with_every_size():
    base = {"depth": 2, "width": 64, "seq_len": 64, "batch_size": 8}
    ref = estimate_memory(config_from_dict(base)).total
    for key, value in (("depth", 4), ("width", 128), ("seq_len", 128), ("batch_size", 16)):
        assert estimate_memory(config_from_dict({**base, key: value})).total > ref, key


def test_processes_share_the_batch_and_fsdp_shards_the_state():
    cfg = config_from_dict({"depth": 4, "width": 256, "batch_size": 16, "parallel": "fsdp"})
    one, two = estimate_memory(cfg), estimate_memory(cfg, world=2)
    assert two.batch == 8 and two.activations < one.activations and two.states < one.states


def test_check_memory_refuses_and_can_be_skipped(monkeypatch):
    cfg = config_from_dict({"depth": 2, "width": 65536, "device": "cpu"})
    with pytest.raises(
        ScaleFitError, match=r"^here: the run .*needs about .* TB .* available on cpu"
    ):
        check_run_memory(cfg, where="here: ")
    monkeypatch.setenv("SCALEFIT_MEMORY_CHECK", "0")
    check_run_memory(cfg)
    monkeypatch.delenv("SCALEFIT_MEMORY_CHECK")
    check_run_memory(config_from_dict({"depth": 1, "width": 32, "device": "cpu"}))  # it fits


def test_available_memory_and_data_vocabulary(tokens):
    free = available_memory("cpu")
    assert free is None or free > 0
    meta = json.loads((Path(tokens) / "meta.json").read_text())
    assert data_vocab(config_from_dict({"data": tokens})) == meta["vocab"]
    assert data_vocab(config_from_dict({"data": "no-such-corpus", "tokenizer": "bpe"})) == 1024


# ------------------------------------------------------------------------------------ toy run
TOY_SPEC = """
[sweep]
name = "hostile"
task = "toy"

[fixed]
preset = "cpu"
teacher_depth = 4
depths = [2]
batch = 16
steps = 2
test_size = 64
checkpoint_every = 0
{extra}

[grid]
seed = [0]
"""

TOY_REFUSED = [
    ("width = 65536", [], ("spec.toml", "needs about")),
    ("width = 70000", [], ("width",)),
    ("replicas = 1024\nwidth = 16384", [], ("spec.toml", "needs about")),
    ("replicas = 1e9", [], ("replicas",)),
    ("", ["--slurm-partition", "gpu\n#SBATCH --wrap=id"], ("--slurm-partition",)),
    ("", ["--cluster", "local;id"], ("--cluster",)),
    ("", ["--workers", "1000000"], ("--workers",)),
    ("", ["--threads", "0"], ("--threads",)),
    ("", ["--timeout-min", "0"], ("--timeout-min",)),
]


@pytest.mark.parametrize(
    ("extra", "options", "names"), TOY_REFUSED, ids=[repr(e or o)[:30] for e, o, _ in TOY_REFUSED]
)
def test_toy_run_is_refused_before_any_work(tmp_path, capsys, extra, options, names):
    spec = tmp_path / "spec.toml"
    spec.write_text(TOY_SPEC.format(extra=extra), encoding="utf-8")
    out = tmp_path / "out"
    result = cli(capsys, ["toy", "run", spec, "--out", out, "--workers", "0", *options])
    assert_refused(result, *names, outputs=[out], case=(extra, options))


def test_toy_estimate_bounds_the_tensors_it_allocates():
    from scalefit.sim.config import preset
    from scalefit.sim.model import StudentStack, Teacher

    cfg = preset("cpu", teacher_depth=8, depths=[2, 4], width=16, batch=32, test_size=128)
    teacher, students = Teacher(cfg), StudentStack(cfg)
    size = 4  # float32
    held = sum(t.numel() for t in teacher.layers.values()) + teacher.head.numel()
    held += 4 * sum(p.numel() for p in students.params)  # weights, grads, Adam's two moments
    assert cfg.memory_bytes() >= size * held


# ------------------------------------------------------------------------------------ train grid
GRID_REFUSED = [
    ("width = [64, 65536]", [], ("grid.toml", "needs about")),
    ("width = [64]\nbatch_size_x = [1]", [], ("batch_size_x",)),
    ("width = [1e12]", [], ("width",)),
    ('width = [64]\nname = ["a\\u000ab"]', [], ("name",)),
]


@pytest.mark.parametrize(
    ("grid", "options", "names"), GRID_REFUSED, ids=[g[:30] for g, _, _ in GRID_REFUSED]
)
def test_train_grid_is_refused_before_any_run(tmp_path, tokens, capsys, grid, options, names):
    spec = tmp_path / "grid.toml"
    spec.write_text(
        f'[sweep]\nname = "g"\ntask = "train"\n[fixed]\ndata = "{tokens}"\nseq_len = 16\n'
        f"batch_size = 4\ntokens = 256\ndevice = 'cpu'\n[grid]\n{grid}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = cli(capsys, ["train", "grid", spec, "--out", out, "--workers", "0", *options])
    assert_refused(result, *names, outputs=[out], case=grid)


def test_diagnose_refuses_a_config_that_does_not_match_its_weights(tmp_path, tokens, capsys):
    config, out = _config(tmp_path, tokens), tmp_path / "run"
    args = ["train", "run", config, "--out", out, "--no-progress", "--set", "diagnose=false"]
    assert cli(capsys, args)[0] == 0
    ckpt = out / "checkpoint.pt"
    code, _, err = cli(capsys, ["train", "diagnose", ckpt, "--out", tmp_path / "ok.csv"])
    assert code == 0, err  # the control: the trainer's own checkpoint
    state = torch.load(ckpt, weights_only=True)
    state["config"]["width"] = 65536  # the weights stay those of a 32-wide model
    bad = tmp_path / "bad" / "checkpoint.pt"
    bad.parent.mkdir()
    torch.save(state, bad)
    result = cli(capsys, ["train", "diagnose", bad, "--out", tmp_path / "d.csv"])
    assert_refused(result, str(bad), outputs=[tmp_path / "d.csv"])
