"""Services of the rlweights engine (functions that write)."""
