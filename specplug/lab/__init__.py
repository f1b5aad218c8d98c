"""The lab: measuring proposers, never needed to run one.

- :mod:`specplug.lab.trace`: the trace format (recorded requests of a real engine);
- :mod:`specplug.lab.bench`: replays traces against methods and peers, models goodput,
  and makes traces and cost models with llama-server;
- :mod:`specplug.lab.perf`: per-step time and memory at long contexts;
- :mod:`specplug.lab.peers`: other engines' drafting code behind the specplug contract;
- :mod:`specplug.lab.llamacpp`: measuring llama.cpp settings and tuning presets;
- :mod:`specplug.lab.trtllm`: tuning TensorRT-LLM's native presets by trace replay;
- :mod:`specplug.lab.eagle_head`: an EAGLE-1 head's forward in torch (trained by
  scripts/train_eagle_head.py, measured into traces by ``specplug trace --neural-head``).

The lab may import the core, the engine layer and the adapters; none of them imports the
lab. Nothing is imported here, so ``import specplug.lab.trace`` pulls in no benchmark code.
"""
