"""Admin of the tuning engine."""
