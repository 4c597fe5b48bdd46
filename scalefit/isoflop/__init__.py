"""IsoFLOP analyses: Chinchilla's Approaches 1 and 2 beside the law fit (Approach 3).

* :func:`approach2` — a curve per budget (Hoffmann's parabola, or the law's own asymmetric
  profile, which corrects the bias of off-centre sampling), the optimum's interval per budget,
  and the power laws ``N* ∝ C^a``, ``T* ∝ C^b`` (Hoffmann's unweighted line for ``"parabola"``,
  a line weighted by the optima's covariance for ``"parabola_weighted"`` and ``"profile"``);
* :func:`approach1` — the envelope of loss curves from a long table (run id, step, loss);
* :func:`approach3` and :func:`compare_approaches` — the law fit's exponents and one table with all
  three (:mod:`scalefit.plot.isoflop` draws them);
* :func:`recommend` — ``N*`` and ``T*`` at new budgets with intervals that include the law's
  misfit, calibrated on rolling origins (:mod:`scalefit.isoflop.decision`);
* :func:`synthetic_isoflops` — sweeps with a known optimum.
"""

from .approach1 import EnvelopeResult, approach1
from .approach2 import IsoFLOPResult, approach2
from .budgets import assign_budgets, detect_budgets
from .compare import PUBLISHED, approach3, compare_approaches
from .decision import (
    Calibration,
    Decision,
    fit_calibration,
    fit_stack_weights,
    recommend,
    rolling_origins,
)
from .synthetic import CHINCHILLA_BUDGETS, HOFFMANN, synthetic_isoflops, true_exponents

__all__ = [
    "CHINCHILLA_BUDGETS",
    "Calibration",
    "Decision",
    "EnvelopeResult",
    "HOFFMANN",
    "IsoFLOPResult",
    "PUBLISHED",
    "approach1",
    "approach2",
    "approach3",
    "assign_budgets",
    "compare_approaches",
    "detect_budgets",
    "fit_calibration",
    "fit_stack_weights",
    "recommend",
    "rolling_origins",
    "synthetic_isoflops",
    "true_exponents",
]
