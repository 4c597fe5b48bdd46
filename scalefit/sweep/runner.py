"""Run a sweep: resumable, on a local process pool or a cluster scheduler (submitit).

A run is finished iff ``out_dir/runs/<run_id>/result.json`` exists; that file is written
atomically and last, so a kill at any moment loses only the runs in flight, and a rerun of the same
spec skips every finished run.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..core._io import (
    MAX_CONFIG_BYTES,
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    folder_lock,
    inside,
    read_json,
    remove_stale_temps,
)
from ..core._progress import progress_bar
from ..core._validation import VOCABULARY, Options, constraints, spelled, validate
from ..core.errors import ScaleFitError, SweepError, require
from .registry import resolve_task, task_ref
from .spec import Run, SweepSpec, spec_from_dict

RESULT_FILE = "result.json"
CONFIG_FILE = "config.json"
ERROR_FILE = "error.txt"
SPECS_DIR = "specs"
_EXECUTORS = ("local", "slurm")


def run_dir_of(out_dir: str | os.PathLike, run: Run) -> Path:
    """Return the folder of one run inside a sweep's output folder (never a link out of it)."""
    return inside(out_dir, Path("runs") / run.run_id, what="run folder")


def is_finished(out_dir: str | os.PathLike, run: Run) -> bool:
    """Whether ``run`` has a ``result.json`` in ``out_dir``."""
    return (run_dir_of(out_dir, run) / RESULT_FILE).is_file()


def validate_runs(spec: SweepSpec) -> list[Run]:
    """Resolve the task and check every run's config with the task's ``validate_config``.

    Returns
    -------
    list of Run
        ``spec.runs()``.

    Raises
    ------
    ScaleFitError
        If the task cannot be found or a configuration is rejected (the message names the spec).
    """
    try:
        func = resolve_task(spec.task)
    except ScaleFitError as exc:
        raise ScaleFitError(f"{spec.source}: [sweep] task: {exc}") from None
    runs = spec.runs()
    validate = getattr(func, "validate_config", None)
    if validate is not None:
        for run in runs:
            try:
                validate(run.config)
            except ScaleFitError as exc:
                raise ScaleFitError(f"{spec.source}: run {run.run_id}: {exc}") from exc
    return runs


