"""The language-model probe's verdict abstains on untrained, barely trained and encoder models,
and its CR is measured on the attention sub-layers (tiny models built from configs, no
downloads; the packaged MiniLM-L6 encoder when installed)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

tf = pytest.importorskip("transformers")

import test_probes_hf as hf_support  # noqa: E402
from test_probes_hf import _documents, _minilm, _model, _probe  # noqa: E402
from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture

from scalefit.cli import main  # noqa: E402
from scalefit.probes._text import iter_windows  # noqa: E402
from scalefit.probes.cr import cr_measure  # noqa: E402
from scalefit.probes.hf import load_model, probe_hf  # noqa: E402

CYCLE = [f"w{i}" for i in range(12)]
tokenizer = hf_support.tokenizer  # the word-level tokenizer fixture of the probe tests


def _predictable(n=60):
    """Documents that repeat one 12-word cycle: a tiny model learns them in ~100 steps."""
    return [" ".join(CYCLE * 4) for _ in range(n)]


def _train(model, tokenizer, docs, steps, *, seed=0):
    windows = iter_windows(iter(docs), tokenizer, seq_len=32, encoder=False)
    ids = torch.from_numpy(np.stack([w for w, _ in windows]))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        batch = ids[torch.randint(0, len(ids), (16,), generator=gen)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
def test_cli_on_an_untrained_random_model_says_undetermined(family, tokenizer, tmp_path, capsys):
    folder = tmp_path / family
    _model(family, tokenizer, seed=1).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join(_documents()))
    out = tmp_path / "out"
    argv = ["probe", "hf", str(folder), "--text", str(text), "--tokens", "256", "--out", str(out)]
    assert main([*argv, "--seq-len", "32", "--prune-tokens", "0", "--quiet", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "mechanism: undetermined" in printed
    assert "indistinguishable from the same architecture at initialisation" in printed
    assert "under-trained: the NLL" in printed  # a random model predicts ≈ uniformly
    # the reason states the per-token distribution of the increments, not a mean angle
    assert "middle token increment pairs: ℓ=4:" in printed and "% correlated" in printed
    assert "CR: on each block's attention sub-layer, batches of 8 windows" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"]["mechanism"] == "undetermined"
    assert summary["cr_on"] == "attention sub-layer" and summary["cr_batch"] == 8
    ratio = summary["verdict"]["evidence"]["loss_ratio"]["4"]
    assert ratio == pytest.approx(1.0, abs=0.05)
    shares = [summary[f"share_{k}"] for k in ("orthogonal", "correlated", "anticorrelated")]
    assert all(0 <= v <= 1 for v in shares) and sum(shares) <= 1 + 1e-12


def test_a_few_training_steps_are_not_enough(tokenizer):
    model = _train(_model("llama", tokenizer, seed=1), tokenizer, _predictable(), steps=3)
    res = _probe(model, tokenizer, _predictable(), prune=False)
    assert res.verdict.mechanism == "undetermined"
    assert any("under-trained" in r for r in res.verdict.reasons)


def test_a_trained_model_passes_the_training_checks(tokenizer):
    # trained until its loss is far below the initial ln V: the verdict still abstains, but only
    # because one depth cannot show the 1/ℓ signature
    model = _train(_model("llama", tokenizer, seed=1), tokenizer, _predictable(), steps=120)
    res = _probe(model, tokenizer, _predictable(), prune=False)
    why = " ".join(res.verdict.reasons)
    assert res.verdict.evidence["loss_ratio"][4] < 0.4  # the sourced LM bound
    assert res.verdict.evidence["init_change"][4]["trained"]
    assert "initialisation" not in why and "under-trained" not in why
    assert res.verdict.mechanism in ("undetermined", "compositional")
    if res.verdict.mechanism == "undetermined":
        assert "untested" in why or "neighbouring increments" in why


def test_the_init_reference_leaves_the_random_state_alone(tokenizer):
    model = _model("gpt2", tokenizer, seed=1)
    torch.manual_seed(123)
    _probe(model, tokenizer, _documents(), prune=False, cr=False)
    after = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(3))
    res = _probe(model, tokenizer, _documents(), prune=False, cr=False, init_reference=False)
    assert "no reference at initialisation" in res.verdict.reasons[0]


def test_cr_is_measured_on_the_attention_sub_layer(tokenizer):
    """With block 2's attention output projection zeroed, its attention sub-layer is the identity
    (CR ≈ 1) while the whole block, whose MLP is made strong, is not."""
    model = _model("llama", tokenizer, seed=1)
    with torch.no_grad():
        model.model.layers[1].self_attn.o_proj.weight.zero_()
        model.model.layers[1].mlp.down_proj.weight.mul_(300.0)
    docs = _documents()
    res = _probe(model, tokenizer, docs, tokens=256, prune=False, bootstrap=0)
    ids = torch.from_numpy(
        np.stack([w for w, _ in iter_windows(iter(docs), tokenizer, seq_len=32, encoder=False)][:8])
    )
    with torch.no_grad():
        hs = model(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states
    whole_block = cr_measure(hs[1], hs[2])
    assert res.layers["cr"].iloc[1] == pytest.approx(1.0, abs=1e-3)
    assert whole_block < 0.9
    assert res.layers["cr_debiased"].iloc[1] == pytest.approx(1.0, abs=1e-3)


def test_real_pretrained_encoder_is_refused(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lm = load_model(str(_minilm()))
    docs = ["Residual networks add the output of every block to a running hidden state. " * 3] * 8
    res = probe_hf(lm, docs, tokens=128, seq_len=64, prune=False, bootstrap=0)
    assert res.verdict.mechanism == "undetermined"
    assert "bidirectional encoder" in res.verdict.reasons[0]
    assert "ensemble" not in res.verdict.mechanism


def test_cli_without_the_init_reference_abstains_and_says_so(tokenizer, tmp_path, capsys):
    folder = tmp_path / "neox"
    _model("gpt_neox", tokenizer, seed=1).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join(_documents()))
    argv = ["probe", "hf", str(folder), "--text", str(text), "--tokens", "256", "--seq-len", "32"]
    argv += ["--out", str(tmp_path / "out"), "--prune-tokens", "0", "--quiet", "--no-plots"]
    assert main([*argv, "--no-init-reference"]) == 0
    printed = capsys.readouterr().out
    assert "mechanism: undetermined" in printed and "no reference at initialisation" in printed
