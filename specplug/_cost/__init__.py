"""How cost models work: the types, their TOML files, step times, online estimates, fitting.

:mod:`specplug.cost` is the public face of this package. The implementation sits here, below the
plugin registry, because the registry validates the cost models plugins hand it and composites
price drafts with these types, while :mod:`specplug.cost` looks names up in that registry: one
package for both would import itself through the registry.
"""
