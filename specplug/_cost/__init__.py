"""Cost-model types and their TOML file format, kept below the plugin registry.

The registrar that plugins hand cost models to validates them with these types, and the
plugin registry sits below :mod:`specplug.cost` (whose ``cost_model(name)`` looks names up
in it); so the types cannot live in that package. :mod:`specplug.cost` re-exports them.
"""
