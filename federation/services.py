"""Services of the federation engine (functions that write)."""