def run_sweep(
    spec: SweepSpec,
    out_dir: str | os.PathLike,
    *,
    workers: int = 1,
    executor: str = "local",
    progress: bool | None = None,
    threads_per_worker: int = 1,
    slurm: dict | None = None,
    overwrite: bool = False,
    wait: bool = True,
    only: set[str] | None = None,
):
    """Run every unfinished run of ``spec`` and collect the results.

    The output folder is locked (an OS file lock, released when the process exits or is killed)
    while the sweep runs, so two processes never train the same run: a second one waits (or, with
    ``wait=False``, raises). Each spec's settings are recorded in ``out_dir/specs/<name>.json``;
    running a spec of the same name with other settings on that folder is refused, naming the keys
    that differ, unless ``overwrite=True`` (which deletes that spec's runs that the new settings no
    longer contain and no other spec in the folder uses). Growing a grid (adding values to a grid
    key) is not a change: the finished runs are kept and only the new ones run. Several specs of
    different names may share one folder.

    Parameters
    ----------
    spec : SweepSpec
        The sweep (see :func:`~scalefit.sweep.load_spec`).
    out_dir : path-like
        Output folder: ``spec.toml``-like ``sweep.json``, ``runs/<run_id>/`` and ``results.csv``.
    workers : int, default 1
        Local executor: number of worker processes (spawn context). ``0`` runs in this process
        (handy for debugging). Slurm executor: ignored (the scheduler decides).
    executor : {"local", "slurm"}
        ``"local"``: a process pool; ``"slurm"``: ``submitit.AutoExecutor``. ``slurm={"cluster":
        "local"}`` selects submitit's local executor (no cluster needed).
    progress : bool, optional
        Show a tqdm progress bar (default: when stderr is a terminal).
    threads_per_worker : int, default 1
        ``torch.set_num_threads`` in each worker (if torch is importable).
    slurm : dict, optional
        Parameters for ``AutoExecutor.update_parameters`` (e.g. ``timeout_min``,
        ``slurm_partition``, ``cpus_per_task``); the special key ``cluster`` is passed to the
        constructor.
    overwrite : bool, default False
        Replace a differently configured spec of the same name in ``out_dir``.
    wait : bool, default True
        Wait for another process that holds the folder's lock instead of raising.
    only : set of str, optional
        Run only the runs with these ids (the others are neither run nor collected).

    Returns
    -------
    pandas.DataFrame
        One row per finished run (config columns, then result columns, then ``run_id``); also
        written atomically to ``out_dir/results.csv``. ``table.attrs["sweep"]`` lists the runs
        this call ran (``"ran"``) and those it found finished (``"skipped"``).

    Raises
    ------
    ScaleFitError
        Bad options, a configuration rejected by the task, a changed spec on an existing folder
        (without ``overwrite``) or a locked folder (with ``wait=False``).
    SweepError
        If some runs raised (after the others finished and ``results.csv`` was written).
    """
    validate(
        "run_sweep",
        locals(),
        {
            "executor": [Options(frozenset(_EXECUTORS))],
            **constraints("workers"),
            "threads_per_worker": list(VOCABULARY["threads"].allowed),
            "overwrite": ["boolean"],
            "wait": ["boolean"],
        },
    )
    runs = validate_runs(spec)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ScaleFitError(f"{out}: is a file; expected an output folder for the sweep.")
    for sub in ("runs", SPECS_DIR, "submitit", "results.csv", "sweep.json"):
        inside(out, sub, what="sweep folder entry")  # the one path policy: no link out of out
    for run in runs:
        run_dir_of(out, run)
    with folder_lock(out, wait=wait, what="sweep folder"):
        atomic_write_json(out / "sweep.json", _claim_spec(spec, out, runs, overwrite=overwrite))
        chosen = [r for r in runs if only is None or r.run_id in only]
        todo = [r for r in chosen if not is_finished(out, r)]
        failures = _execute(
            spec, out, todo, len(chosen), workers, executor, progress, threads_per_worker, slurm
        )
        table = collect_results(out, chosen)
    ran = [r.run_id for r in todo]
    table.attrs["sweep"] = {"ran": ran, "skipped": [r.run_id for r in chosen if r not in todo]}
    if failures:
        names = ", ".join(run_id for run_id, _ in failures[:5])
        raise SweepError(
            f"{spec.source}: {len(failures)} of {len(runs)} runs failed ({names}); "
            f"see {out}/runs/<run_id>/{ERROR_FILE}. "
            f"First error: {_last_line(failures[0][1])}"
        )
    return table


def _execute(spec, out, todo, total, workers, executor, progress, threads, slurm) -> list:
    ref = task_ref(spec.task)
    jobs = [(ref, r.config, r.run_id, str(run_dir_of(out, r)), threads) for r in todo]
    bar = progress_bar(progress, total=total, initial=total - len(todo), desc=spec.name, unit="run")
    failures: list[tuple[str, str]] = []

    def done(run_id: str, error: str | None) -> None:
        if error is not None:
            failures.append((run_id, error))
        bar.update(1)

    try:
        if not jobs:
            pass
        elif executor == "slurm":
            _run_submitit(jobs, out, slurm or {}, done)
        elif workers == 0:
            for job in jobs:
                done(job[2], execute_run(*job))
        else:
            _run_pool(jobs, workers, done)
    finally:
        bar.close()
    return failures


