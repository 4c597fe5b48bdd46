"""Research code beside the core, tested but free to change between versions (docs/experimental.md).

:mod:`.discrepancy`: the calibrated predictive; :mod:`.extrapolation`: the protocol that scores it.
"""
