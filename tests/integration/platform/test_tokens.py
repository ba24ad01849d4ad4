"""API tokens expire, rotate, are revoked by their owner and on a password change; sign-in and
submissions are throttled; production refuses a weak secret key."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-1")


def sign_in(username="bob", password="pw-bob-1"):
    return APIClient().post("/api/v1/auth/token/", {"username": username, "password": password}, format="json")


def as_token(key):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def test_token_has_an_expiry_and_expired_tokens_are_refused_then_replaced(bob, settings):
    r = sign_in()
    assert r.status_code == 200
    key = r.json()["token"]
    expires = timezone.datetime.fromisoformat(r.json()["expires_at"].replace("Z", "+00:00"))
    assert timedelta(hours=167) < expires - timezone.now() <= timedelta(hours=168)
    assert as_token(key).get("/api/v1/jobs/").status_code == 200
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(hours=169))
    r = as_token(key).get("/api/v1/jobs/")
    assert r.status_code == 401 and "token expired" in r.json()["detail"]
    fresh = sign_in().json()["token"]  # signing in again replaces the expired token
    assert fresh != key and as_token(fresh).get("/api/v1/jobs/").status_code == 200


def test_owner_revokes_and_rotates(bob):
    key = sign_in().json()["token"]
    r = as_token(key).post("/api/v1/auth/token/rotate/")
    assert r.status_code == 200
    new = r.json()["token"]
    assert as_token(key).get("/api/v1/jobs/").status_code == 401  # the old key is gone at once
    assert as_token(new).delete("/api/v1/auth/token/").status_code == 204
    assert as_token(new).get("/api/v1/jobs/").status_code == 401
    assert not Token.objects.filter(user=bob).exists()


def test_password_change_revokes_tokens(bob):
    key = sign_in().json()["token"]
    bob.set_password("pw-bob-2")
    bob.save()
    assert as_token(key).get("/api/v1/jobs/").status_code == 401
    bob.first_name = "Bob"  # saving without a password change keeps a new token
    key2 = sign_in(password="pw-bob-2").json()["token"]
    bob.save()
    assert as_token(key2).get("/api/v1/jobs/").status_code == 200


def test_wrong_passwords_are_throttled(bob, monkeypatch):
    from webapp.auth import AuthThrottle

    from django.core.cache import cache

    cache.clear()
    monkeypatch.setattr(AuthThrottle, "THROTTLE_RATES", {"auth": "5/min"})
    codes = [sign_in(password="wrong").status_code for _ in range(8)]
    assert codes[:5] == [400] * 5 and codes[5:] == [429] * 3, codes
    assert sign_in().status_code == 429  # the right password too, until the window passes
    cache.clear()


def test_submissions_are_throttled_per_user(bob, monkeypatch):
    from webapp.auth import SubmitThrottle
    from webapp.models import Job

    from django.core.cache import cache

    cache.clear()
    monkeypatch.setattr(SubmitThrottle, "THROTTLE_RATES", {"submit": "3/min"})
    c = as_token(sign_in().json()["token"])
    codes = [c.post("/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 1, "num_gpus": 0}, format="json").status_code
             for _ in range(5)]
    assert codes == [201, 201, 201, 429, 429]
    assert Job.objects.count() == 3
    assert c.get("/api/v1/jobs/").status_code == 200  # reads are not throttled
    cache.clear()


@pytest.mark.parametrize("key, ok", [("", False), ("short", False), ("x" * 60, False),
                                     ("django-insecure-" + "a1b2c3d4e5" * 5, False), ("Zq8-" + "k2Jf9sLp0W" * 5, True)])
def test_production_refuses_a_weak_secret_key(key, ok):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.prod", "DJANGO_SECRET_KEY": key,
           "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"}
    r = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=env, capture_output=True, text=True)
    assert (r.returncode == 0) == ok, r.stderr[-1500:]
    if not ok:
        assert "DJANGO_SECRET_KEY must be at least 50 characters" in r.stderr


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_browser_and_admin_sign_in_are_throttled(bob, client, settings, url):
    from django.core.cache import cache

    cache.clear()
    settings.LOGIN_ATTEMPTS_PER_MIN = 4
    codes = [client.post(url, {"username": "bob", "password": "wrong"}).status_code for _ in range(6)]
    assert codes[:4] == [200] * 4 and codes[4:] == [429] * 2, codes  # the form again, then refused
    assert client.post(url, {"username": "bob", "password": "pw-bob-1"}).status_code == 429
    cache.clear()


def test_token_lookup_reads_what_the_orm_reads(bob, django_user_model):
    """webapp.authentication.token_with_user (SQL compiled once) gives the token and user that
    ``Token.objects.select_related("user").get`` gives, field by field; unknown, over-long and
    NUL-bearing keys find nothing; an inactive user's token is refused."""
    from webapp.authentication import token_with_user

    key = sign_in().json()["token"]
    bob.first_name, bob.email, bob.is_staff = "Bob", "bob@example.org", True
    bob.save()
    ours, orm = token_with_user(key), Token.objects.select_related("user").get(key=key)
    for f in Token._meta.concrete_fields:
        assert getattr(ours, f.attname) == getattr(orm, f.attname), f.attname
    for f in django_user_model._meta.concrete_fields:
        assert getattr(ours.user, f.attname) == getattr(orm.user, f.attname), f.attname
    for bad in ("0" * 40, key + "x", key[:-1] + "\x00", ""):
        assert token_with_user(bad) is None
        assert as_token(bad).get("/api/v1/jobs/").status_code == 401
    bob.is_active = False
    bob.save()
    r = as_token(key).get("/api/v1/jobs/")
    assert r.status_code == 401 and "inactive" in r.json()["detail"]