def _claim_spec(spec: SweepSpec, out: Path, runs: list[Run], *, overwrite: bool) -> dict:
    """Refuse a changed spec of the same name on ``out`` (or replace it); record and return it."""
    record = out / SPECS_DIR / f"{spec.name}.json"
    mine = {**spec.to_dict(), "task_ref": task_ref(spec.task)}
    old = _read_record(record)
    if old is not None:
        diff = _differences(old, mine)
        if diff and not overwrite:
            raise ScaleFitError(
                f"{out}: sweep {spec.name!r} was started here with other settings "
                f"({'; '.join(diff[:8])}{'; ...' if len(diff) > 8 else ''}); use "
                f"{spelled('overwrite=True', '--overwrite')} to replace its runs, or another "
                "output folder."
            )
        if diff:
            _drop_old_runs(out, old, {r.run_id for r in runs})
    atomic_write_json(record, mine)
    return mine


def _read_record(path: Path) -> dict | None:
    if not os.path.lexists(path):
        return None
    try:
        data = read_json(path, what="sweep record", max_bytes=MAX_CONFIG_BYTES)
    except ScaleFitError as exc:
        raise ScaleFitError(
            f"unreadable sweep record ({exc}); delete it or use another output folder."
        ) from None
    if not isinstance(data, dict):
        raise ScaleFitError(f"{path}: a sweep record must be a JSON object.")
    return data


def _differences(old: dict, new: dict) -> list[str]:
    """``section.key: old -> new`` for every setting that changed (a grid may only grow)."""
    out = []
    for section in ("sweep", "fixed", "grid"):
        a, b = old.get(section) or {}, new.get(section) or {}
        for key in sorted(set(a) | set(b), key=str):
            if section == "sweep" and key == "description":
                continue
            va, vb = a.get(key, "<unset>"), b.get(key, "<unset>")
            if section == "grid" and isinstance(va, list) and isinstance(vb, list):
                grown = {_canon(v) for v in va} <= {_canon(v) for v in vb}
                if grown:
                    continue
            if va != vb:
                out.append(f"{section}.{key}: {_short(va)} -> {_short(vb)}")
    return out


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _short(value: Any) -> str:
    text = value if value == "<unset>" else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _drop_old_runs(out: Path, old: dict, keep: set[str]) -> None:
    """Delete the runs of the replaced spec that neither the new spec nor another spec uses."""
    import shutil

    for path in sorted((out / SPECS_DIR).glob("*.json")):
        other = _runs_of(_read_record(path))
        if other is not None and path.stem != old.get("sweep", {}).get("name"):
            keep = keep | {r.run_id for r in other}
    for run in _runs_of(old) or []:
        folder = run_dir_of(out, run)
        if run.run_id not in keep and folder.is_dir():
            shutil.rmtree(folder)


def _runs_of(record: dict | None) -> list[Run] | None:
    if record is None:
        return None
    try:
        data = {k: record[k] for k in ("sweep", "fixed", "grid") if k in record}
        return spec_from_dict(data, source="sweep record").runs()
    except ScaleFitError:
        return None


def _last_line(text: str) -> str:
    """The exception line of a traceback, without the module path of scalefit's own errors."""
    lines = text.strip().splitlines()
    last = lines[-1] if lines else "unknown error"
    for prefix in (
        "scalefit.core.errors.ScaleFitError: ",
        "scalefit.core.errors.MissingExtraError: ",
    ):
        if last.startswith(prefix):
            return last[len(prefix) :]
    return last


def execute_run(ref: str, config: dict, run_id: str, run_dir: str, threads: int = 1) -> str | None:
    """Run one task in this process and write its ``result.json``; return an error text or None.

    Skips the run when ``result.json`` already exists. Removes temporary files a killed
    attempt left behind, writes ``config.json`` first, ``result.json`` last (atomically), and
    ``error.txt`` (a traceback) when the task raises.
    """
    path = Path(run_dir)
    if (path / RESULT_FILE).is_file():
        return None
    _set_threads(threads)
    path.mkdir(parents=True, exist_ok=True)
    # A run killed in the middle of an atomic write leaves its temporary file behind: clear the
    # files of writers that are gone (a live writer's file is never touched).
    remove_stale_temps(path)
    atomic_write_json(path / CONFIG_FILE, {"run_id": run_id, "task": ref, "config": config})
    start = time.perf_counter()
    try:
        func = resolve_task(ref)
        result = func(dict(config), path)
        if not isinstance(result, dict):
            raise TypeError(f"task {ref} returned {type(result).__name__}, expected a dict")
    except Exception:  # noqa: BLE001 - recorded and reported by run_sweep
        text = traceback.format_exc()
        atomic_write_text(path / ERROR_FILE, text)
        return text
    payload = {
        "run_id": run_id,
        "config": config,
        "result": result,
        "elapsed_s": time.perf_counter() - start,
    }
    atomic_write_json(path / RESULT_FILE, payload)
    (path / ERROR_FILE).unlink(missing_ok=True)
    return None


