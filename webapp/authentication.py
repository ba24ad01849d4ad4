"""Token authentication with expiry (imported by DRF's settings, so it imports no DRF views;
the token endpoints are in :mod:`webapp.auth`)."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def token_ttl() -> timedelta:
    """How long a token lives after it was issued (``TOKEN_TTL_HOURS`` setting, hours)."""
    return timedelta(hours=float(getattr(settings, "TOKEN_TTL_HOURS", 168)))


def expires_at(token: Token) -> datetime:
    return token.created + token_ttl()


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing tokens older than :func:`token_ttl` (401)."""

    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        if timezone.now() >= expires_at(token):
            raise AuthenticationFailed(f"token expired at {expires_at(token).isoformat()}; get a new one with POST /api/v1/auth/token/")
        return user, token


def revoke_tokens_on_password_change(sender, instance, **kwargs) -> None:
    """``pre_save`` receiver for the user model: a changed password hash deletes the user's
    tokens (a stolen token must not outlive the password reset that was meant to stop it)."""
    if not instance.pk:
        return
    old = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if old is not None and old != instance.password:
        Token.objects.filter(user_id=instance.pk).delete()


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
            key = f"tandem-login:{request.META.get('REMOTE_ADDR', '?')}"
            cache.add(key, 0, timeout=60)  # incr keeps the expiry: the window is 60 s from the first POST
            try:
                attempts = cache.incr(key)
            except ValueError:  # the window closed between add and incr
                attempts = 1
                cache.set(key, attempts, timeout=60)
            if attempts > limit:
                return HttpResponse(f"Too many sign-in attempts from this address (more than {limit} a minute); "
                                    "wait a minute and try again.", status=429, content_type="text/plain")
        return view(request, *args, **kwargs)

    return wrapped
