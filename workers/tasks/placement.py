"""Celery tasks of the placement engine (thin: IDs in, one service call)."""
