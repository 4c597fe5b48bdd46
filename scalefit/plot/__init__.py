"""Matplotlib figures (imported lazily; every function takes ``ax=None`` and returns the figure)."""
