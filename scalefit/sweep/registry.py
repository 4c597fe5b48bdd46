"""Task registry: short names (``"toy"``, ``"train"``) for ``"module:function"`` references."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..core._validation import Matches, did_you_mean, validate
from ..core.errors import ScaleFitError

_TASKS: dict[str, str] = {
    "toy": "scalefit.sim.sweep_task:run_toy",
    "train": "scalefit.train.grid:run_train_task",
}


def register_task(name: str, ref: str) -> None:
    """Register (or replace) a task name.

    Parameters
    ----------
    name : str
        Short name used in ``[sweep] task = "..."``.
    ref : str
        ``"package.module:function"``; the function has the signature
        ``task(config: dict, run_dir: pathlib.Path) -> dict``. It may carry an attribute
        ``validate_config(config) -> None`` that raises :class:`~scalefit.core.errors.ScaleFitError`
        for a bad configuration; :func:`~scalefit.sweep.run_sweep` calls it on every run first.

    Examples
    --------
    >>> register_task("mytask", "mypackage.tasks:run")  # doctest: +SKIP
    """
    validate("register_task", {"name": name}, {"name": [Matches(r"[^:]+", "a string without ':'")]})
    _split_ref(ref)
    _TASKS[name] = ref


def registered_tasks() -> dict[str, str]:
    """Return a copy of the registry (name → reference)."""
    return dict(_TASKS)


def task_ref(task: str) -> str:
    """Return the ``"module:function"`` reference for a task name or reference."""
    if task in _TASKS:
        return _TASKS[task]
    if ":" in task:
        _split_ref(task)
        return task
    raise ScaleFitError(
        f"unknown task {task!r}; expected one of {sorted(_TASKS)} or 'package.module:function'."
        f"{did_you_mean(task, _TASKS)}"
    )


def resolve_task(task: str) -> Callable:
    """Import and return the task function named by a task name or ``"module:function"``."""
    ref = task_ref(task)
    module_name, func_name = _split_ref(ref)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ScaleFitError(
            f"task {task!r}: cannot import module {module_name!r} ({exc})."
        ) from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ScaleFitError(f"task {task!r}: {module_name!r} has no function {func_name!r}.")
    return func


def _split_ref(ref: str) -> tuple[str, str]:
    module_name, _, func_name = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not module_name or not func_name or ":" in func_name:
        raise ScaleFitError(
            f"task reference must look like 'package.module:function', got {ref!r}."
        )
    return module_name, func_name
