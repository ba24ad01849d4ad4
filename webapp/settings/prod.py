"""Production settings: every secret from the environment, PostgreSQL and Redis required."""
from .base import *  # noqa: F401,F403
from .base import env

SECRET_KEY = env("DJANGO_SECRET_KEY")  # no default: refuse to start without one
DEBUG = False
DATABASES = {"default": env.db("DATABASE_URL")}
CELERY_BROKER_URL = env("CELERY_BROKER_URL")
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
