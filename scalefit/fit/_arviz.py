"""The one place that talks to ArviZ: 0.x (``InferenceData``) and 1.x (``xarray.DataTree``).

Everything else in the Bayes path calls these functions, never ``arviz`` directly. The posterior
object is built from plain ``xarray.Dataset`` groups (no ``from_dict``, whose signature changed
between the two series); reading, writing and the statistics each have one branch per series,
chosen by ArviZ's major version. WAIC (gone from ArviZ 1.x) and BFMI are computed here from their
definitions so both series give the same numbers.

Group datasets follow ArviZ's conventions: sample dimensions ``chain`` and ``draw`` first (no
sample dimensions in ``observed_data``), per-row variables along ``row``.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from inspect import signature
from pathlib import Path
from typing import Any

import numpy as np

#: Groups every Bayes fit writes, in ArviZ's order.
GROUPS = (
    "posterior",
    "posterior_predictive",
    "log_likelihood",
    "sample_stats",
    "prior",
    "prior_predictive",
    "observed_data",
)
#: The ``inplace=`` deprecation pandas 3 raises inside ``arviz.compare`` of ArviZ 0.x.
_PANDAS_INPLACE = r"The inplace keyword in DataFrame\.sort_values is deprecated"


def _az():
    from ..core.errors import require

    return require("arviz", "bayes")


def major() -> int:
    """Major version of the installed ArviZ (0 or 1)."""
    return int(re.match(r"\d+", _az().__version__).group())


def dataset(values: Mapping[str, Any], *, sample_dims: Sequence[str] = ("chain", "draw"), **dims):
    """An ``xarray.Dataset`` of ``values``, each with ``sample_dims`` as its leading axes.

    ``dims`` names further axes per variable (e.g. ``log_loss=("row",)``); unnamed ones become
    ``<var>_dim_<i>``. Integer coordinates are added for every dimension.
    """
    import xarray as xr

    data = {}
    for name, value in values.items():
        arr = np.asarray(value)
        rest = tuple(dims.get(name, ()))
        extra = arr.ndim - len(sample_dims) - len(rest)
        rest += tuple(f"{name}_dim_{i}" for i in range(extra))
        data[name] = (tuple(sample_dims) + rest, arr)
    ds = xr.Dataset(data)
    return ds.assign_coords({d: np.arange(n) for d, n in ds.sizes.items()})


def build(groups: Mapping[str, Any]):
    """The ArviZ object of ``groups`` (name -> ``xarray.Dataset``).

    ``InferenceData`` on ArviZ 0.x, ``xarray.DataTree`` on 1.x.
    """
    if major() < 1:
        return _az().InferenceData(**dict(groups))
    import xarray as xr

    return xr.DataTree.from_dict(dict(groups))


def group_names(obj) -> list[str]:
    """Names of the groups held by ``obj`` (either series)."""
    if hasattr(obj, "children"):  # DataTree
        return list(obj.children)
    return list(obj.groups())


def group(obj, name: str):
    """Group ``name`` of ``obj`` as an ``xarray.Dataset`` (KeyError when absent)."""
    if name not in group_names(obj):
        raise KeyError(name)
    node = obj[name]
    return node.to_dataset() if hasattr(node, "children") else node


def values(obj, name: str, group_name: str = "posterior") -> np.ndarray:
    """Values of variable ``name`` in a group, as a numpy array (``(chain, draw, ...)``)."""
    return np.asarray(group(obj, group_name)[name])


def write_netcdf(obj, path: str | os.PathLike) -> Path:
    """Write ``obj`` to a NetCDF-4 file at ``path`` atomically (h5netcdf engine, h5py backend)."""
    from ..core._io import atomic_write_bytes
    from ..core.errors import require

    require("h5py", "bayes")  # h5netcdf >= 1.8 no longer installs it

    with tempfile.TemporaryDirectory(prefix="scalefit-netcdf-") as tmp:
        scratch = Path(tmp) / "posterior.nc"
        obj.to_netcdf(str(scratch), engine="h5netcdf")
        data = scratch.read_bytes()
    return atomic_write_bytes(path, data)


def read_netcdf(path: str | os.PathLike):
    """Read a file written by :func:`write_netcdf` fully into memory (the file is closed after).

    Returns the object of the installed series (``InferenceData`` or ``DataTree``), whichever
    series wrote the file.
    """
    from ..core.errors import require

    require("h5py", "bayes")
    az = _az()
    if major() < 1:
        with az.rc_context(rc={"data.load": "eager"}):
            return az.from_netcdf(str(path), engine="h5netcdf")
    import xarray as xr

    with xr.open_datatree(str(path), engine="h5netcdf") as tree:
        return tree.load().copy(deep=True)


def _as_dataset(result):
    """An ArviZ statistic's result as an ``xarray.Dataset`` (1.x may return a DataTree)."""
    return result.to_dataset() if hasattr(result, "children") else result


