"""The SGLang adapter: every specplug method as an SGLang speculative algorithm.

With specplug installed next to SGLang, its general plugin (:func:`register`, entry point
``sglang.srt.plugins``) registers ``SPECPLUG_<METHOD>`` for each method::

    python -m sglang.launch_server --model-path MODEL --speculative-algorithm SPECPLUG_SUFFIX \\
        --speculative-num-draft-tokens 8
    SPECPLUG_SGLANG_OPTIONS='{"min_match": 2}' python -m sglang.launch_server ... SPECPLUG_ADAPTIVE
    sglang.Engine(model_path=MODEL, speculative_algorithm="SPECPLUG_NGRAM")

The algorithms run on SGLang's n-gram verify path (:class:`SpecplugSpecAlgo`), drafting with
:class:`SpecplugWorker`; a method that composes the model's own drafter (``hybrid``) also runs
over SGLang's EAGLE worker as ``SPECPLUG_HYBRID_EAGLE``/``_EAGLE3`` (and ``_NEXTN``, the model's own MTP
layers as the draft; :class:`SpecplugEagleWorker`,
its lookup drafts overlaid on the head's by :class:`EagleOverlay`) and over its draft-model worker as
``SPECPLUG_HYBRID_STANDALONE`` (:class:`SpecplugStandaloneWorker`); the request lifecycle,
fault isolation and counters are the engine layer's (:mod:`specplug.engine`). Importing this package imports no SGLang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplug.engine._lazy import lazy_attributes
from specplug_adapters.sglang._compat import TESTED_SGLANG, installed_sglang_version, version_problem
from specplug_adapters.sglang._config import (
    DEFAULT_NUM_DRAFT_TOKENS,
    LOGGER_NAME,
    OPTIONS_ENV,
    OVERLAY_DRAFTERS,
    PREFIX,
    REFUSED_DRAFTERS,
    STATS_FILE_ENV,
    STATS_INTERVAL_ENV,
    algorithm_names,
    check_eagle_options,
    check_options,
    eagle_algorithm_names,
    method_of,
    overlay_algorithm_names,
    read_options,
    read_stats_settings,
    refused_overlay_names,
)
from specplug_adapters.sglang._plugin import DISABLE_ENV, register, registered
from specplug_adapters.sglang._trees import PAD_TOKEN, draft_trees

if TYPE_CHECKING:
    from specplug_adapters.sglang._eagle import EagleOverlay, SpecplugEagleWorker
    from specplug_adapters.sglang._spec import (
        SpecplugEagle3SpecAlgo,
        SpecplugEagleSpecAlgo,
        SpecplugNextnSpecAlgo,
        SpecplugRefusedSpecAlgo,
        SpecplugSpecAlgo,
        SpecplugStandaloneSpecAlgo,
    )
    from specplug_adapters.sglang._standalone import SpecplugStandaloneWorker
    from specplug_adapters.sglang._worker import SpecplugWorker

__all__ = [
    "DEFAULT_NUM_DRAFT_TOKENS",
    "DISABLE_ENV",
    "LOGGER_NAME",
    "OPTIONS_ENV",
    "OVERLAY_DRAFTERS",
    "PAD_TOKEN",
    "PREFIX",
    "REFUSED_DRAFTERS",
    "STATS_FILE_ENV",
    "STATS_INTERVAL_ENV",
    "TESTED_SGLANG",
    "EagleOverlay",
    "SpecplugEagle3SpecAlgo",
    "SpecplugEagleSpecAlgo",
    "SpecplugEagleWorker",
    "SpecplugNextnSpecAlgo",
    "SpecplugRefusedSpecAlgo",
    "SpecplugSpecAlgo",
    "SpecplugStandaloneSpecAlgo",
    "SpecplugStandaloneWorker",
    "SpecplugWorker",
    "algorithm_names",
    "check_eagle_options",
    "check_options",
    "eagle_algorithm_names",
    "draft_trees",
    "installed_sglang_version",
    "method_of",
    "overlay_algorithm_names",
    "read_options",
    "read_stats_settings",
    "refused_overlay_names",
    "register",
    "registered",
    "version_problem",
]

# SGLang's modules load only when asked for: the launcher registers names without the worker
__getattr__ = lazy_attributes(__name__, {
    "EagleOverlay": "specplug_adapters.sglang._eagle",
    "SpecplugEagle3SpecAlgo": "specplug_adapters.sglang._spec",
    "SpecplugEagleSpecAlgo": "specplug_adapters.sglang._spec",
    "SpecplugEagleWorker": "specplug_adapters.sglang._eagle",
    "SpecplugNextnSpecAlgo": "specplug_adapters.sglang._spec",
    "SpecplugRefusedSpecAlgo": "specplug_adapters.sglang._spec",
    "SpecplugSpecAlgo": "specplug_adapters.sglang._spec",
    "SpecplugStandaloneSpecAlgo": "specplug_adapters.sglang._spec",
    "SpecplugStandaloneWorker": "specplug_adapters.sglang._standalone",
    "SpecplugWorker": "specplug_adapters.sglang._worker",
})
