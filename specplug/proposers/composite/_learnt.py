"""A composite's learnt statistics in a file, so that a restarted server starts where it left off.

What a composite learns from all the requests it has served is its pooled acceptance counts (per
statistics track, score band and draft position); every new request's estimates start from them.
A fresh server has none, and pays to learn them again: it calls a weak neural drafter until its
counts say it is weak, and cuts drafts by the prior until they say how far they run. With
``learnt_state = PATH`` a composite reads the counts from PATH when it is built (if the file
exists) and writes them there every :data:`SAVE_EVERY` finished requests, and once more, if
requests finished since, when the composite is dropped or its process exits.

Every tensor-parallel rank reads the same file and counts the same tokens, so the ranks' choices
stay alike; they write the same counts too (each through a file of its own, then an atomic
rename, so a reader never sees half a file). Data-parallel replicas each write what they learnt:
the file holds the last writer's counts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import zipfile
from collections.abc import Sequence
from multiprocessing import util as multiprocessing_util
from pathlib import Path

import numpy as np

from specplug._errors import InvalidOptionError

__all__ = ["SAVE_EVERY", "LearntState"]

#: finished requests between two writes of the file
SAVE_EVERY = 16
_FORMAT = "specplug.learnt_state.1"
_log = logging.getLogger("specplug")


class LearntState:
    """The file of one composite's pooled counts: its layout (method, parts, array shape) is checked
    on reading, so counts of another configuration are refused rather than misread."""

    def __init__(self, path: str | os.PathLike[str], method: str, parts: Sequence[str], shape: tuple[int, ...]) -> None:
        self.path = Path(path)
        self.layout = {"format": _FORMAT, "method": method, "parts": list(parts), "shape": list(shape)}
        self._finished = 0
        self._unsaved = 0  # requests finished since the last write
        self._failed_write = False

    def keep_at_the_end(self, owner: object, drafted: np.ndarray, accepted: np.ndarray) -> None:
        """When ``owner`` (the composite) is dropped or its process exits, write ``drafted`` and
        ``accepted`` (its pooled arrays, updated in place) if requests finished since the last write:
        vLLM and SGLang never close their drafter. A multiprocessing finalizer, not atexit: engines
        run the drafter in worker processes, which run finalizers on their way out but skip atexit
        when forked. (A process killed outright, as SGLang's schedulers are, runs neither.)"""
        multiprocessing_util.Finalize(owner, self._write_unsaved, args=(drafted, accepted), exitpriority=0)

    def _write_unsaved(self, drafted: np.ndarray, accepted: np.ndarray) -> None:
        if self._unsaved:
            self.write(drafted, accepted)

    def read(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The pooled (drafted, accepted) counts the file holds; None when there is no file yet."""
        if not self.path.exists():
            return None
        try:
            with np.load(self.path, allow_pickle=False) as saved:
                layout = json.loads(str(saved["layout"]))
                drafted, accepted = saved["drafted"], saved["accepted"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            raise InvalidOptionError(
                f"learnt_state = {str(self.path)!r} is not a file of specplug's learnt statistics; remove it or give another path"
            ) from None
        if _fewer_bands(layout, self.layout) and accepted.shape == drafted.shape == tuple(layout["shape"]):
            drafted, accepted = (_with_bands(counts, self.layout["shape"][1]) for counts in (drafted, accepted))
            layout = self.layout
        if layout != self.layout or drafted.shape != tuple(self.layout["shape"]) or accepted.shape != drafted.shape:
            raise InvalidOptionError(
                f"learnt_state = {str(self.path)!r} holds the statistics of {_described(layout)}, not of this "
                f"{_described(self.layout)}; remove it or give another path"
            )
        if not (np.isfinite(drafted).all() and np.isfinite(accepted).all() and (accepted >= 0).all() and (accepted <= drafted).all()):
            raise InvalidOptionError(
                f"learnt_state = {str(self.path)!r} holds counts that are negative, not finite, or more accepted "
                "than drafted; remove it or give another path"
            )
        return drafted, accepted

    def finished(self, drafted: np.ndarray, accepted: np.ndarray) -> None:
        """A request finished: write the counts every :data:`SAVE_EVERY` of them."""
        self._finished += 1
        self._unsaved += 1
        if self._finished % SAVE_EVERY == 0:
            self.write(drafted, accepted)

    def write(self, drafted: np.ndarray, accepted: np.ndarray) -> None:
        """Write the counts now. A failed write is logged once and serving goes on: the counts are
        an optimisation, never a reason to stop drafting."""
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as file:
                np.savez(file, layout=np.array(json.dumps(self.layout)), drafted=drafted, accepted=accepted)
            os.replace(partial, self.path)
            self._unsaved = 0
        except OSError as error:
            if not self._failed_write:
                _log.warning("specplug: could not write learnt_state %s (%s); drafting goes on", self.path, error)
            self._failed_write = True
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)


def _fewer_bands(saved: dict, wanted: dict) -> bool:
    """Whether ``saved`` is ``wanted`` but for fewer statistics bands: counts an earlier version kept.
    Bands are only ever added after the existing ones, each keeping its meaning (drafts after a long
    match came later: before, they counted in the bands of their score)."""
    if {**saved, "shape": None} != {**wanted, "shape": None}:
        return False
    old, new = saved.get("shape"), wanted["shape"]
    return (
        isinstance(old, list) and len(old) == len(new) == 3 and old[0] == new[0] and old[2] == new[2]
        and isinstance(old[1], int) and 0 < old[1] < new[1]
    )


def _with_bands(counts: np.ndarray, bands: int) -> np.ndarray:
    """``counts`` [track, band, position] with empty bands added up to ``bands``."""
    grown = np.zeros((counts.shape[0], bands, counts.shape[2]), dtype=counts.dtype)
    grown[:, : counts.shape[1]] = counts
    return grown


def _described(layout: dict) -> str:
    parts = ", ".join(layout.get("parts", []))
    shape = " x ".join(str(size) for size in layout.get("shape", []))
    return f"{layout.get('method', '?')} over ({parts}), counts {shape} (tracks x bands x positions)"
