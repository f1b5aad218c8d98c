"""Data files shipped with specplug: cost-model presets and benchmark traces."""
