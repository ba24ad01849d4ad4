"""Expected end-to-end latency of an application placed on a federation.

A placement is a fraction matrix ``F`` of shape ``(S, C)`` (services x member clusters; row ``s``
is the share of service ``s``'s replicas in each cluster, summing to 1). Callers spread their
calls over a callee's replicas in proportion to the replica counts (a multi-cluster Service with
no locality preference, as Karmada's MultiClusterService does by default), so a call from ``u``
to ``v`` crosses link ``(i, j)`` with probability ``F[u, i] * F[v, j]``.

Expected latency of one user request, ms (a sequential call-graph model, as in the queueing-free
part of Lindsay et al., IEEE JCC 2021, section IV):

    network = sum_e visits[u_e] * calls_e * sum_ij F[u_e,i] F[v_e,j] (rtt[i,j] + 8 * payload_e / bw[i,j] / 1000)
    compute = sum_s visits[s] * work_ms[s] * sum_i F[s,i] * slowdown_i
    slowdown_i = 1 + w * (1 / (1 - contention_i) - 1)

A placement that asks a cluster for more cores than it has available (only the baselines can:
the planners keep within capacity) oversubscribes it: compute there is further stretched by
``load_c / available_c`` (each replica gets that share of what it requested), reported as
``overload_cores``.

With a ``client`` cluster (where the users are), each request also pays the link from the
client cluster to the entry service's cluster once: ``sum_i F[entry,i] (rtt[client,i] + 8 *
client_payload / bw[client,i] / 1000)``, counted in ``network``. Users in several regions:
``client`` = ``{cluster: share}`` (shares normalised to sum 1), and the link is the
share-weighted mean over those clusters (users reach the entry's replicas in proportion to
their counts, like every other caller: no geo-routing).

``rtt`` in ms, ``payload`` in bytes, ``bw`` in Mbit/s (so ``8 * bytes / Mbit/s / 1000`` is ms).
The slowdown is processor sharing: a call's CPU time stretches by ``1 / (1 - rho)`` when other
load takes a fraction ``rho`` of the CPU (Kleinrock, Queueing Systems vol. 2, M/G/1-PS);
``w`` (``contention_weight``, default 1) scales that penalty. The contention penalty is
``compute`` minus the same work at slowdown 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Application, Federation, FederationError


@dataclass
class Problem:
    """Arrays of one (application, federation) pair, precomputed for the cost model.

    ``unary``: ``(S, C)`` compute ms per request of service s in cluster c (incl. penalty).
    ``edges``: list of ``(u, v, weight, payload_bytes)`` with ``weight = visits[u] * calls``.
    ``demand``: ``(S,)`` cores; ``capacity``: ``(C,)`` available cores.
    """

    app: Application
    fed: Federation
    unary: np.ndarray
    penalty: np.ndarray
    edges: list[tuple[int, int, float, float]]
    demand: np.ndarray
    capacity: np.ndarray
    inv_bw_ms_per_byte: np.ndarray
    pinned: dict[int, int]
    client_link: np.ndarray | None = None
    entry: int = 0

    @property
    def S(self) -> int:
        return len(self.app.services)

    @property
    def C(self) -> int:
        return len(self.fed.clusters)

    def link_ms(self, payload_bytes: float) -> np.ndarray:
        """``(C, C)`` ms of one call carrying ``payload_bytes`` between each pair of clusters."""
        return self.fed.rtt_ms + payload_bytes * self.inv_bw_ms_per_byte


def client_shares(client: str | dict[str, float]) -> dict[str, float]:
    """``{cluster: share}`` of where the users are (a single name: all of them there), shares
    normalised to sum 1. Raises :class:`FederationError` for an empty map or a negative or
    all-zero share."""
    if isinstance(client, str):
        return {client: 1.0}
    if not client or any(float(v) < 0 for v in client.values()) or sum(float(v) for v in client.values()) <= 0:
        raise FederationError(f"user shares must be >= 0 and not all zero, got {client}")
    tot = sum(float(v) for v in client.values())
    return {k: float(v) / tot for k, v in client.items() if float(v) > 0}


def home_cluster(client: str | dict[str, float] | None) -> str | None:
    """The cluster with the largest share of the users (None without users)."""
    if client is None:
        return None
    sh = client_shares(client)
    return max(sorted(sh), key=lambda k: sh[k])


def slowdown(contention: np.ndarray, weight: float = 1.0) -> np.ndarray:
    """Processor-sharing slowdown ``1 + w (1/(1-rho) - 1)`` per cluster (dimensionless)."""
    rho = np.asarray(contention, float)
    return 1.0 + weight * (1.0 / (1.0 - rho) - 1.0)


def build_problem(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                  pinned: dict[str, str] | None = None, client: str | dict[str, float] | None = None,
                  client_payload_bytes: int = 2048) -> Problem:
    """Precompute the cost model's arrays. ``pinned`` maps service -> cluster it must run in;
    ``client`` names the cluster the users' requests come from (``None``: no client link).
    Raises :class:`FederationError` for unknown names or a negative weight."""
    if contention_weight < 0:
        raise FederationError("contention_weight must be >= 0")
    names = app.names
    visits = app.visits()
    work = np.array([visits[s.name] * s.work_ms for s in app.services])
    slow = slowdown([c.contention for c in fed.clusters], contention_weight)
    unary = work[:, None] * slow[None, :]
    penalty = work[:, None] * (slow[None, :] - 1.0)
    idx = {n: i for i, n in enumerate(names)}
    edges = [(idx[e.caller], idx[e.callee], visits[e.caller] * e.calls, float(e.payload_bytes)) for e in app.edges]
    demand = np.array([s.demand_cores for s in app.services])
    capacity = np.array([c.available_cores for c in fed.clusters])
    pins: dict[int, int] = {}
    for s, c in (pinned or {}).items():
        if s not in idx:
            raise FederationError(f"pinned service {s!r} is not in application {app.name!r}")
        pins[idx[s]] = fed.index(c)
    inv_bw = 8.0 / (fed.bandwidth_mbps * 1000.0)
    client_link = None
    if client is not None:
        shares = client_shares(client)
        client_link = np.zeros(len(fed.clusters))
        for name, share in shares.items():
            ci = fed.index(name)
            client_link += share * (fed.rtt_ms[ci, :] + client_payload_bytes * inv_bw[ci, :])
        unary = unary.copy()
        unary[idx[app.entry]] += client_link
    return Problem(app, fed, unary, penalty, edges, demand, capacity, inv_bw, pins, client_link, idx[app.entry])


@dataclass
class CostBreakdown:
    """Expected latency of one request, ms: ``total = network + compute``; ``penalty`` is the
    part of ``compute`` due to contention. ``overload_cores`` (per cluster) is demand above
    available capacity (0 when the placement fits)."""

    total_ms: float
    network_ms: float
    compute_ms: float
    penalty_ms: float
    overload_cores: list[float]

    def as_dict(self) -> dict:
        return {"total_ms": self.total_ms, "network_ms": self.network_ms, "compute_ms": self.compute_ms,
                "penalty_ms": self.penalty_ms, "overload_cores": self.overload_cores}


def evaluate(prob: Problem, F: np.ndarray) -> CostBreakdown:
    """Cost of a fraction matrix ``F`` ``(S, C)``; raises :class:`FederationError` if a row does
    not sum to 1 or an entry is negative."""
    F = np.asarray(F, float)
    if F.shape != (prob.S, prob.C):
        raise FederationError(f"placement must be {prob.S}x{prob.C}, got {F.shape}")
    if np.any(F < -1e-12) or not np.allclose(F.sum(axis=1), 1.0):
        raise FederationError("each service's replica fractions must be >= 0 and sum to 1")
    net = 0.0
    for u, v, w, p in prob.edges:
        net += w * float(F[u] @ prob.link_ms(p) @ F[v])
    load = (F * prob.demand[:, None]).sum(axis=0)
    over = np.maximum(load - prob.capacity, 0.0)
    stretch = np.maximum(load / prob.capacity, 1.0)
    compute = float(np.sum(F * prob.unary * stretch[None, :]))
    if prob.client_link is not None:
        client = float(F[prob.entry] @ prob.client_link)
        net += client
        compute -= client
    pen = float(np.sum(F * prob.penalty))
    return CostBreakdown(net + compute, net, compute, pen, [round(float(x), 6) for x in over])


def assignment_matrix(assign: np.ndarray, C: int) -> np.ndarray:
    """One-hot ``(S, C)`` fraction matrix of an assignment vector (service -> cluster index)."""
    F = np.zeros((len(assign), C))
    F[np.arange(len(assign)), np.asarray(assign, int)] = 1.0
    return F
