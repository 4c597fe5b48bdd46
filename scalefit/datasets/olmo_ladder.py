"""The OLMo model ladder: validation losses and downstream task metrics, one long table.

Bhagia et al. 2024 (arXiv 2412.04403; github.com/allenai/OLMo-ladder, Apache-2.0) trained five
ladder sizes (190M-3B) at 0.5, 1, 2, 5 and 10 x Chinchilla tokens (kxC = k * 20 tokens per
parameter), a second seed of each 1xC run, and a 7B model to 4T tokens (the target). The 31
CSVs (one a run, one row an evaluation step) are resolved at run time like the other public
tables (``data_dir``, ``SCALEFIT_DATA_DIR``, the cache, a download from the repository at commit
67a3f44), each checked against its sha256, and returned as one validated canonical table::

    from scalefit import datasets
    ladder = datasets.load("olmo_ladder")

Columns: ``run`` (file stem), ``size`` (190M ... 7B), ``params`` and ``flops`` (the ladder's own
counts: parameters, FLOPs per token x tokens), ``tokens`` (``throughput/total_tokens``), ``step``
(``<NA>`` on the target row), ``multiplier`` (k of kxC; NaN on the target), ``rerun`` and
``target`` flags, ``loss`` (C4 validation cross-entropy, nats/token), ``loss_<set>`` for the
other ten validation sets, and ``bpb_<task>`` (bits per byte of the correct answer) and
``acc_<task>`` (accuracy, length-normalised except BoolQ's) for the ten tasks of :data:`TASKS`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import ScaleFitError
from ..core.table import parse_bytes, read_table, require_file_columns

#: Folder of the files inside a data directory.
FOLDER = "olmo_ladder/ladder-runs"
URL = (
    "https://raw.githubusercontent.com/allenai/OLMo-ladder/67a3f44/src/scripts/paper/data/"
    "ladder-runs/"
)
#: The 7B-4T final (annealed) evaluation: the paper's prediction target.
TARGET = "peteish7_eval_anneal"
#: size -> (parameters, training FLOPs per token), as the ladder's code counts them.
SIZES = {
    "190M": (190_354_176, 1.903e9),
    "370M": (371_262_464, 3.444e9),
    "760M": (758_220_288, 6.374e9),
    "1B": (1_279_395_840, 1.011e10),
    "3B": (3_169_537_280, 2.297e10),
    "7B": (6_887_575_552, 4.941e10),
}
_MMLU = {"stem": 0.215, "humanities": 0.335, "social_sciences": 0.219, "other": 0.231}
#: task -> source key (split), as the paper's scripts choose them; MMLU is the weighted mean of
#: its four test categories (weights ``_MMLU``, the ladder's own).
TASKS = {
    "mmlu": "mmlu_{cat}_test",
    "hellaswag": "hellaswag_val",
    "arc_challenge": "arc_challenge_test",
    "arc_easy": "arc_easy_test",
    "piqa": "piqa_val",
    "csqa": "csqa_val",
    "socialiqa": "socialiqa_val",
    "openbookqa": "openbookqa_test",
    "boolq": "boolq_val",
    "winogrande": "winogrande_val",
}
_LOSSES = (
    "dolma_books dolma_common-crawl dolma_pes2o dolma_reddit dolma_stack dolma_wiki ice "
    "m2d2_s2orc pile wikitext_103"
).split()
#: file stem -> sha256 (the data folder's SHA256SUMS; the target plus the 30 ladder runs).
SHA256 = {
    stem.removesuffix(".csv"): digest
    for digest, stem in (
        line.split()
        for line in """
