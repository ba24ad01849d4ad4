"""Selectors of the federation engine (functions that read)."""
