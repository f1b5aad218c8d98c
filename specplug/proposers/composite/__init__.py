"""Composite proposers: drafts chosen per request and step among other proposers (hybrid, adaptive)."""
