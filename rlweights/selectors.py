"""Selectors of the rlweights engine (functions that read)."""
