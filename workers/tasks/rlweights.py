"""Celery tasks of the rlweights engine (thin: IDs in, one service call)."""
