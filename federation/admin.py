"""Admin of the federation engine."""
