"""Token authentication with expiry (imported by DRF's settings, so it imports no DRF views;
the token endpoints are in :mod:`webapp.auth`)."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

log = logging.getLogger(__name__)


def token_ttl() -> timedelta:
    """How long a token lives after it was issued (``TOKEN_TTL_HOURS`` setting, hours)."""
    return timedelta(hours=float(getattr(settings, "TOKEN_TTL_HOURS", 168)))


def expires_at(token: Token) -> datetime:
    return token.created + token_ttl()


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing tokens older than :func:`token_ttl` (401).

    The token and its user are read with one SQL statement compiled once per process
    (:func:`token_with_user`): the ORM compiled DRF's ``select_related("user").get(key=...)``
    anew on every request, a fifth of a job submission's CPU time (bench/api_load.py)."""

    def authenticate_credentials(self, key):
        token = token_with_user(key)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        user = token.user
        if not user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        if timezone.now() >= expires_at(token):
            raise AuthenticationFailed(f"token expired at {expires_at(token).isoformat()}; get a new one with POST /api/v1/auth/token/")
        return user, token


_TOKEN_SQL: dict[str, tuple[str, list[str], list[str]]] = {}  # database alias -> (SQL, token fields, user fields)


def token_with_user(key: str) -> Token | None:
    """The token whose key is ``key``, with its ``user`` loaded, or ``None``: what
    ``Token.objects.select_related("user").get(key=key)`` returns, from SQL the ORM compiles
    once per database (a sentinel stands for the key; the columns come back in the order of
    the token's concrete fields, then the user's, as ``select_related`` selects them).
    ``key``: the header's token string; an empty, over-long (> 40 characters) or NUL-bearing
    one finds nothing. Raises ``RuntimeError`` if the compiled SQL or its row does not have
    the shape described (a Django or DRF upgrade changed it), and the database's errors."""
    from django.db import connections, router

    if not key or len(key) > Token._meta.get_field("key").max_length or "\x00" in key:
        return None  # no such key can be stored; PostgreSQL cannot even compare a NUL
    alias = router.db_for_read(Token)
    if alias not in _TOKEN_SQL:
        sentinel = "tandem-token-sentinel"
        sql, params = Token.objects.using(alias).select_related("user").filter(key=sentinel).query.sql_with_params()
        if list(params) != [sentinel]:
            raise RuntimeError(f"token lookup compiled with unexpected parameters {params!r}")
        user_model = Token._meta.get_field("user").related_model
        _TOKEN_SQL[alias] = (sql, [f.attname for f in Token._meta.concrete_fields],
                             [f.attname for f in user_model._meta.concrete_fields])
    sql, token_fields, user_fields = _TOKEN_SQL[alias]
    with connections[alias].cursor() as cur:
        cur.execute(sql, [key])
        row = cur.fetchone()
    if row is None:
        return None
    if len(row) != len(token_fields) + len(user_fields):
        raise RuntimeError(f"token lookup returned {len(row)} columns, expected {len(token_fields) + len(user_fields)}")
    n = len(token_fields)
    token = Token.from_db(alias, token_fields, row[:n])
    token.user = Token._meta.get_field("user").related_model.from_db(alias, user_fields, row[n:])
    return token


def revoke_tokens_on_password_change(sender, instance, **kwargs) -> None:
    """``pre_save`` receiver for the user model: a changed password hash deletes the user's
    tokens (a stolen token must not outlive the password reset that was meant to stop it)."""
    if not instance.pk:
        return
    old = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if old is not None and old != instance.password:
        Token.objects.filter(user_id=instance.pk).delete()


def cache_errors() -> tuple[type[BaseException], ...]:
    """Exceptions of a cache whose server cannot be reached (refused, reset, timed out) or
    answers with an error: redis-py's, and ``OSError`` for the rest."""
    import redis

    return (OSError, redis.RedisError)


def throttle_logins(view):
    """Wrap a Django login view (the dashboard's and the admin's): more than
    ``LOGIN_ATTEMPTS_PER_MIN`` POSTs (default 10, env ``TANDEM_LOGIN_ATTEMPTS_PER_MIN``) from one
    client address within 60 s get HTTP 429 without checking the password. The 60 s window
    opens at an address's first attempt (not at a clock minute, which a burst could straddle and
    so get twice the limit). Counters live in Django's cache, as DRF's throttles do."""
    import functools

    from django.core.cache import cache
    from django.http import HttpResponse

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method == "POST":
            limit = int(getattr(settings, "LOGIN_ATTEMPTS_PER_MIN", 10))
            # the client address as DRF's throttles take it (REMOTE_ADDR, or X-Forwarded-For's
            # entry from TANDEM_NUM_PROXIES trusted proxies): one address, one count
            from rest_framework.throttling import BaseThrottle

            key = f"tandem-login:{BaseThrottle().get_ident(request)}"
            try:
                cache.add(key, 0, timeout=60)  # incr keeps the expiry: the window is 60 s from the first POST
                try:
                    attempts = cache.incr(key)
                except ValueError:  # the window closed between add and incr
                    attempts = 1
                    cache.set(key, attempts, timeout=60)
            except cache_errors() as err:  # cache unreachable: the sign-in still works
                log.warning("sign-in limit not applied: cache unavailable (%s: %s)", type(err).__name__, err)
                attempts = 0
            if attempts > limit:
                return HttpResponse(f"Too many sign-in attempts from this address (more than {limit} a minute); "
                                    "wait a minute and try again.", status=429, content_type="text/plain")
        return view(request, *args, **kwargs)

    return wrapped
