"""Hidden-state probes for any residual model: angles, norms, early exit and the mechanism verdict.

Pre-trained Hugging Face language models are probed by :mod:`scalefit.probes.hf` (extra ``hf``;
imported on demand, not here).

Examples
--------
>>> from scalefit.probes import layer_table, mechanism_verdict  # doctest: +SKIP
>>> layer_table(states)  # (L+1, tokens, width) residual states  # doctest: +SKIP
"""

from __future__ import annotations

from .angles import (
    angle,
    as_states,
    layer_table,
    middle_layers,
    summarize_states,
    summarize_table,
    token_angles,
)
from .hooks import capture_residual_states
from .mechanism import (
    Verdict,
    early_exit_split,
    mechanism_verdict,
    split_token_angles,
    verdict_from_evidence,
)

__all__ = [
    "Verdict",
    "angle",
    "as_states",
    "capture_residual_states",
    "early_exit_split",
    "layer_table",
    "mechanism_verdict",
    "middle_layers",
    "split_token_angles",
    "summarize_states",
    "summarize_table",
    "token_angles",
    "verdict_from_evidence",
]
