"""Lookup proposers: drafts copied from earlier text (n-gram and suffix matching), CPU only."""
