"""One visibility timeout for every worker on a Redis broker.

kombu's Redis transport gives a delivered, unacknowledged message to another worker once
``visibility_timeout`` seconds pass, and every worker restores *all* workers' unacknowledged
messages by its own value, so one worker with a short timeout hands out the long tasks of the
others. A worker therefore refuses to start when its ``CELERY_VISIBILITY_TIMEOUT`` differs from
the one recorded on the broker (Redis key :data:`KEY`, set by the first worker, kept 7 days and
renewed at each start). To change it: stop every worker, ``redis-cli DEL tandem:visibility_timeout``,
start them with the new value.
"""
from __future__ import annotations

from celery.signals import worker_init

KEY = "tandem:visibility_timeout"
KEEP_S = 7 * 24 * 3600


class VisibilityTimeoutMismatch(RuntimeError):
    pass


def check(broker_url: str, timeout_s: int) -> None:
    """Record ``timeout_s`` on the broker, or raise :class:`VisibilityTimeoutMismatch` when a
    different value is recorded. Brokers other than Redis: nothing to check."""
    if not broker_url.startswith(("redis://", "rediss://")):
        return
    import redis

    r = redis.Redis.from_url(broker_url, socket_timeout=10)
    r.set(KEY, str(int(timeout_s)), nx=True, ex=KEEP_S)
    recorded = int(r.get(KEY) or timeout_s)
    if recorded != int(timeout_s):
        raise VisibilityTimeoutMismatch(
            f"this worker's CELERY_VISIBILITY_TIMEOUT is {int(timeout_s)} s but the workers on this broker use {recorded} s; "
            f"every worker must use the same value (Redis restores unacknowledged tasks at the lowest). To change it, stop all "
            f"workers and run: redis-cli DEL {KEY}")
    r.expire(KEY, KEEP_S)


@worker_init.connect
def _on_worker_init(sender=None, **_kwargs) -> None:
    app = getattr(sender, "app", None)
    if app is None:
        return
    opts = app.conf.broker_transport_options or {}
    try:
        check(str(app.conf.broker_url or ""), int(opts.get("visibility_timeout", 3600)))
    except VisibilityTimeoutMismatch as err:  # Celery logs and ignores exceptions of signal handlers
        raise SystemExit(f"tandem worker refused to start: {err}") from None
