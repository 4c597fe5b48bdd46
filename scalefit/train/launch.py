"""Start a command in several processes of this node through torch's public launcher.

``scalefit train run CONFIG --nproc-per-node N`` runs ``python -m scalefit train run CONFIG``
in N processes with :func:`torch.distributed.launcher.api.elastic_launch`, the launcher behind
``torchrun``, in a process of its own (``python -m scalefit.train.launch``), and turns a failed
process into one :class:`RankFailure` (the CLI prints its :meth:`~RankFailure.line`) instead of
torch's ``ChildFailedError`` traceback. The processes' stderr goes to a log folder while they
run; the launcher reads each one's own last line from it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The loggers of torch's launcher; their lines ("failed (exitcode: 2) local_rank: 1 ...") are
#: replaced by the one :class:`RankFailure` line.
_TORCH_LOGGERS = ("torch.distributed.elastic", "torch.distributed.launcher")
#: What a process may print after its error line while it exits (gloo's teardown; C++ runtime).
_TEARDOWN = frozenset({"terminate called without an active exception"})
#: The one line with which scalefit's command line refuses (exit 2).
_ERROR = re.compile(r"^scalefit( [a-z]+)*: error: (.*)$")


@dataclasses.dataclass(frozen=True)
class RankFailure:
    """The process that explains why a launch failed.

    Attributes
    ----------
    rank : int
        Its global rank (-1: torch's launcher itself ended without a report).
    nproc : int
        Processes launched.
    exitcode : int
        Its exit code (negative: the signal that ended it).
    reason : str
        Its own last line: the ``scalefit: error:`` line without the prefix, else the last line
        it wrote to stderr (a traceback's exception), else torch's description.
    refused : bool
        Whether it said ``scalefit: error:`` (it refused its input; gloo's teardown may still
        abort it, or torch end it, before it exits with 2).
    log : str or None
        Its full stderr, kept when it did not refuse (a crash).

    Examples
    --------
    >>> RankFailure(1, 2, 2, "run.toml: depth must be positive", refused=True).line()
    'rank 1 of 2 refused: run.toml: depth must be positive'
    """

    rank: int
    nproc: int
    exitcode: int
    reason: str
    refused: bool = False
    log: str | None = None

    @property
    def code(self) -> int:
        """The launcher's exit code: 2 for a refusal, else the process's own (128 + a signal)."""
        if self.refused:
            return 2
        return self.exitcode if self.exitcode > 0 else 128 - self.exitcode

    def line(self) -> str:
        """One line naming the rank, its reason and, for a crash, its exit code and log."""
        who = f"rank {self.rank} of {self.nproc}" if self.rank >= 0 else "torch's launcher"
        if self.refused:
            return f"{who} refused: {self.reason}"
        where = f"; its log: {self.log}" if self.log else ""
        return f"{who} failed (exit {self.exitcode}): {self.reason}{where}"


def launch(argv: Sequence[str], *, nproc_per_node: int) -> RankFailure | None:
    """Run ``python -m scalefit ARGV`` in ``nproc_per_node`` processes on this node.

    torch's launcher runs in a process of its own (it changes the signal handlers, the
    environment and the log levels of the process it runs in, and leaves the log files of the
    processes that end first open), which reports back the failure that explains a launch.
    The processes meet at a free port of 127.0.0.1 (torch's c10d rendezvous, no restarts) and
    get ``OMP_NUM_THREADS=1`` unless it is set (as ``torchrun`` does). Their stdout is this
    process's; their stderr is read when they end: rank 0's is repeated after a success.

    Parameters
    ----------
    argv : sequence of str
        The command after ``python -m scalefit`` (e.g. ``["train", "run", "a.toml"]``).
    nproc_per_node : int
        Processes to start (each one is told its ``RANK`` and ``WORLD_SIZE``).

    Returns
    -------
    RankFailure or None
        None when every process exited 0, else the failure that explains the launch.
    """
    import subprocess

    with tempfile.TemporaryDirectory(prefix="scalefit-launch-") as folder:
        report = Path(folder) / "failure.json"
        cmd = [sys.executable, "-m", __name__, str(report), str(nproc_per_node), *argv]
        code = subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False).returncode
        if report.is_file():
            found = json.loads(report.read_text())
            return None if found is None else RankFailure(**found)
    if code == 0:
        return None
    return RankFailure(-1, nproc_per_node, code, "it ended before the processes reported")


def _launch_here(report: str, nproc_per_node: int, argv: Sequence[str]) -> int:
    """Run torch's launcher here; write the failure (or None) to ``report`` as JSON."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    class _Logs(DefaultLogsSpecs):  # remembers where each rank's stderr goes
        def reify(self, envs):
            self.dest = super().reify(envs)
            return self.dest

    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith(_TORCH_LOGGERS) and isinstance(logger, logging.Logger):
            logger.setLevel(logging.CRITICAL + 1)  # their lines are replaced by the report
    for name in _TORCH_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    folder = Path(report).parent
    logs = _Logs(log_dir=str(folder / "logs"), redirects=Std.ERR)
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc_per_node,
        run_id=uuid.uuid4().hex,
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        max_restarts=0,
        logs_specs=logs,
    )
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    failure = None
    try:
        elastic_launch(config, sys.executable)("-m", "scalefit", *argv)
        sys.stderr.write(_read(logs.dest.stderrs.get(0)))
    except SignalException as exc:  # torch's handler of SIGINT/SIGTERM ended the processes
        return 128 + int(exc.sigval)
    except ChildFailedError as exc:
        texts = {rank: _read(logs.dest.stderrs.get(rank)) for rank in exc.failures}
        failure = rank_failure(exc.failures, texts, nproc=nproc_per_node)
        if not failure.refused:  # a crash: keep its stderr where the line says
            kept = tempfile.mkdtemp(prefix=f"scalefit-rank{failure.rank}-")
            Path(kept, "stderr.log").write_text(texts[failure.rank])
            failure = dataclasses.replace(failure, log=str(Path(kept, "stderr.log")))
    except Exception as exc:  # noqa: BLE001 - the rendezvous or a start failed: one line too
        text = " ".join(str(exc).split())[:300]
        failure = RankFailure(-1, nproc_per_node, 1, f"{type(exc).__name__}: {text}")
    Path(report).write_text(json.dumps(None if failure is None else dataclasses.asdict(failure)))
    return 0


def rank_failure(failures: Mapping, stderrs: Mapping[int, str], *, nproc: int) -> RankFailure:
    """The failure that explains a launch, from torch's failures and the processes' stderr.

    A process that refused with its own reason comes first, then one that only says another
    process refused, then one that crashed, and one stopped by a signal (torch ends the others
    when one fails) last.

    Parameters
    ----------
    failures : mapping
        Global rank -> :class:`torch.distributed.elastic.multiprocessing.errors.ProcessFailure`
        (``ChildFailedError.failures``).
    stderrs : mapping of int to str
        Global rank -> what that process wrote to stderr.
    nproc : int
        Processes launched.

    Returns
    -------
    RankFailure
    """
    found = [
        RankFailure(rank, nproc, f.exitcode, *_reason(stderrs.get(rank, ""), f))
        for rank, f in sorted(failures.items())
    ]
    return min(
        found,
        key=lambda r: (
            not r.refused,
            "refused by another process" in r.reason,
            r.exitcode < 0,
            r.rank,
        ),
    )


def _reason(text: str, failure) -> tuple[str, bool]:
    """A process's reason, and whether it is its own refusal (a ``scalefit: error:`` line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() not in _TEARDOWN]
    own = [m for m in map(_ERROR.match, lines) if m]
    if own:
        return own[-1].group(2), True
    if lines:
        return lines[-1], False
    if failure.exitcode < 0:
        return f"ended by signal {failure.signal_name()}", False
    return "exited without a message", False


def _read(path: str | None) -> str:
    if not path or not os.path.isfile(path):
        return ""
    return Path(path).read_text(errors="replace")


if __name__ == "__main__":  # launch()'s own process: REPORT NPROC ARGV...
    sys.exit(_launch_here(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