def collect_results(out_dir: str | os.PathLike, runs: Iterable[Run] | None = None):
    """Gather finished runs into one tidy DataFrame and write ``out_dir/results.csv``.

    A task returns one row as a dict. A result may instead carry a key ``"rows"`` holding a list of
    dicts: each becomes one line (merged with the config and the result's other scalar keys), which
    lets one run report, e.g., several student depths or checkpoints. Lists and tables in the
    config are written as JSON strings.

    Parameters
    ----------
    out_dir : path-like
        Sweep output folder.
    runs : iterable of Run, optional
        Restrict to these runs (in this order); default: every ``runs/*/result.json``.

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    out = Path(out_dir)
    if runs is None:
        paths = sorted((out / "runs").glob(f"*/{RESULT_FILE}"))
    else:
        paths = [run_dir_of(out, r) / RESULT_FILE for r in runs]
    records: list[dict] = []
    for p in paths:
        if p.is_file():
            records.extend(_read_result(p))
    table = pd.DataFrame.from_records(records)
    atomic_write_csv(out / "results.csv", table)
    return table


def _read_result(path: Path) -> list[dict]:
    try:
        payload = read_json(path, what="run result")
    except ScaleFitError as exc:
        raise ScaleFitError(f"{exc} Delete the run folder to run it again.") from None
    ok = isinstance(payload, dict)
    try:
        if not (
            ok
            and isinstance(payload.get("config"), dict)
            and isinstance(payload.get("result"), dict)
        ):
            raise ValueError("expected an object with 'config' and 'result' objects")
        return _result_rows(payload)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ScaleFitError(
            f"{path}: not a readable run result ({type(exc).__name__}: {exc}); delete the run "
            f"folder to run it again."
        ) from None


def _result_rows(payload: dict) -> list[dict]:
    config = {k: _flat(v) for k, v in payload["config"].items()}
    result = dict(payload["result"])
    rows = result.pop("rows", None)
    base = {**config, **{k: _flat(v) for k, v in result.items()}}
    tail = {"run_id": payload["run_id"]}
    if rows is None:
        return [{**base, **tail}]
    return [{**base, **{k: _flat(v) for k, v in row.items()}, **tail} for row in rows]


def _flat(value: Any) -> Any:
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return value


def _set_threads(threads: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is optional
        return
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _run_pool(jobs: list[tuple], workers: int, done: Callable) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:  # jobs set threads
        futures = {pool.submit(execute_run, *job): job[2] for job in jobs}
        for fut in as_completed(futures):
            try:
                err = fut.result()
            except Exception:  # noqa: BLE001 - e.g. a worker killed by the OS
                err = traceback.format_exc()
            done(futures[fut], err)


def _run_submitit(jobs: list[tuple], out: Path, slurm: dict, done: Callable) -> None:
    submitit = require("submitit", "torch")
    params = dict(slurm)
    cluster = params.pop("cluster", None)
    ex = submitit.AutoExecutor(folder=out / "submitit" / "%j", cluster=cluster)
    if params:
        ex.update_parameters(**params)
    submitted = {ex.submit(execute_run, *job): job[2] for job in jobs}
    for job in submitit.helpers.as_completed(list(submitted), poll_frequency=0.2):
        try:
            err = job.result()
        except Exception:  # noqa: BLE001 - scheduler failure, recorded per run
            err = traceback.format_exc()
        done(submitted[job], err)
