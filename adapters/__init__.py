"""Engine adapters: one package per engine; each translates engine calls into the specplug contract."""
