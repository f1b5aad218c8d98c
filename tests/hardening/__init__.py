"""Fault-and-abuse tests: threads, bad drafts, nonsense options, malformed batches."""
