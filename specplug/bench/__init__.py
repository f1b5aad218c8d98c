"""Trace replay and benchmark: replays recorded requests against proposers and reports goodput."""
