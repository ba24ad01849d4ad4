"""A work-around for a kombu bug that stops a worker for good when Redis restarts.

kombu's Redis ``Channel.close`` first reads the reply of a ``BRPOP`` still in flight (kombu pull
request #1733, so that a message popped while the channel closes is not lost) and lets only
``queue.Empty`` pass. When the broker went away, that read raises a connection error instead:
``close`` stops half-way (the channel is not marked closed and its unacknowledged messages are
not handed back), Celery's connection clean-up swallows the error and drops the transport, and
the next ``close`` of the same channel (Celery then releases the broken connection) restores the
messages through a transport that no longer has a client: ``AttributeError: 'NoneType' object
has no attribute 'hostname'``, which Celery treats as unrecoverable. The worker stops consuming
at once and exits when its running tasks end, so nothing is run until someone restarts it.
Seen with celery 5.7.0, kombu 5.7.0 and redis-py 8.1.0 whenever the broker restarts while the
worker waits in ``BRPOP`` with tasks unacknowledged (``acks_late``), by
``tests/integration/platform/test_fault_matrix.py``.

:func:`apply` (called when the Celery app is imported, :mod:`workers.celery`) makes that read
treat a connection error like an empty reply: a dead connection has nothing left to read, and
``close`` goes on as it does for an idle channel; the worker then reconnects as Celery intends.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def apply() -> bool:
    """Wrap ``kombu.transport.redis.Channel.close`` once (idempotent). Returns whether the wrapper
    is in place (``False`` when that kombu has no such channel, e.g. no redis-py installed)."""
    try:
        from kombu.transport import redis as kombu_redis
    except ImportError:  # pragma: no cover - redis-py missing: no Redis transport to fix
        return False
    channel = getattr(kombu_redis, "Channel", None)
    if channel is None or not hasattr(channel, "_brpop_read"):
        return False
    if getattr(channel.close, "_tandem_dead_brpop", False):
        return True
    original = channel.close

    def close(self) -> None:
        if getattr(self, "_in_poll", None) and not self.closed:
            try:
                self._brpop_read()
            except kombu_redis.Empty:
                pass
            except self.connection_errors as err:
                log.info("closing a Redis channel whose connection is gone (%s): nothing left to read", type(err).__name__)
                self._in_poll = None
        original(self)

    close._tandem_dead_brpop = True  # type: ignore[attr-defined]
    close.__doc__ = original.__doc__
    channel.close = close
    return True
