"""What the vLLM plugin has patched in this process, readable without importing the plugin.

The plugin (``_plugin``) records each concern it installs; stats files (``_stats``) report them.
Kept apart so that the drafter and overlay modules, which the plugin imports lazily, can read it
without importing the plugin back.
"""

from __future__ import annotations

__all__ = ["installed", "mark_installed"]

_installed: set[str] = set()


def mark_installed(concern: str) -> None:
    """Record that ``concern`` (``config``, ``cli``, ``requests``, ``hybrid``) is patched into vLLM here."""
    _installed.add(concern)


def installed() -> frozenset[str]:
    """The concerns patched in this process: ``config``, ``cli``, ``requests``, ``hybrid`` (empty when off)."""
    return frozenset(_installed)
