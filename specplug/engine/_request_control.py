"""What one request may ask of speculation: off, a shorter draft, or the method that drafts it, through its
engine's own request fields.

Each engine carries free-form per-request parameters (vLLM's ``SamplingParams.extra_args``, set
by OpenAI clients as ``extra_body={"vllm_xargs": {...}}``; SGLang's ``custom_params``). The
keys below are read from there. Keys that do not start with ``specplug`` belong to other
extensions and are left alone; a ``specplug`` key that is unknown, or a bad value, is one
clear error naming it and what is valid (the engine returns it to the client as a bad request).

``specplug_method`` names what drafts the request: under a composite method (``hybrid``,
``adaptive``) one of its parts - a lookup by its method name (``suffix``, ``ngram``) or
``neural`` for the engine's own drafter (MTP, EAGLE head, draft model) - or the server's method
itself (as the server chooses); under any other method, only that method. The valid names are
the server's (:func:`served_methods`); the composite still chooses per step between the named
part and no draft.

>>> request_control({"specplug_draft": "off"}).limit(5)
0
>>> request_control({"specplug_max_draft_tokens": 2, "other_extension": 1}).limit(5)
2
>>> request_control(None).limit(5)
5
>>> request_control({"specplug_method": "suffix"}, ("adaptive", "suffix", "ngram")).method
'suffix'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specplug._errors import InvalidOptionError
from specplug._batch import NEURAL_METHOD

__all__ = [
    "DRAFT_KEY", "MAX_DRAFT_TOKENS_KEY", "METHOD_KEY", "NEURAL_METHOD", "REQUEST_KEYS", "RequestControl", "note_served", "noted_served", "request_control", "served_methods",
]

#: "off": this request is never drafted; "on" (the default): as the server is set
DRAFT_KEY = "specplug_draft"
#: an int >= 0: this request's drafts are at most this long (0 is the same as off)
MAX_DRAFT_TOKENS_KEY = "specplug_max_draft_tokens"
#: a name: the part of the server's composite method that drafts this request (see the module's doc)
METHOD_KEY = "specplug_method"
REQUEST_KEYS = (DRAFT_KEY, MAX_DRAFT_TOKENS_KEY, METHOD_KEY)
_DRAFT_VALUES = ("on", "off")


@dataclass(frozen=True)
class RequestControl:
    """One request's speculation: ``off``, or drafts of at most ``max_draft_tokens`` by ``method``."""

    off: bool = False
    max_draft_tokens: int | None = None
    #: the part of the server's composite that drafts the request (None: as the server chooses)
    method: str | None = None

    def limit(self, engine_limit: int) -> int:
        """The request's draft length this step, given the engine's."""
        if self.off:
            return 0
        return engine_limit if self.max_draft_tokens is None else min(engine_limit, self.max_draft_tokens)

    @property
    def default(self) -> bool:
        return not self.off and self.max_draft_tokens is None and self.method is None


NO_CONTROL = RequestControl()


def served_methods(method: str, proposer: object) -> tuple[str, ...]:
    """What a request may name as its ``specplug_method`` on a server running ``method`` (its
    registered name) as ``proposer``: the method itself, then a composite's parts.

    >>> import specplug
    >>> served_methods("adaptive", specplug.create("adaptive"))
    ('adaptive', 'suffix', 'ngram')
    >>> served_methods("suffix", specplug.create("suffix"))
    ('suffix',)
    """
    parts = getattr(proposer, "request_methods", ())
    return (method, *(part for part in parts if part != method))


#: the names the specplug server set up in this process honours (None: none was set up here)
_served: tuple[str, ...] | None = None


def note_served(methods: Sequence[str]) -> None:
    """Note the names a request to the server set up in this process may give as ``specplug_method``
    (the adapter notes them where it checks the server's config, the process that checks its requests)."""
    global _served
    _served = tuple(methods)


def noted_served() -> tuple[str, ...] | None:
    """The names :func:`note_served` noted (None: no server was set up in this process)."""
    return _served


def request_control(params: Mapping[str, Any] | None, methods: Sequence[str] | None = None) -> RequestControl:
    """The control a request's free-form parameters ask for; ``InvalidOptionError`` for a bad one.

    ``methods``: the names this server honours (:func:`served_methods`); None: any name is taken here
    (a process that does not know the server's method), and the engine checks it.
    """
    if not params:
        return NO_CONTROL
    ours = {key: value for key, value in params.items() if isinstance(key, str) and key.startswith("specplug")}
    if not ours:
        return NO_CONTROL
    for key in ours:
        if key not in REQUEST_KEYS:
            raise InvalidOptionError(f"request parameter {key!r} is not valid; specplug reads {', '.join(REQUEST_KEYS)}")
    draft = ours.get(DRAFT_KEY, "on")
    if draft not in _DRAFT_VALUES:
        raise InvalidOptionError(f"request parameter {DRAFT_KEY} = {draft!r} is not valid; use one of on, off")
    cap = ours.get(MAX_DRAFT_TOKENS_KEY)
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
        raise InvalidOptionError(
            f"request parameter {MAX_DRAFT_TOKENS_KEY} = {cap!r} is not valid; it must be an integer >= 0")
    method = ours.get(METHOD_KEY)
    if method is not None and (not isinstance(method, str) or (methods is not None and method not in methods)):
        valid = f"this server honours {', '.join(methods)}" if methods is not None else "it must be a method name"
        raise InvalidOptionError(f"request parameter {METHOD_KEY} = {method!r} is not valid; {valid}")
    return RequestControl(off=draft == "off", max_draft_tokens=cap, method=method)
