"""Hidden-state probes for any residual model: angles, norms, early exit and the mechanism verdict.

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
    token_angles,
)
from .hooks import capture_residual_states
from .mechanism import Verdict, early_exit_split, mechanism_verdict

__all__ = [
    "Verdict",
    "angle",
    "as_states",
    "capture_residual_states",
    "early_exit_split",
    "layer_table",
    "mechanism_verdict",
    "middle_layers",
    "summarize_states",
    "token_angles",
]
