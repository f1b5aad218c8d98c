"""Errors of the llama.cpp adapter; each names the bad value and what to do about it."""

from __future__ import annotations

from specplug import SpecplugError

__all__ = ["BinaryNotFoundError", "FlagRejectedError", "LlamaCppError", "ModelNotFoundError", "ServerError"]


class LlamaCppError(SpecplugError):
    """Base class of the llama.cpp adapter's errors."""


class BinaryNotFoundError(LlamaCppError, FileNotFoundError):
    """No llama-server executable where it was looked for."""


class ModelNotFoundError(LlamaCppError, FileNotFoundError):
    """A model path that is not a readable GGUF file."""


class FlagRejectedError(LlamaCppError, ValueError):
    """A flag (or flag value) that the installed llama-server does not accept."""


class ServerError(LlamaCppError, RuntimeError):
    """llama-server did not start, died, or answered with an error."""
