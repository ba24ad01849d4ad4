"""Middleware of the platform.

:class:`DatabaseUnavailableMiddleware`: a request that fails because the database cannot be
reached (PostgreSQL restarting or failing over, SQLite locked past its busy timeout) is answered
``503 Service Unavailable`` with ``Retry-After``, not a 500 page: the client learns that the
outage is temporary and retries (a submission with the same ``Idempotency-Key``, so a retry never
creates a second one, :class:`webapp.api.IdempotentCreate`). API paths get JSON, other pages text.
"""
from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

log = logging.getLogger(__name__)

#: Seconds a client is asked to wait before retrying.
RETRY_AFTER_S = 5


class DatabaseUnavailableMiddleware:
    """Turns ``django.db.OperationalError`` / ``InterfaceError`` raised by a view into a 503
    (``{"detail": ...}`` under ``/api/``) with ``Retry-After: 5``; the error is logged."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        log.warning("%s %s: database unavailable (%s: %s); answered 503", request.method, request.path,
                    type(exception).__name__, str(exception).strip()[:200])
        detail = "the database is unavailable; retry in a few seconds"
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": detail}, status=503)
        else:
            response = HttpResponse(detail, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
