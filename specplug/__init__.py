"""specplug: speculative-decoding proposers written once, run inside existing engines."""

from specplug._catalog import create, method_specs, methods
from specplug._contract import Draft, Proposer, RequestId, as_token_array
from specplug._errors import (
    DuplicateNameError,
    InvalidOptionError,
    InvalidTokensError,
    RequestStateError,
    SpecplugError,
    UnknownMethodError,
)
from specplug._guard import GuardedProposer
from specplug._hookimpl import hookimpl
from specplug._version import __version__

__all__ = [
    "Draft",
    "DuplicateNameError",
    "GuardedProposer",
    "InvalidOptionError",
    "InvalidTokensError",
    "Proposer",
    "RequestId",
    "RequestStateError",
    "SpecplugError",
    "UnknownMethodError",
    "__version__",
    "as_token_array",
    "create",
    "hookimpl",
    "method_specs",
    "methods",
]