d4e9f80960149676352b61b739c4dca727bffee5e7a8f41919119365fcde0534  190M-0.5xC.csv
192b115c3f02b6503043280f8303c59f5b10897cd631f1b8ec6aea944d22faa6  190M-10xC.csv
50e635e970e4a29c838d644f942503f9ef6e0d78feb744055447413de42a3e2b  190M-1xC-rerun.csv
8ac0066547d5edec4d05d2b861a26c7faf591eef6971e11acba2450a45e69c27  190M-1xC.csv
db90c75f8d031d0754e7108f1a8d16f372603e0c04d2cb00cca08cf272ecf86a  190M-2xC.csv
aefe54fa03bd158d6da178b1eb2ece88cb0681bb32403845b6e544ae9e4e5dcf  190M-5xC.csv
7c44ecf10ddaeba4c5ceb26ac0db8b9454163c19903556238d3117685768126a  1B-0.5xC.csv
ec7e7487c67a774d9b919ec35121966ded7ae2ce5ede135f1d32f509f451476f  1B-10xC.csv
878e664acbb68df93b046a4242ccac12b321276e1f2fcbbbc6fa8779bd5eaa24  1B-1xC-rerun.csv
7fe91f0552829238e591e55c03f66b743ac5931388d9710457a845d92c2d9102  1B-1xC.csv
34ba12a08a52e10e89a71d88a5c13538c3df21e5e993c476cadb08eb4b2eb354  1B-2xC.csv
d195153f05b846f6d4f8ca95247d1f79d9d00e898d856b244b17e20431539ddb  1B-5xC.csv
04e12eec843bb7b8bf292ec8837edd8db63010469e457d145a1757d48a91bac9  370M-0.5xC.csv
3f25b4ec4035caeb71b787d165857667779dc3b92739c6379b8f8ce7079fcb58  370M-10xC.csv
e27c89356cc6c842585c0232bb3be20bd066c2d4f859d1a3c772c43e5b6887c7  370M-1xC-rerun.csv
3597a61872596affbb61e83f36c7cc3fe43485c3ed30ba6d658064b57edcea07  370M-1xC.csv
73c686e580ad0600ca12334bf22ab3dad3265583a948e3beaae5b79b9a20c137  370M-2xC.csv
199905d322b0332b69f1d0a40de9be43e5eb3cf576fc1d3031578cdea09708fa  370M-5xC.csv
35247d4ff9af52c11bdec95a31e069599f43564ba6094a3893b49d91aa258410  3B-0.5xC.csv
1ff388361b6d8e4548aaaaecd8a0437a21e28b9af11c4696225e322c8526e488  3B-10xC.csv
5c2b189aa82b964c4005fce327b42e9399110d297c83903d03d03d0892e11d7d  3B-1xC-rerun.csv
bd5dbad1b2942c58439006f77dba46ff2f66ad8760f8d709f9ced4fcb387bedb  3B-1xC.csv
b933055d54221855c893245331770c0e7314dea5203518640da88773d92d8e47  3B-2xC.csv
4b02c35ea9b3623402ac3a401dbc66ed827dcecede04343ea65cc2bbf6bfd962  3B-5xC.csv
a02cee96b21c78a6a9c71ba99ead71c454fc6561e50b778681ab1d7182df6cf6  760M-0.5xC.csv
e256c9df6d3b7af66bbcf4dc7ca84b45a812bd205b70648ca5177c8b74f6ff40  760M-10xC.csv
f5b2775ebc27c80f21e13e0bf35622007b8b30f09734ab0bb6f7e871bf33103b  760M-1xC-rerun.csv
a830185275c91cc077379540ec91a71b4bea6f191ca99a8090c851be19e7956d  760M-1xC.csv
8c1ad2bf7da390b9eed24af7b6eb12a6393cc077164d51b4e4740f7221f1193c  760M-2xC.csv
9c08b58d2625f427253bbd2079bad3a90726a66486154dd4f82ef84560e275ec  760M-5xC.csv
0742d6c113aa0f9c789cf9e5745678fc6f30eb9b873a1f98068fc6f6522c85df  peteish7_eval_anneal.csv
""".strip().splitlines()
    )
}
_RUN = re.compile(r"^(?P<size>\w+)-(?P<k>[\d.]+)xC(?P<rerun>-rerun)?$")


def url(stem: str) -> str:
    """Public raw URL of one run's CSV (the checksum guards what it serves)."""
    return f"{URL}{stem}.csv"


def _task_columns(frame: pd.DataFrame, path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for task, key in TASKS.items():
        metric = "acc" if task == "boolq" else "len_norm"
        keys = [key.format(cat=c) for c in _MMLU] if "{cat}" in key else [key]
        w = np.array(list(_MMLU.values()) if len(keys) > 1 else [1.0])
        for col, src in (("bpb", "eval/downstream_bpb/{}_rc_5shot_bpb"), ("acc", None)):
            names = [
                src.format(k) if src else f"eval/downstream/{k}_rc_5shot_{metric}" for k in keys
            ]
            require_file_columns(frame, names, path)
            out[f"{col}_{task}"] = frame[names].to_numpy(float) @ w / w.sum()
    return out


def frame_of(raw: bytes, path: Path, stem: str) -> pd.DataFrame:
    """The canonical rows of one run's CSV bytes (checked: columns and values)."""
    frame = parse_bytes(raw, path, "ladder CSV")
    target = stem == TARGET
    m = None if target else _RUN.match(stem)
    size = "7B" if target else m["size"]
    need = ["throughput/total_tokens", "eval/c4_en-validation/CrossEntropyLoss"]
    need += [] if target else ["_step"]
    need += [f"eval/{name}-validation/CrossEntropyLoss" for name in _LOSSES]
    require_file_columns(frame, need, path)
    params, flops_per_token = SIZES[size]
    tokens = frame["throughput/total_tokens"].to_numpy(float)
    cols = {
        "run": stem,
        "size": size,
        "params": float(params),
        "tokens": tokens,
        "flops": flops_per_token * tokens,
        "step": pd.array([pd.NA] * len(frame) if target else frame["_step"], dtype="Int64"),
        "multiplier": np.nan if target else float(m["k"]),
        "rerun": bool(m and m["rerun"]),
        "target": target,
        "loss": frame["eval/c4_en-validation/CrossEntropyLoss"].to_numpy(float),
    }
    for name in _LOSSES:
        key = f"eval/{name}-validation/CrossEntropyLoss"
        cols[f"loss_{name.replace('-', '_')}"] = frame[key].to_numpy(float)
    return pd.DataFrame({**cols, **_task_columns(frame, path)})


def checked(table: pd.DataFrame, sources: list[str]) -> pd.DataFrame:
    """The concatenated runs as a validated canonical table (finite, accuracies in [0, 1])."""
    metrics = [c for c in table.columns if c.startswith(("bpb_", "acc_", "loss_"))]
    bad = ~np.isfinite(table[metrics].to_numpy(float))
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ScaleFitError(f"run {table['run'].iloc[row]!r}: {metrics[col]} is not finite.")
    acc = table.filter(like="acc_")
    if ((acc < 0) | (acc > 1)).to_numpy().any():
        raise ScaleFitError("olmo_ladder: an accuracy lies outside [0, 1].")
    out = read_table(table.reset_index(drop=True), {c: c for c in table.columns})
    out.attrs["scalefit"].update(
        dataset="olmo_ladder", source=sources[0].rsplit("/", 1)[0], loss_unit="nats/token"
    )
    return out
