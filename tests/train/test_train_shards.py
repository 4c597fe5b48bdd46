"""`scalefit data prepare --shards` on a local JSONL corpus; the trainer streams the shards."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture

from scalefit.cli import main  # noqa: E402
from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.train.loop import config_from_dict, load_checkpoint, train  # noqa: E402
from scalefit.train.shards import ShardData, prepare_shards, verify_shards  # noqa: E402

WORDS = ["river", "stone", "light", "under", "quiet", "winter", "field", "song", "over", "the"]


def write_jsonl(path, n_docs=30, words=60, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n_docs):
            text = " ".join(rng.choice(WORDS, size=words))
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    return path


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    corpus = write_jsonl(root / "corpus.jsonl")
    args = ["data", "prepare", str(corpus), "--shards", "--out", str(root / "shards")]
    args += ["--tokenizer", "bpe", "--bpe-vocab", "300", "--shard-tokens", "500"]
    assert main([*args, "--val-fraction", "0.2"]) == 0
    return root / "shards"


def test_prepare_writes_shards_and_a_manifest(shard_dir):
    m = json.loads((shard_dir / "manifest.json").read_text())
    assert m["format"] == "scalefit-shards-1" and m["dtype"] == "uint16" and m["vocab"] <= 300
    assert m["train_docs"] == 24 and m["val_docs"] == 6
    assert len(m["train"]) >= 3 and all(s["tokens"] == 500 for s in m["train"][:-1])
    for split in ("train", "val"):
        sizes = [(shard_dir / s["file"]).stat().st_size // 2 for s in m[split]]
        assert sizes == [s["tokens"] for s in m[split]] and sum(sizes) == m[f"{split}_tokens"]
    verify_shards(shard_dir)
    assert m["tokenizer"]["kind"] == "bpe-trained" and len(m["tokenizer"]["sha256"]) == 64
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(shard_dir / "tokenizer.json"))
    ids = np.fromfile(shard_dir / m["train"][0]["file"], dtype=np.uint16).tolist()
    first = tok.decode(ids[: ids.index(m["eot"])])
    assert len(first.split()) == 60 and set(first.split()) <= set(WORDS)


def test_a_tokenizer_json_given_by_path_gives_the_same_ids(shard_dir, tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl")
    again = prepare_shards(
        corpus,
        tmp_path / "again",
        tokenizer=str(shard_dir / "tokenizer.json"),
        shard_tokens=500,
        val_fraction=0.2,
    )
    m = json.loads((again / "manifest.json").read_text())
    assert m["tokenizer"]["kind"] == "file"
    ref = json.loads((shard_dir / "manifest.json").read_text())
    assert [s["sha256"] for s in m["train"]] == [s["sha256"] for s in ref["train"]]


def test_tampered_shard_is_caught(shard_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(shard_dir, copy)
    data = bytearray((copy / "train_00000.bin").read_bytes())
    data[10] ^= 1
    (copy / "train_00000.bin").write_bytes(bytes(data))
    with pytest.raises(ScaleFitError, match="train_00000.bin: sha256 differs"):
        verify_shards(copy)
    (copy / "train_00001.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ScaleFitError, match="train_00001.bin: missing or not 500 tokens"):
        ShardData(copy, 16)


def test_stream_is_sequential_across_shards_and_wraps(shard_dir):
    data = ShardData(shard_dir, 16)
    total = data.meta["train_tokens"]
    stream = np.concatenate(
        [np.fromfile(shard_dir / s["file"], np.uint16) for s in data.meta["train"]]
    )
    x, y = data.batch(3, 4)
    start = 3 * 4 * 16
    assert x[0].tolist() == stream[start : start + 16].tolist()
    assert torch.equal(x[:, 1:], y[:, :-1]) and x[1, 0] == y[0, -1]
    x0, _ = data.batch(0, 4, rank=1, world=2)  # rank 1 takes rows 2, 3
    assert x0[0].tolist() == stream[32:48].tolist()
    step = total // 64 + 1  # past the end: the second epoch
    pos = data.position(step, 4)
    assert pos["epoch"] == 1 and data.batch(step, 4)[0][0, 0] == stream[pos["offset"]]


def test_bad_jsonl_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine words here"}\n{"body": "no text"}\n')
    with pytest.raises(ScaleFitError, match=r"bad.jsonl, line 2: .* string field 'text'"):
        prepare_shards(path, tmp_path / "out")
    path.write_text('{"text": "fine words here"}\n{"text": "cut\n')
    with pytest.raises(ScaleFitError, match=r"bad.jsonl, line 2: not valid JSON"):
        prepare_shards(path, tmp_path / "out")


def test_jsonl_reader_is_shared_by_the_shards_and_the_probes(tmp_path):
    from scalefit.core._io import iter_jsonl_texts
    from scalefit.probes._text import iter_documents as probe_documents
    from scalefit.train.shards import iter_documents

    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"text": "caf\xe9 ok"}\n\n{"text": ""}\n{"text": "two"}\n')
    assert list(iter_jsonl_texts(path)) == ["caf\ufffd ok", "", "two"]  # not UTF-8: replaced
    assert list(iter_documents(path)) == ["caf\ufffd ok", "", "two"]
    assert list(probe_documents(path)) == ["caf\ufffd ok", "two"]  # the probes skip empty texts


def test_trainer_streams_shards_and_resumes_mid_shard_with_identical_losses(shard_dir, tmp_path):
    settings = dict(data=str(shard_dir), depth=1, width=32, seq_len=16, batch_size=4)
    cfg = config_from_dict({**settings, "tokens": 64 * 60, "eval_tokens": 256, "device": "cpu"})
    data = ShardData(shard_dir, 16)
    assert data.position(17, 4)["offset"] not in (0,)  # step 17 starts inside a shard
    full = train(cfg, tmp_path / "full")
    part = train(cfg, tmp_path / "resumed", stop_after=17)
    saved = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")["data_position"]
    assert saved == data.position(17, 4) and saved["shard"] > 0
    resumed = train(cfg, tmp_path / "resumed")
    assert len(part.history) == 17
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    assert resumed.row["loss"] == full.row["loss"]
    assert full.row["epochs"] == pytest.approx(64 * 60 / data.meta["train_tokens"])
    assert full.row["epochs"] > 1  # the stream wrapped around
    assert full.row["vocab"] == data.vocab and full.history[-1]["loss"] < full.history[0]["loss"]


def test_shard_source_shares_the_token_source_properties(shard_dir):
    from scalefit.train.data import TokenSource

    data = ShardData(shard_dir, 16)
    m = data.meta
    assert isinstance(data, TokenSource) and data.vocab == m["vocab"]
    assert data.bytes_per_token == m["val_bytes"] / m["val_tokens"] > 1.0
    with pytest.raises(ScaleFitError, match=rf"val split of .* has {m['val_tokens']} tokens"):
        ShardData(shard_dir, m["val_tokens"] - 1)
