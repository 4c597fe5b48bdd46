"""Law catalogue: every functional form defined once (see :mod:`scalefit.laws.base`)."""

from .base import Law, Param, sample_starts
from .catalogue import get_law, law_from_spec, law_to_spec, list_laws, register_law

__all__ = [
    "Law",
    "Param",
    "get_law",
    "law_from_spec",
    "law_to_spec",
    "list_laws",
    "register_law",
    "sample_starts",
]
