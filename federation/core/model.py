"""The federation model: member clusters, the link matrices between them, and applications as
service call graphs.

Units: CPU in cores, contention as a fraction 0-1 of a cluster's CPU taken by other load,
latency as round-trip time (RTT) in milliseconds, bandwidth in Mbit/s, CPU work in
milliseconds per call, payload in bytes per call (request plus response).

Pure Python + numpy (no Django), so the model can be tested and reused outside the web app.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np


class FederationError(ValueError):
    """Bad federation or application input (unknown cluster, non-square matrix, cycle...)."""


@dataclass(frozen=True)
class MemberCluster:
    """A member cluster of a federation.

    ``capacity_cores``: allocatable CPU, cores (> 0). ``contention``: fraction (0 <= c < 1) of
    that CPU already used by other tenants; it slows every call served there and lowers the
    capacity available to the application (see :func:`federation.core.cost.contention_slowdown`).
    ``region``: cloud region id as in the Skyplane measurements (``aws:eu-west-1``), optional.
    """

    name: str
    capacity_cores: float
    contention: float = 0.0
    region: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise FederationError("a member cluster needs a name")
        if not (self.capacity_cores > 0):
            raise FederationError(f"cluster {self.name!r}: capacity_cores must be > 0, not {self.capacity_cores!r}")
        if not (0.0 <= self.contention < 1.0):
            raise FederationError(f"cluster {self.name!r}: contention must be in [0, 1), not {self.contention!r}")

    @property
    def available_cores(self) -> float:
        """Cores left to the application: ``capacity_cores * (1 - contention)``."""
        return self.capacity_cores * (1.0 - self.contention)


@dataclass
class Federation:
    """Member clusters plus RTT (ms) and bandwidth (Mbit/s) matrices, both ``(C, C)`` with
    ``C = len(clusters)``, indexed like ``clusters``. The diagonal is the intra-cluster link.

    Raises :class:`FederationError` for duplicate names, wrong shapes, negative latency or
    non-positive bandwidth.
    """

    clusters: list[MemberCluster]
    rtt_ms: np.ndarray
    bandwidth_mbps: np.ndarray

    def __post_init__(self) -> None:
        names = [c.name for c in self.clusters]
        if not names:
            raise FederationError("a federation needs at least one member cluster")
        if len(set(names)) != len(names):
            raise FederationError(f"duplicate member cluster names: {names}")
        n = len(names)
        self.rtt_ms = np.asarray(self.rtt_ms, dtype=float)
        self.bandwidth_mbps = np.asarray(self.bandwidth_mbps, dtype=float)
        for label, m in (("rtt_ms", self.rtt_ms), ("bandwidth_mbps", self.bandwidth_mbps)):
            if m.shape != (n, n):
                raise FederationError(f"{label} must be {n}x{n} for {n} clusters, got shape {m.shape}")
            if not np.all(np.isfinite(m)):
                raise FederationError(f"{label} has non-finite entries")
        if np.any(self.rtt_ms < 0):
            raise FederationError("rtt_ms has negative entries")
        if np.any(self.bandwidth_mbps <= 0):
            raise FederationError("bandwidth_mbps must be > 0 everywhere")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.clusters]

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise FederationError(f"unknown member cluster {name!r}; members: {self.names}") from None

    def with_contention(self, contention: dict[str, float]) -> "Federation":
        """A copy with some clusters' contention replaced (name -> fraction)."""
        for k in contention:
            self.index(k)
        clusters = [MemberCluster(c.name, c.capacity_cores, float(contention.get(c.name, c.contention)), c.region)
                    for c in self.clusters]
        return Federation(clusters, self.rtt_ms.copy(), self.bandwidth_mbps.copy())


