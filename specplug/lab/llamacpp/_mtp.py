"""Whether a GGUF carries MTP layers, for llama-server settings that draft with them (``draft-mtp``).

llama.cpp loads a model's multi-token-prediction (NextN) layers from tensors named
``blk.N.nextn.*`` in the model's own GGUF (DeepSeek-V3, GLM-4.5, Qwen3.5, Qwen3-Next, MiMo-V2,
Step-3.5, Nemotron-H and similar architectures, when converted with those layers kept); every MTP
block has ``blk.N.nextn.eh_proj.weight``. A ``draft-mtp`` setting on a GGUF without it has nothing
to draft with, so ``specplug tune`` and the demo refuse it before any llama-server starts, naming
the tensor looked for. A separate draft GGUF (``-md``) may carry the head instead: then the model's
own file is not asked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from specplug._errors import InvalidOptionError
from specplug.engine import no_drafter

__all__ = ["MTP_SPEC_TYPE", "MTP_TENSOR", "check_mtp_settings", "mtp_tensors", "uses_model_mtp"]

#: llama-server's speculative type that drafts with the model's MTP layers
MTP_SPEC_TYPE = "draft-mtp"
#: the tensor every MTP block has, as the refusal names it (N: the block's index)
MTP_TENSOR = "blk.N.nextn.eh_proj.weight"
_MTP_TENSOR = re.compile(r"blk\.\d+\.nextn\.eh_proj\.weight")
#: flags that give llama-server a separate draft GGUF (which may hold the MTP head)
_DRAFT_MODEL_FLAGS = ("-md", "--spec-draft-model")


def _values(flags: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values given to any of ``names`` in ``flags`` (``--flag value`` or ``--flag=value``)."""
    found = []
    for index, flag in enumerate(flags):
        for name in names:
            if flag == name and index + 1 < len(flags):
                found.append(flags[index + 1])
            elif flag.startswith(name + "="):
                found.append(flag.split("=", 1)[1])
    return found


def uses_model_mtp(flags: Sequence[str]) -> bool:
    """Whether llama-server ``flags`` draft with the model's own MTP layers (no separate draft GGUF).

    >>> uses_model_mtp(["--spec-type", "ngram-mod,draft-mtp"]), uses_model_mtp(["--spec-type", "ngram-mod"])
    (True, False)
    >>> uses_model_mtp(["--spec-type", "draft-mtp", "-md", "head.gguf"])
    False
    """
    types = {kind.strip() for value in _values(flags, ("--spec-type",)) for kind in value.split(",")}
    return MTP_SPEC_TYPE in types and not _values(flags, _DRAFT_MODEL_FLAGS)


def mtp_tensors(model: str | os.PathLike[str]) -> list[str]:
    """The MTP tensors (``blk.N.nextn.eh_proj.weight``) in the GGUF at ``model``, read with the ``gguf`` package."""
    try:
        from gguf import GGUFReader
    except ImportError as error:
        raise InvalidOptionError(
            "reading a GGUF's tensors needs the gguf package: pip install gguf (scripts/setup_llamacpp.sh installs it)"
        ) from error
    try:
        reader = GGUFReader(os.fspath(model))
    except (OSError, ValueError) as error:
        raise InvalidOptionError(f"{model} is not a readable GGUF file ({error})") from None
    return [tensor.name for tensor in reader.tensors if _MTP_TENSOR.fullmatch(tensor.name)]


def check_mtp_settings(model: str | os.PathLike[str], settings: Sequence[object]) -> None:
    """Refuse any of ``settings`` (``.name``, ``.flags``) that drafts with MTP layers the GGUF has not.

    Raises :class:`specplug.NoDrafterError` naming the setting, the GGUF, the tensor looked for and the ways out.
    """
    asking = [setting for setting in settings if uses_model_mtp(getattr(setting, "flags", ()))]
    if not asking or mtp_tensors(model):
        return
    raise no_drafter(
        f"llama-server setting {asking[0].name!r} (--spec-type {MTP_SPEC_TYPE})",
        Path(model).name,
        why=f"the GGUF has no MTP layers (no tensor {MTP_TENSOR}, which llama.cpp loads them from)",
        give="use a GGUF converted with its MTP layers (DeepSeek-V3, GLM-4.5, Qwen3.5, Qwen3-Next class), or a draft "
             "model: the draft-model preset with -md DRAFT.gguf",
        lookups="use a lookup preset that needs none: code-edit, chat or agentic",
    )
