"""Workflows: run a producer's output through a fit and draw the figures.

:mod:`~scalefit.workflows.toy` fits the toy's depth exponents per group;
:mod:`~scalefit.workflows.train_report` turns a finished trainer grid into its loss table, a
``decomposed`` fit and the comparison figures; :mod:`~scalefit.workflows.demo` picks the demo's
table and says what its fit can recommend. This layer may import every layer below it (the
layer contracts of ``pyproject.toml``); the producers (``sim``, ``train``, ``probes``, ``sweep``)
never import the fitter themselves.
"""
