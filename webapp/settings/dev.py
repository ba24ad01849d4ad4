"""Development and demo settings: no services needed (SQLite, filesystem broker) unless
``DATABASE_URL`` / ``CELERY_BROKER_URL`` say otherwise."""
from .base import *  # noqa: F401,F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
