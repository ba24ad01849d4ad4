"""Celery tasks of the federation engine (thin: IDs in, one service call)."""
