"""Exception and warning types raised by scalefit."""

from __future__ import annotations


class ScaleFitError(ValueError):
    """Bad input or an impossible request.

    Raised at the boundary (tables, options, files) with a message that names what was wrong and
    what was expected. The command-line interface turns it into one line on stderr and exit code 2.
    """


class ConvergenceWarning(UserWarning):
    """A fit, resample or chain did not converge, or a parameter is not identified by the data."""


class SweepError(RuntimeError):
    """One or more runs of a sweep raised; the finished runs are kept and listed."""


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the ``pip install`` extra."""


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
