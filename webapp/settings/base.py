"""Settings shared by every environment, read from environment variables (12-factor).

Variables (all optional unless stated):

==========================  ==============================================================
``DJANGO_SECRET_KEY``       required in ``prod``; dev/test use a fixed insecure key
``DJANGO_DEBUG``            ``true``/``false``
``DJANGO_ALLOWED_HOSTS``    comma-separated host names
``DATABASE_URL``            e.g. ``postgres://postgres@127.0.0.1:5432/tandem``;
                            default: SQLite file ``var/tandem.sqlite3``
``CELERY_BROKER_URL``       e.g. ``redis://127.0.0.1:6379/0``; default: kombu's
                            ``filesystem://`` transport under ``var/broker`` (no server)
``TANDEM_VAR_DIR``          where runtime state lives (SQLite file, broker folder,
                            tuning work directories); default ``<repo>/var``
``TANDEM_MAX_UPLOAD_MIB``   largest accepted upload (traces, ONNX), default 64
``CELERY_VISIBILITY_TIMEOUT``  seconds Redis keeps a delivered, unacknowledged task before
                            giving it to another worker (worker lost); default 3600. Must
                            exceed the longest task, or a slow task is run twice at once
``TANDEM_JOB_IMAGE_SIZE``   side of the synthetic training images of jobs, pixels; default 224
``TANDEM_TORCH_THREADS``    torch threads of jobs and training probes; default 0 = torch's own
``TANDEM_LOG_LEVEL``        root log level, default ``INFO``
``TANDEM_CACHE_URL``        Redis URL of Django's cache, which holds the throttles' counters
                            (shared by every server process); default: each process its
                            own memory (``prod``: the broker's Redis)
==========================  ==============================================================
"""
from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()

# --- Core -------------------------------------------------------------------------------
SECRET_KEY = env("DJANGO_SECRET_KEY", default="insecure-dev-key-change-me")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

