"""Harness for the hostile-input corpus: run the CLI and assert one of four verdicts.

A case is run in-process (fast, :func:`cli`) or in a real child process with a time limit
(:func:`cli_process`, for inputs that could block or run code). :func:`assert_refused` states what
"handled" means for bad input: exit 2, one line on stderr naming the file or option, no traceback,
no partial output left behind.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from scalefit.cli import main

#: Seconds a child process may take before the case counts as a hang.
HANG_S = 120

#: The ``config.json`` of a tiny GPT-2 model folder (2 blocks, width 32), for hostile-folder cases.
GPT2 = {
    "model_type": "gpt2",
    "architectures": ["GPT2LMHeadModel"],
    "n_layer": 2,
    "n_embd": 32,
    "n_head": 2,
    "vocab_size": 100,
    "n_positions": 64,
}


def cli(capsys, args: Sequence[object]):
    """Run ``scalefit args`` in-process; an escaping exception is returned as ``"traceback"``."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    except Exception as exc:  # noqa: BLE001 - this is what the corpus looks for
        out = capsys.readouterr()
        return "traceback", out.out, f"{type(exc).__name__}: {exc}\n{out.err}"
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_process(
    args: Sequence[object],
    *,
    cwd: str | os.PathLike | None = None,
    env: dict | None = None,
    timeout: float = HANG_S,
    launcher: Sequence[str] | None = None,
):
    """Run ``python -m scalefit args`` (or ``launcher + args``) in a child; a hang is ``"hang"``."""
    cmd = [*(launcher or [sys.executable, "-m", "scalefit"]), *map(str, args)]
    full_env = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        return "hang", exc.stdout or "", exc.stderr or ""
    return done.returncode, done.stdout, done.stderr


#: The one line of a refusal: the command's (``scalefit: error: ...``) or the parser's, for a
#: value outside an option's declared range (``scalefit toy run: error: argument --workers: ...``).
ERROR_LINE = re.compile(r"scalefit( [a-z]+)*: error: ")


def error_lines(err: str) -> list[str]:
    """The stderr lines that are not warnings."""
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("scalefit: warning:")]


def assert_refused(
    result,
    *names: str,
    outputs: Iterable[str | os.PathLike] = (),
    case: object = "",
) -> str:
    """Assert a clean refusal: exit 2, one error line naming one of ``names``, no output files.

    Parameters
    ----------
    result : tuple
        ``(code, out, err)`` from :func:`cli` or :func:`cli_process`.
    *names : str
        Words of which at least one must appear in the error line (a file, an option, a field).
    outputs : iterable of path-like
        Files that must not exist afterwards (no partial output).
    case : object
        Shown in failure messages.

    Returns
    -------
    str
        The error line.
    """
    code, out, err = result
    where = f"case {case!r}: exit {code!r}, stderr {err[-2000:]!r}"
    assert code != "hang", f"HANG: {where}"
    assert code != "traceback" and "Traceback" not in err, f"TRACEBACK: {where}"
    assert code == 2, f"WRONG EXIT: {where}"
    lines = error_lines(err)
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), f"NOT ONE LINE: {where}"
    if names:
        assert any(n in lines[0] for n in names), f"NAMES NONE OF {names}: {where}"
    for path in outputs:
        assert not Path(path).exists(), f"PARTIAL OUTPUT {path}: {where}"
    return lines[0]


def trainer_run(folder: Path, **config) -> Path:
    """A trainer run folder written by hand: ``train_config.json`` and a 40-step ``history.csv``."""
    folder.mkdir()
    cfg = dict(batch_size=4, seq_len=16, depth=1, width=32, vocab=256, tokens=2560)
    cfg.update(warmup_frac=0.1, lr=1e-3, min_lr_ratio=0.1, **config)
    (folder / "train_config.json").write_text(json.dumps(cfg))
    rows = [f"{i},{1e-3 * min(1, (i + 1) / 4)},{3 - 0.02 * i}" for i in range(40)]
    (folder / "history.csv").write_text("step,lr,loss\n" + "\n".join(rows) + "\n")
    return folder
