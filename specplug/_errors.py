"""Exceptions raised for user mistakes; each message names the bad value and what is valid."""

from __future__ import annotations

__all__ = [
    "CostModelError",
    "DuplicateNameError",
    "InvalidDraftError",
    "InvalidOptionError",
    "InvalidTokensError",
    "NoDrafterError",
    "NotFoundError",
    "RequestStateError",
    "SpecplugError",
    "UnknownMethodError",
    "UnknownNameError",
    "UnknownPeerError",
    "shown",
]


class SpecplugError(Exception):
    """Base class of every error specplug raises on purpose."""


class NotFoundError(SpecplugError, KeyError):
    """Something looked up by name and not found; the message lists what is valid."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class UnknownNameError(NotFoundError):
    """A name that no plugin registered."""

    #: what was looked up, as the message names it
    kind = "name"

    def __init__(self, name: object, valid: list[str]) -> None:
        self.name = name
        self.valid = valid
        super().__init__(f"unknown {self.kind} {shown(name)}; valid {self.kind}s: {', '.join(valid) or '(none)'}")


class UnknownMethodError(UnknownNameError):
    """A method name that no plugin registered."""

    kind = "method"


class UnknownPeerError(UnknownNameError):
    """A peer name that no plugin registered."""

    kind = "peer"


class InvalidOptionError(SpecplugError, ValueError):
    """An option that a method does not take, or a value of the wrong type or range."""


class NoDrafterError(InvalidOptionError):
    """A method that composes the model's own drafter (hybrid) asked of a model that has none, with none given.

    Raised before the engine starts; the message names the method, the model and what to give instead.
    """


class DuplicateNameError(SpecplugError, ValueError):
    """Two plugins registered the same name."""


class RequestStateError(SpecplugError, RuntimeError):
    """A lifecycle call out of order: propose before start, a second start, use after stop."""


class InvalidTokensError(SpecplugError, TypeError):
    """Token ids that are not non-negative ints."""


class CostModelError(SpecplugError, ValueError):
    """A cost model that cannot be used: unknown preset, bad file, negative or missing coefficient."""


class InvalidDraftError(SpecplugError, ValueError):
    """A proposer returned something that is not a valid draft (see ``Proposer.propose``).

    ``kind`` names what was wrong ("not a Draft", "tokens not a tuple", "token not an int",
    "token out of range", "too long"): the guard logs each kind once.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def shown(value: object, width: int = 60) -> str:
    """``repr(value)`` cut to about ``width`` characters, for quoting a bad value in a message.

    A huge value would make a huge message, and a value whose ``repr`` raises would replace the
    error being reported with its own.

    >>> shown("x" * 10_000_000, 12)
    "'xxxxxxxxxx..."
    >>> class Bad:
    ...     def __repr__(self): raise RuntimeError
    >>> shown(Bad())
    '<Bad whose repr raised>'
    """
    if isinstance(value, (str, bytes)) and len(value) > width:
        value = value[:width]  # not repr of all of it: that alone could cost seconds
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - any repr may raise; the message must not
        return f"<{type(value).__name__} whose repr raised>"
    text = text.replace("\n", " ")  # a message is one line
    return text if len(text) <= width else text[: width - 3] + "..."
