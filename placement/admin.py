"""Admin of the placement engine."""
