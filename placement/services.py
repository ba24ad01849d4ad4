"""Services of the placement engine (functions that write)."""
