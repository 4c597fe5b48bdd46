"""Close the loop: ask for runs, train them, tell their losses, stop when the decision is pinned.

:func:`plan` starts a plan in a folder (``scalefit.plan(target_budget, folder, candidates=...)``:
the package itself is callable), :func:`load` reopens it; :class:`Plan` has ``ask``, ``tell``,
``status`` and ``report``. :func:`run_plan` trains the asked runs with the sweep runner and the
trainer until the stopping rule holds.
"""

import inspect
import sys
import types

from .core import Plan, load, plan
from .loop import run_plan


class _CallableModule(types.ModuleType):
    """A module whose call is :func:`plan` (the data model's ``__class__`` assignment)."""

    def __call__(self, *args, **kwargs) -> Plan:
        return plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
__signature__ = inspect.signature(plan)

__all__ = ["Plan", "load", "plan", "run_plan"]
