"""Shared helpers that keep the benchmarks honest.

- :func:`pin_threads` gives our code and every reference the same BLAS/OpenMP/XLA/torch thread
  settings (call it before numpy, jax or torch are imported; child processes inherit it through
  the environment) and returns what it set, for printing.
- :func:`header` prints the time (UTC), the machine, the thread settings and the load average.
- :func:`alternate` runs several ways of doing the same work in alternating order, ``repeats``
  times, and reports the median wall and CPU time of each (never the best-of: under a shared
  machine's changing load the best run flatters whichever way got lucky).
- :func:`run_fresh` times a command in a fresh process: wall time, the child's CPU time and its
  peak resident memory (``os.wait4``).
- :func:`measure_matmul_peak` gives the best float32 matmul rate of this process, the CPU's
  peak for an MFU (a CPU has no datasheet figure).
- :func:`word_tokens` writes a seeded corpus of random words and builds its token files, for the
  trainer benchmarks that need no real text.

Benchmarks import this module as ``from _harness import ...`` (they are run as scripts from the
repository root, ``python benchmarks/bench_x.py``, so ``benchmarks/`` is on ``sys.path``).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def pin_threads(n: int = 1) -> dict[str, str]:
    """Pin BLAS/OpenMP, XLA's CPU thread pool and torch to ``n`` threads for this process and its
    children; returns the settings (print them with the results).

    Must run before numpy/jax/torch are imported to take full effect; a module already imported
    is reported in the returned dict under ``"warning"``.
    """
    out: dict[str, str] = {}
    for var in THREAD_VARS:
        os.environ[var] = str(n)
        out[var] = str(n)
    xla = os.environ.get("XLA_FLAGS", "")
    want = ["--xla_cpu_multi_thread_eigen=false"] if n == 1 else []
    want.append(f"intra_op_parallelism_threads={n}")
    for flag in want:
        if flag.split("=")[0] not in xla:
            xla = f"{xla} {flag}".strip()
    os.environ["XLA_FLAGS"] = xla
    out["XLA_FLAGS"] = xla
    os.environ["SCALEFIT_BENCH_THREADS"] = str(n)
    late = [m for m in ("numpy", "jax", "torch", "scipy") if m in sys.modules]
    if late:
        out["warning"] = f"imported before pinning: {', '.join(late)}"
    if "torch" in sys.modules:  # pragma: no cover - depends on caller
        import torch

        torch.set_num_threads(n)
        out["torch"] = str(n)
    return out


def argv_threads(default: int = 1, argv: Sequence[str] | None = None) -> int:
    """The ``--threads N`` (or ``--threads=N``) value of the command line, before argparse runs.

    For scripts that must pin threads before their module-level ``import torch``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(args):
        if arg == "--threads" and i + 1 < len(args):
            return int(args[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return default


def pin_torch() -> None:
    """Apply the pinned thread count to torch (call after importing torch)."""
    n = os.environ.get("SCALEFIT_BENCH_THREADS")
    if n:
        import torch

        torch.set_num_threads(int(n))


def loadavg() -> str:
    """The 1/5/15-minute load average as a short string."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # pragma: no cover - platform without it
        return "n/a"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def header(title: str, threads: Mapping[str, str] | None = None) -> None:
    """Print the benchmark's title, date (UTC), machine, thread settings and load average."""
    print(f"# {title}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.platform(terse=True)}"
    )
    if threads:
        print("threads: " + ", ".join(f"{k}={v}" for k, v in threads.items()))
    print(f"load average (1/5/15 min) at start: {loadavg()}")
    sys.stdout.flush()


@dataclass
class Timing:
    """Wall and CPU seconds of every repeat of one way, plus its peak memory if measured."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    load: list[str] = field(default_factory=list)

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def spread(self) -> str:
        return ", ".join(f"{w:.2f}" for w in self.wall)


def alternate(
    ways: Mapping[str, Callable[[], object]], repeats: int = 3, *, verbose: bool = True
) -> dict[str, Timing]:
    """Run each way ``repeats`` times in alternating order (A B A B ...) in this process.

    CPU time is the process's (``time.process_time``), which other processes' load does not
    inflate as much as wall time; both are recorded.
    """
    out = {name: Timing() for name in ways}
    for r in range(repeats):
        order = list(ways) if r % 2 == 0 else list(reversed(list(ways)))
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            ways[name]()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            out[name].wall.append(wall)
            out[name].cpu.append(cpu)
            out[name].load.append(loadavg())
            if verbose:
                print(
                    f"  repeat {r}: {name}: {wall:.3f} s wall, {cpu:.3f} s CPU (load {loadavg()})"
                )
                sys.stdout.flush()
    return out


@dataclass
class Fresh:
    """One fresh-process run: wall s, CPU s (user + system of the child), peak RSS MB, output."""

    wall: float
    cpu: float
    peak_mb: float
    returncode: int
    stdout: str
    stderr: str


def run_fresh(
    cmd: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> Fresh:
    """Run ``cmd`` in a fresh process and measure it (wall, child CPU, peak RSS)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=cwd,
        text=True,
    )
    # Read the pipes before reaping so a chatty child cannot block on a full pipe.
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    proc.stderr.close()
    # ru_maxrss is in kilobytes on Linux.
    return Fresh(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        peak_mb=usage.ru_maxrss / 1024.0,
        returncode=proc.returncode,
        stdout=out,
        stderr=err,
    )


def alternate_fresh(
    cmds: Mapping[str, Sequence[str]],
    repeats: int = 3,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    verbose: bool = True,
    check: bool = True,
) -> tuple[dict[str, Timing], dict[str, list[Fresh]]]:
    """Fresh-process runs of several commands, alternating, ``repeats`` times each."""
    out = {name: Timing() for name in cmds}
    runs: dict[str, list[Fresh]] = {name: [] for name in cmds}
    for r in range(repeats):
        order = list(cmds) if r % 2 == 0 else list(reversed(list(cmds)))
        for name in order:
            f = run_fresh(cmds[name], env=env, cwd=cwd)
            if check and f.returncode != 0:
                raise RuntimeError(f"{name} failed ({f.returncode}):\n{f.stderr[-2000:]}")
            out[name].wall.append(f.wall)
            out[name].cpu.append(f.cpu)
            out[name].peak_mb.append(f.peak_mb)
            out[name].load.append(loadavg())
            runs[name].append(f)
            if verbose:
                print(
                    f"  repeat {r}: {name}: {f.wall:.2f} s wall, {f.cpu:.2f} s CPU, "
                    f"peak {f.peak_mb:.0f} MB (load {loadavg()})"
                )
                sys.stdout.flush()
    return out, runs


def measure_matmul_peak(size: int = 1024, repeats: int = 5, dtype=None) -> float:
    """Best FLOP/s of ``size × size`` float32 matmuls in this process (per CPU-second).

    Timed with ``time.process_time`` so other processes on a shared machine do not count; with
    one torch thread this is one core's achievable peak.
    """
    import torch

    a = torch.randn(size, size, dtype=dtype or torch.float32)
    b = torch.randn(size, size, dtype=dtype or torch.float32)
    a @ b  # warm-up
    best = 0.0
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(4):
            a @ b
        best = max(best, 4 * 2 * size**3 / max(time.process_time() - t0, 1e-9))
    return best


def word_tokens(
    root: Path,
    words: Sequence[str],
    *,
    n_docs: int,
    words_per_doc: int,
    end: str = "",
    seed: int = 0,
    **build,
) -> Path:
    """Token files of ``n_docs`` documents of random ``words`` (seeded) under ``root``.

    The documents go to ``root/c/d<i>.txt`` (each ending with ``end``), the tokens to ``root/t``
    through :func:`scalefit.train.data.build_tokens` with ``build`` as its options.
    """
    import numpy as np

    from scalefit.train.data import build_tokens

    rng = np.random.default_rng(seed)
    folder = Path(root) / "c"
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        (folder / f"d{d}.txt").write_text(" ".join(rng.choice(words, size=words_per_doc)) + end)
    return build_tokens(folder, Path(root) / "t", **build)
