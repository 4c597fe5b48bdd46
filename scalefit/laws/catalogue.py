"""The built-in laws and the registry (:func:`get_law`, :func:`register_law`, :func:`list_laws`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core._validation import Options, did_you_mean, validate
from ..core.accounting import CONSTRAINTS, standard_params
from ..core.errors import ScaleFitError
from .base import Law, Param, check_law, law_from_formula_spec

_REGISTRY: dict[str, Callable[..., Law]] = {}

GPT2_VOCAB = 50_257


def inv_power(xp, x, a):
    """``x ** (-a)`` written as ``exp(-a log x)``.

    Inside a compiled solver loop ``log x`` is loop-invariant and hoisted, so each evaluation costs
    one exponential instead of a full ``pow``.
    """
    return xp.exp(-a * xp.log(x))


def _coef(name: str, exponent: str, x: str, desc: str) -> Param:
    """A non-negative coefficient ``name`` of the term ``name / x**exponent``.

    Its range ``[0, inf)`` is a hard constraint, kept by its log coordinates: a coefficient that
    runs to 0 is flagged at bound (the term is not supported by the data).
    """
    return Param(
        name,
        "coef",
        pivot=(exponent, x),
        bounds=(0, float("inf")),
        description=desc,
        range_kind="constraint",
    )


def _exponent(name: str, desc: str, start=(0.0, 1.5)) -> Param:
    """A decay exponent whose range ``[0, 5]`` is a validity condition.

    A negative exponent means loss that grows with the resource; above 5 the term is a step at
    the smallest input. Either way the law's reading (a power-law decay) does not hold, so a fit
    there is not converged (the reason names the parameter) rather than held on a bound.
    """
    return Param(
        name, "exponent", start=start, bounds=(0.0, 5.0), description=desc, range_kind="validity"
    )


def _positive(name: str, start, desc: str, hi: float = float("inf")) -> Param:
    """A positive scale fitted in log space, starts drawn log-uniformly from ``start``.

    Its lower bound 0 is kept by the log coordinates; an upper bound ``hi`` is a validity
    condition.
    """
    return Param(name, "positive", start=start, bounds=(0.0, hi), description=desc)


def _free(name: str, start, bounds, desc: str) -> Param:
    """A parameter of either sign, fitted as it is; ``bounds`` are a validity condition."""
    return Param(name, "free", start=start, bounds=bounds, description=desc)


#: Hoffmann et al. (2022), Approach 3: the published fit of the Chinchilla law (REFERENCE.md §2).
#: The law's start point, the synthetic truth of the recovery tests and of the IsoFLOP study.
HOFFMANN_2022: dict[str, float] = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


# ------------------------------------------------------------------------------ chinchilla
def _chinchilla_expr(xp, p, x):
    return (
        p["E"]
        + p["A"] * inv_power(xp, x["params"], p["alpha"])
        + p["B"] * inv_power(xp, x["tokens"], p["beta"])
    )


def chinchilla() -> Law:
    """Hoffmann et al. (2022): ``L = E + A / params**alpha + B / tokens**beta``.

    Declared ranges: ``A``, ``B`` ≥ 0 and ``E`` ≥ 0 are hard constraints (log coordinates; at
    bound when one runs to 0); ``alpha``, ``beta`` in [0, 5] and ``E`` ≤ 10 are validity
    conditions (a fit outside is not converged).
    """
    return Law(
        name="chinchilla",
        inputs=("params", "tokens"),
        params=(
            Param("E", "floor", bounds=(0.0, 10.0), description="irreducible loss"),
            _coef("A", "alpha", "params", "params-term coefficient"),
            _coef("B", "beta", "tokens", "tokens-term coefficient"),
            _exponent("alpha", "params exponent"),
            _exponent("beta", "tokens exponent"),
        ),
        expr=_chinchilla_expr,
        formula="L = E + A / params^alpha + B / tokens^beta",
        reference="Hoffmann et al. 2022, Approach 3; Besiroglu et al. 2024 (Epoch AI) replication",
        start_points=(dict(HOFFMANN_2022),),
    )


# ------------------------------------------------------------------------------ decomposed
def _decomposed_expr(xp, p, x):
    return (
        p["c_width"] * inv_power(xp, x["width"], p["a_width"])
        + p["c_depth"] * inv_power(xp, x["depth"], p["a_depth"])
        + p["c_tokens"] * inv_power(xp, x["tokens"], p["a_tokens"])
        + p["L0"]
    )


def decomposed() -> Law:
    """Liu et al. Eq. 3: ``L = c_W/W^a_W + c_l/l^a_l + c_T/T^a_T + L0``.

    Declared ranges: coefficients and ``L0`` ≥ 0 are hard constraints (log coordinates; at
    bound when one runs to 0); the exponents in [0, 5] and ``L0`` ≤ 10 are validity conditions
    (a fit outside is not converged).
    """
    return Law(
        name="decomposed",
        inputs=("width", "depth", "tokens"),
        params=(
            _coef("c_width", "a_width", "width", "width-term coefficient (width in d_model)"),
            _exponent("a_width", "width exponent", (0.0, 2.0)),
            _coef("c_depth", "a_depth", "depth", "depth-term coefficient (depth in layers)"),
            _exponent("a_depth", "depth exponent", (0.0, 2.0)),
            _coef("c_tokens", "a_tokens", "tokens", "tokens-term coefficient"),
            _exponent("a_tokens", "tokens exponent", (0.0, 1.0)),
            Param("L0", "floor", bounds=(0.0, 10.0), description="irreducible loss"),
        ),
        expr=_decomposed_expr,
        formula="L = c_width/width^a_width + c_depth/depth^a_depth + c_tokens/tokens^a_tokens + L0",
        reference="Liu, Kangaslahti, Liu, Gore, Inverse Depth Scaling (ICML 2026), Eq. 3",
    )


# ------------------------------------------------------------------------------ critical depth
_CRITICAL_OPTIONS = {
    "form": [Options({"log", "power"})],
    "embeddings": CONSTRAINTS["embeddings"],
    "params_from": [Options({"accounting", "column"})],
}


def _critical_features(params_from: str, vocab: int, embeddings: str):
    """The derived input ``n`` (parameter count) of :func:`critical_depth`."""

    def features(xp, x):
        if params_from == "column":
            return {"n": x["params"]}
        return {"n": standard_params(x["depth"], x["width"], vocab=vocab, embeddings=embeddings)}

    return features


def _critical_kink(form: str):
    """The hinge of :func:`critical_depth`: ``(depth - lc) / lc``, zero at the critical depth."""

    def kink(xp, p, x):
        if form == "log":
            lc = p["kappa"] * xp.log(x["width"])
        else:
            lc = p["c_crit"] * inv_power(xp, x["width"], -p["a_crit"])
        return (x["depth"] - lc) / lc

    return kink


def _critical_expr(form: str):
    """The expression of :func:`critical_depth` for ``lc`` of the given ``form``."""
    kink = _critical_kink(form)

    def expr(xp, p, x):
        excess = xp.maximum(0.0, kink(xp, p, x))
        penalty = p["gamma"] * inv_power(xp, x["width"], p["mu"]) * excess
        return (
            p["A"] * inv_power(xp, x["n"], p["alpha"])
            + p["B"] * inv_power(xp, x["tokens"], p["delta"])
            + penalty
        )

    return expr


def _critical_params(form: str) -> tuple[tuple[Param, ...], str]:
    """The critical-depth parameters of ``form`` and the formula of ``lc``."""
    if form == "log":
        kappa = _positive(
            "kappa", (0.5, 6.0), "critical depth per unit log-width, lc = kappa ln W", hi=50.0
        )
        return (kappa,), "lc = kappa ln(width)"
    c_crit = _positive(
        "c_crit", (0.1, 5.0), "critical-depth prefactor, lc = c_crit W^a_crit", hi=100.0
    )
    a_crit = _free("a_crit", (0.1, 0.8), (-1.0, 2.0), "critical-depth width exponent")
    return (c_crit, a_crit), "lc = c_crit width^a_crit"


def critical_depth(
    form: str = "log",
    vocab: int = GPT2_VOCAB,
    embeddings: str = "untied",
    params_from: str = "accounting",
) -> Law:
    """Fahim & Karim's critical-depth ansatz (their Ansatz 3.4).

    ``L = A/N^alpha + B/tokens^delta + gamma/width^mu * max(0, (depth - lc)/lc)`` with
    ``lc = kappa * ln(width)`` (``form="log"``) or ``lc = c_crit * width^a_crit``
    (``form="power"``). ``N`` is ``12 depth width^2`` plus embeddings (``vocab * width`` once if
    tied, twice if untied, none if excluded) when ``params_from="accounting"``, or the table's
    ``params`` column when ``params_from="column"``.

    Declared ranges: coefficients ≥ 0 and ``kappa``/``c_crit`` ≥ 0 are hard constraints (log
    coordinates; at bound when one runs to 0). The exponents in [0, 5] — ``mu`` among them, the
    ansatz requires a depth penalty that falls with width, μ > 0 — and ``kappa`` ≤ 50,
    ``c_crit`` ≤ 100, ``a_crit`` in [-1, 2] are validity conditions: a fit outside (e.g.
    μ < 0) is not converged, with the reason.
    """
    validate("critical_depth", locals(), _CRITICAL_OPTIONS)
    crit, formula_lc = _critical_params(form)
    inputs = ("depth", "width", "tokens") + (("params",) if params_from == "column" else ())
    return Law(
        name="critical_depth" if form == "log" else "critical_depth_power",
        inputs=inputs,
        params=(
            _coef("A", "alpha", "n", "params-term coefficient"),
            _exponent("alpha", "params exponent", (0.0, 1.0)),
            _coef("B", "delta", "tokens", "tokens-term coefficient"),
            _exponent("delta", "tokens exponent", (0.0, 1.0)),
            _coef("gamma", "mu", "width", "depth-penalty coefficient"),
            _exponent("mu", "depth-penalty width exponent", (0.0, 1.0)),
            *crit,
        ),
        expr=_critical_expr(form),
        kink=_critical_kink(form),
        features=_critical_features(params_from, vocab, embeddings),
        formula=(
            "L = A/N^alpha + B/tokens^delta + gamma/width^mu * max(0, (depth - lc)/lc), "
            f"{formula_lc}, N = 12 depth width^2 + embeddings"
        ),
        options={
            "form": form,
            "vocab": vocab,
            "embeddings": embeddings,
            "params_from": params_from,
        },
        reference="Fahim & Karim, The Depth Delusion, Ansatz 3.4 and Table 1",
    )


def critical_depth_power(**options: Any) -> Law:
    """:func:`critical_depth` with the persistence form ``lc = c_crit * width**a_crit``."""
    validate("critical_depth_power", options, {"form": [Options({"power"})]})
    return critical_depth(**{**options, "form": "power"})


# ------------------------------------------------------------------------------ depth power
def _depth_power_expr(xp, p, x):
    return p["c"] * inv_power(xp, x["depth"], p["alpha"]) + p["L0"]


def depth_power() -> Law:
    """Toy-sweep law ``L = c / depth**alpha + L0``.

    Declared ranges: ``c`` ≥ 0 and ``L0`` ≥ 0 are hard constraints (log coordinates; at bound
    when one runs to 0); ``alpha`` in [0, 5] is a validity condition (a fit outside, such as an
    α of 49 where ``c`` runs off to 1e35, is not converged).
    """
    return Law(
        name="depth_power",
        inputs=("depth",),
        params=(
            _coef("c", "alpha", "depth", "depth-term coefficient"),
            _exponent("alpha", "depth exponent", (0.0, 4.0)),
            Param("L0", "floor", bounds=(0.0, float("inf")), description="loss floor"),
        ),
        expr=_depth_power_expr,
        formula="L = c / depth^alpha + L0",
        reference="Liu et al., toy teacher-student sweeps",
    )


# ------------------------------------------------------------------------------ loss curves
def _lr_annealing_expr(xp, p, x):
    return p["L0"] + p["A"] * inv_power(xp, x["S1"], p["alpha"]) - p["C"] * x["S2"]


def _forward_params() -> tuple[Param, ...]:
    """``L0 + A / S1^alpha``: the floor and forward-area term both schedule-aware laws share."""
    return (
        Param("L0", "floor", bounds=(0.0, 10.0), description="loss floor"),
        _coef("A", "alpha", "S1", "forward-area coefficient"),
        _exponent("alpha", "forward-area exponent", (0.1, 1.0)),
    )


def _annealing_params() -> tuple[Param, ...]:
    return (
        *_forward_params(),
        _positive("C", (1e-3, 3.0), "loss drop per unit of annealing area"),
    )


def lr_annealing() -> Law:
    """Tissue et al. (2024): ``L = L0 + A * S1**(-alpha) - C * S2`` along a training curve.

    ``S1`` is the forward area (sum of learning rates) and ``S2`` the annealing area
    (momentum form); see :mod:`scalefit.core.schedule`.
    """
    return Law(
        name="lr_annealing",
        inputs=("S1", "S2"),
        params=_annealing_params(),
        expr=_lr_annealing_expr,
        formula="L = L0 + A / S1^alpha - C * S2",
        reference="Tissue et al. 2024, Scaling Law with Learning Rate Annealing, arXiv:2408.11029",
    )


def _lr_annealing_params_expr(xp, p, x):
    return _lr_annealing_expr(xp, p, x) + p["B"] * inv_power(xp, x["params"], p["beta"])


def lr_annealing_params() -> Law:
    """:func:`lr_annealing` with a Chinchilla-style model-size term ``B / params**beta``."""
    return Law(
        name="lr_annealing_params",
        inputs=("params", "S1", "S2"),
        params=(
            *_annealing_params(),
            _coef("B", "beta", "params", "params-term coefficient"),
            _exponent("beta", "params exponent", (0.1, 1.0)),
        ),
        expr=_lr_annealing_params_expr,
        formula="L = L0 + B / params^beta + A / S1^alpha - C * S2",
        reference="Tissue et al. 2024 (arXiv:2408.11029) with a model-size term as in "
        "Hoffmann et al. 2022",
    )


#: Reference size and tokens of :func:`lr_optimum`'s ``e0`` (the optimal peak rate there).
LR_PIVOT = {"params": 1e8, "tokens": 1e10}


def _lr_features(xp, x):
    """Areas per unit of peak rate: steps-equivalent ``S1 / peak_lr`` and ``S2 / peak_lr``."""
    return {"S1_per_lr": x["S1"] / x["peak_lr"], "S2_per_lr": x["S2"] / x["peak_lr"]}


def log_lr_star(xp, p, params, tokens):
    """``log eta*(N, D) = log e0 + a log(N / 1e8) + b log(D / 1e10)`` of :func:`lr_optimum`."""
    return (
        xp.log(p["e0"])
        + p["a"] * xp.log(params / LR_PIVOT["params"])
        + p["b"] * xp.log(tokens / LR_PIVOT["tokens"])
    )


def _lr_optimum_expr(xp, p, x):
    miss = xp.log(x["peak_lr"]) - log_lr_star(xp, p, x["params"], x["tokens"])
    return (
        p["L0"]
        + p["B"] * inv_power(xp, x["params"], p["beta"])
        + p["A"] * inv_power(xp, x["S1_per_lr"], p["alpha"])
        - p["C"] * x["S2_per_lr"]
        + p["k"] * miss**2
    )


def lr_optimum() -> Law:
    """:func:`lr_annealing_params` with an optimal peak learning rate ``eta*(params, tokens)``.

    ``L = L0 + B/N^beta + A/(S1/eta)^alpha - C S2/eta + k (log eta - log eta*)^2`` with ``eta``
    the run's peak rate (``peak_lr``), ``N`` params, ``D`` the checkpoint's tokens and
    ``eta* = e0 (N/1e8)^a (D/1e10)^b`` (the learning-rate laws of DeepSeek-LLM and Step Law).
    The areas are counted per unit of peak rate, so the peak rate acts through the penalty
    alone and ``eta*`` is the loss's minimum over it. Curves of one peak rate do not identify
    ``k, e0, a, b``: :func:`scalefit.curves.fit_curves` refuses them.
    """
    return Law(
        name="lr_optimum",
        inputs=("params", "tokens", "S1", "S2", "peak_lr"),
        params=(
            Param("L0", "floor", bounds=(0.0, 10.0), description="loss floor"),
            _coef("A", "alpha", "S1_per_lr", "forward-area coefficient (area / peak rate)"),
            _exponent("alpha", "forward-area exponent", (0.1, 1.0)),
            _positive("C", (1e-6, 1e-2), "loss drop per unit of annealing area / peak rate"),
            _coef("B", "beta", "params", "params-term coefficient"),
            _exponent("beta", "params exponent", (0.1, 1.0)),
            _positive("k", (1e-3, 0.1), "loss per squared log-distance of the peak rate from eta*"),
            _positive("e0", (1e-4, 1e-2), "eta* at 1e8 params and 1e10 tokens"),
            _free("a", (-1.0, 0.2), (-3.0, 3.0), "eta* params exponent"),
            _free("b", (-0.5, 0.5), (-3.0, 3.0), "eta* tokens exponent"),
        ),
        expr=_lr_optimum_expr,
        features=_lr_features,
        formula="L = L0 + B / params^beta + A / (S1/peak_lr)^alpha - C * S2/peak_lr "
        "+ k (log peak_lr - log eta*)^2, eta* = e0 (params/1e8)^a (tokens/1e10)^b",
        reference="Tissue et al. 2024 (arXiv:2408.11029) with a peak-rate optimum as in "
        "DeepSeek-AI 2024 (arXiv:2401.02954) and Li et al. 2025, Step Law (arXiv:2503.04715)",
    )


# ------------------------------------------------------------------------------ multi-power law
#: Default number of quadrature nodes of the multi-power law's loss-drop term.
MPL_SEGMENTS = 16


def mpl_inputs(segments: int = MPL_SEGMENTS) -> tuple[str, ...]:
    """Input columns of the multi-power loss drop, three per quadrature node ``j``.

    ``mpl_w{j}`` is the node's decrease of learning rate, ``mpl_loglr{j}`` the log of its
    learning rate and ``mpl_logs{j}`` the log of the area from it to the checkpoint (built by
    :func:`scalefit.curves.multipower.quadrature`).
    """
    return tuple(
        f"mpl_{what}{j}" for j in range(1, segments + 1) for what in ("w", "loglr", "logs")
    )


def _mpl_drop(xp, p, x, segments: int):
    """``sum_j w_j G(eta_j^-gamma S_j)`` with ``G(u) = 1 - (C u + 1)^-beta`` (log-space form)."""
    log_c = xp.log(p["C"])
    total = 0.0
    for j in range(1, segments + 1):
        z = log_c + x[f"mpl_logs{j}"] - p["gamma"] * x[f"mpl_loglr{j}"]
        softplus = xp.maximum(z, 0.0) + xp.log1p(xp.exp(-xp.abs(z)))  # log(1 + C u), no overflow
        total = total - x[f"mpl_w{j}"] * xp.expm1(-p["beta"] * softplus)
    return total


def _mpl_params() -> tuple[Param, ...]:
    return (
        *_forward_params(),
        _positive("B", (1.0, 1e4), "loss drop per unit of learning-rate decay, at saturation"),
        _positive("C", (0.1, 10.0), "rate at which a decay's loss drop saturates"),
        _exponent("beta", "saturation exponent of the loss drop", (0.1, 1.5)),
        _exponent("gamma", "learning-rate exponent of the drop's time scale", (0.1, 1.5)),
    )


def _check_segments(segments: Any) -> int:
    if isinstance(segments, bool) or int(segments) != segments or segments < 1:
        raise ValueError(f"segments must be an integer >= 1; got {segments!r}.")
    return int(segments)


def multi_power(segments: int = MPL_SEGMENTS) -> Law:
    """Luo et al. (2025), the multi-power law: ``L = L0 + A S1^-alpha - B LD``.

    ``LD(t) = sum_k (eta_{k-1} - eta_k) G(eta_k^-gamma S_k(t))``, ``G(u) = 1 - (C u + 1)^-beta``,
    ``S_k(t)`` the sum of learning rates of updates ``k .. t`` and ``S1`` the whole forward
    area (warm-up included). ``LD`` is read from ``segments`` quadrature nodes per row (inputs
    :func:`mpl_inputs`); see :mod:`scalefit.curves.multipower`. Under a constant schedule
    ``LD = 0`` and ``B, C, beta, gamma`` are not identified.
    """
    k = _check_segments(segments)

    def expr(xp, p, x):
        drop = _mpl_drop(xp, p, x, k)
        return p["L0"] + p["A"] * inv_power(xp, x["S1"], p["alpha"]) - p["B"] * drop

    return Law(
        name="multi_power",
        inputs=("S1", *mpl_inputs(k)),
        params=_mpl_params(),
        expr=expr,
        formula="L = L0 + A / S1^alpha - B * sum_k (eta_{k-1} - eta_k) "
        "(1 - (C eta_k^-gamma S_k + 1)^-beta)",
        options={"segments": k},
        reference="Luo et al. 2025, A Multi-Power Law for Loss Curve Prediction Across "
        "Learning Rate Schedules, arXiv:2503.12811",
    )


def multi_power_params(segments: int = MPL_SEGMENTS) -> Law:
    """:func:`multi_power` with a Chinchilla-style model-size term ``D / params**delta``."""
    k = _check_segments(segments)
    base = multi_power(k)

    def expr(xp, p, x):
        return base.expr(xp, p, x) + p["D"] * inv_power(xp, x["params"], p["delta"])

    return Law(
        name="multi_power_params",
        inputs=("params", *base.inputs),
        params=(
            *_mpl_params(),
            _coef("D", "delta", "params", "params-term coefficient"),
            _exponent("delta", "params exponent", (0.1, 1.0)),
        ),
        expr=expr,
        formula=base.formula.replace("L0 +", "L0 + D / params^delta +"),
        options={"segments": k},
        reference=base.reference + ", with a model-size term as in Hoffmann et al. 2022",
    )


# ------------------------------------------------------------------------------ registry
def register_law(
    factory: Law | Callable[..., Law], name: str | None = None, *, overwrite: bool = False
) -> None:
    """Add a law to the registry.

    Parameters
    ----------
    factory : Law or callable returning Law
        A law, or a function of keyword options that builds one.
    name : str, optional
        Registry name (default: the law's own name).
    overwrite : bool, default False
        Replace an existing entry of that name.

    Examples
    --------
    >>> from scalefit.laws import Law, Param, register_law, get_law
    >>> law = Law(name="kaplan_params", inputs=("params",),
    ...           params=(Param("Nc", "positive", start=(1e12, 1e14)),
    ...                   Param("alpha", "exponent", start=(0.05, 0.2))),
    ...           expr=lambda xp, p, x: (p["Nc"] / x["params"]) ** p["alpha"],
    ...           formula="L = (Nc / params)^alpha")
    >>> register_law(law, overwrite=True)
    >>> get_law("kaplan_params").param_names
    ('Nc', 'alpha')
    """
    if isinstance(factory, Law):
        law = factory
        check_law(law)
        key = name or law.name

        def build(**options: Any) -> Law:
            if options:
                raise ScaleFitError(
                    f"The law {key!r} takes no options. Got {sorted(options)} instead."
                )
            return law
    else:
        build = factory
        key = name or build().name
        check_law(build())
    if key in _REGISTRY and not overwrite:
        raise ScaleFitError(
            f"A law named {key!r} is already registered; pass overwrite=True to replace it."
        )
    _REGISTRY[key] = build


def get_law(law: str | Law, **options: Any) -> Law:
    """Return a law by name (built with ``options``) or pass a :class:`Law` through."""
    if isinstance(law, Law):
        return law
    if law not in _REGISTRY:
        raise ScaleFitError(
            f"Unknown law {law!r}; expected one of {', '.join(sorted(_REGISTRY))} "
            f"(or register your own with scalefit.register_law).{did_you_mean(law, _REGISTRY)}"
        )
    try:
        return _REGISTRY[law](**options)
    except (TypeError, ValueError) as exc:
        raise ScaleFitError(f"law {law!r}: bad options {options}: {exc}") from exc


def list_laws() -> list[str]:
    """Names of every registered law."""
    return sorted(_REGISTRY)


for _f in (chinchilla, decomposed, critical_depth, critical_depth_power, depth_power):
    register_law(_f)
for _f in (lr_annealing, lr_annealing_params, lr_optimum, multi_power, multi_power_params):
    register_law(_f)


# ------------------------------------------------------------------------------ JSON specs
def _same_law(a: Law, b: Law) -> bool:
    """Whether two law objects compute the same thing (same names, inputs, expression code)."""
    code = getattr(a.expr, "__code__", a.expr)
    return (
        a.name == b.name
        and a.inputs == b.inputs
        and a.param_names == b.param_names
        and [p.kind for p in a.params] == [p.kind for p in b.params]
        and a.formula == b.formula
        and code is getattr(b.expr, "__code__", b.expr)
    )


def law_to_spec(law: Law) -> dict[str, Any]:
    """A JSON-able description from which :func:`law_from_spec` rebuilds ``law``.

    Formula laws (:meth:`Law.from_formula`) are written in full (formula, inputs, parameters);
    a law that the registry builds under its name and options is written as that name and those
    options.

    Raises
    ------
    ScaleFitError
        For a Python law object that is not registered (its expression is code, and loading a
        file never runs code): register it with :func:`register_law` or write it as a formula.
    """
    if law.spec is not None:
        return dict(law.spec)
    if law.name in _REGISTRY:
        try:
            built = _REGISTRY[law.name](**law.options)
        except (TypeError, ValueError):
            built = None
        if built is not None and _same_law(built, law):
            return {"type": "registered", "name": law.name, "options": dict(law.options)}
    raise ScaleFitError(
        f"law {law.name!r} is a Python object that is not registered, so it cannot be written "
        "to JSON (loading a result never runs code): register it with scalefit.register_law "
        "(and again before loading), or write it with scalefit.Law.from_formula."
    )


def law_from_spec(spec: Any, *, where: str = "law spec") -> Law:
    """Rebuild a law from :func:`law_to_spec` output.

    Parameters
    ----------
    spec : mapping
        ``{"type": "registered", "name", "options"}`` or ``{"type": "formula", ...}``.
    where : str
        What the spec belongs to (a file name), for error messages.

    Raises
    ------
    ScaleFitError
        On a malformed spec or an unknown registered name.
    """
    if not isinstance(spec, dict) or spec.get("type") not in ("registered", "formula"):
        raise ScaleFitError(
            f"{where}: 'law_spec' must be a mapping with type 'registered' or 'formula'. "
            f"Got {spec!r:.80}."
        )
    if spec["type"] == "formula":
        return law_from_formula_spec(spec, where=where)
    name, options = spec.get("name"), spec.get("options") or {}
    if not isinstance(name, str) or not isinstance(options, dict):
        raise ScaleFitError(f"{where}: a registered law spec needs a 'name' and 'options'.")
    try:
        return get_law(name, **options)
    except ScaleFitError as exc:
        raise ScaleFitError(f"{where}: {exc}") from exc
