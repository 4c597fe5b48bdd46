"""NIST StRD nonlinear regression: certified values, fitted with formula laws on raw residuals.

The 25 problems live in ``$SCALEFIT_DATA_DIR/nist_strd`` (not part of the project; the tests skip
when they are absent). Each model below is NIST's, rewritten in scalefit's formula grammar; Nelson's
model is ``log y = b1 - b2 x1 exp(-b3 x2)``, fitted as ``exp(...)`` with log residuals, which is
exactly NIST's residual.

Run ``python tests/fit/test_nist.py`` to print the table recorded in docs/fitting.md.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest

MODELS: dict[str, str] = {
    "Misra1a": "b1*(1-exp(-b2*x))",
    "Chwirut2": "exp(-b1*x)/(b2+b3*x)",
    "Chwirut1": "exp(-b1*x)/(b2+b3*x)",
    "Lanczos3": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "Gauss1": "b1*exp(-b2*x) + b3*exp(-(x-b4)**2/b5**2) + b6*exp(-(x-b7)**2/b8**2)",
    "Gauss2": "b1*exp(-b2*x) + b3*exp(-(x-b4)**2/b5**2) + b6*exp(-(x-b7)**2/b8**2)",
    "DanWood": "b1*x**b2",
    "Misra1b": "b1*(1-(1+b2*x/2)**(-2))",
    "Kirby2": "(b1 + b2*x + b3*x**2)/(1 + b4*x + b5*x**2)",
    "Hahn1": "(b1+b2*x+b3*x**2+b4*x**3)/(1+b5*x+b6*x**2+b7*x**3)",
    "Nelson": "exp(b1 - b2*x1*exp(-b3*x2))",
    "Lanczos1": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "Lanczos2": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "Gauss3": "b1*exp(-b2*x) + b3*exp(-(x-b4)**2/b5**2) + b6*exp(-(x-b7)**2/b8**2)",
    "Misra1c": "b1*(1-(1+2*b2*x)**(-0.5))",
    "Misra1d": "b1*b2*x*((1+b2*x)**(-1))",
    "Roszman1": "b1 - b2*x - arctan(b3/(x-b4))/pi",
    "ENSO": "b1 + b2*cos(2*pi*x/12) + b3*sin(2*pi*x/12) + b5*cos(2*pi*x/b4) "
    "+ b6*sin(2*pi*x/b4) + b8*cos(2*pi*x/b7) + b9*sin(2*pi*x/b7)",
    "MGH09": "b1*(x**2+x*b2)/(x**2+x*b3+b4)",
    "Thurber": "(b1 + b2*x + b3*x**2 + b4*x**3)/(1 + b5*x + b6*x**2 + b7*x**3)",
    "Rat42": "b1/(1+exp(b2-b3*x))",
    "MGH10": "b1*exp(b2/(x+b3))",
    "Eckerle4": "(b1/b2)*exp(-0.5*((x-b3)/b2)**2)",
    "Rat43": "b1/((1+exp(b2-b3*x))**(1/b4))",
    "Bennett5": "b1*(b2+x)**(-1/b3)",
}
LOG_RESPONSE = {"Nelson"}


def nist_dir() -> Path | None:
    """The folder of NIST ``.dat`` files under ``SCALEFIT_DATA_DIR`` (None when absent)."""
    root = os.environ.get("SCALEFIT_DATA_DIR")
    if not root:
        return None
    d = Path(root) / "nist_strd"
    return d if d.is_dir() else None


def read_nist(path: Path) -> dict:
    """Parse one NIST StRD ``.dat`` file: starts, certified values, RSS, difficulty, data."""
    lines = path.read_text().splitlines()
    level = next(
        w
        for ln in lines
        for w in ("Lower", "Average", "Higher")
        if f"{w} Level of Difficulty" in ln
    )
    params, start1, start2, cert, sd = [], [], [], [], []
    for ln in lines:
        m = re.match(r"\s*(b\d+)\s*=\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", ln)
        if m:
            params.append(m.group(1))
            start1.append(float(m.group(2)))
            start2.append(float(m.group(3)))
            cert.append(float(m.group(4)))
            sd.append(float(m.group(5)))
    rss = float(next(ln.split(":")[1] for ln in lines if ln.startswith("Residual Sum of Squares")))
    head = max(i for i, ln in enumerate(lines) if ln.startswith("Data:"))
    names = lines[head].split(":")[1].split()
    rows = [list(map(float, ln.split())) for ln in lines[head + 1 :] if ln.strip()]
    frame = pd.DataFrame(rows, columns=["loss" if n == "y" else n for n in names])
    frame.attrs["scalefit"] = {"source": path.name, "n_read": len(frame)}
    return {
        "name": path.stem,
        "level": level,
        "params": params,
        "starts": (dict(zip(params, start1, strict=True)), dict(zip(params, start2, strict=True))),
        "cert": dict(zip(params, cert, strict=True)),
        "sd": dict(zip(params, sd, strict=True)),
        "rss": rss,
        "table": frame,
        "inputs": [n for n in frame.columns if n != "loss"],
    }


def digits(est: float, cert: float) -> float:
    """Log relative error: the number of agreeing significant digits (capped at 15)."""
    if est == cert:
        return 15.0
    err = abs(est - cert) / abs(cert) if cert != 0 else abs(est)
    return float(min(15.0, -math.log10(err))) if err > 0 else 15.0


def solve(problem: dict, start: int, *, starts: int = 256):
    """Fit one NIST problem from NIST start ``start`` (0 or 1) with ``starts`` starts."""
    import scalefit
    from scalefit import Law
    from scalefit.core.errors import ConvergenceWarning

    name = problem["name"]
    law = Law.from_formula(
        MODELS[name], name=name, inputs=problem["inputs"], starts=problem["starts"][start]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = scalefit.fit(
            problem["table"],
            law,
            residuals="log" if name in LOG_RESPONSE else "linear",
            starts=starts,
            seed=0,
            progress=False,
        )
    return res


def _swap(v: dict, a: tuple, b: tuple) -> dict:
    out = dict(v)
    for i, j in zip(a, b, strict=True):
        out[i], out[j] = v[j], v[i]
    return out


def variants(name: str, v: dict) -> list[dict]:
    """The certified optimum is unique only up to the model's symmetries: every equivalent point.

    Gauss: the widths enter squared and the two peaks can swap; Lanczos: the three exponentials can
    be relabelled; ENSO: the two cycles can swap, and a cycle with a negated period and sine
    coefficient is the same curve; Eckerle4: ``(b1, b2) -> (-b1, -b2)``.
    """
    out = [dict(v)]
    if name.startswith("Gauss"):
        out = [{**w, "b5": abs(w["b5"]), "b8": abs(w["b8"])} for w in out]
        out += [_swap(w, ("b3", "b4", "b5"), ("b6", "b7", "b8")) for w in out]
    elif name.startswith("Lanczos"):
        import itertools

        pairs = [("b1", "b2"), ("b3", "b4"), ("b5", "b6")]
        out = [
            {k: v[src[i]] for dst, src in zip(pairs, perm, strict=True) for i, k in enumerate(dst)}
            for perm in itertools.permutations(pairs)
        ]
    elif name == "ENSO":
        flips = []
        for w in out:
            for a in ((("b4", "b6"),), (("b7", "b9"),), (("b4", "b6"), ("b7", "b9"))):
                f = dict(w)
                for per, sin in a:
                    f[per], f[sin] = -f[per], -f[sin]
                flips.append(f)
        out += flips
        out += [_swap(w, ("b4", "b5", "b6"), ("b7", "b8", "b9")) for w in out]
    elif name == "Eckerle4":
        out.append({**v, "b1": -v["b1"], "b2": -v["b2"]})
    return out


def score(problem: dict, res) -> dict:
    """Digits of agreement of parameters, RSS and standard errors with the certified values."""
    names, cert = problem["params"], problem["cert"]
    best = max(
        variants(problem["name"], res.params),
        key=lambda v: min(digits(v[p], cert[p]) for p in names),
    )
    return {
        "param_digits": min(digits(best[p], cert[p]) for p in names),
        "rss_digits": digits(float(res.objective), problem["rss"]),
        "sd_digits": _sd_digits(problem, res),
        "converged": bool(res.converged),
    }


def _sd_digits(problem: dict, res) -> float:
    """Standard errors matched under the same relabelling that matches the parameters."""
    names, cert, sd = problem["params"], problem["cert"], problem["sd"]
    pv = variants(problem["name"], res.params)
    sv = variants(problem["name"], {k: abs(v) for k, v in res.stderr.items()})
    i = max(range(len(pv)), key=lambda k: min(digits(pv[k][p], cert[p]) for p in names))
    return min(digits(abs(sv[i][p]), sd[p]) for p in names)


DIR = nist_dir()
PROBLEMS = sorted(p.stem for p in DIR.glob("*.dat")) if DIR else []
needs_nist = pytest.mark.skipif(DIR is None, reason="NIST StRD files not found")


def _load(name: str) -> dict:
    return read_nist(DIR / f"{name}.dat")


def _level(name: str) -> str:
    return _load(name)["level"] if DIR else ""


LOWER_AVG = [n for n in PROBLEMS if _level(n) in ("Lower", "Average")]
HIGHER = [n for n in PROBLEMS if _level(n) == "Higher"]


@needs_nist
def test_all_25_problems_parsed_and_modelled():
    assert len(PROBLEMS) == 25 and set(PROBLEMS) == set(MODELS)
    p = _load("Misra1a")
    assert p["rss"] == pytest.approx(1.2455138894e-01) and len(p["table"]) == 14


# Lanczos1's certified RSS (1.4e-25) sits at float64's rounding floor of its residuals: no
# double-precision evaluation of its model resolves the RSS to 9 digits (see docs/fitting.md).
RSS_EXEMPT = {"Lanczos1"}


@pytest.mark.slow
@needs_nist
@pytest.mark.parametrize("name", LOWER_AVG)
@pytest.mark.parametrize("start", [0, 1])
def test_lower_and_average_reach_certified_values(name, start):
    problem = _load(name)
    res = solve(problem, start)
    s = score(problem, res)
    assert res.converged, res.warnings
    assert s["param_digits"] >= 6, s
    if name not in RSS_EXEMPT:
        assert s["rss_digits"] >= 9, s
        assert s["sd_digits"] >= 4, s


@pytest.mark.slow
@needs_nist
@pytest.mark.parametrize("start", [0, 1])
def test_higher_difficulty_mostly_solved_rest_flagged(start):
    solved = 0
    for name in HIGHER:
        problem = _load(name)
        res = solve(problem, start)
        s = score(problem, res)
        ok = s["param_digits"] >= 6 and s["rss_digits"] >= 9
        solved += ok
        assert ok or not res.converged, (name, s)
    assert solved >= math.ceil(0.8 * len(HIGHER))


@needs_nist
@pytest.mark.parametrize("name", ["Misra1a", "DanWood", "Rat42"])
def test_single_start_certified_or_not_converged_fast(name):
    problem = _load(name)
    for start in (0, 1):
        res = solve(problem, start, starts=1)
        s = score(problem, res)
        assert (s["param_digits"] >= 6 and s["rss_digits"] >= 9) or not res.converged, s


@pytest.mark.slow
@needs_nist
@pytest.mark.parametrize("name", PROBLEMS)
def test_single_start_never_claims_a_wrong_point(name):
    problem = _load(name)
    for start in (0, 1):
        res = solve(problem, start, starts=1)
        s = score(problem, res)
        rss_ok = s["rss_digits"] >= 5 or name in RSS_EXEMPT
        assert (s["param_digits"] >= 6 and rss_ok) or not res.converged, s


def _table() -> str:  # pragma: no cover - run by hand
    rows = [
        "| problem | level | start | multi-start: param / RSS / SE digits, converged "
        "| single start: param digits, converged |",
        "|---|---|---|---|---|",
    ]
    for name in PROBLEMS:
        problem = _load(name)
        for start in (0, 1):
            m = score(problem, solve(problem, start))
            s1 = score(problem, solve(problem, start, starts=1))
            rows.append(
                f"| {name} | {problem['level'].lower()} | {start + 1} | "
                f"{m['param_digits']:.1f} / {m['rss_digits']:.1f} / {m['sd_digits']:.1f}, "
                f"{'yes' if m['converged'] else 'NO'} | {s1['param_digits']:.1f}, "
                f"{'yes' if s1['converged'] else 'NO'} |"
            )
            print(rows[-1], flush=True)
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if DIR is None:
        shared = Path(__file__).resolve().parents[2].parent / "shared" / "data"
        os.environ["SCALEFIT_DATA_DIR"] = str(shared)
        DIR = nist_dir()
        PROBLEMS = sorted(p.stem for p in DIR.glob("*.dat"))
    print(_table())
