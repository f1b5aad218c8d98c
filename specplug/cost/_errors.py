"""The error a bad cost model raises."""

from __future__ import annotations

from specplug._errors import SpecplugError

__all__ = ["CostModelError"]


class CostModelError(SpecplugError, ValueError):
    """A cost model that cannot be used: unknown preset, bad file, negative or missing coefficient."""