@dataclass(frozen=True)
class Service:
    """One microservice (or job component).

    ``replicas``: pod count (>= 1). ``cpu_per_replica``: cores each replica requests
    (Kubernetes ``resources.requests.cpu``). ``work_ms``: CPU time per call it serves, ms.
    ``tier``: ``"app"``, ``"cache"``, ``"db"``, ``"queue"`` or ``"job"`` (informational).
    """

    name: str
    replicas: int = 1
    cpu_per_replica: float = 0.1
    work_ms: float = 1.0
    tier: str = "app"

    @property
    def demand_cores(self) -> float:
        """Cores the whole service asks for: ``replicas * cpu_per_replica``."""
        return self.replicas * self.cpu_per_replica


@dataclass(frozen=True)
class Edge:
    """``caller`` calls ``callee`` ``calls`` times per call it serves, each call moving
    ``payload_bytes`` (request + response) over the link."""

    caller: str
    callee: str
    calls: float = 1.0
    payload_bytes: int = 1024


@dataclass
class Application:
    """A service call graph with one entry service (where user requests arrive).

    ``kind`` is the application type (``microservices``, ``batch-training``, ``inference``).
    ``source`` says where the graph came from (file paths and the derivation rule).
    Raises :class:`FederationError` for unknown services in edges, a missing entry, or a cycle.
    """

    name: str
    services: list[Service]
    edges: list[Edge]
    entry: str
    kind: str = "microservices"
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [s.name for s in self.services]
        if len(set(names)) != len(names):
            raise FederationError(f"application {self.name!r}: duplicate service names")
        known = set(names)
        if self.entry not in known:
            raise FederationError(f"application {self.name!r}: entry {self.entry!r} is not one of its services")
        for e in self.edges:
            if e.caller not in known or e.callee not in known:
                raise FederationError(f"application {self.name!r}: edge {e.caller}->{e.callee} names an unknown service")
            if e.caller == e.callee:
                raise FederationError(f"application {self.name!r}: self-call {e.caller}")
            if e.calls < 0 or e.payload_bytes < 0:
                raise FederationError(f"application {self.name!r}: edge {e.caller}->{e.callee} has negative calls/payload")
        self.topological_order()  # raises on cycles

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.services]

    def service(self, name: str) -> Service:
        for s in self.services:
            if s.name == name:
                return s
        raise FederationError(f"application {self.name!r} has no service {name!r}")

    def downstream(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.caller == name]

    def topological_order(self) -> list[str]:
        """Services in call order (Kahn's algorithm); raises :class:`FederationError` on a cycle."""
        indeg = {s: 0 for s in self.names}
        for e in self.edges:
            indeg[e.callee] += 1
        ready = [s for s in self.names if indeg[s] == 0]
        order: list[str] = []
        while ready:
            s = ready.pop(0)
            order.append(s)
            for e in self.downstream(s):
                indeg[e.callee] -= 1
                if indeg[e.callee] == 0:
                    ready.append(e.callee)
        if len(order) != len(self.names):
            raise FederationError(f"application {self.name!r}: the call graph has a cycle")
        return order

    def visits(self) -> dict[str, float]:
        """Expected calls each service serves per user request: 1 for the entry, and
        ``visits[callee] += visits[caller] * calls`` along every edge (topological order)."""
        v = {s: 0.0 for s in self.names}
        v[self.entry] = 1.0
        for s in self.topological_order():
            for e in self.downstream(s):
                v[e.callee] += v[s] * e.calls
        return v

    def reachable(self) -> "Application":
        """The sub-application reachable from the entry (services nobody calls are dropped)."""
        seen, stack = {self.entry}, [self.entry]
        while stack:
            for e in self.downstream(stack.pop()):
                if e.callee not in seen:
                    seen.add(e.callee)
                    stack.append(e.callee)
        return Application(self.name, [s for s in self.services if s.name in seen],
                           [e for e in self.edges if e.caller in seen], self.entry, self.kind, self.source, list(self.notes))


def federation_from_entered(clusters: Iterable[MemberCluster], rtt_ms, bandwidth_mbps) -> Federation:
    """Build a federation from matrices an operator entered (lists of lists, ms and Mbit/s)."""
    return Federation(list(clusters), np.asarray(rtt_ms, float), np.asarray(bandwidth_mbps, float))
