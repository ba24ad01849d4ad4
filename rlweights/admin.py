"""Admin of the rlweights engine."""