def rhat(posterior, names: Sequence[str]) -> dict[str, float]:
    """Rank-normalised split R-hat of each variable ``names`` of a posterior ``Dataset``."""
    out = _as_dataset(_az().rhat(posterior[list(names)]))
    return {n: float(out[n]) for n in names}


def ess(posterior, names: Sequence[str], method: str) -> dict[str, float]:
    """Effective sample size (``method`` "bulk" or "tail") of each variable ``names``."""
    out = _as_dataset(_az().ess(posterior[list(names)], method=method))
    return {n: float(out[n]) for n in names}


def bfmi(energy) -> np.ndarray:
    """Bayesian fraction of missing information per chain from the energy, shape ``(chains,)``.

    ``sum(diff(E)^2) / sum((E - mean E)^2)`` over each chain's draws (Betancourt 2016), the
    quantity both ArviZ series report.
    """
    e = np.asarray(energy, dtype=float)
    return np.sum(np.diff(e, axis=1) ** 2, axis=1) / np.sum(
        (e - e.mean(axis=1, keepdims=True)) ** 2, axis=1
    )


def loo(obj) -> dict[str, Any]:
    """PSIS-LOO of the single ``log_likelihood`` variable of ``obj``.

    Returns ``elpd_loo, se, p_loo`` and the per-row ``pareto_k`` (numpy array). The Pareto-k
    warning ArviZ raises is not repeated here: callers report large k themselves.
    """
    az = _az()
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"Estimated shape parameter of Pareto", category=UserWarning
        )
        res = az.loo(obj, pointwise=True)
    if major() < 1:
        elpd, p = res.elpd_loo, res.p_loo
    else:
        elpd, p = res.elpd, res.p
    return {
        "elpd_loo": float(elpd),
        "se": float(res.se),
        "p_loo": float(p),
        "pareto_k": np.asarray(res.pareto_k, dtype=float).reshape(-1),
    }


def waic(log_lik) -> dict[str, float]:
    """WAIC on the log scale from pointwise log likelihood ``(chain, draw, rows)``.

    ``elpd_waic = sum_i [log mean_s p(y_i | s) - var_s log p(y_i | s)]`` and ``p_waic`` the
    sum of the variances (Watanabe 2010; Vehtari, Gelman & Gabry 2017), ``se`` from the spread
    of the pointwise terms. Computed here because ArviZ 1.x no longer provides it.
    """
    from scipy.special import logsumexp

    ll = np.asarray(log_lik, dtype=float)
    ll = ll.reshape(-1, ll.shape[-1])  # (samples, rows)
    lppd = logsumexp(ll, axis=0) - np.log(ll.shape[0])
    p_i = np.var(ll, axis=0)  # population variance over draws, as ArviZ 0.x computed it
    elpd_i = lppd - p_i
    return {
        "elpd_waic": float(np.sum(elpd_i)),
        "se": float(np.sqrt(len(elpd_i) * np.var(elpd_i))),
        "p_waic": float(np.sum(p_i)),
    }


def hdi(draws, prob: float) -> tuple[float, float]:
    """Highest-density interval of one-dimensional ``draws`` with probability ``prob``."""
    az = _az()
    x = np.asarray(draws, dtype=float).reshape(-1)
    h = az.hdi(x, hdi_prob=prob) if major() < 1 else az.hdi(x, prob=prob)
    h = np.asarray(h, dtype=float).reshape(-1)
    return float(h[0]), float(h[1])


def compare(objects: Mapping[str, Any]):
    """Rank ArviZ objects by PSIS-LOO with stacking weights, best first.

    Returns a DataFrame indexed by name with ``rank`` (0 best), ``elpd_loo``, ``se``,
    ``elpd_diff`` (the best elpd minus this one's: zero or positive), ``dse``, ``p_loo`` and
    ``weight``, whichever ArviZ series computed it.
    """
    import pandas as pd

    az = _az()
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"Estimated shape parameter of Pareto", category=UserWarning
        )
        if major() < 1:
            warnings.filterwarnings("ignore", message=_PANDAS_INPLACE, category=DeprecationWarning)
            cmp = az.compare(dict(objects), ic="loo", method="stacking", scale="log")
            elpd, p = cmp["elpd_loo"], cmp["p_loo"]
        else:
            # unrounded numbers (arviz-stats releases that round the table take ``round_to``)
            unrounded = (
                {"round_to": "none"} if "round_to" in signature(az.compare).parameters else {}
            )
            cmp = az.compare(dict(objects), method="stacking", **unrounded)
            elpd, p = cmp["elpd"], cmp["p"]
    frame = pd.DataFrame(
        {
            "rank": cmp["rank"].astype(int),
            "elpd_loo": elpd.astype(float),
            "se": cmp["se"].astype(float),
            "elpd_diff": float(elpd.max()) - elpd.astype(float),
            "dse": cmp["dse"].astype(float),
            "p_loo": p.astype(float),
            "weight": cmp["weight"].astype(float),
        },
        index=cmp.index,
    )
    return frame.sort_values("rank")
