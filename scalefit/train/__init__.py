"""The reference transformer trainer for the LM grid (torch; imported lazily).

``model`` (the transformer and its variants), ``cr`` (CR measure and losses), ``data`` (corpora
and memory-mapped tokens), ``shards`` (pre-training corpora as token shards, streamed),
``config`` (settings and their validation), ``loop`` (training, checkpoints), ``dist`` (DDP and
FSDP2 under torchrun, distributed checkpoints), ``cuda`` (the CUDA-only pieces), ``rundir``
(run-folder lock and changed-settings check), ``mfu`` (peak FLOP/s table, MFU),
``diagnostics`` (per-layer probes) and ``grid`` (the ``train`` task of :mod:`scalefit.sweep`).
"""
