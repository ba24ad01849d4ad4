"""Tandem's Django project: settings, URLs, the platform models, the API root and the dashboard.

Importing the package loads the Celery app so ``@shared_task`` binds to it.
"""
from workers.celery import app as celery_app

__all__ = ("celery_app",)
