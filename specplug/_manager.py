"""Building the plugin manager, under the name other modules and tests have imported it by.

Everything here lives in :mod:`specplug._plugins` (the plugin manager and every registry).
"""

from specplug._plugins import BLOCK_ENV, BUILTIN_PLUGINS, ENTRY_POINT_GROUP, PluginLoadError, build_plugin_manager

__all__ = ["BLOCK_ENV", "BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "PluginLoadError", "build_plugin_manager"]
