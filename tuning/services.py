"""Services of the tuning engine (functions that write)."""
