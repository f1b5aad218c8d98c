"""Chains for ``specplug tune --draft``: a lookup setting tried first, then a model drafter.

llama-server takes several ``--spec-type`` values and drafts with the first that has a draft
(n-gram types before model drafters). A chain candidate is one of tune's lookup settings with a
drafter appended and the drafter's draft length (``--spec-draft-n-max``) set; the drafter alone
at each length is measured beside them, so the table shows what the lookup adds. The drafter is
a separate GGUF (``--spec-draft-model``) or, for ``draft-mtp``, the model's own MTP layers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specplug._errors import InvalidOptionError
from specplug.lab.llamacpp._measure import Setting
from specplug.lab.llamacpp._mtp import MTP_SPEC_TYPE
from specplug_adapters.llamacpp import ModelNotFoundError, check_model, find_server, help_options, server_help

__all__ = ["CHAIN_LOOKUPS", "DRAFT_LENGTHS", "Drafter", "chain_settings", "check_drafter", "drafter_types", "with_drafter"]

#: draft lengths tried by default (llama.cpp's default is 3; a CPU pays per drafted position)
DRAFT_LENGTHS: tuple[int, ...] = (2, 4, 8)
#: tune's lookup candidates chained by default: the code-edit preset's winner and two runners-up
CHAIN_LOOKUPS: tuple[str, ...] = ("ngram-mod match16 min8 max32", "ngram-map-k n4 m16", "ngram-mod match24 min16 max32")
#: drafters that draft a block of their own length: their draft length is not a knob
BLOCK_DRAFTERS = frozenset({"draft-dflash", "draft-dspark"})
_TYPE_FLAG = "--spec-type"
_PREFIX = "draft-"


@dataclass(frozen=True)
class Drafter:
    """A llama-server model drafter: its ``--spec-type`` and its GGUF (None: the model's own MTP layers)."""

    kind: str
    model: Path | None = None

    @property
    def flags(self) -> tuple[str, ...]:
        return ("--spec-draft-model", str(self.model)) if self.model is not None else ()

    def describe(self) -> str:
        source = self.model.name if self.model is not None else "the model's own MTP layers"
        return f"{self.kind} ({source})"


def drafter_types(binary: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The model drafters (``draft-*`` values of ``--spec-type``) the installed llama-server accepts."""
    path = str(find_server(binary))
    option = help_options(server_help(path)).get(_TYPE_FLAG)
    return tuple(kind for kind in (option.choices if option else ()) if kind.startswith(_PREFIX))


def check_drafter(
    kind: str | None, model: str | os.PathLike[str] | None, *, binary: str | os.PathLike[str] | None = None
) -> Drafter:
    """The drafter ``--draft-type``/``--draft`` name, or a one-line error naming the bad value and what is valid."""
    kind = kind or "draft-simple"
    valid = ", ".join(drafter_types(binary)) or "none (this build has no draft-* types)"
    if kind not in drafter_types(binary):
        raise InvalidOptionError(f"--draft-type {kind!r} is not a drafter this llama-server accepts; valid drafter types: {valid}")
    if model is None:
        if kind != MTP_SPEC_TYPE:
            raise InvalidOptionError(
                f"--draft-type {kind} needs --draft DRAFT.gguf (the drafter's GGUF); only {MTP_SPEC_TYPE} drafts "
                "with the model's own layers"
            )
        return Drafter(kind)
    try:
        check_model(model)
    except ModelNotFoundError as error:
        raise InvalidOptionError(f"--draft: draft {error}") from None
    # absolute, as given: the preset names the file the user chose, not where a link leads
    return Drafter(kind, Path(os.path.abspath(model)))


def _lookup_parts(setting: Setting) -> tuple[str, tuple[str, ...]]:
    """(its ``--spec-type`` value, its other flags) of a lookup setting; one without a type cannot chain."""
    flags = list(setting.flags)
    if _TYPE_FLAG not in flags or flags.index(_TYPE_FLAG) + 1 >= len(flags):
        raise InvalidOptionError(f"candidate {setting.name!r} sets no {_TYPE_FLAG}, so it cannot head a chain; "
                                 f"name lookup candidates such as {', '.join(CHAIN_LOOKUPS)}")  # fmt: skip
    index = flags.index(_TYPE_FLAG)
    kinds = flags[index + 1]
    if any(kind.startswith(_PREFIX) for kind in kinds.split(",")):
        raise InvalidOptionError(f"candidate {setting.name!r} already drafts with a model ({kinds}); give a lookup setting")
    return kinds, tuple(flags[:index] + flags[index + 2 :])


def chain_settings(drafter: Drafter, lookups: Sequence[Setting], lengths: Sequence[int] = DRAFT_LENGTHS) -> tuple[Setting, ...]:
    """The drafter alone and each lookup chained before it, at each draft length.

    >>> [s.name for s in chain_settings(Drafter("draft-simple", Path("d.gguf")), [Setting("ngram", ("--spec-type", "ngram-mod"))], [4])]
    ['draft-simple n4', 'ngram + draft-simple n4']
    >>> chain_settings(Drafter("draft-simple", Path("d.gguf")), [Setting("ngram", ("--spec-type", "ngram-mod"))], [4])[1].flags
    ('--spec-type', 'ngram-mod,draft-simple', '--spec-draft-n-max', '4', '--spec-draft-model', 'd.gguf')
    """
    if not lengths or min(lengths) < 1:
        raise InvalidOptionError(f"draft lengths must be ints >= 1 (got {list(lengths)})")
    parts = [(lookup.name, *_lookup_parts(lookup)) for lookup in lookups]
    # a block drafter's length is its own: one setting each, no --spec-draft-n-max
    sizes: Sequence[int | None] = (None,) if drafter.kind in BLOCK_DRAFTERS else lengths
    settings = []
    for size in sizes:
        length = () if size is None else ("--spec-draft-n-max", str(size))
        tag = drafter.kind if size is None else f"{drafter.kind} n{size}"
        settings.append(Setting(tag, (_TYPE_FLAG, drafter.kind, *length, *drafter.flags)))
        for name, kinds, rest in parts:
            flags = (_TYPE_FLAG, f"{kinds},{drafter.kind}", *rest, *length, *drafter.flags)
            settings.append(Setting(f"{name} + {tag}", flags))
    return tuple(settings)


def with_drafter(setting: Setting, drafter: Drafter) -> Setting:
    """A shipped preset that drafts with ``drafter.kind`` but names no draft GGUF, given ``drafter``'s file.

    The chain presets (``draft-model-ngram``, ``eagle3-ngram``) leave ``-md`` to the user, so
    ``tune --presets draft-model-ngram --draft D.gguf`` measures them with this drafter; any other
    setting is returned as it is.

    >>> with_drafter(Setting("p", ("--spec-type", "ngram-mod,draft-simple")), Drafter("draft-simple", Path("d.gguf"))).flags
    ('--spec-type', 'ngram-mod,draft-simple', '--spec-draft-model', 'd.gguf')
    """
    flags = setting.flags
    kinds = flags[flags.index(_TYPE_FLAG) + 1].split(",") if _TYPE_FLAG in flags[:-1] else []
    named = any(flag in ("-md", "--spec-draft-model", "--model-draft") or flag.startswith("--spec-draft-model=") for flag in flags)
    if drafter.kind not in kinds or named:
        return setting
    return Setting(setting.name, (*flags, *drafter.flags))
