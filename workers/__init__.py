"""Celery app and thin tasks (``workers/tasks/<engine>.py``)."""
