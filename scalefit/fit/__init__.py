"""Fitting: least squares (:func:`fit`), bootstrap, held-out checks and the :class:`FitResult`.

Floors, top down: :mod:`~scalefit.fit.api` (``fit``) → :mod:`~scalefit.fit.holdout` (hold-out)
→ :mod:`~scalefit.fit.bootstrap` → :mod:`~scalefit.fit.lmfit_method` and
:mod:`~scalefit.fit.lsq` (backends, multi-start) → :mod:`~scalefit.fit.build` (the one step that
builds a result) → :mod:`~scalefit.fit.checks` → :mod:`~scalefit.fit.result`,
:mod:`~scalefit.fit.engine` → :mod:`~scalefit.fit.observation`. The Bayesian fitter
(:mod:`~scalefit.fit.bayes`) stands beside ``api`` on the same floors.
"""

from .api import fit
from .bootstrap import bootstrap
from .result import FitResult

__all__ = ["FitResult", "bootstrap", "fit"]
