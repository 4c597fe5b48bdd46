"""Hostile curve files: sizes taken from a file are checked before use, corruption is reported.

A W&B step of 29 digits, a TensorBoard record whose length prefix is 2**62 (at the start or after
valid records), a scalar logged at step 2**62, one flipped byte in an event file, a text loss in a
trainer's ``history.csv``, ``batch_size = 0`` in its ``train_config.json``: each is one line and
exit 2. A folder of thousands of tiny event files is read in time proportional to its bytes.
"""

from __future__ import annotations

import json
import struct
import time

import numpy as np
import pytest
from hostile import assert_refused, cli, trainer_run

pytest.importorskip("tensorboard")

from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: E402

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.curves import read_tensorboard  # noqa: E402
from scalefit.curves._events import masked_crc32c  # noqa: E402


def _record(data: bytes, *, length: int | None = None) -> bytes:
    head = struct.pack("<Q", len(data) if length is None else length)
    return (
        head
        + struct.pack("<I", masked_crc32c(head))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _scalar(step: int, value_: float, tag: str = "loss", *, tensor: bool = False) -> bytes:
    value = summary_pb2.Summary.Value(tag=tag)
    if tensor:  # the TF2 form: a rank-0 tensor with the scalars plugin's metadata
        from tensorboard.util.tensor_util import make_tensor_proto

        value.tensor.CopyFrom(make_tensor_proto(np.float32(value_)))
        value.metadata.plugin_data.plugin_name = "scalars"
    else:
        value.simple_value = value_
    summary = summary_pb2.Summary(value=[value])
    return event_pb2.Event(step=step, wall_time=1.0, summary=summary).SerializeToString()


def _events(folder, steps, *, tensor=False, name="events.out.tfevents.1.host") -> bytes:
    folder.mkdir(parents=True, exist_ok=True)
    data = _record(event_pb2.Event(file_version="brain.Event:2").SerializeToString())
    data += b"".join(_record(_scalar(s, 3.0 - 0.01 * s, tensor=tensor)) for s in steps)
    (folder / name).write_bytes(data)
    return data


def test_crc32c_matches_the_published_check_value():
    # CRC-32C of "123456789" is 0xE3069283 (RFC 3720); masked as TFRecord files store it.
    crc = 0xE3069283
    assert masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@pytest.mark.parametrize("tensor", [False, True])
def test_both_scalar_forms_are_read_and_a_restart_purges_orphans(tmp_path, tensor):
    _events(tmp_path / "a", range(1, 31), tensor=tensor)
    # a second file: the run resumed from step 20 and stopped at 25; 26..30 are orphans
    second = _events(tmp_path / "b", range(20, 26), tensor=tensor, name="x")
    (tmp_path / "a" / "events.out.tfevents.2.host").write_bytes(second)
    table = read_tensorboard(tmp_path)
    assert table["step"].tolist() == list(range(1, 26))


@pytest.mark.parametrize("where", ["start", "after valid records"])
def test_a_huge_length_prefix_is_refused_before_reading(tmp_path, capsys, where):
    good = _events(tmp_path / "r", range(1, 20)) if where != "start" else b""
    hostile = struct.pack("<Q", 2**62)
    data = good + hostile + struct.pack("<I", masked_crc32c(hostile)) + b"x" * 64
    (tmp_path / "r" / "events.out.tfevents.1.host").parent.mkdir(exist_ok=True)
    (tmp_path / "r" / "events.out.tfevents.1.host").write_bytes(data)
    line = assert_refused(cli(capsys, ["curves", "fit", tmp_path / "r"]), "events.out.tfevents")
    assert "4,611,686,018,427,387,904 bytes" in line


@pytest.mark.parametrize("offset", [3, 20, 200, -3])
def test_one_flipped_byte_is_reported_not_taken_as_the_end(tmp_path, capsys, offset):
    data = bytearray(_events(tmp_path / "r", range(1, 60)))
    data[offset if offset >= 0 else len(data) // 2] ^= 0x10
    (tmp_path / "r" / "events.out.tfevents.1.host").write_bytes(bytes(data))
    line = assert_refused(cli(capsys, ["curves", "fit", tmp_path / "r"]), "events.out.tfevents")
    assert "corrupt" in line


def test_an_incomplete_last_record_is_left_out_with_a_warning(tmp_path):
    data = _events(tmp_path, range(1, 30))
    (tmp_path / "events.out.tfevents.1.host").write_bytes(data[:-7])
    with pytest.warns(UserWarning, match="incomplete record"):
        table = read_tensorboard(tmp_path)
    assert table["step"].max() == 28


def test_a_scalar_at_step_2_62_is_refused(tmp_path, capsys):
    _events(tmp_path, [1, 2, 3, 2**62])
    assert_refused(cli(capsys, ["curves", "fit", tmp_path]), "step")


def test_thousands_of_tiny_event_files_are_read_linearly(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for i in range(2_000):
        (folder / f"events.out.tfevents.{i:06d}.host").write_bytes(_record(_scalar(i + 1, 2.0)))
    start = time.perf_counter()
    table = read_tensorboard(folder)
    assert len(table) == 2_000
    assert time.perf_counter() - start < 20  # under 1 s; TensorBoard's reader: 46 s for 2,000


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_a_wandb_step_of_29_digits_is_refused(tmp_path, capsys, suffix):
    big = 10**28
    path = tmp_path / f"h.{suffix}"
    if suffix == "csv":
        path.write_text(f"_step,loss\n1,3.0\n2,2.9\n{big},2.8\n")
    else:
        rows = [{"_step": 1, "loss": 3.0}, {"_step": big, "loss": 2.8}]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = assert_refused(cli(capsys, ["curves", "fit", "--format", "wandb", path]), "step")
    assert "2**53" in line


def test_a_text_loss_cell_in_history_csv_is_one_line(tmp_path, capsys):
    run = trainer_run(tmp_path / "run")
    lines = (run / "history.csv").read_text().splitlines()
    lines[5] = "4,0.001,abc"
    (run / "history.csv").write_text("\n".join(lines) + "\n")
    line = assert_refused(cli(capsys, ["curves", "fit", run]), "history.csv")
    assert "'loss'" in line and "'abc'" in line


@pytest.mark.parametrize("key", ["batch_size", "seq_len"])
def test_a_zero_size_in_train_config_is_one_line(tmp_path, capsys, key):
    run = trainer_run(tmp_path / "run", **{key: 0})
    line = assert_refused(cli(capsys, ["curves", "fit", run]), "train_config.json")
    assert key in line


def test_read_tensorboard_refuses_in_python_too(tmp_path):
    data = bytearray(_events(tmp_path, range(1, 10)))
    data[40] ^= 1
    (tmp_path / "events.out.tfevents.1.host").write_bytes(bytes(data))
    with pytest.raises(ScaleFitError, match="corrupt TensorBoard event file"):
        read_tensorboard(tmp_path)


@pytest.mark.parametrize(
    ("tensor", "words"),
    [
        ({"dtype": 999, "float_val": [1.0]}, "is not a scalar"),  # no such dtype
        ({"dtype": 1, "tensor_content": b"abc"}, "is not a scalar"),  # 3 bytes for a float32
        ({"dtype": 1, "float_val": [1.0], "tensor_shape": {"dim": [{"size": 2**40}]}}, "tags []"),
    ],
)
def test_a_malformed_scalar_tensor_is_one_line(tmp_path, capsys, tensor, words):
    from tensorboard.compat.proto import tensor_pb2

    value = summary_pb2.Summary.Value(tag="loss", tensor=tensor_pb2.TensorProto(**tensor))
    value.metadata.plugin_data.plugin_name = "scalars"
    events = [
        event_pb2.Event(step=s, summary=summary_pb2.Summary(value=[value])).SerializeToString()
        for s in (1, 2, 3)
    ]
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"".join(map(_record, events)))
    line = assert_refused(cli(capsys, ["curves", "fit", tmp_path]), str(tmp_path))
    assert words in line  # the 2**40-element shape is never allocated: not a scalar, left out
