"""The law specification: one definition per functional form.

A :class:`Law` names its inputs (canonical table columns), its parameters (with how each is fitted:
a coefficient pinned at a reference point, a positive scale, a free exponent) and one expression
written over an array namespace ``xp`` (``numpy`` or ``jax.numpy``). Least squares, bootstrap,
Bayesian fits, allocation and plots all read the same object.

Internal coordinates ("for the ridge")
--------------------------------------
A term ``c / x**a`` has a near-flat valley along ``(log c, a)`` when the data sit far from
``x = 1``. A coefficient declared with ``pivot=(exponent, input)`` is therefore fitted as
``t = log c - a * log(x_ref)``, the log of the term's value at ``x_ref`` (the geometric mean of that
input over the fitted rows). Positive parameters are fitted in log space; exponents and free
parameters as they are. Results are always reported in raw units.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Kind = Literal["coef", "positive", "floor", "exponent", "free"]


@dataclass(frozen=True)
class Param:
    """One parameter of a law.

    Parameters
    ----------
    name : str
        Public name used in results, JSON and docs.
    kind : {"coef", "positive", "floor", "exponent", "free"}
        ``coef``: positive coefficient of a power-law term, fitted as the log of the term at a
        reference point (needs ``pivot``). ``positive``: fitted in log space. ``floor``: an
        irreducible loss, positive and below every observed loss (fitted in log space).
        ``exponent`` and ``free``: fitted as they are.
    pivot : tuple of (str, str), optional
        For ``coef``: ``(exponent_name, input_name)`` of the term ``coef / input**exponent``.
    start : tuple of float, optional
        Range of random starting values in public units (``exponent``, ``free``, ``positive``;
        log-uniform for ``positive``). ``coef`` and ``floor`` starts are set from the data.
    bounds : tuple of float, optional
        Public-unit bounds, used by the lmfit method and as prior support.
    prior : dict, optional
        Prior in internal coordinates for the Bayesian fitter, e.g.
        ``{"dist": "normal", "loc": 1.0, "scale": 1.0}``; ``None`` uses the kind's default.
    description : str
        One line for ``scalefit laws`` and the docs.
    """

    name: str
    kind: Kind
    pivot: tuple[str, str] | None = None
    start: tuple[float, float] | None = None
    bounds: tuple[float, float] = (-np.inf, np.inf)
    prior: Mapping[str, Any] | None = None
    description: str = ""


Expr = Callable[[Any, Mapping[str, Any], Mapping[str, Any]], Any]
Features = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Law:
    """A scaling law: inputs, parameters and one expression.

    Parameters
    ----------
    name : str
        Registry name.
    inputs : sequence of str
        Canonical table columns the law reads.
    params : sequence of Param
        Parameters in their public order.
    expr : callable
        ``expr(xp, p, x) -> loss`` with ``p`` a mapping of public parameter values and ``x`` a
        mapping of input arrays (plus whatever ``features`` adds). Must work for ``xp=numpy`` and
        ``xp=jax.numpy`` and broadcast over leading axes of the parameters.
    formula : str
        Human-readable formula.
    features : callable, optional
        ``features(xp, x) -> dict`` of derived inputs (e.g. a parameter count from depth and
        width) that ``expr`` and pivots may use.
    options : dict
        The options the law was built with (recorded in results so they can be rebuilt).
    reference : str
        Source of the law.
    start_points : sequence of dict
        Deterministic public-unit starting points tried before random starts (optional).
    """

    name: str
    inputs: tuple[str, ...]
    params: tuple[Param, ...]
    expr: Expr
    formula: str
    features: Features | None = None
    options: dict[str, Any] = field(default_factory=dict)
    reference: str = ""
    start_points: tuple[dict[str, float], ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        """Public parameter names, in order."""
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        """Return the :class:`Param` called ``name``."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def variables(self, xp, x: Mapping[str, Any]) -> dict[str, Any]:
        """Inputs plus derived features, as arrays of ``xp``."""
        out = {k: xp.asarray(v) for k, v in x.items()}
        if self.features is not None:
            out.update(self.features(xp, out))
        return out

    def evaluate(self, params: Mapping[str, Any], x: Mapping[str, Any], xp=np):
        """Predicted loss for public parameter values ``params`` at inputs ``x``.

        Parameters
        ----------
        params : mapping
            Public parameter values (scalars or arrays broadcasting against the inputs).
        x : mapping
            Input arrays by canonical name (a DataFrame works).
        xp : module, default numpy
            Array namespace.

        Returns
        -------
        array
            Predicted loss.
        """
        data = {k: np.asarray(x[k], dtype=float) if xp is np else x[k] for k in self.inputs}
        return self.expr(xp, params, self.variables(xp, data))

    # ------------------------------------------------------------------ internal coordinates
    def pivot_inputs(self) -> tuple[str, ...]:
        """Names of the variables that coefficients are pinned to."""
        return tuple(sorted({p.pivot[1] for p in self.params if p.kind == "coef"}))

    def references(self, x: Mapping[str, Any]) -> dict[str, float]:
        """Log reference points (log of the geometric mean) of each pivot variable."""
        v = self.variables(np, {k: np.asarray(x[k], dtype=float) for k in self.inputs})
        return {name: float(np.mean(np.log(v[name]))) for name in self.pivot_inputs()}

    def to_public(self, z, refs: Mapping[str, float], xp=np) -> dict[str, Any]:
        """Map internal coordinates ``z[..., i]`` to public parameter values."""
        out: dict[str, Any] = {}
        for i, p in enumerate(self.params):
            if p.kind in ("exponent", "free"):
                out[p.name] = z[..., i]
            elif p.kind in ("positive", "floor"):
                out[p.name] = xp.exp(z[..., i])
        for i, p in enumerate(self.params):
            if p.kind == "coef":
                a_name, var = p.pivot
                out[p.name] = xp.exp(z[..., i] + out[a_name] * refs[var])
        return {p.name: out[p.name] for p in self.params}

    def to_internal(self, values: Mapping[str, float], refs: Mapping[str, float]) -> np.ndarray:
        """Map public parameter values to internal coordinates (inverse of :meth:`to_public`)."""
        z = np.empty(len(self.params))
        for i, p in enumerate(self.params):
            v = float(values[p.name])
            if p.kind in ("exponent", "free"):
                z[i] = v
            elif p.kind in ("positive", "floor"):
                z[i] = np.log(v)
            else:
                a_name, var = p.pivot
                z[i] = np.log(v) - float(values[a_name]) * refs[var]
        return z

    def describe(self) -> str:
        """Multi-line description: formula, inputs, parameters."""
        lines = [f"{self.name}: {self.formula}", f"  inputs: {', '.join(self.inputs)}"]
        for p in self.params:
            lines.append(f"  {p.name:<8} {p.kind:<8} {p.description}")
        if self.reference:
            lines.append(f"  source: {self.reference}")
        return "\n".join(lines)


