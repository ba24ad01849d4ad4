"""API tokens that expire, rotate and can be revoked by their owner; throttles for sign-in and
submissions.

- ``POST /api/v1/auth/token/`` (``username``, ``password``; form or JSON): the user's token and
  ``expires_at``. An expired token is replaced by a new one. Throttled (scope ``auth``).
- ``DELETE /api/v1/auth/token/`` (authenticated): revokes the caller's token (sign-out).
- ``POST /api/v1/auth/token/rotate/`` (authenticated): a new key; the old one stops working.
- A token older than ``TANDEM_TOKEN_TTL_HOURS`` (default 168, one week) is refused with 401
  "token expired"; every token of a user is deleted when their password changes.

Throttle scopes (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``; sliding-window counters in
Django's cache, :class:`SlidingWindowCounter`): ``auth`` per client address, ``submit`` per user
on ``POST`` of jobs and experiments. The limits hold across server processes only with a shared
cache (``TANDEM_CACHE_URL``); without one each process counts alone.
"""
from __future__ import annotations

import logging
import weakref

from django.contrib.auth import authenticate
from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import permissions, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle, UserRateThrottle
from rest_framework.views import APIView

from .authentication import ExpiringTokenAuthentication, cache_errors, expires_at

log = logging.getLogger(__name__)


#: what a cache that cannot be reached raises (a bug in the throttle is not one of them)
CACHE_ERRORS = cache_errors()

