"""The base of every method's options model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class MethodOptions(BaseModel):
    """Options of one method: unknown keys and loose types are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, arbitrary_types_allowed=True)
