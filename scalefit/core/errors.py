"""Exception and warning types raised by scalefit."""

from __future__ import annotations


class ScaleFitError(ValueError):
    """Bad input or an impossible request.

    Raised at the boundary (tables, options, files) with a message that names what was wrong and
    what was expected. The command-line interface turns it into one line on stderr and exit code 2.
    """


class ConvergenceWarning(UserWarning):
    """A fit, resample or chain did not converge, or a parameter is not identified by the data."""


class NoRecommendationWarning(UserWarning):
    """An allocation of a law of depth and width recommends no shape at any budget."""


class SweepError(RuntimeError):
    """One or more runs of a sweep raised; the finished runs are kept and listed."""


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the ``pip install`` extra."""


#: The optional dependencies and the extra that installs each (``pip install 'scalefit[EXTRA]'``).
EXTRAS = {
    "numpyro": "bayes",
    "arviz": "bayes",
    "h5netcdf": "bayes",
    "h5py": "bayes",
    "torch": "torch",
    "submitit": "torch",
    "tokenizers": "torch",
    "datasets": "torch",
    "transformers": "hf",
    "safetensors": "hf",
}


def missing_extra(exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The :class:`MissingExtraError` for an import of an optional dependency that failed.

    Parameters
    ----------
    exc : ModuleNotFoundError
        The failed import.

    Returns
    -------
    MissingExtraError or None
        ``None`` when the missing module is not one of :data:`EXTRAS` (a real bug).
    """
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return MissingExtraError(
        f"{top!r} is needed for this command; install it with `pip install 'scalefit[{extra}]'`."
    )


def require(module: str, extra: str):
    """Import an optional dependency or raise a helpful :class:`MissingExtraError`.

    Parameters
    ----------
    module : str
        Importable module name, e.g. ``"numpyro"``.
    extra : str
        The scalefit extra that provides it, e.g. ``"bayes"``.

    Returns
    -------
    module
        The imported module.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            f"{module!r} is needed for this feature; install it with "
            f"`pip install 'scalefit[{extra}]'`."
        ) from exc


def one_line(exc: BaseException, limit: int | None = None, *, whole: bool = False) -> str:
    """``exc``'s first message line (``whole``: all lines), ``[:limit]``; if empty its type name."""
    text = " ".join(str(exc).split()) if whole else next(iter(str(exc).strip().splitlines()), "")
    return text[:limit] or type(exc).__name__
