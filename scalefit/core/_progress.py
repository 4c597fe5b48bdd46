"""The package's one progress bar, and its one rule for when a bar shows.

Every long loop (multi-start fits, bootstrap, sweeps, training, probes) takes
``progress: bool | None`` and reads it through :func:`wanted`: ``True`` shows a bar, ``False``
never does, and ``None`` shows one when standard error is a terminal. With no bar, tqdm is not
imported. The Bayesian fit is the exception: numpyro's bar shows only for ``progress=True``,
because it runs numpyro's own driver instead of the compiled sampler.
"""

from __future__ import annotations

import sys


def wanted(progress: bool | None) -> bool:
    """Whether a progress bar shows: ``progress``, or for ``None`` whether stderr is a terminal.

    Examples
    --------
    >>> wanted(False), wanted(True)
    (False, True)
    """
    if progress is None:
        return sys.stderr is not None and sys.stderr.isatty()
    return bool(progress)


class _NoBar:
    """A progress bar that shows nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, *args, **kwargs) -> None:
        """Ignore progress (also its ``set_postfix`` and ``close``)."""

    set_postfix = close = update


def progress_bar(
    progress: bool | None, *, total: int, desc: str, unit: str, initial: int = 0, leave=True
):
    """A ``tqdm.auto`` bar when :func:`wanted` says so, else one that shows nothing.

    Both are context managers with ``update``, ``set_postfix`` and ``close``.
    """
    if not wanted(progress):
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=leave)
