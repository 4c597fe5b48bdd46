"""A dependency's refusal is one line naming the file and the reason, exit 2.

A Hugging Face folder whose ``pytorch_model.bin`` pickles a call (torch's ``weights_only``
refuses it) or whose ``model.safetensors`` has tensors at overlapping offsets (its header passes
scalefit's own checks; the safetensors library refuses it): ``scalefit probe hf`` prints one line
naming the weight file, never torch's or safetensors' traceback, and nothing runs.
"""

from __future__ import annotations

import json
import os
import struct

import pytest
from hostile import GPT2, assert_refused, cli

pytest.importorskip("torch")
pytest.importorskip("transformers")


class _Call:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _weights(folder, kind: str, marker) -> None:
    import torch

    if kind == "pickled call":
        torch.save({"transformer.wte.weight": _Call(marker)}, folder / "pytorch_model.bin")
    else:
        header = {
            name: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
            for name in ("transformer.wte.weight", "transformer.wpe.weight")
        }
        text = json.dumps(header).encode()
        data = struct.pack("<Q", len(text)) + text + b"\0" * 8
        (folder / "model.safetensors").write_bytes(data)


@pytest.mark.parametrize(
    ("kind", "file", "reason"),
    [
        ("pickled call", "pytorch_model.bin", "unsupported GLOBAL"),
        ("overlapping tensors", "model.safetensors", "refused by safetensors"),
    ],
)
def test_a_refused_weight_file_is_one_line(tmp_path, capsys, kind, file, reason):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(GPT2))
    marker = tmp_path / "pwned"
    _weights(folder, kind, marker)
    text = tmp_path / "t.txt"
    text.write_text("one two three\n\nfour five six\n")
    out = tmp_path / "out"
    args = ["probe", "hf", folder, "--text", text, "--tokens", "64", "--out", out]
    line = assert_refused(cli(capsys, args), file)
    assert reason in line and str(folder / file) in line
    assert not marker.exists()
