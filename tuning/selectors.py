"""Selectors of the tuning engine (functions that read)."""
