"""Celery tasks of the tuning engine (thin: IDs in, one service call)."""
