"""The marker that plugin functions carry."""

import pluggy

hookimpl = pluggy.HookimplMarker("specplug")
