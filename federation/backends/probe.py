"""Health probes of member clusters: an HTTP ``GET`` of the member's readiness endpoint, as
Karmada's cluster status controller probes a member's API server (``/readyz``, falling back to
``/healthz``). Feeds :class:`federation.core.health.HealthTracker`."""
from __future__ import annotations

import http.client
import time
from urllib.parse import urlsplit

from federation.core.health import HealthTracker
from federation.core.model import FederationError


def probe(url: str, *, timeout_s: float = 1.0) -> bool:
    """True when ``GET url`` answers 200 within ``timeout_s`` (``url``: ``http://host:port/path``;
    a refused connection, a timeout or any other status is False). Raises
    :class:`FederationError` for a URL that is not ``http://host:port/...``."""
    u = urlsplit(url)
    if u.scheme != "http" or not u.hostname or not u.port:
        raise FederationError(f"probe URL must be http://host:port/path, got {url!r}")
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
    try:
        conn.request("GET", u.path or "/readyz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def probe_all(tracker: HealthTracker, endpoints: dict[str, str], *, timeout_s: float = 1.0, now: float | None = None) -> dict[str, str]:
    """Probe every member once (``endpoints``: cluster -> readiness URL), feed the tracker and
    return cluster -> state."""
    t = time.monotonic() if now is None else now
    return {c: tracker.observe(c, probe(url, timeout_s=timeout_s), t) for c, url in endpoints.items()}