#: redis-py client per Django Redis cache client (one per thread: Django's caches are per thread)
_REDIS_CLIENTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class SlidingWindowCounter(SimpleRateThrottle):
    """A DRF ``SimpleRateThrottle`` with a sliding-window counter instead of DRF's
    list of request times. The count of the current clock window (of the rate's period) is a
    cache counter (``incr``); a request is allowed while ``previous x (1 - elapsed fraction) +
    current`` is below the limit (the sliding-window approximation of rate limiters such as
    Cloudflare's, which assumes the previous window's requests were spread evenly). A request
    is counted first and taken back out if refused: refusals do not use up the limit, as in DRF.

    Why: DRF's throttle reads and writes the whole timestamp list through the cache on every
    request, 6,000 floats pickled both ways at 100 submissions/s per user; with a cache shared
    by every server process (``TANDEM_CACHE_URL``, needed for the limit to hold across processes)
    that list would cross the network twice a request. This costs one Redis round trip (a
    pipeline: ``INCR``, ``EXPIRE``, ``GET``). Requests arriving together at the limit may each
    see the others' counts and be refused where one at a time some would not be; the estimate
    never goes over the limit."""

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        window = int(self.now // self.duration)
        current_key, previous_key = f"{self.key}:{window}", f"{self.key}:{window - 1}"
        elapsed = self.now / self.duration - window  # fraction of the current window gone, 0..1
        try:
            redis_client = self._redis_client(current_key)
            if redis_client is not None:
                current, previous = self._count_on_redis(redis_client, current_key, previous_key)
            else:
                current, previous = self._count_on_cache(current_key, previous_key)
            if previous * (1.0 - elapsed) + current - 1 >= self.num_requests:
                self._uncount(redis_client, current_key)
                self.wait_s = self._wait(elapsed, previous, current - 1)
                return False
        except CACHE_ERRORS as err:  # the cache's server is unreachable: let it through
            log.warning("throttle %s not applied: cache unavailable (%s: %s)", self.scope, type(err).__name__, err)
        return True

    def _redis_client(self, key: str):
        """The redis-py client behind Django's ``RedisCache`` (``None`` for another backend), so a
        request's counting is one round trip: Django's own ``incr`` checks that the key exists
        first, and ``get_many`` is another. Kept per cache client (Django builds a new
        ``redis.Redis`` on every call, a tenth of a submission's CPU time)."""
        backend = getattr(self.cache, "_cache", None)
        if not hasattr(backend, "get_client"):
            return None
        client = _REDIS_CLIENTS.get(backend)
        if client is None:
            client = _REDIS_CLIENTS[backend] = backend.get_client(self.cache.make_and_validate_key(key), write=True)
        return client

    def _count_on_redis(self, client, current_key: str, previous_key: str) -> tuple[int, int]:
        """Count this request in the current window; returns (current window's count with it,
        previous window's count). Django's Redis serializer stores integers as plain numbers, so
        these are the keys and values ``cache.get`` reads."""
        cur, prev = self.cache.make_and_validate_key(current_key), self.cache.make_and_validate_key(previous_key)
        pipe = client.pipeline(transaction=False)
        pipe.incr(cur)
        pipe.expire(cur, int(2 * self.duration + 1))
        pipe.get(prev)
        current, _, previous = pipe.execute()
        return int(current), int(previous or 0)

    def _count_on_cache(self, current_key: str, previous_key: str) -> tuple[int, int]:
        """:meth:`_count_on_redis` through Django's cache API (the demo's local memory)."""
        try:
            current = self.cache.incr(current_key)
        except ValueError:  # first request of the window (or its key expired just now)
            if self.cache.add(current_key, 1, timeout=2 * self.duration + 1):
                current = 1
            else:
                current = self.cache.incr(current_key)  # another process created it meanwhile
        return current, int(self.cache.get(previous_key, 0))

    def _uncount(self, redis_client, current_key: str) -> None:
        """Take a refused request back out of the count (refusals do not use up the limit)."""
        if redis_client is not None:
            redis_client.decr(self.cache.make_and_validate_key(current_key))
        else:
            self.cache.decr(current_key)

    def _wait(self, elapsed: float, previous: int, current: int) -> float | None:
        """Seconds until the estimate falls below the limit with no new requests: the previous
        window's weight decays to ``(limit - current) / previous`` within this window, or not
        before the next one (then this window's count becomes the decaying one)."""
        left_s = (1.0 - elapsed) * self.duration
        if self.num_requests <= 0:
            return None  # nothing is ever allowed: no time to wait for
        room = self.num_requests - current
        if room > 0 and previous > 0:
            return max(0.0, (1.0 - room / previous - elapsed) * self.duration)
        if current < self.num_requests:
            return left_s
        # next window: current * (1 - f) < limit, i.e. f > 1 - limit / current
        return left_s + max(0.0, 1.0 - self.num_requests / current) * self.duration

    def wait(self) -> float | None:
        return getattr(self, "wait_s", None)


class AuthThrottle(ScopedRateThrottle, SlidingWindowCounter):
    """Sign-in attempts per client address (scope ``auth``)."""

    scope_attr = "throttle_scope"


class SubmitThrottle(UserRateThrottle, SlidingWindowCounter):
    """Submissions (``POST`` of jobs and experiments) per user (scope ``submit``)."""

    scope = "submit"


def issue_token(user) -> Token:
    """The user's live token, replacing an expired one."""
    with transaction.atomic():
        token, created = Token.objects.select_for_update().get_or_create(user=user)
        if not created and timezone.now() >= expires_at(token):
            token.delete()
            token = Token.objects.create(user=user)
    return token


_Credentials = inline_serializer("TokenRequest", fields={
    "username": serializers.CharField(), "password": serializers.CharField(style={"input_type": "password"})})
_TokenOut = inline_serializer("TokenResponse", fields={"token": serializers.CharField(), "expires_at": serializers.DateTimeField()})


class TokenView(APIView):
    """Obtain (POST) or revoke (DELETE) the caller's API token. See the module docstring."""

    throttle_scope = "auth"
    authentication_classes = [ExpiringTokenAuthentication, SessionAuthentication]

    def get_permissions(self):
        return [permissions.AllowAny()] if self.request.method == "POST" else [permissions.IsAuthenticated()]

    def get_throttles(self):
        return [AuthThrottle()] if self.request.method == "POST" else []

    @extend_schema(request=_Credentials, responses=_TokenOut)
    def post(self, request):
        username, password = request.data.get("username"), request.data.get("password")
        if not isinstance(username, str) or not isinstance(password, str) or not username or not password:
            return Response({"detail": "give username and password"}, status=status.HTTP_400_BAD_REQUEST)
        user = authenticate(request=request, username=username, password=password)
        if user is None or not user.is_active:
            return Response({"detail": "unable to log in with those credentials"}, status=status.HTTP_400_BAD_REQUEST)
        token = issue_token(user)
        return Response({"token": token.key, "expires_at": expires_at(token)})

    @extend_schema(request=None, responses={204: None})
    def delete(self, request):
        if isinstance(request.auth, Token):
            request.auth.delete()
        else:  # a browser session: revoke the user's token
            Token.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenRotateView(APIView):
    """``POST``: a new token for the caller; the old one is deleted at once."""

    authentication_classes = [ExpiringTokenAuthentication, SessionAuthentication]
    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses=_TokenOut)
    def post(self, request):
        with transaction.atomic():
            Token.objects.filter(user=request.user).delete()
            token = Token.objects.create(user=request.user)
        return Response({"token": token.key, "expires_at": expires_at(token)})