def check_law(law: Law) -> None:
    """Validate a law definition; raises ``ValueError`` with the problem."""
    names = law.param_names
    if len(set(names)) != len(names):
        raise ValueError(f"law {law.name!r}: duplicate parameter names {names}.")
    for p in law.params:
        if p.kind == "coef":
            if p.pivot is None:
                raise ValueError(
                    f"law {law.name!r}: coef {p.name!r} needs pivot=(exponent, input)."
                )
            if p.pivot[0] not in names or law.param(p.pivot[0]).kind not in ("exponent", "free"):
                raise ValueError(
                    f"law {law.name!r}: pivot exponent of {p.name!r} is not an exponent."
                )
        if p.kind in ("exponent", "free", "positive") and p.start is None:
            raise ValueError(f"law {law.name!r}: parameter {p.name!r} needs a start range.")


def sample_starts(
    law: Law, n: int, loss: np.ndarray, *, seed: int, include: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """Random starting points in internal coordinates, scaled from the observed losses.

    Parameters
    ----------
    law : Law
        The law.
    n : int
        Total number of starts (``include`` first, then random ones).
    loss : ndarray
        Observed losses (sets the scale of coefficient and floor starts).
    seed : int
        Random seed.
    include : sequence of ndarray
        Internal points to put first (deterministic starts).

    Returns
    -------
    ndarray, shape (n, n_params)
    """
    rng = np.random.default_rng(seed)
    lmin, lmean = float(np.min(loss)), float(np.mean(loss))
    z = np.empty((n, len(law.params)))
    for i, p in enumerate(law.params):
        if p.kind == "coef":
            z[:, i] = rng.uniform(np.log(0.01 * lmean), np.log(lmean), n)
        elif p.kind == "floor":
            z[:, i] = rng.uniform(np.log(0.05 * lmin), np.log(0.995 * lmin), n)
        elif p.kind == "positive":
            lo, hi = p.start
            z[:, i] = rng.uniform(np.log(lo), np.log(hi), n)
        else:
            lo, hi = p.start
            z[:, i] = rng.uniform(lo, hi, n)
    k = min(len(include), n)
    if k:
        z[:k] = np.asarray(include[:k])
    return z
