"""``GET /healthz``: 200 when the database and the Celery broker answer, 503 otherwise.

Body: ``{"status": "ok"|"fail", "database": "ok"|<error>, "broker": "ok"|<error>, "cache":
"ok"|"local"|<error>}``. The cache (the throttles' counters, ``TANDEM_CACHE_URL``) does not
decide the status: without it requests go through unthrottled (webapp/auth.py); ``"local"``: each
process's own memory. No authentication (for load balancers); it reveals no configuration beyond
error class names.
"""
from __future__ import annotations

from django.db import connection
from django.http import JsonResponse


def _check_db() -> str:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()
        return "ok"
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}"


def _check_broker() -> str:
    from workers.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}"


def _check_cache() -> str:
    from django.core.cache import cache

    if not hasattr(getattr(cache, "_cache", None), "get_client"):
        return "local"
    try:
        cache.get("tandem-healthz")
        return "ok"
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}"


def healthz(request):
    db, broker = _check_db(), _check_broker()
    ok = db == "ok" and broker == "ok"
    return JsonResponse({"status": "ok" if ok else "fail", "database": db, "broker": broker, "cache": _check_cache()},
                        status=200 if ok else 503)
