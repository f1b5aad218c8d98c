"""Refusing a server start: a method that needs the model's own drafter where it has none, told in one line.

An engine's server is started from a command line, where a traceback from deep inside the engine
hides the one thing the user must change. Adapters check what they can before the engine starts
any process and end the start here: one line on stderr, exit status 2 (the status argparse and
click give a usage mistake). Library calls (``LLM(...)``, ``sgl.Engine(...)``) get the exception.
"""

from __future__ import annotations

import sys
from typing import NoReturn, TextIO

from specplug._errors import NoDrafterError, SpecplugError

__all__ = ["EXIT_STATUS", "exit_on_mistake", "no_drafter"]

#: the exit status of a start refused for a configuration mistake
EXIT_STATUS = 2


def no_drafter(method: str, model: str, *, why: str, give: str, lookups: str) -> NoDrafterError:
    """The error for ``method`` (as the engine spells it) on ``model``: why there is no drafter, and the two fixes.

    >>> print(no_drafter("specplug.hybrid", "org/m", why="it has no MTP layers", give='give a head in "model"',
    ...                  lookups="use specplug.suffix"))
    specplug.hybrid drafts with the model's own drafter (MTP layers, an EAGLE head or a draft model), but there is none for org/m: it has no MTP layers; give a head in "model", or use specplug.suffix
    """
    return NoDrafterError(
        f"{method} drafts with the model's own drafter (MTP layers, an EAGLE head or a draft model), but there is "
        f"none for {model}: {why}; {give}, or {lookups}"
    )


def exit_on_mistake(error: SpecplugError, stream: TextIO | None = None) -> NoReturn:
    """End a server's start on ``error``: ``specplug: error: MESSAGE`` as one line on stderr, then exit status 2.

    Raises SystemExit, which Python and asyncio let through without a traceback.
    """
    text = " ".join(str(error).split())
    print(f"specplug: error: {text}", file=stream if stream is not None else sys.stderr, flush=True)
    raise SystemExit(EXIT_STATUS)
