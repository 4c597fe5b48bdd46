"""The reference transformer trainer for the LM grid (torch; imported lazily).

``model`` (the transformer and its variants), ``cr`` (CR measure and losses), ``data`` (corpora
and memory-mapped tokens), ``loop`` (training, checkpoints, DDP), ``diagnostics`` (per-layer
probes) and ``grid`` (the ``train`` task of :mod:`scalefit.sweep`).
"""
