"""The plan's state: candidates, asked runs, results and decisions, saved as JSON in a folder.

:func:`plan` starts one, :func:`load` reads it back; :meth:`Plan.ask` chooses runs through
:func:`scalefit.design.next_runs` (one call, in :func:`scalefit.plan.steps.choose`),
:meth:`Plan.tell` refits with :func:`scalefit.fit`, records the decision at the target budget from
:func:`scalefit.allocate` and checks the stopping rule. The state is written atomically after each
step, so a plan killed at any moment resumes from its last step.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core._io import atomic_write_json, ensure_folder, inside, read_json
from ..core._validation import IsType, constraints, spelled, validate, validate_mapping
from ..core.accounting import training_flops
from ..core.errors import ScaleFitError
from .steps import FIT_FILE, RUN_COLUMNS, choose, decide, match

STATE_FILE = "plan.json"
#: The decision's numbers in the report and their formats (a NaN is saved as None: "n/a").
_SHOWN = {"params": ".4g", "params_lo": ".4g", "params_hi": ".4g", "ratio": ".3g"}
_SHOWN.update(depth="g", width="g", tokens=".4g")
SCHEMA = 1


@dataclass
class Plan:
    """An ask/tell plan saved in ``folder`` (start one with :func:`plan`, reopen with :func:`load`).

    Attributes
    ----------
    folder : pathlib.Path
        Where ``plan.json`` (settings, candidates, asked runs, results, decisions) and ``fit.json``
        (the last fit) live.
    settings : dict
        ``target_budget, law, max_run_flops, total_flops, stop_width, seed, n_boot, trainer``.
    candidates : DataFrame
        ``run_id, depth, width, params, tokens, flops`` of every run the plan may ask for.
    asked, results, decisions : list of dict
        Asked runs (``run_id, round, choice``), told results (``run_id, depth, width, params,
        tokens, flops, loss``) and one decision per tell (N*, depth, width, tokens at the target
        budget with its calibrated interval, ``ratio`` the draws' ``hi / lo``, ``notes``).
    """

    folder: Path
    settings: dict
    candidates: pd.DataFrame
    asked: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)

    # -- what the plan knows -------------------------------------------------------------
    @property
    def pending(self) -> pd.DataFrame:
        """Runs asked and not yet told, in the order asked (with ``round`` and ``config``)."""
        told = {r["run_id"] for r in self.results}
        ids = [a["run_id"] for a in self.asked if a["run_id"] not in told]
        return self.runs(ids)

    @property
    def flops_spent(self) -> float:
        """Compute of the told runs (``sum 6·N·T``)."""
        return float(sum(r["flops"] for r in self.results))

    def table(self) -> pd.DataFrame:
        """The told runs: ``run_id, depth, width, params, tokens, flops, loss``."""
        cols = ["run_id", *RUN_COLUMNS, "loss"]
        return pd.DataFrame(self.results, columns=cols)

    def stop_reason(self) -> str | None:
        """Why the plan is finished (``"interval"``, ``"compute"``), or None while it is not."""
        last = self.decisions[-1] if self.decisions else {}
        ratio = last.get("ratio") if last.get("converged") else None  # a converged fit's only
        if ratio is not None and ratio <= self.settings["stop_width"]:
            return "interval"
        if self.pending.empty and self.free().empty:
            return "compute"
        return None

    def status(self) -> dict[str, Any]:
        """A JSON-safe summary: runs, compute, the last decision and the stop reason."""
        return {
            "target_budget": self.settings["target_budget"],
            "law": self.settings["law"],
            "rounds": max((a["round"] for a in self.asked), default=0),
            "runs_told": len(self.results),
            "runs_pending": len(self.pending),
            "flops_spent": self.flops_spent,
            "total_flops": self.settings["total_flops"],
            "stop_width": self.settings["stop_width"],
            "decision": self.decisions[-1] if self.decisions else None,
            "stop": self.stop_reason(),
        }

    def report(self) -> str:
        """The status as a few lines of text."""
        s = self.status()
        cap = "no limit" if s["total_flops"] is None else f"{s['total_flops']:.3g}"
        lines = [
            f"plan for {s['target_budget']:.3g} FLOPs ({s['law']}): round {s['rounds']}, "
            f"{s['runs_told']} runs told, {s['runs_pending']} pending, "
            f"{s['flops_spent']:.3g} FLOPs spent of {cap}",
        ]
        d = s["decision"]
        if d and d.get("params") is not None:
            g = {k: "n/a" if d.get(k) is None else f"{d[k]:{f}}" for k, f in _SHOWN.items()}
            shape = "" if d["depth"] is None else f", depth {g['depth']}, width {g['width']}"
            lines.append(
                f"decision: N* {g['params']} [{g['params_lo']}, {g['params_hi']}] "
                f"(draws hi/lo {g['ratio']}, stop at {s['stop_width']:g}){shape}, "
                f"tokens {g['tokens']}{'' if d.get('converged') else ' (the fit did not converge)'}"
            )
        notes = (d or {}).get("notes", [])
        lines += [f"note: {note}" for note in notes[:3]]
        if len(notes) > 3:
            lines.append(f"note: {len(notes) - 3} more in {STATE_FILE}")
        stop = {"interval": "the interval is narrow enough", "compute": "no run fits the "
                "compute left"}.get(s["stop"], "not yet")  # fmt: skip
        lines.append(f"stop: {stop}")
        return "\n".join(lines)

    # -- ask / tell ----------------------------------------------------------------------
    def ask(self, k: int = 12) -> pd.DataFrame:
        """Choose up to ``k`` new runs, record them as asked and save the plan.

        Returns
        -------
        DataFrame
            ``run_id, round, depth, width, params, tokens, flops, config`` (``config``: the
            trainer settings that produce the run; empty without a trainer); ``attrs["choice"]``
            says how they were chosen. Empty when the stopping rule holds or no candidate fits
            the compute left.
        """
        validate("Plan.ask", {"k": k}, constraints("k"))
        if self.stop_reason() is not None:
            return self.runs([])
        chosen, how = choose(self, int(k))
        rnd = max((a["round"] for a in self.asked), default=0) + 1
        self.asked += [{"run_id": i, "round": rnd, "choice": how} for i in chosen]
        self.save()
        out = self.runs(chosen)
        out.attrs["choice"] = how
        return out

    def tell(self, results: pd.DataFrame) -> dict | None:
        """Add the losses of asked runs, refit, record the decision and save the plan.

        Parameters
        ----------
        results : DataFrame
            A ``loss`` column, and ``run_id`` or the runs' ``params, tokens`` (and ``depth, width``
            where the candidates have them) to say which asked run each row is. Measured
            ``params, tokens`` (a trainer's own count) replace the planned ones in the fit. A
            NaN loss (a diverged run) counts as compute spent and stays out of the fit.

        Returns
        -------
        dict or None
            The new decision (see :attr:`decisions`), None while too few runs are told to fit.

        Raises
        ------
        ScaleFitError
            A row the plan did not ask for, or one already told; a loss or measured size that
            is text, zero or negative.
        """
        rows = match(self, pd.DataFrame(results))
        self.results += rows
        decision = decide(self)
        self.decisions.append(decision)
        self.save()
        return decision if decision.get("params") is not None else None

    # -- files ---------------------------------------------------------------------------
    def save(self) -> Path:
        """Write ``plan.json`` atomically."""
        state = {
            "schema": SCHEMA,
            "settings": self.settings,
            "candidates": self.candidates.to_dict(orient="list"),
            "asked": self.asked,
            "results": self.results,
            "decisions": self.decisions,
        }
        return atomic_write_json(inside(self.folder, STATE_FILE, what="plan file"), state)

    def last_fit(self):
        """The last fit (``fit.json``), or None before the first."""
        from ..fit import FitResult

        path = inside(self.folder, FIT_FILE, what="plan file")
        return FitResult.load(path) if path.is_file() else None

    # -- candidates ----------------------------------------------------------------------
    def runs(self, ids: list[str]) -> pd.DataFrame:
        """The candidate runs ``ids`` with their ``round`` and trainer ``config``."""
        cand = self.candidates.set_index("run_id")
        out = cand.loc[ids, RUN_COLUMNS].reset_index()
        rounds = {a["run_id"]: a["round"] for a in self.asked}
        out.insert(1, "round", [rounds.get(i, 0) for i in ids])
        out["config"] = [run_config(self.settings["trainer"], r)[0] for _, r in out.iterrows()]
        return out

    def free(self) -> pd.DataFrame:
        """Candidates not yet asked that fit the compute left."""
        asked = {a["run_id"] for a in self.asked}
        free = self.candidates[~self.candidates["run_id"].isin(asked)]
        return free[free["flops"] <= self.compute_left() * (1 + 1e-12)]

    def compute_left(self) -> float:
        """Compute not yet spent nor promised to pending runs (inf without ``total_flops``)."""
        total = self.settings["total_flops"]
        if total is None:
            return math.inf
        return total - self.flops_spent - float(self.pending["flops"].sum())


def run_config(trainer: dict | None, row) -> tuple[dict, dict]:
    """The trainer settings of a candidate run and its grid point (``depth, width, tokens``)."""
    if trainer is not None and not (np.isfinite(row["depth"]) and np.isfinite(row["width"])):
        raise ScaleFitError(
            "plan: with trainer settings every candidate needs depth and width (the runs are "
            "trained); the candidates table lacks them."
        )
    if trainer is None:
        return {}, {"params": float(row["params"]), "tokens": float(row["tokens"])}
    point = {"depth": int(row["depth"]), "width": int(row["width"]), "tokens": int(row["tokens"])}
    return {**trainer, **point}, point


def _candidate_table(candidates, trainer: dict | None) -> pd.DataFrame:
    from ..sweep.spec import make_run_id

    cand = pd.DataFrame(candidates).copy()
    missing = sorted({"params", "tokens"} - set(cand.columns))
    if missing or cand.empty:
        raise ScaleFitError(
            f"The 'candidates' parameter of plan must be a non-empty table with columns "
            f"params and tokens (and depth, width). Missing {missing or 'rows'}."
        )
    for col in ("depth", "width", "params", "tokens"):
        cand[col] = pd.to_numeric(cand[col], errors="coerce") if col in cand else np.nan
    with np.errstate(over="ignore", invalid="ignore"):  # 1e308 params: refused just below
        cand["flops"] = training_flops(cand["params"], cand["tokens"])
    vals = cand[["params", "tokens", "flops"]].to_numpy(float)
    if not np.all(np.isfinite(vals) & (vals > 0)):
        raise ScaleFitError(
            "plan: candidate params and tokens must be finite and positive (and 6·N·T finite)."
        )
    cand = cand[RUN_COLUMNS].drop_duplicates().reset_index(drop=True)
    ids = []
    for _, row in cand.iterrows():
        config, point = run_config(trainer, row)
        ids.append(make_run_id(config or point, point))
    cand.insert(0, "run_id", ids)
    return cand


def plan(
    target_budget: float,
    folder: str | os.PathLike,
    *,
    candidates: pd.DataFrame,
    law: str = "chinchilla",
    max_run_flops: float | None = None,
    total_flops: float | None = None,
    stop_width: float = 1.5,
    n_boot: int = 200,
    seed: int = 0,
    trainer: dict | None = None,
) -> Plan:
    """Start a plan that picks runs to pin down the compute-optimal N* at ``target_budget``.

    Parameters
    ----------
    target_budget : float
        The budget (FLOPs) whose decision (N*, depth, width, tokens) the plan pins down.
    folder : path-like
        The folder for the plan's state (``plan.json``, ``fit.json``; one plan per folder).
    candidates : DataFrame
        The runs the plan may ask for: ``params, tokens`` (and ``depth, width`` for laws of
        shape, or to train them); e.g. the points of a grid used as an oracle.
    law : str, default "chinchilla"
        The law fitted after each tell.
    max_run_flops : float, optional
        The largest run the hardware allows (``6·N·T``); larger candidates are dropped.
    total_flops : float, optional
        Compute for all the plan's runs together (default: no limit but the candidates).
    stop_width : float, default 1.5
        Stop when the bootstrap draws' interval of N* at the target budget has ``hi / lo`` at
        most this (the calibrated interval, which adds the law's misfit, is the one reported).
    n_boot : int, default 200
        Bootstrap resamples of each fit (their draws drive the choice and the intervals).
    seed : int, default 0
        Seed of the fits.
    trainer : dict, optional
        Trainer settings (``scalefit.train`` keys without depth, width, tokens) for
        :func:`scalefit.plan.run_plan`.

    Returns
    -------
    Plan

    Examples
    --------
    >>> import scalefit
    >>> grid = scalefit.datasets.load("gemstones").groupby("run").tail(1)  # doctest: +SKIP
    >>> p = scalefit.plan(1e22, "my_plan", candidates=grid)  # doctest: +SKIP
    >>> runs = p.ask(8)  # doctest: +SKIP
    """
    validate(
        "plan",
        {**locals(), "budget": target_budget},
        {
            **constraints("budget", "max_run_flops", "total_flops", "stop_width", "n_boot"),
            **constraints("seed", "law"),
            "trainer": [None, IsType(dict, "a dict of trainer settings")],
        },
    )
    cand = _candidate_table(candidates, trainer)
    if trainer is not None:
        _check_trainer(trainer, cand)
    cand = _fits_hardware(cand, max_run_flops)
    smallest = float(cand["flops"].min())
    for name, flag, value in (
        ("target_budget", "--budget", target_budget),
        ("total_flops", "--total-flops", total_flops),
    ):
        if value is not None and value < smallest:
            raise ScaleFitError(
                f"The {spelled(name, flag)} parameter of plan must be at least the smallest "
                f"candidate run "
                f"({smallest:.3g} FLOPs). Got {value:.3g} instead."
            )
    folder = ensure_folder(folder)
    if inside(folder, STATE_FILE, what="plan file").exists():
        raise ScaleFitError(f"{folder}: already holds a plan; open it with scalefit.plan.load.")
    settings = {
        "target_budget": float(target_budget),
        "law": law or "chinchilla",
        "max_run_flops": max_run_flops,
        "total_flops": total_flops,
        "stop_width": float(stop_width),
        "n_boot": int(n_boot),
        "seed": int(seed),
        "trainer": trainer,
    }
    p = Plan(folder, settings, cand)
    p.save()
    return p


def _fits_hardware(cand: pd.DataFrame, max_run_flops: float | None) -> pd.DataFrame:
    if max_run_flops is None:
        return cand
    keep = cand[cand["flops"] <= max_run_flops]
    if keep.empty:
        raise ScaleFitError(
            f"The 'max_run_flops' parameter of plan leaves no candidate run: the smallest needs "
            f"{float(cand['flops'].min()):.3g} FLOPs. Got {max_run_flops:.3g} instead."
        )
    return keep.reset_index(drop=True)


def _check_trainer(trainer: dict, cand: pd.DataFrame) -> None:
    from ..train.grid import validate_config

    for _, row in cand.iterrows():
        validate_config(run_config(trainer, row)[0])


def load(folder: str | os.PathLike) -> Plan:
    """Open the plan saved in ``folder`` (JSON only; nothing is executed).

    Raises
    ------
    ScaleFitError
        No plan in the folder, or a file that is not a plan of this version.
    """
    path = inside(folder, STATE_FILE, what="plan file")
    if not path.is_file():
        raise ScaleFitError(f"{folder}: no plan here (expected {STATE_FILE}; start one first).")
    try:
        return _checked(Path(folder), read_json(path, what="plan"))
    except ScaleFitError as exc:
        raise ScaleFitError(f"{path}: not a plan file of schema {SCHEMA} ({exc})") from None


def _checked(folder: Path, data: Any) -> Plan:
    """The plan in ``data`` (a parsed ``plan.json``), every field checked as :func:`plan` does."""
    from ..laws import get_law

    keys = {"schema", "settings", "candidates", "asked", "results", "decisions"}
    if not isinstance(data, dict) or set(data) != keys or data["schema"] != SCHEMA:
        raise ScaleFitError("its keys are not those of a plan")
    names = {"target_budget": "budget", "max_run_flops": "max_run_flops", "law": "law"}
    names.update({k: k for k in ("total_flops", "stop_width", "n_boot", "seed")})
    rules = {k: constraints(n)[n] for k, n in names.items()}
    rules["trainer"] = [None, IsType(dict, "a dict of trainer settings")]
    validate_mapping("settings", data["settings"], rules, required=rules)
    settings, cand = data["settings"], data["candidates"]
    get_law(settings["law"])
    cols = ["run_id", *RUN_COLUMNS]
    if not isinstance(cand, dict) or set(cand) != set(cols) or not _lists(cand.values()):
        raise ScaleFitError(f"candidates must hold equal-length lists {', '.join(cols)}")
    table = _candidate_table(
        pd.DataFrame({c: cand[c] for c in RUN_COLUMNS[:4]}), settings["trainer"]
    )
    if table["run_id"].tolist() != cand["run_id"]:
        raise ScaleFitError("a candidate's run_id is not the id of its run (edited?)")
    if settings["trainer"] is not None:
        _check_trainer(settings["trainer"], table)
    asked = _records("asked", data["asked"], {"run_id", "round", "choice"}, set(table["run_id"]))
    if not all(type(a["round"]) is int and a["round"] > 0 for a in asked):
        raise ScaleFitError("an asked run's round is not a positive integer")
    results = _records(
        "results", data["results"], set(cols) | {"loss"}, {a["run_id"] for a in asked}
    )
    for r in results:
        if not all(r[c] is None or _finite(r[c]) for c in [*RUN_COLUMNS, "loss"]):
            raise ScaleFitError(f"result {r['run_id']!r} has a value that is not a finite number")
        if not all(r[c] is not None and r[c] > 0 for c in ("params", "tokens", "flops")):
            raise ScaleFitError(f"result {r['run_id']!r} lacks positive params, tokens, flops")
    decisions = data["decisions"]
    if not isinstance(decisions, list) or not all(map(_decision_ok, decisions)):
        raise ScaleFitError("decisions must be a list of decision records")
    return Plan(folder, settings, table, asked, results, decisions)


def _lists(values) -> bool:
    values = list(values)
    same = all(isinstance(v, list) and len(v) == len(values[0]) for v in values)
    return same and all(x is None or isinstance(x, (str, int, float)) for v in values for x in v)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _records(name: str, items: Any, keys: set[str], known: set[str]) -> list[dict]:
    """``items`` as a list of records with exactly ``keys``, each of a distinct run in ``known``."""
    ok = isinstance(items, list) and all(isinstance(i, dict) and set(i) == keys for i in items)
    ids = [i["run_id"] for i in items] if ok else []
    if (
        not ok
        or not all(isinstance(i, str) and i in known for i in ids)
        or len(set(ids)) < len(ids)
    ):
        raise ScaleFitError(
            f"{name} must be records of distinct runs of the plan with {sorted(keys)}"
        )
    return items


def _decision_ok(d: Any) -> bool:
    nums = ("params", "depth", "width", "tokens", "loss", "params_lo", "params_hi", "tokens_lo")
    nums += ("tokens_hi", "ratio", "flops_spent", "runs")
    return (
        isinstance(d, dict)
        and all(d.get(k) is None or _finite(d[k]) for k in nums)
        and isinstance(d.get("converged", False), bool)
        and isinstance(d.get("notes", []), list)
        and all(isinstance(n, str) for n in d.get("notes", []))
    )
