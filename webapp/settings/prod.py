"""Production settings: every secret from the environment, PostgreSQL and Redis required."""
import os

from .base import *  # noqa: F401,F403
from .base import cache, database, env

SECRET_KEY = env("DJANGO_SECRET_KEY")  # no default: refuse to start without one
if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be at least 50 characters with at least 5 distinct ones and not Django's "
        "'django-insecure' placeholder; generate one: python -c 'import secrets; print(secrets.token_urlsafe(50))'")
DEBUG = False
DATABASES = {"default": database()}  # DATABASE_URL required
CELERY_BROKER_URL = env("CELERY_BROKER_URL")
# throttles must count across processes and machines: the cache is Redis (the broker's, unless
# TANDEM_CACHE_URL names another database; docs/deployment.md)
_cache_url = env("TANDEM_CACHE_URL", default=CELERY_BROKER_URL)
if not _cache_url:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("TANDEM_CACHE_URL is set but empty: production keeps the throttles' counters in Redis "
                               "(unset it to use the broker's, or give redis://host:port/db)")
CACHES = {"default": cache(_cache_url, name="TANDEM_CACHE_URL" if "TANDEM_CACHE_URL" in os.environ
                           else "TANDEM_CACHE_URL (unset: CELERY_BROKER_URL, the default)")}
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
# TLS is usually ended at a proxy/load balancer: trust its X-Forwarded-Proto, and let the
# operator turn on redirects and HSTS once the whole site is served over HTTPS.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SSL_REDIRECT", default=False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=0)
