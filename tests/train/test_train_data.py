import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train.data import (  # noqa: E402
    TokenData,
    build_tokens,
    read_documents,
    split_documents,
)


def make_corpus(folder, n_docs=6, words=3000, seed=0):
    rng = np.random.default_rng(seed)
    vocab = ["the", "cat", "dog", "sat", "on", "mat", "and", "ran", "to", "a", "big", "red"]
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        text = " ".join(rng.choice(vocab, size=words)) + f"\nDOC{d}END\n"
        (folder / f"doc{d}.txt").write_text(text)
    return folder


def test_whole_documents_are_held_out(tmp_path):
    corpus = make_corpus(tmp_path / "c")
    out = build_tokens(corpus, tmp_path / "tok", val_fraction=0.34, seed=3)
    meta = json.loads((out / "meta.json").read_text())
    assert len(meta["val_docs"]) == 2 and len(meta["train_docs"]) == 4
    assert not set(meta["val_docs"]) & set(meta["train_docs"])
    train = (out / "train.bin").read_bytes()
    val = (out / "val.bin").read_bytes()
    for name in meta["val_docs"]:
        marker = f"DOC{name[3:-4]}END".encode()
        assert marker in val and marker not in train
    assert meta["train_tokens"] == len(train) and meta["dtype"] == "uint8"
    assert build_tokens(corpus, tmp_path / "tok") == out  # reused, not rebuilt


def test_batches_are_step_addressed_and_split_across_ranks(tmp_path):
    out = build_tokens(make_corpus(tmp_path / "c"), tmp_path / "tok")
    data = TokenData(out, seq_len=16, seed=5)
    assert isinstance(data.train, np.memmap)
    x, y = data.batch(7, 8)
    x2, y2 = data.batch(7, 8)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next tokens
    assert not torch.equal(x, data.batch(8, 8)[0])
    parts = [data.batch(7, 8, rank=r, world=2)[0] for r in range(2)]
    assert torch.equal(torch.cat(parts), x)
    with pytest.raises(ScaleFitError, match="divisible"):
        data.batch(0, 7, world=2)
    val = list(data.val_batches(max_tokens=160, batch_size=4))
    assert sum(v[0].shape[0] for v in val) == 10
    assert data.bytes_per_token == 1.0


def test_bpe_tokenizer_trains_offline(tmp_path):
    pytest.importorskip("tokenizers")
    out = build_tokens(
        make_corpus(tmp_path / "c"), tmp_path / "bpe", tokenizer="bpe", vocab_size=300
    )
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and 256 < meta["vocab"] <= 300
    assert meta["val_bytes"] > meta["val_tokens"]  # merges compress
    bpe = json.loads((out / "bpe.json").read_text())  # the trained tokenizer, saved beside
    assert len(bpe["model"]["vocab"]) == meta["vocab"]
    assert TokenData(out, seq_len=8).bytes_per_token > 1.5


def test_bad_sources(tmp_path):
    with pytest.raises(ScaleFitError, match="neither"):
        read_documents(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScaleFitError, match="no \\*.txt"):
        read_documents(tmp_path / "empty")
    with pytest.raises(ScaleFitError, match="at least 2"):
        split_documents(["a"], val_fraction=0.1, seed=0)
    with pytest.raises(ScaleFitError, match="tokenizer"):
        build_tokens(make_corpus(tmp_path / "c"), tmp_path / "t", tokenizer="wordpiece")
    with pytest.raises(ScaleFitError, match="meta.json"):
        TokenData(tmp_path / "nothing", seq_len=4)


def test_too_short_split_is_refused_with_its_size(tmp_path):
    out = build_tokens(make_corpus(tmp_path / "c", words=40), tmp_path / "tok", val_fraction=0.34)
    val = json.loads((out / "meta.json").read_text())["val_tokens"]
    assert TokenData(out, seq_len=val - 2).vocab == 256
    with pytest.raises(ScaleFitError, match=rf"val split of .* has {val} tokens; need more than"):
        TokenData(out, seq_len=val - 1)
