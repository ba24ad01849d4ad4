"""Selectors of the placement engine (functions that read)."""
