"""Priors for the Bayesian fitter: defaults per parameter kind, overrides, validation.

Every prior is a small dict in the parameter's *internal* coordinate (see
:mod:`scalefit.laws.base`): ``t = log(c) - a log(x_ref)`` for a ``coef`` (the log of the term at the
reference point), ``log(value)`` for ``positive`` and ``floor``, the value itself for ``exponent``
and ``free``. The noise parameters ``sigma`` (scale of the log-loss residuals) and ``nu`` (Student-t
degrees of freedom) take priors on their own values.

Defaults are weak and, where a scale is needed, relative to the table (see ``docs/bayes.md``):

========== =================================================================================
kind       default prior (internal coordinate)
========== =================================================================================
coef       ``normal(loc = log(mean loss) - 1, scale = 2.5)``
floor      ``below_min``: the floor is uniform on ``(0, min observed loss)``
positive   ``normal(loc = log of the geometric middle of the start range, scale = max(1, half
           its log-width))``, truncated to the log of the law's bounds
exponent   ``truncated_normal(loc = middle of the start range, scale = max(1, its width),
           low/high = the law's bounds)`` (built-in exponents: bounds 0..5)
free       ``normal`` like ``exponent``, truncated only where the bounds are finite
sigma      ``halfnormal(scale = sd of log loss)``
nu         ``gamma(concentration = 2, rate = 0.1)`` (Juárez & Steel 2010)
========== =================================================================================
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core._validation import Interval, IsType, validate
from ..core.errors import ScaleFitError
from ..laws import Law


def _no_inf(v: float) -> float | None:
    return None if not math.isfinite(v) else v


def _truncnorm(stats, s):
    a, b = (s["low"] - s["loc"]) / s["scale"], (s["high"] - s["loc"]) / s["scale"]
    return stats.truncnorm(a, b, s["loc"], s["scale"])


@dataclass(frozen=True)
class PriorFamily:
    """One prior family: its keys, its support, and its numpyro and scipy constructors.

    ``numpyro(dist, spec)`` gets :mod:`numpyro.distributions`, ``scipy(stats, spec)`` gets
    :mod:`scipy.stats`; both build the same distribution from a validated spec.
    """

    required: tuple[str, ...]
    optional: Mapping[str, float]
    numpyro: Callable[[Any, Mapping[str, Any]], Any]
    scipy: Callable[[Any, Mapping[str, Any]], Any]
    positive: bool = False


def _family(numpyro_name: str, required: tuple[str, ...], scipy, positive=False) -> PriorFamily:
    """A family whose numpyro constructor takes the ``required`` keys in order."""

    def numpyro(d, s):
        return getattr(d, numpyro_name)(*(s[k] for k in required))

    return PriorFamily(required, {}, numpyro, scipy, positive)


def _loc_scale(numpyro_name: str, scipy_name: str) -> PriorFamily:
    """A family whose numpyro and scipy constructors both take ``(loc, scale)``."""
    return _family(
        numpyro_name, ("loc", "scale"), lambda st, s: getattr(st, scipy_name)(s["loc"], s["scale"])
    )


#: The one table of prior families (validation, the numpyro model and numpy prior draws read it).
FAMILIES: dict[str, PriorFamily] = {
    "normal": _loc_scale("Normal", "norm"),
    "student_t": _family(
        "StudentT", ("df", "loc", "scale"), lambda st, s: st.t(s["df"], s["loc"], s["scale"])
    ),
    "cauchy": _loc_scale("Cauchy", "cauchy"),
    "laplace": _loc_scale("Laplace", "laplace"),
    "logistic": _loc_scale("Logistic", "logistic"),
    "uniform": _family(
        "Uniform", ("low", "high"), lambda st, s: st.uniform(s["low"], s["high"] - s["low"])
    ),
    "truncated_normal": PriorFamily(
        ("loc", "scale"),
        {"low": -math.inf, "high": math.inf},
        lambda d, s: d.TruncatedNormal(
            s["loc"], s["scale"], low=_no_inf(s["low"]), high=_no_inf(s["high"])
        ),
        _truncnorm,
    ),
    "halfnormal": _family(
        "HalfNormal", ("scale",), lambda st, s: st.halfnorm(scale=s["scale"]), positive=True
    ),
    "halfcauchy": _family(
        "HalfCauchy", ("scale",), lambda st, s: st.halfcauchy(scale=s["scale"]), positive=True
    ),
    "lognormal": _family(
        "LogNormal",
        ("loc", "scale"),
        lambda st, s: st.lognorm(s["scale"], scale=math.exp(s["loc"])),
        positive=True,
    ),
    "exponential": _family(
        "Exponential", ("rate",), lambda st, s: st.expon(scale=1.0 / s["rate"]), positive=True
    ),
    "gamma": _family(
        "Gamma",
        ("concentration", "rate"),
        lambda st, s: st.gamma(s["concentration"], scale=1.0 / s["rate"]),
        positive=True,
    ),
    # a fraction of the smallest observed loss: the model scales a Uniform(0, 1) site
    "below_min": PriorFamily(
        (),
        {"fraction": 1.0},
        lambda d, s: d.Uniform(0.0, 1.0),
        lambda st, s: st.uniform(0.0, 1.0),
    ),
    # a constant: no sample site, so no constructor is ever called
    "fixed": PriorFamily(("value",), {}, None, None, positive=True),  # type: ignore[arg-type]
}
#: Distributions whose support lies in (0, inf): allowed for ``sigma`` and ``nu``.
POSITIVE_DISTS = tuple(k for k, f in FAMILIES.items() if f.positive)


def numpyro_distribution(spec: Mapping[str, Any]):
    """The numpyro distribution of a validated prior spec."""
    import numpyro.distributions as dist

    return FAMILIES[spec["dist"]].numpyro(dist, spec)


def scipy_distribution(spec: Mapping[str, Any]):
    """The same prior as :func:`numpyro_distribution`, as a frozen scipy distribution."""
    from scipy import stats

    return FAMILIES[spec["dist"]].scipy(stats, spec)


NOISE = ("sigma", "nu")


def default_priors(law: Law, loss: np.ndarray, residuals: str = "log") -> dict[str, dict[str, Any]]:
    """Default priors for every parameter of ``law`` plus ``sigma`` and ``nu``.

    Parameters
    ----------
    law : Law
        The law (a ``Param.prior`` set by the law replaces the kind's default).
    loss : ndarray
        Observed losses of the fitted rows (sets the data-relative scales).
    residuals : {"log", "linear"}, default "log"
        Residual scale: ``sigma``'s default scale is the spread of the response on that scale.

    Returns
    -------
    dict
        ``name -> prior dict`` in internal coordinates.
    """
    loss = np.asarray(loss, dtype=float)
    out: dict[str, dict[str, Any]] = {}
    for p in law.params:
        if p.prior is not None:
            out[p.name] = dict(p.prior)
            continue
        lo_b, hi_b = (float(b) for b in p.bounds)
        if p.kind == "coef":
            loc = float(np.log(np.abs(loss).mean())) - 1.0
            out[p.name] = {"dist": "normal", "loc": loc, "scale": 2.5}
        elif p.kind == "floor":
            out[p.name] = {"dist": "below_min", "fraction": 1.0}
        elif p.kind == "positive":
            lo, hi = p.start
            spec = {
                "dist": "truncated_normal",
                "loc": 0.5 * (math.log(lo) + math.log(hi)),
                "scale": max(1.0, 0.5 * math.log(hi / lo)),
            }
            spec["low"] = math.log(lo_b) if lo_b > 0 else -math.inf
            spec["high"] = math.log(hi_b) if math.isfinite(hi_b) else math.inf
            out[p.name] = spec
        else:
            lo, hi = p.start
            out[p.name] = {
                "dist": "truncated_normal",
                "loc": 0.5 * (lo + hi),
                "scale": max(1.0, hi - lo),
                "low": lo_b,
                "high": hi_b,
            }
    scaled = np.log(loss) if residuals == "log" else loss
    sd = float(np.std(scaled)) if len(loss) > 1 else 1.0
    out["sigma"] = {"dist": "halfnormal", "scale": sd if sd > 0 else 1.0}
    out["nu"] = {"dist": "gamma", "concentration": 2.0, "rate": 0.1}
    return out


#: Prior arguments that must be finite and above 0.
POSITIVE_KEYS = ("scale", "rate", "concentration", "df", "fraction")


def _number(spec_name: str, key: str, value: Any, *, positive: bool = False) -> float:
    """``value`` as a float: any real number, or (``positive``) a finite one above 0."""
    cons = Interval(float, 0, None, closed="neither", finite=True) if positive else Interval(float)
    validate(f"the prior for {spec_name!r}", {key: value}, {key: [cons]}, noun="key")
    return float(value)


def check_prior(name: str, spec: Any, kind: str | None) -> dict[str, Any]:
    """Validate one prior dict and fill in optional keys.

    Parameters
    ----------
    name : str
        Parameter name (for messages).
    spec : mapping
        ``{"dist": ..., <arguments>}``.
    kind : str or None
        The parameter's kind, or None for ``sigma``/``nu``.

    Returns
    -------
    dict
        The validated prior with every argument a float.
    """
    if not isinstance(spec, Mapping):
        raise ScaleFitError(
            f"prior for {name!r} must be a mapping like "
            f"{{'dist': 'normal', 'loc': 0, 'scale': 1}}. Got {spec!r} instead."
        )
    dist = spec.get("dist")
    if not isinstance(dist, str) or dist not in FAMILIES:
        raise ScaleFitError(
            f"prior for {name!r}: unknown dist {str(dist)[:60]!r}; expected one of "
            f"{', '.join(FAMILIES)}."
        )
    required, optional = FAMILIES[dist].required, FAMILIES[dist].optional
    allowed = {"dist", *required, *optional}
    extra = sorted(set(spec) - allowed)
    missing = sorted(set(required) - set(spec))
    if extra or missing:
        raise ScaleFitError(
            f"prior for {name!r} ({dist}): "
            + (f"unknown key(s) {extra}" if extra else "")
            + ("; " if extra and missing else "")
            + (f"missing key(s) {missing}" if missing else "")
            + f"; expected {', '.join(required + tuple(optional)) or 'no keys'}."
        )
    out: dict[str, Any] = {"dist": dist}
    for key, value in [(k, spec[k]) for k in required] + [
        (k, spec.get(k, v)) for k, v in optional.items()
    ]:
        out[key] = _number(name, key, value, positive=key in POSITIVE_KEYS)
    if dist in ("uniform", "truncated_normal") and not out["low"] < out["high"]:
        raise ScaleFitError(
            f"prior for {name!r}: 'low' must be below 'high'. "
            f"Got {out['low']!r} and {out['high']!r}."
        )
    if dist == "below_min" and kind != "floor":
        raise ScaleFitError(f"prior for {name!r}: 'below_min' applies to floor parameters only.")
    if kind is None and dist not in POSITIVE_DISTS:
        if not (dist in ("uniform", "truncated_normal") and out["low"] >= 0):
            raise ScaleFitError(
                f"prior for {name!r} must have positive support (one of "
                f"{', '.join(POSITIVE_DISTS)}, or uniform/truncated_normal with "
                f"low >= 0). Got {dist!r}."
            )
    if kind is None and dist == "fixed" and not out["value"] > 0:
        raise ScaleFitError(f"prior for {name!r}: a fixed value must be positive.")
    return out


def resolve_priors(
    law: Law,
    loss: np.ndarray,
    priors: Mapping[str, Mapping[str, Any]] | None,
    residuals: str = "log",
) -> dict[str, dict[str, Any]]:
    """Defaults for ``law`` updated with the user's ``priors``, all validated.

    Raises
    ------
    ScaleFitError
        On an unknown parameter name, distribution or argument.
    """
    specs = default_priors(law, loss, residuals)
    kinds: dict[str, str | None] = {p.name: p.kind for p in law.params}
    kinds.update({n: None for n in NOISE})
    shape = IsType(Mapping, "a mapping of parameter name to prior dict")
    validate("fit_bayes", {"priors": priors}, {"priors": [shape, None]})
    for name, spec in (priors or {}).items():
        if name not in kinds:
            raise ScaleFitError(
                f"prior given for unknown parameter {name!r} of law {law.name!r}; "
                f"expected one of {', '.join(kinds)}."
            )
        specs[name] = dict(spec)
    return {name: check_prior(name, spec, kinds[name]) for name, spec in specs.items()}


def read_priors_toml(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Read prior overrides from a TOML file.

    The file has one table per parameter, optionally under a ``[priors]`` table::

        [a_depth]
        dist = "normal"
        loc = 1.0
        scale = 0.5

    Returns
    -------
    dict
        ``name -> prior dict`` (validated later against the law).
    """
    from ..core._io import read_toml

    path = Path(path)
    data = read_toml(path, what="priors file")
    if set(data) == {"priors"}:
        data = data["priors"]
        if not isinstance(data, dict):
            raise ScaleFitError(f"{path}: 'priors' must be a table of [priors.NAME] tables.")
    bad = [k for k, v in data.items() if not isinstance(v, dict)]
    if bad:
        raise ScaleFitError(f"{path}: key(s) {bad} must be tables like [a_depth] with dist = ...")
    return data
