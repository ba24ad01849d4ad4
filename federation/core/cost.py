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
share-weighted mean over those clusters.

**Routing** (``routing``) says which replica of a callee a call reaches:

* ``"proportional"`` (default): in proportion to the callee's replica counts, from every caller
  and every user region alike (a multi-cluster Service with no locality preference: Karmada's
  MultiClusterService, Cilium ClusterMesh global services without affinity). The formulas above.
* ``"locality"``: a caller in cluster ``i`` calls a replica in ``i`` when the callee has one
  there, else the callee's replicas in the cluster(s) nearest ``i`` by RTT (ties in proportion to
  the replica counts); users of region ``r`` enter at the entry's replica in ``r``, else at the
  nearest one. This is Istio's locality load balancing with a failover from each region to its
  nearest (Envoy priorities: same locality first, then the failover region; istio.io, "Locality
  failover") and, for the local step, Cilium ClusterMesh ``service.cilium.io/affinity: local``
  (cilium#19521); for the users, latency-based DNS or an anycast global load balancer. With
  each service in one cluster both rules route the same way. The cost is then computed from
  routing matrices (:func:`routing_matrix`, ``R_v[i, j]``: share of the calls from cluster ``i``
  that reach ``v``'s replicas in ``j``) and the share ``a_s[i]`` of ``s``'s visits served in
  ``i``, propagated down the call graph in topological order:

      a_entry = sum_r share_r R_entry[r, :]
      a_v     = sum_{e = (u, v)} w_e (a_u @ R_v) / visits[v]
      network = sum_e w_e sum_ij a_u[i] R_v[i, j] link_e[i, j] + sum_r share_r sum_j R_entry[r, j] link_client[r, j]
      compute = sum_s visits[s] work_ms[s] sum_i a_s[i] slowdown_i stretch_i

  (with ``R_v[i, :] = F[v, :]`` for every ``i`` these are the proportional formulas: ``a_s =
  F[s]``). The expected latency is the mean over user regions weighted by their shares.

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
    ``demand``: ``(S,)`` cores; ``capacity``: ``(C,)`` available cores; ``cpu``: ``(S,)``
    cores per replica. ``routing``: ``"proportional"`` or ``"locality"`` (module docstring);
    ``shares``: user region (cluster index) -> share of the requests, or None without users.
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
    routing: str = "proportional"
    shares: dict[int, float] | None = None
    client_payload_bytes: float = 2048.0
    cpu: np.ndarray | None = None

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


ROUTINGS = ("proportional", "locality")


def check_routing(routing: str) -> str:
    """``routing`` if it is one of :data:`ROUTINGS`, else :class:`FederationError`."""
    if routing not in ROUTINGS:
        raise FederationError(f"unknown routing {routing!r}; use one of {', '.join(ROUTINGS)}")
    return routing


def routing_matrix(rtt_ms: np.ndarray, replicas: np.ndarray, routing: str = "proportional") -> np.ndarray:
    """``(C, C)`` row-stochastic matrix ``R``: ``R[i, j]`` is the share of the calls made from
    cluster ``i`` (or of the users of region ``i``) that reach the callee's replicas in cluster
    ``j``, given the callee's replica counts (or fractions) ``replicas`` ``(C,)`` (not all 0).
    ``"proportional"``: every row is ``replicas / replicas.sum()``. ``"locality"``: row ``i`` is
    1 at ``i`` when ``replicas[i] > 0``, else spread over the clusters with replicas at the
    smallest ``rtt_ms[i, j]`` (within 1e-9 ms), in proportion to their replicas (module
    docstring: Istio locality failover to the nearest region, Cilium ``affinity: local``).
    Raises :class:`FederationError` for an unknown routing or no replicas."""
    r = np.asarray(replicas, float)
    if r.sum() <= 0:
        raise FederationError("routing needs a callee with at least one replica")
    C = len(r)
    if check_routing(routing) == "proportional":
        return np.tile(r / r.sum(), (C, 1))
    R = np.zeros((C, C))
    has = r > 0
    for i in range(C):
        if has[i]:
            R[i, i] = 1.0
            continue
        d = np.where(has, rtt_ms[i], np.inf)
        near = has & (d <= d.min() + 1e-9)
        R[i, near] = r[near] / r[near].sum()
    return R


def route_row(fed: Federation, replicas: dict[str, int], frm: str, routing: str = "proportional") -> dict[str, float]:
    """Where calls from cluster ``frm`` to a service with ``replicas`` ({cluster: count}) go:
    ``{cluster: share}`` (shares > 0, summing to 1), :func:`routing_matrix`'s row ``frm``. The
    harness routes its calls with this, so the world and the cost model route alike. Raises
    :class:`FederationError` for unknown clusters or routing."""
    counts = np.zeros(len(fed.clusters))
    for c, n in replicas.items():
        counts[fed.index(c)] = n
    row = routing_matrix(fed.rtt_ms, counts, routing)[fed.index(frm)]
    return {fed.names[j]: float(row[j]) for j in np.flatnonzero(row > 0)}


def build_problem(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                  pinned: dict[str, str] | None = None, client: str | dict[str, float] | None = None,
                  client_payload_bytes: int = 2048, routing: str = "proportional") -> Problem:
    """Precompute the cost model's arrays. ``pinned`` maps service -> cluster it must run in;
    ``client`` names the cluster the users' requests come from, or ``{cluster: share}``
    (``None``: no client link); ``routing``: ``"proportional"`` or ``"locality"`` (module
    docstring). Raises :class:`FederationError` for unknown names or routing, or a negative
    weight."""
    if contention_weight < 0:
        raise FederationError("contention_weight must be >= 0")
    check_routing(routing)
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
    client_link, shares = None, None
    if client is not None:
        shares = {fed.index(name): share for name, share in client_shares(client).items()}
        client_link = np.zeros(len(fed.clusters))
        for ci, share in shares.items():
            client_link += share * (fed.rtt_ms[ci, :] + client_payload_bytes * inv_bw[ci, :])
        unary = unary.copy()
        unary[idx[app.entry]] += client_link
    cpu = np.array([s.cpu_per_replica for s in app.services])
    return Problem(app, fed, unary, penalty, edges, demand, capacity, inv_bw, pins, client_link, idx[app.entry], routing, shares,
                   float(client_payload_bytes), cpu)


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
    """Cost of a fraction matrix ``F`` ``(S, C)`` (each service's replicas, ``replicas`` of
    them in all, divided over the clusters), under ``prob.routing``; raises
    :class:`FederationError` if a row does not sum to 1 or an entry is negative."""
    F = np.asarray(F, float)
    if F.shape != (prob.S, prob.C):
        raise FederationError(f"placement must be {prob.S}x{prob.C}, got {F.shape}")
    if np.any(F < -1e-12) or not np.allclose(F.sum(axis=1), 1.0):
        raise FederationError("each service's replica fractions must be >= 0 and sum to 1")
    return _evaluate(prob, F, (F * prob.demand[:, None]).sum(axis=0))


def evaluate_counts(prob: Problem, counts: np.ndarray) -> CostBreakdown:
    """Cost of replica counts ``(S, C)`` (integers >= 0, every service at least one): as
    :func:`evaluate` of the fractions ``counts / counts.sum(1)``, but each cluster's load is
    ``sum_s counts[s, c] * cpu_per_replica[s]``, so a service copied whole into several clusters
    (Karmada ``Duplicated``: its ``replicas`` in each) loads each of them with its full demand.
    Raises :class:`FederationError` for a negative count or a service without replicas."""
    N = np.asarray(counts, float)
    if N.shape != (prob.S, prob.C):
        raise FederationError(f"replica counts must be {prob.S}x{prob.C}, got {N.shape}")
    if np.any(N < 0) or np.any(N.sum(axis=1) <= 0):
        raise FederationError("replica counts must be >= 0 with at least one replica per service")
    return _evaluate(prob, N / N.sum(axis=1, keepdims=True), (N * prob.cpu[:, None]).sum(axis=0))


def served_shares(prob: Problem, F: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(a, R)``: ``a`` ``(S, C)``, the share of each service's visits served in each cluster,
    and ``R[s]`` its :func:`routing_matrix` (module docstring), under ``prob.routing``. Without
    users the entry's requests arrive in proportion to its replicas."""
    R = [routing_matrix(prob.fed.rtt_ms, F[s], prob.routing) for s in range(prob.S)]
    if prob.routing == "proportional":
        return F.copy(), R
    a = np.zeros((prob.S, prob.C))
    if prob.shares:
        for r, share in prob.shares.items():
            a[prob.entry] += share * R[prob.entry][r]
    else:
        a[prob.entry] = F[prob.entry]
    inflow = np.zeros((prob.S, prob.C))
    by_caller: dict[int, list[tuple[int, float]]] = {}
    for u, v, w, _ in prob.edges:
        by_caller.setdefault(u, []).append((v, w))
    idx = {n: i for i, n in enumerate(prob.app.names)}
    for name in prob.app.topological_order():
        u = idx[name]
        if u != prob.entry:
            tot = inflow[u].sum()
            a[u] = inflow[u] / tot if tot > 0 else F[u]
        for v, w in by_caller.get(u, []):
            inflow[v] += w * (a[u] @ R[v])
    return a, R


def _evaluate(prob: Problem, F: np.ndarray, load: np.ndarray) -> CostBreakdown:
    over = np.maximum(load - prob.capacity, 0.0)
    stretch = np.maximum(load / prob.capacity, 1.0)
    if prob.routing == "proportional":
        net = 0.0
        for u, v, w, p in prob.edges:
            net += w * float(F[u] @ prob.link_ms(p) @ F[v])
        compute = float(np.sum(F * prob.unary * stretch[None, :]))
        if prob.client_link is not None:
            client = float(F[prob.entry] @ prob.client_link)
            net += client
            compute -= client
        pen = float(np.sum(F * prob.penalty))
        return CostBreakdown(net + compute, net, compute, pen, [round(float(x), 6) for x in over])
    a, R = served_shares(prob, F)
    net = 0.0
    for u, v, w, p in prob.edges:
        net += w * float(a[u] @ (R[v] * prob.link_ms(p)).sum(axis=1))
    if prob.shares:
        link = prob.link_ms(prob.client_payload_bytes)
        for r, share in prob.shares.items():
            net += share * float(R[prob.entry][r] @ link[r])
    unary = prob.unary.copy()
    if prob.client_link is not None:
        unary[prob.entry] -= prob.client_link
    compute = float(np.sum(a * unary * stretch[None, :]))
    pen = float(np.sum(a * prob.penalty))
    return CostBreakdown(net + compute, net, compute, pen, [round(float(x), 6) for x in over])


def assignment_matrix(assign: np.ndarray, C: int) -> np.ndarray:
    """One-hot ``(S, C)`` fraction matrix of an assignment vector (service -> cluster index)."""
    F = np.zeros((len(assign), C))
    F[np.arange(len(assign)), np.asarray(assign, int)] = 1.0
    return F
