"""API tokens that expire, rotate and can be revoked by their owner; throttles for sign-in and
submissions.

- ``POST /api/v1/auth/token/`` (``username``, ``password``; form or JSON): the user's token and
  ``expires_at``. An expired token is replaced by a new one. Throttled (scope ``auth``).
- ``DELETE /api/v1/auth/token/`` (authenticated): revokes the caller's token (sign-out).
- ``POST /api/v1/auth/token/rotate/`` (authenticated): a new key; the old one stops working.
- A token older than ``TANDEM_TOKEN_TTL_HOURS`` (default 168, one week) is refused with 401
  "token expired"; every token of a user is deleted when their password changes.

Throttle scopes (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``, DRF's cache-based throttles):
``auth`` per client address, ``submit`` per user on ``POST`` of jobs and experiments.
"""
from __future__ import annotations

from django.contrib.auth import authenticate
from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import permissions, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle, UserRateThrottle
from rest_framework.views import APIView

from .authentication import ExpiringTokenAuthentication, expires_at


class AuthThrottle(ScopedRateThrottle):
    """Sign-in attempts per client address (scope ``auth``)."""

    scope_attr = "throttle_scope"


class SubmitThrottle(UserRateThrottle):
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