_THROTTLE_PROC = """
import django; django.setup()
from webapp.auth import SubmitThrottle
SubmitThrottle.THROTTLE_RATES = {{"submit": "3/min"}}  # the test settings' is far higher
SubmitThrottle.timer = lambda self: {now!r}  # both processes in one clock window (see the test)
class User:
    is_authenticated, pk = True, {pk}
class Request:
    user, META, headers = User(), {{}}, {{}}
print(sum(SubmitThrottle().allow_request(Request(), None) for _ in range(3)))
"""


@pytest.mark.parametrize("shared", [True, False])
def test_submission_limit_holds_across_processes_with_a_shared_cache(shared):
    """Two server processes, 3 submissions each, limit 3/min: with TANDEM_CACHE_URL (Redis, as
    production sets it) they share one count and 3 get through in all; with each process's own
    memory (no TANDEM_CACHE_URL) each lets 3 through. Both processes read one fixed clock, the
    middle of the current minute: the sliding-window estimate would otherwise let a request of
    the second process through when the two straddle a minute boundary (3 x 0.7 + 0 < 3 at 30%
    into the next window; CI saw [3, 1] on a loaded machine), which is the estimate working as
    documented, not a count that was not shared."""
    import time

    import redis
    from django.conf import settings

    pk = 880000 + int(shared)
    now = (time.time() // 60 + 0.5) * 60  # the middle of the current minute
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
           "CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "TANDEM_CACHE_URL": settings.CELERY_BROKER_URL if shared else ""}
    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    pattern = f"tandem:*throttle_submit_{pk}:*"
    try:
        counts = [int(subprocess.run([sys.executable, "-c", _THROTTLE_PROC.format(pk=pk, now=now)], cwd=REPO, env=env,
                                     capture_output=True, text=True, check=True).stdout.split()[-1]) for _ in range(2)]
        assert counts == ([3, 0] if shared else [3, 3])
        assert bool(r.keys(pattern)) == shared  # the counter lives in Redis only when shared
        if shared:  # the 3 refused requests were taken back out of the count
            assert sum(int(r.get(k)) for k in r.keys(pattern)) == 3
    finally:
        for k in r.keys(pattern):
            r.delete(k)


def test_forwarded_for_does_not_dodge_the_sign_in_limits(bob, client, monkeypatch, settings):
    """A client that sends a new X-Forwarded-For with every wrong password is still one address
    (TANDEM_NUM_PROXIES 0: REMOTE_ADDR), for the API's token endpoint and the login page."""
    from django.core.cache import cache

    from webapp.auth import AuthThrottle

    cache.clear()
    monkeypatch.setattr(AuthThrottle, "THROTTLE_RATES", {"auth": "5/min"})
    codes = [APIClient().post("/api/v1/auth/token/", {"username": "bob", "password": "wrong"}, format="json",
                              HTTP_X_FORWARDED_FOR=f"10.0.0.{i}").status_code for i in range(8)]
    assert codes == [400] * 5 + [429] * 3, codes
    cache.clear()
    settings.LOGIN_ATTEMPTS_PER_MIN = 4
    codes = [client.post("/accounts/login/", {"username": "bob", "password": "wrong"},
                         HTTP_X_FORWARDED_FOR=f"10.0.1.{i}").status_code for i in range(6)]
    assert codes == [200] * 4 + [429] * 2, codes  # the form again, then refused
    cache.clear()


@pytest.mark.parametrize("settings_module, env, message", [
    ("webapp.settings.test", {"TANDEM_THROTTLE_SUBMIT": "abc"}, "TANDEM_THROTTLE_SUBMIT must be N/s, N/min"),
    ("webapp.settings.test", {"TANDEM_THROTTLE_AUTH": "0/min"}, "TANDEM_THROTTLE_AUTH must be N/s, N/min"),
    ("webapp.settings.test", {"TANDEM_TOKEN_TTL_HOURS": "999999999999"}, "TANDEM_TOKEN_TTL_HOURS must be > 0"),
    ("webapp.settings.test", {"TANDEM_CACHE_URL": "memcached://x"}, "TANDEM_CACHE_URL must be a Redis URL"),
    ("webapp.settings.test", {"TANDEM_CACHE_URL": "redis://127.0.0.1:abc/9"}, "is not a number"),
    ("webapp.settings.test", {"TANDEM_CACHE_URL": "redis://127.0.0.1:6379/notadb"}, "must be a number"),
    ("webapp.settings.prod", {"TANDEM_CACHE_URL": ""}, "TANDEM_CACHE_URL is set but empty"),
    ("webapp.settings.prod", {"CELERY_BROKER_URL": "amqp://user:s3cret-pw@mq:5672//"},
     "TANDEM_CACHE_URL (unset: CELERY_BROKER_URL, the default) must be a Redis URL"),
])
def test_bad_settings_fail_at_start_with_a_clear_message(settings_module, env, message):
    """Settings the first throttled request or sign-in would trip over (a 500 on every one) are
    refused when the process starts, naming the variable and never printing a password."""
    full = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module, "DJANGO_SECRET_KEY": "Zq8-" + "k2Jf9sLp0W" * 5,
            "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15",
            **env}
    full.pop("TANDEM_CACHE_URL", None) if "TANDEM_CACHE_URL" not in env else None
    r = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=full, capture_output=True, text=True)
    assert r.returncode != 0 and "ImproperlyConfigured" in r.stderr and message in r.stderr, r.stderr[-1500:]
    assert "s3cret-pw" not in r.stderr
