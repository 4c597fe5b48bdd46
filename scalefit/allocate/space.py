"""What an allocation chooses: the search space of a law, its accounting and its compute constraint.

Two spaces cover the catalogue:

* ``"params"`` — laws in ``params`` and ``tokens`` (``chinchilla``): one free coordinate
  ``y = log params``; ``tokens = C / (6 params)``.
* ``"shape"`` — laws in ``depth``, ``width`` and ``tokens`` (``decomposed``, ``critical_depth``):
  two free coordinates ``x = log depth`` and ``y = log params``; the width follows from the
  parameter accounting (``params = N(depth, width)``, inverted exactly) and
  ``tokens = C / (6 params)``. A law that also reads ``params`` gets the accounted count.

Working in ``log params`` rather than ``log width`` keeps the box simple: params lie between
``sqrt(C / (6 r_max))`` and ``sqrt(C / (6 r_min))`` for tokens-per-parameter ratios
``r = tokens / params`` in ``[r_min, r_max]`` (default ``[1e-3, 1e7]``). An optimum on that edge
means the law has no compute-optimal split inside it (e.g. a bootstrap draw with a negative
exponent) and is flagged, never reported as an answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..core._validation import Interval, constraints, validate
from ..core.accounting import (
    CONSTRAINTS,
    DEFAULT_VOCAB,
    param_count_array,
    tokens_for_budget,
    width_for_params,
)
from ..core.errors import ScaleFitError
from ..laws import Law

RATIO_RANGE = (1e-3, 1e7)


@dataclass(frozen=True)
class Accounting:
    """How parameters follow from (depth, width); see :mod:`scalefit.core.accounting`.

    Parameters
    ----------
    vocab : int
        Vocabulary size (32,000 for Chinchilla's tokenizer; 50,257 in the Depth Delusion paper).
    embeddings : {"tied", "untied", "excluded"}
        Token embedding/output head counted once, twice or not at all.
    block : {"standard", "swiglu"}
        MLP type (both ≈ 12·W² per block).
    mlp_ratio : float
        Hidden/width ratio of the standard block.
    norms : bool
        Count RMSNorm gains (``(2·depth + 1)·W``).
    """

    vocab: int = DEFAULT_VOCAB
    embeddings: str = "tied"
    block: str = "standard"
    mlp_ratio: float = 4.0
    norms: bool = False

    def __post_init__(self):
        values = {"embeddings": self.embeddings, "block": self.block, "vocab": self.vocab}
        values["mlp_ratio"] = self.mlp_ratio
        allowed = {**CONSTRAINTS, **constraints("mlp_ratio"), "vocab": [Interval(int, 1, None)]}
        validate("Accounting", values, allowed)

    def params(self, depth, width, *, exact: bool = False) -> np.ndarray:
        """Parameter count (continuous unless ``exact`` for integer shapes)."""
        return param_count_array(depth, width, continuous=not exact, **vars(self))

    def width(self, depth, params) -> np.ndarray:
        """Width with ``params(depth, width) == params`` (continuous accounting)."""
        return width_for_params(depth, params, **vars(self))

    def to_dict(self) -> dict:
        """Plain dictionary (for reports)."""
        return asdict(self)


def default_accounting(law: Law) -> Accounting:
    """The accounting a law implies: its own ``vocab``/``embeddings`` options if it has them.

    ``critical_depth`` counts ``12·depth·width² + embeddings`` without norms, so the compute
    constraint uses exactly the law's ``N``. Other laws default to Chinchilla's tokenizer
    (32,000, tied) — override with ``accounting=Accounting(...)`` / ``--vocab``.
    """
    opts = law.options or {}
    return Accounting(
        vocab=int(opts.get("vocab", DEFAULT_VOCAB)),
        embeddings=str(opts.get("embeddings", "tied")),
        norms=False,
    )


@dataclass(frozen=True)
class Space:
    """Search space of one law (see the module docstring)."""

    law: Law
    kind: str  # "params" or "shape"
    accounting: Accounting

    @classmethod
    def of(cls, law: Law, accounting: Accounting | None = None) -> Space:
        """Classify ``law`` by its inputs; raises for laws that do not involve compute."""
        inputs = set(law.inputs)
        known = {"params", "tokens", "depth", "width"}
        if "tokens" not in inputs or not inputs <= known or inputs == {"tokens"}:
            raise ScaleFitError(
                f"law {law.name!r} has inputs {sorted(inputs)}: allocation needs 'tokens' and "
                f"'params' or 'depth'/'width' (and nothing else) to trade them under C = 6·N·T."
            )
        shape = bool(inputs & {"depth", "width"})
        if shape and not {"depth", "width"} <= inputs:
            raise ScaleFitError(
                f"law {law.name!r} reads only one of depth/width; allocation "
                f"needs both (or neither)."
            )
        return cls(law, "shape" if shape else "params", accounting or default_accounting(law))

    @property
    def ndim(self) -> int:
        """Number of free coordinates."""
        return 2 if self.kind == "shape" else 1

    def inputs(self, z: np.ndarray, budget: np.ndarray) -> dict[str, np.ndarray]:
        """Law inputs at points ``z[..., :]`` (``(log depth,) log params``) and budgets ``C``."""
        params = np.exp(z[..., -1])
        out = {"params": params, "tokens": tokens_for_budget(budget, params)}
        if self.kind == "shape":
            depth = np.exp(z[..., 0])
            out["depth"] = depth
            out["width"] = self.accounting.width(depth, params)
        return out

    def box(
        self,
        budget: np.ndarray,
        depth_range: tuple[float, float],
        ratio_range: tuple[float, float] = RATIO_RANGE,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners ``(P, n)`` of the box for budgets ``(P,)``."""
        log_nt = np.log(tokens_for_budget(budget, 1.0))  # log N·T = log C / 6
        y_lo = 0.5 * (log_nt - np.log(ratio_range[1]))
        y_hi = 0.5 * (log_nt - np.log(ratio_range[0]))
        if self.kind == "params":
            return y_lo[:, None], y_hi[:, None]
        x_lo = np.full_like(y_lo, np.log(depth_range[0]))
        x_hi = np.full_like(y_lo, np.log(depth_range[1]))
        # params must at least hold one unit of width at the smallest depth
        y_lo = np.maximum(y_lo, np.log(self.accounting.params(depth_range[0], 1.0)))
        return np.stack([x_lo, y_lo], axis=1), np.stack([x_hi, y_hi], axis=1)

    def objective(self, params: dict[str, np.ndarray], budget: np.ndarray):
        """Objective for :mod:`scalefit.allocate._newton` over problems with these parameters.

        ``params[name]`` and ``budget`` have shape (P,); the returned ``f(index, z)`` evaluates
        the law for problems ``index`` at points ``z`` (len(index), M, n).
        """
        law = self.law

        def f(index: np.ndarray, z: np.ndarray) -> np.ndarray:
            p = {k: v[index][:, None] for k, v in params.items()}
            with np.errstate(all="ignore"):
                x = self.inputs(z, budget[index][:, None])
                val = law.expr(np, p, law.variables(np, {k: x[k] for k in law.inputs}))
            return np.where(np.isfinite(val), val, np.inf)

        return f
