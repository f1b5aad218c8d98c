"""Exceptions raised for user mistakes; each message names the bad value and what is valid."""

from __future__ import annotations

__all__ = [
    "DuplicateNameError",
    "InvalidOptionError",
    "InvalidTokensError",
    "RequestStateError",
    "SpecplugError",
    "UnknownMethodError",
]


class SpecplugError(Exception):
    """Base class of every error specplug raises on purpose."""


class UnknownMethodError(SpecplugError, KeyError):
    """A method name that no plugin registered."""

    def __init__(self, name: object, valid: list[str]) -> None:
        self.name = name
        self.valid = valid
        super().__init__(f"unknown method {name!r}; valid methods: {', '.join(valid) or '(none)'}")

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class InvalidOptionError(SpecplugError, ValueError):
    """An option that a method does not take, or a value of the wrong type or range."""


class DuplicateNameError(SpecplugError, ValueError):
    """Two plugins registered the same name."""


class RequestStateError(SpecplugError, RuntimeError):
    """A lifecycle call out of order: propose before start, a second start, use after stop."""


class InvalidTokensError(SpecplugError, TypeError):
    """Token ids that are not non-negative ints."""