VAR_DIR = Path(env("TANDEM_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)
DATA_DIR = BASE_DIR / "data"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "webapp.apps.WebappConfig",
    "placement.apps.PlacementConfig",
    "tuning.apps.TuningConfig",
    "rlweights.apps.RlweightsConfig",
    "federation.apps.FederationConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # a database outage: 503 with Retry-After, not a 500 (webapp/middleware.py)
    "webapp.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"
ASGI_APPLICATION = "webapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------
#: Seconds a server thread or worker keeps its database connection between requests (Django's
#: ``CONN_MAX_AGE``; env ``TANDEM_DB_CONN_MAX_AGE``, 0 = a new connection per request). On
#: PostgreSQL a new connection forks a server process: per request that cost more than the
#: request itself (bench/api_load.py, docs/platform.md). ``CONN_HEALTH_CHECKS`` tests a kept
#: connection before a request uses it, so one that died with a PostgreSQL restart is replaced.
DB_CONN_MAX_AGE = env.int("TANDEM_DB_CONN_MAX_AGE", default=60)


def database(url: str | None = None) -> dict:
    """Django's ``DATABASES["default"]`` for ``DATABASE_URL`` (or ``url`` when it is unset; no
    default: ``DATABASE_URL`` required), with persistent, health-checked connections
    (:data:`DB_CONN_MAX_AGE`) and, on SQLite, WAL mode and a 20 s busy timeout."""
    db = env.db("DATABASE_URL", default=url) if url is not None else env.db("DATABASE_URL")
    db.setdefault("ATOMIC_REQUESTS", False)
    db.setdefault("CONN_MAX_AGE", DB_CONN_MAX_AGE)
    db.setdefault("CONN_HEALTH_CHECKS", True)
    if db["ENGINE"].endswith("sqlite3"):
        # The demo's SQLite: WAL lets the dashboard read while a worker writes; a writer waits up
        # to 20 s for the lock (then "database is locked", inside the request's transaction:
        # nothing is committed), and write transactions take the lock up front (no upgrade
        # deadlocks).
        db.setdefault("OPTIONS", {}).update({
            "timeout": 20, "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        })
    return db


DATABASES = {"default": database(f"sqlite:///{VAR_DIR / 'tandem.sqlite3'}")}


def cache(url: str, *, name: str = "TANDEM_CACHE_URL") -> dict:
    """Django's ``CACHES["default"]``: Redis at ``url`` (``redis://``, ``rediss://`` or
    ``unix://``) with keys prefixed ``tandem``, so that the throttles' counters (webapp/auth.py)
    are shared by every server process; an empty ``url``: this process's memory (each process
    then counts alone). Raises ``ImproperlyConfigured`` (naming ``name``, never the URL's
    password) for another scheme, a port that is not a number or a database that is not one."""
    if not url:
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    from urllib.parse import urlsplit

    from django.core.exceptions import ImproperlyConfigured

    parts = urlsplit(url)
    shown = f"{parts.scheme}://{parts.hostname or ''}{parts.path if parts.scheme == 'unix' else ''}"
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ImproperlyConfigured(f"{name} must be a Redis URL (redis://host:port/db), got a {parts.scheme or 'scheme-less'} URL ({shown})")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ImproperlyConfigured(f"{name}: the port of {shown} is not a number") from None
    db = parts.path.strip("/") if parts.scheme != "unix" else ""
    if db and not db.isdigit():
        raise ImproperlyConfigured(f"{name}: the database of {shown} must be a number (redis://host:port/1), got {db!r}")
    # short timeouts: a throttle that cannot reach its counters lets the request through
    # (webapp/auth.py) after at most this long, rather than holding it
    return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": "tandem",
            "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}}


CACHES = {"default": cache(env("TANDEM_CACHE_URL", default=""))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"

# --- Static files (plotly.js, Swagger UI: served locally, never from a CDN) --------------
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "webapp" / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "webapp.staticfinders.PlotlyFinder",
]

# --- Uploads ----------------------------------------------------------------------------
MAX_UPLOAD_MIB = env.int("TANDEM_MAX_UPLOAD_MIB", default=64)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_UPLOAD_MIB * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# --- Internationalisation ---------------------------------------------------------------
LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- REST framework ---------------------------------------------------------------------
def throttle_rate(name: str, default: str) -> str:
    """The throttle rate in environment variable ``name`` (``N/s``, ``N/min``, ``N/hour`` or
    ``N/day``, N >= 1), checked here: DRF would only fail on the first throttled request (a 500
    on every one). Raises ``ImproperlyConfigured``."""
    import re

    value = env(name, default=default).strip()
    if not re.fullmatch(r"[1-9][0-9]{0,8}/(s|sec|m|min|h|hour|d|day)", value):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{name} must be N/s, N/min, N/hour or N/day with N >= 1, got {value!r}")
    return value


REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "webapp.authentication.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "webapp.filters.SingleValuedQueryParams",
        "django_filters.rest_framework.DjangoFilterBackend",
        "webapp.filters.StrictOrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "webapp.schema.TandemAutoSchema",  # adds the 4xx answers
    # sign-in attempts per client address, submissions per user (webapp/auth.py)
    "DEFAULT_THROTTLE_RATES": {
        "auth": throttle_rate("TANDEM_THROTTLE_AUTH", "10/min"),
        "submit": throttle_rate("TANDEM_THROTTLE_SUBMIT", "3000/min"),
    },
    # the client address of a request is REMOTE_ADDR, or with TANDEM_NUM_PROXIES = n > 0 the
    # n-th address from the right of X-Forwarded-For (set by your n proxies). Unset, DRF would
    # take the whole X-Forwarded-For a client sends, and a sign-in limit per address could be
    # dodged by sending a new one each time.
    "NUM_PROXIES": env.int("TANDEM_NUM_PROXIES", default=0),
    # JSON bodies: size, depth, NUL/surrogate and 64-bit limits before parsing (webapp/parsers.py)
    "DEFAULT_PARSER_CLASSES": [
        "webapp.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
#: A submission whose transaction would commit later than this many seconds after the request
#: arrived is rolled back and answered 503 (its client has probably given up and will retry).
WRITE_DEADLINE_S = env.float("TANDEM_WRITE_DEADLINE_S", default=10.0)
LOGIN_ATTEMPTS_PER_MIN = env.int("TANDEM_LOGIN_ATTEMPTS_PER_MIN", default=10)
TOKEN_TTL_HOURS = env.float("TANDEM_TOKEN_TTL_HOURS", default=168.0)
if not 0 < TOKEN_TTL_HOURS <= 87600:  # ten years; far more overflows datetime arithmetic
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"TANDEM_TOKEN_TTL_HOURS must be > 0 and at most 87600 (ten years), got {TOKEN_TTL_HOURS}")
MAX_JSON_BYTES = env.int("TANDEM_MAX_JSON_KIB", default=2048) * 1024
SPECTACULAR_SETTINGS = {
    "TITLE": "Tandem API",
    "DESCRIPTION": "Optimisation platform for deep-learning clusters: placement, tuning, "
    "learned scheduler weights and federation.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs describe the API, they hold no data: readable without a login.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "ClusterKindEnum": "webapp.models.Cluster.Kind",
        "StateEnum": "webapp.states.State",
    },
}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # kombu's default is ./control in the cwd
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600),
        # kombu sweeps for unacknowledged messages to restore every interval x throttle seconds
        # (10 x 10 by default); a short visibility timeout needs a shorter sweep
        "unacked_restore_interval": env.int("CELERY_UNACKED_RESTORE_S", default=10),
        "unacked_restore_throttle": env.int("CELERY_UNACKED_RESTORE_THROTTLE", default=10),
    }
#: Experiment leases and the reconciler (webapp/leases.py, webapp/reconcile.py), seconds.
EXPERIMENT_LEASE_S = env.float("TANDEM_LEASE_S", default=60.0)
RECONCILE_EVERY_S = env.float("TANDEM_RECONCILE_S", default=60.0)
#: A ``queued`` experiment older than this whose task message is in no queue is re-enqueued.
QUEUED_GRACE_S = env.float("TANDEM_QUEUED_GRACE_S", default=300.0)
CELERY_BEAT_SCHEDULE = {
    "tandem-reconcile": {"task": "tandem.reconcile", "schedule": RECONCILE_EVERY_S, "options": {"queue": "control", "expires": RECONCILE_EVERY_S}},
}
CELERY_RESULT_BACKEND = None  # results live in the Django database, not in Celery
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Jobs -------------------------------------------------------------------------------
JOB_IMAGE_SIZE = env.int("TANDEM_JOB_IMAGE_SIZE", default=224)
#: torch intra-op threads for jobs and training probes; 0 keeps torch's default (one per core).
#: On a machine shared with other busy processes, 1 avoids oversubscription.
TORCH_THREADS = env.int("TANDEM_TORCH_THREADS", default=0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("TANDEM_LOG_LEVEL", default="INFO")},
    # Django's own default console handler (DEBUG only) printed every 4xx a second time beside the
    # root's line; its records reach the root handler above instead
    "loggers": {"django": {"handlers": [], "level": "INFO", "propagate": True}},
}
