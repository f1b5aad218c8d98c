"""The catalog of methods, under the name other modules and tests have imported it by.

It is :mod:`specplug._plugins` itself (the plugin manager and every registry), not a copy of
its names: setting ``_catalog._default`` in a test sets the catalog that lookups use.
"""

import sys

from specplug import _plugins

sys.modules[__name__] = _plugins
