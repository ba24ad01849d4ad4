"""Test settings. Unit tests need no services; integration tests use the PostgreSQL and
Redis given by ``DATABASE_URL`` and ``CELERY_BROKER_URL`` (defaults: the local servers)."""
from .base import *  # noqa: F401,F403
from .base import database, env

DATABASES = {"default": database("postgres://postgres@127.0.0.1:5432/tandem")}
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/15")
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600),
    # kombu sweeps for unacknowledged messages to restore every interval x throttle seconds
    # (10 x 10 by default); a short visibility timeout needs a shorter sweep
    "unacked_restore_interval": env.int("CELERY_UNACKED_RESTORE_S", default=10),
    "unacked_restore_throttle": env.int("CELERY_UNACKED_RESTORE_THROTTLE", default=10),
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The suite signs in from one address many times a minute; tests of the throttles set their own rates.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth": "10000/min", "submit": "100000/min"}}  # noqa: F405
LOGIN_ATTEMPTS_PER_MIN = 10000
