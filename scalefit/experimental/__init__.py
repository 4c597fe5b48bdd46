"""Research code above the fitter: tested, free to change between versions (docs/experimental.md).

:mod:`.extrapolation`: the protocol that scores the calibrated predictive
(:mod:`scalefit.fit.discrepancy`) against the law's own.
"""
