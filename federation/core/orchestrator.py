"""Inter-cluster aware placement of an application's services on member clusters.

Objective: minimise the expected end-to-end latency of one user request
(:mod:`federation.core.cost`: call-graph edges weighted by inter-cluster RTT plus payload over
bandwidth, times calls per request, plus compute stretched by each cluster's contention), subject
to each cluster's available cores. The planners below keep all replicas of a service in one
member cluster; :func:`plan` then adds whole copies of services where locality routing makes them
pay (:func:`replicate_chains`) and spreads replicas a spread requirement asks for
(:func:`spread_replicas`).

* :func:`plan_milp`: exact, a mixed-integer programme solved by HiGHS through
  ``scipy.optimize.milp``. Binary ``x[s,c]`` (service s in cluster c); the pairwise co-location
  product ``x[u,i] x[v,j]`` of each edge is linearised with continuous ``y[e,i,j] >= 0`` and the
  transportation constraints ``sum_j y[e,i,j] = x[u,i]``, ``sum_i y[e,i,j] = x[v,j]`` (exact
  when ``x`` is binary: the row and column sums pin the single non-zero ``y``; tighter than the
  three McCormick inequalities, Adams & Sherali, Management Science 1986).
* :func:`plan_greedy`: greedy in call order (each service to the feasible cluster that adds the
  least latency given the services already placed) followed by local search (single-service moves,
  ejection chains of two moves, pairwise swaps, until no move improves) and iterated local search
  within a time limit.
* Baselines: :func:`plan_nearest_fit` (everything in the nearest cluster that holds it; when
  none does, fill the nearest in call order and spill the rest to the next nearest);
  :func:`plan_all_in_one`; :func:`plan_karmada_static` (Karmada ``replicaScheduling:
  Divided/Weighted`` with a ``staticWeightList``); :func:`plan_karmada_dynamic` (Karmada
  ``dynamicWeight: AvailableReplicas``). Both Karmada baselines divide replicas with Karmada's
  own algorithm, ported in :mod:`federation.core.division` (Webster / Sainte-Lague, Karmada
  ``pkg/util/helper/webstermethod.go`` ``AllocateWebsterSeats``), ties included: equal
  priorities go to the cluster with fewer replicas, then the smaller name, so single-replica
  services with equal weights all land in the alphabetically first cluster, as in Karmada.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from .cost import (CostBreakdown, Problem, assignment_matrix, build_problem, check_routing, evaluate, evaluate_counts,
                   home_cluster)
from .division import dynamic_weight_division, static_weight_division
from .model import Application, Federation, FederationError


@dataclass
class Plan:
    """A placement: ``replicas[service][cluster] = count`` (clusters with 0 omitted).

    ``method``: which planner made it; ``cost``: its expected latency breakdown (ms);
    ``explanation``: per-service text; ``solve_seconds``: wall time of planning;
    ``duplicated``: services copied whole into each of their clusters (Karmada ``Duplicated``,
    :func:`duplicated_services`), the others' replicas are divided.
    """

    app_name: str
    method: str
    replicas: dict[str, dict[str, int]]
    cost: CostBreakdown
    explanation: dict[str, str] = field(default_factory=dict)
    solve_seconds: float = 0.0
    optimal: bool = False
    duplicated: list[str] = field(default_factory=list)

    def counts(self, prob: Problem) -> np.ndarray:
        """``(S, C)`` replica counts of the plan, indexed like ``prob``."""
        names = prob.fed.names
        N = np.zeros((prob.S, prob.C))
        for s, svc in enumerate(prob.app.services):
            for c, n in self.replicas[svc.name].items():
                N[s, names.index(c)] = n
        return N

    def fractions(self, prob: Problem) -> np.ndarray:
        names = prob.fed.names
        F = np.zeros((prob.S, prob.C))
        for s, svc in enumerate(prob.app.services):
            reps = self.replicas[svc.name]
            tot = sum(reps.values())
            for c, n in reps.items():
                F[s, names.index(c)] = n / tot
        return F

    def clusters_of(self, service: str) -> list[str]:
        return sorted(self.replicas[service])

    def as_dict(self) -> dict:
        return {"app": self.app_name, "method": self.method, "replicas": self.replicas, "cost": self.cost.as_dict(),
                "explanation": self.explanation, "solve_seconds": self.solve_seconds, "optimal": self.optimal,
                "duplicated": list(self.duplicated)}


def _plan_from_assign(prob: Problem, assign: np.ndarray, method: str, secs: float, optimal: bool = False) -> Plan:
    names = prob.fed.names
    reps = {s.name: {names[int(assign[i])]: s.replicas} for i, s in enumerate(prob.app.services)}
    plan = Plan(prob.app.name, method, reps, evaluate(prob, assignment_matrix(assign, prob.C)), solve_seconds=secs, optimal=optimal)
    plan.explanation = explain(prob, assign)
    return plan


def _move_costs(prob: Problem, assign: np.ndarray, s: int, adj: list[list[tuple[int, float, float, bool]]]) -> np.ndarray:
    """``(C,)`` latency terms that depend on service ``s``'s cluster, others fixed at ``assign``."""
    v = prob.unary[s].copy()
    rtt, ibw = prob.fed.rtt_ms, prob.inv_bw_ms_per_byte
    for t, w, p, out in adj[s]:
        c = assign[t]
        if c < 0:
            continue
        v += w * ((rtt[:, c] + p * ibw[:, c]) if out else (rtt[c, :] + p * ibw[c, :]))
    return v


def _adjacency(prob: Problem) -> list[list[tuple[int, float, float, bool]]]:
    adj: list[list[tuple[int, float, float, bool]]] = [[] for _ in range(prob.S)]
    for u, v, w, p in prob.edges:
        adj[u].append((v, w, p, True))
        adj[v].append((u, w, p, False))
    return adj


def explain(prob: Problem, assign: np.ndarray) -> dict[str, str]:
    """Per service: chosen cluster, its compute (with contention) and network terms, and what
    the best other cluster would cost (others held fixed), or why it is pinned."""
    adj = _adjacency(prob)
    names = prob.fed.names
    out = {}
    for s, svc in enumerate(prob.app.services):
        c = int(assign[s])
        costs = _move_costs(prob, assign, s, adj)
        comp = prob.unary[s, c]
        msg = (f"{names[c]}: compute {comp:.2f} ms/request (contention {prob.fed.clusters[c].contention:.2f}, "
               f"penalty {prob.penalty[s, c]:.2f} ms), calls to/from neighbours {costs[c] - comp:.2f} ms")
        if s in prob.pinned:
            msg += "; pinned here"
        elif prob.C > 1:
            others = [k for k in range(prob.C) if k != c]
            k = min(others, key=lambda k: costs[k])
            load = sum(prob.demand[t] for t in range(prob.S) if assign[t] == k and t != s)
            fits = load + prob.demand[s] <= prob.capacity[k] + 1e-9
            msg += f"; next best {names[k]} would add {costs[k] - costs[c]:+.2f} ms" + ("" if fits else " and does not fit its capacity")
        out[svc.name] = msg
    return out


def _check_fit(prob: Problem) -> None:
    if prob.demand.sum() > prob.capacity.sum() + 1e-9:
        raise FederationError(f"application {prob.app.name!r} needs {prob.demand.sum():.2f} cores; "
                              f"the federation has {prob.capacity.sum():.2f} available")
    for s, c in prob.pinned.items():
        if prob.demand[s] > prob.capacity[c] + 1e-9:
            raise FederationError(f"pinned service {prob.app.services[s].name!r} does not fit cluster {prob.fed.names[c]!r}")


def plan_milp(app: Application, fed: Federation, *, contention_weight: float = 1.0,
              pinned: dict[str, str] | None = None, client: str | dict[str, float] | None = None, time_limit: float = 60.0,
              routing: str = "proportional") -> Plan:
    """Exact placement by MILP (HiGHS). Variables: ``S*C`` binaries plus ``E*C*C`` continuous.
    Raises :class:`FederationError` when no placement fits the capacities or the solver fails."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    prob = build_problem(app, fed, contention_weight=contention_weight, pinned=pinned, client=client, routing=routing)
    _check_fit(prob)
    t0 = time.perf_counter()
    S, C, E = prob.S, prob.C, len(prob.edges)
    nx = S * C
    n = nx + E * C * C
    cost = np.zeros(n)
    cost[:nx] = prob.unary.ravel()
    for e, (u, v, w, p) in enumerate(prob.edges):
        cost[nx + e * C * C: nx + (e + 1) * C * C] = w * prob.link_ms(p).ravel()
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0
    for s in range(S):  # each service in exactly one cluster
        rows += [r] * C; cols += [s * C + c for c in range(C)]; vals += [1.0] * C; lo.append(1); hi.append(1); r += 1
    for c in range(C):  # capacity
        rows += [r] * S; cols += [s * C + c for s in range(S)]; vals += list(prob.demand); lo.append(-np.inf); hi.append(prob.capacity[c]); r += 1
    for e, (u, v, _, _) in enumerate(prob.edges):
        base = nx + e * C * C
        for i in range(C):  # sum_j y[e,i,j] = x[u,i]
            rows += [r] * (C + 1); cols += [base + i * C + j for j in range(C)] + [u * C + i]; vals += [1.0] * C + [-1.0]
            lo.append(0); hi.append(0); r += 1
        for j in range(C):  # sum_i y[e,i,j] = x[v,j]
            rows += [r] * (C + 1); cols += [base + i * C + j for i in range(C)] + [v * C + j]; vals += [1.0] * C + [-1.0]
            lo.append(0); hi.append(0); r += 1
    A = coo_matrix((vals, (rows, cols)), shape=(r, n)).tocsr()
    lb, ub = np.zeros(n), np.ones(n)
    ub[nx:] = np.inf
    for s, c in prob.pinned.items():
        ub[s * C: (s + 1) * C] = 0.0
        ub[s * C + c] = lb[s * C + c] = 1.0
    integrality = np.zeros(n)
    integrality[:nx] = 1
    res = milp(cost, constraints=LinearConstraint(A, lo, hi), integrality=integrality, bounds=Bounds(lb, ub),
               options={"time_limit": time_limit, "mip_rel_gap": 1e-9})
    if res.x is None:
        raise FederationError(f"MILP found no placement: {res.message}")
    assign = res.x[:nx].reshape(S, C).argmax(axis=1)
    return _plan_from_assign(prob, assign, "milp", time.perf_counter() - t0, optimal=res.status == 0)


def _greedy_assign(prob: Problem, adj, order: list[int]) -> np.ndarray | None:
    assign = -np.ones(prob.S, dtype=int)
    load = np.zeros(prob.C)
    for s, c in prob.pinned.items():
        assign[s] = c
        load[c] += prob.demand[s]
    for s in order:
        if assign[s] >= 0:
            continue
        costs = _move_costs(prob, assign, s, adj)
        costs[load + prob.demand[s] > prob.capacity + 1e-9] = np.inf
        c = int(np.argmin(costs))
        if not np.isfinite(costs[c]):
            return None
        assign[s] = c
        load[c] += prob.demand[s]
    return assign


def _local_search(prob: Problem, adj, assign: np.ndarray, deadline: float) -> np.ndarray:
    """Local search to a local optimum of single-service moves, pairwise swaps and ejection
    chains (in that order of preference), all within capacity, pinned services fixed.

    Incremental: ``M[s, c]`` (``(S, C)``) is the latency that depends on service ``s`` were it
    in cluster ``c``, the others held fixed (:func:`_move_costs`). Moving ``t`` from ``a`` to
    ``b`` changes only its neighbours' rows, each by ``w * (link[b] - link[a])`` of their shared
    edge, so a move costs ``O(deg * C)`` instead of re-evaluating everything. The best single
    move is one ``argmin`` over ``M - M[s, assign[s]]``; the best swap one ``argmin`` over the
    ``(S, S)`` matrix ``M[a, c_b] - M[a, c_a] + M[b, c_a] - M[b, c_b]`` plus, for services that
    share an edge, ``w (L[c_b, c_a] + L[c_a, c_b] - L[c_b, c_b] - L[c_a, c_a])`` (the edge
    between them counted in both rows at positions it will not have after the swap)."""
    S, C = prob.S, prob.C
    assign = assign.copy()
    demand, cap = prob.demand, prob.capacity + 1e-9
    load = np.zeros(C)
    np.add.at(load, assign, demand)
    M = np.array([_move_costs(prob, assign, t, adj) for t in range(S)]) if S else np.zeros((0, C))
    pinned = np.zeros(S, bool)
    pinned[list(prob.pinned)] = True
    rows = np.arange(S)
    links = {p: prob.link_ms(p) for p in {p for _, _, _, p in prob.edges}}
    pair_edges = [(u, v, w, links[p]) for u, v, w, p in prob.edges]

    def move(t: int, b: int) -> None:
        a = int(assign[t])
        for s2, w, pl, out in adj[t]:
            L = links[pl]
            # t -> s2 (t caller): s2's row holds w * L[c_t, :]; s2 -> t: w * L[:, c_t]
            M[s2] += w * ((L[b, :] - L[a, :]) if out else (L[:, b] - L[:, a]))
        load[a] -= demand[t]
        load[b] += demand[t]
        assign[t] = b

    while time.perf_counter() < deadline:
        cur = M[rows, assign]
        feas = load[None, :] + demand[:, None] <= cap[None, :]
        feas[pinned] = False
        gain = np.where(feas, M - cur[:, None], np.inf)
        gain[rows, assign] = np.inf
        if S and gain.size:
            k = int(np.argmin(gain))
            t, b = divmod(k, C)
            if gain[t, b] < -1e-9:
                move(t, b)
                continue
        if S > 1:
            D = M[:, assign]  # D[x, y] = M[x, c_y]
            delta = D - cur[:, None] + D.T - cur[None, :]
            for u, v, w, L in pair_edges:
                cu, cv = assign[u], assign[v]
                corr = w * (L[cv, cu] + L[cu, cv] - L[cv, cv] - L[cu, cu])
                delta[u, v] += corr
                delta[v, u] += corr
            same = assign[:, None] == assign[None, :]
            la, lb = load[assign][:, None], load[assign][None, :]
            ok = (lb - demand[None, :] + demand[:, None] <= cap[assign][None, :]) & (la - demand[:, None] + demand[None, :] <= cap[assign][:, None])
            ok &= ~same & ~pinned[:, None] & ~pinned[None, :]
            delta = np.where(ok, delta, np.inf)
            k = int(np.argmin(delta))
            x, y = divmod(k, S)
            if delta[x, y] < -1e-9:
                cx, cy = int(assign[x]), int(assign[y])
                move(x, cy)
                move(y, cx)
                continue
        free = [t for t in range(S) if not pinned[t]]
        if _ejection_pass(prob, adj, assign, load, free, deadline):
            M = np.array([_move_costs(prob, assign, t, adj) for t in range(S)])
            continue
        break
    return assign


def _local_search_sweep(prob: Problem, adj, assign: np.ndarray, deadline: float) -> np.ndarray:
    """The first-improvement variant: sweep the services in order, moving each to its best
    cluster at once, then ejection chains, then the first improving swap; recomputes move costs
    each time (``O(S^2)`` per swap pass), so it is used only on small instances, where it
    reaches other local optima than :func:`_local_search` (a second descent from every start)."""
    load = np.zeros(prob.C)
    np.add.at(load, assign, prob.demand)
    free = [s for s in range(prob.S) if s not in prob.pinned]
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for s in free:  # single moves
            costs = _move_costs(prob, assign, s, adj)
            c0 = assign[s]
            ok = load + prob.demand[s] <= prob.capacity + 1e-9
            ok[c0] = True
            costs[~ok] = np.inf
            c = int(np.argmin(costs))
            if costs[c] < costs[c0] - 1e-9:
                load[c0] -= prob.demand[s]; load[c] += prob.demand[s]; assign[s] = c
                improved = True
        if improved:
            continue
        improved = _ejection_pass(prob, adj, assign, load, free, deadline)
        if improved:
            continue
        for a, b in itertools.combinations(free, 2):  # swaps, for when capacity blocks single moves
            if time.perf_counter() > deadline:
                break
            ca, cb = assign[a], assign[b]
            if ca == cb:
                continue
            if (load[cb] - prob.demand[b] + prob.demand[a] > prob.capacity[cb] + 1e-9
                    or load[ca] - prob.demand[a] + prob.demand[b] > prob.capacity[ca] + 1e-9):
                continue
            before = _move_costs(prob, assign, a, adj)[ca] + _move_costs(prob, assign, b, adj)[cb]
            shared = sum(w * (prob.link_ms(p)[ca, cb] if out else prob.link_ms(p)[cb, ca]) for t, w, p, out in adj[a] if t == b)
            assign[a], assign[b] = cb, ca
            after = _move_costs(prob, assign, a, adj)[cb] + _move_costs(prob, assign, b, adj)[ca]
            shared2 = sum(w * (prob.link_ms(p)[cb, ca] if out else prob.link_ms(p)[ca, cb]) for t, w, p, out in adj[a] if t == b)
            if after - shared2 < before - shared - 1e-9:
                load[ca] += prob.demand[b] - prob.demand[a]; load[cb] += prob.demand[a] - prob.demand[b]
                improved = True
                break
            assign[a], assign[b] = ca, cb
    return assign


def _ejection_pass(prob: Problem, adj, assign: np.ndarray, load: np.ndarray, free: list[int], deadline: float) -> bool:
    """Ejection chains of length 2 (Glover, Discrete Applied Mathematics 1996): move ``s`` to a
    cluster ``c`` it does not fit and eject one service ``t`` from ``c`` to a cluster it fits,
    if the pair of moves lowers the cost. Applies the first improving chain; True if one was."""
    freeset = set(free)
    for s in free:
        if time.perf_counter() > deadline:
            return False
        c0 = assign[s]
        costs = _move_costs(prob, assign, s, adj)
        for c in np.argsort(costs)[:3]:
            c = int(c)
            if c == c0 or costs[c] >= costs[c0] - 1e-9 or load[c] + prob.demand[s] <= prob.capacity[c] + 1e-9:
                continue
            d1 = costs[c] - costs[c0]
            assign[s] = c
            load[c0] -= prob.demand[s]; load[c] += prob.demand[s]
            best = None
            for t in np.flatnonzero(assign == c):
                t = int(t)
                if t == s or t not in freeset or load[c] - prob.demand[t] > prob.capacity[c] + 1e-9:
                    continue
                ct = _move_costs(prob, assign, t, adj)
                ok = load + prob.demand[t] <= prob.capacity + 1e-9
                ok[c] = False
                if not ok.any():
                    continue
                k = int(np.argmin(np.where(ok, ct, np.inf)))
                d = d1 + ct[k] - ct[c]
                if d < -1e-9 and (best is None or d < best[0]):
                    best = (d, t, k)
            if best is not None:
                _, t, k = best
                assign[t] = k
                load[c] -= prob.demand[t]; load[k] += prob.demand[t]
                return True
            assign[s] = c0
            load[c] -= prob.demand[s]; load[c0] += prob.demand[s]
    return False


SWEEP_LIMIT = 1000  # S * C up to which the first-improvement descent runs as well


def plan_greedy(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                pinned: dict[str, str] | None = None, client: str | dict[str, float] | None = None, time_limit: float = 0.9,
                max_stale: int = 100, seed: int = 0, routing: str = "proportional") -> Plan:
    """Greedy in call order plus local search (moves, then swaps), started also from the best
    single cluster that can hold the whole application; then iterated local search (random
    perturbations of 2 to S/5 services, re-optimised) until ``max_stale`` perturbations in a row
    brought nothing or ``time_limit`` seconds passed; the best result wins (seeded by ``seed``). Raises :class:`FederationError` when greedy
    cannot fit the services (the MILP may still find a packing)."""
    prob = build_problem(app, fed, contention_weight=contention_weight, pinned=pinned, client=client, routing=routing)
    _check_fit(prob)
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    adj = _adjacency(prob)
    idx = {n: i for i, n in enumerate(app.names)}
    order = [idx[n] for n in app.topological_order()]
    starts = []
    g = _greedy_assign(prob, adj, order)
    if g is not None:
        starts.append(g)
    total = prob.demand.sum()
    for c in np.argsort(prob.unary.sum(axis=0)):
        if total <= prob.capacity[c] + 1e-9 and all(pc == c for pc in prob.pinned.values()):
            starts.append(np.full(prob.S, int(c)))
            break
    if not starts:
        raise FederationError("greedy placement could not fit every service; try the MILP planner")
    best, best_cost = None, np.inf
    # both descents on small instances: from every start, and alternately inside the iterated local search
    searches = [_local_search] + ([_local_search_sweep] if prob.S * prob.C <= SWEEP_LIMIT else [])
    for st in starts:
        for search in searches:
            a = search(prob, adj, st.copy(), deadline)
            cst = evaluate(prob, assignment_matrix(a, prob.C)).total_ms
            if cst < best_cost:
                best, best_cost = a, cst
    # iterated local search (Lourenco, Martin & Stuetzle, Handbook of Metaheuristics 2003):
    # move a few random services to random clusters that fit, re-optimise, keep if better.
    rng = np.random.default_rng(seed)
    free = [s for s in range(prob.S) if s not in prob.pinned]
    stale = 0
    while free and stale < max_stale and time.perf_counter() < deadline:
        a = best.copy()
        load = np.zeros(prob.C)
        np.add.at(load, a, prob.demand)
        for s in rng.choice(free, size=min(len(free), int(rng.integers(2, max(3, len(free) // 5) + 1))), replace=False):
            fits = np.flatnonzero(load + prob.demand[s] <= prob.capacity + 1e-9)
            if len(fits):
                c = int(rng.choice(fits))
                load[a[s]] -= prob.demand[s]; load[c] += prob.demand[s]; a[s] = c
        a = searches[stale % len(searches)](prob, adj, a, deadline)
        cst = evaluate(prob, assignment_matrix(a, prob.C)).total_ms
        if cst < best_cost - 1e-9:
            best, best_cost, stale = a, cst, 0
        else:
            stale += 1
    return _plan_from_assign(prob, best, "greedy+local-search", time.perf_counter() - t0)


def plan(app: Application, fed: Federation, *, method: str = "auto", exact_limit: int = 4000,
         min_clusters: dict[str, int] | None = None, **kw) -> Plan:
    """Plan with ``method`` ``"milp"``, ``"greedy"`` or ``"auto"`` (MILP when the programme has at
    most ``exact_limit`` variables ``S*C + E*C^2``, else greedy + local search). With
    ``routing="locality"`` (calls and users prefer a replica in their own cluster, else the
    nearest: :mod:`federation.core.cost`) the whole-service plan is then given copies where they
    lower the expected latency (:func:`replicate_chains`: a chain per user region, say). With
    ``min_clusters`` (service -> how many member clusters its replicas must span, for
    availability: Karmada ``spreadConstraints`` ``minGroups``) the plan is then split replica by
    replica (:func:`spread_replicas`). Raises :class:`FederationError` for an unknown method or
    routing and when nothing fits."""
    check_routing(kw.get("routing", "proportional"))
    if method == "milp":
        p = plan_milp(app, fed, **kw)
    elif method == "greedy":
        p = plan_greedy(app, fed, **kw)
    elif method != "auto":
        raise FederationError(f"unknown planning method {method!r}; use milp, greedy or auto")
    else:
        C = len(fed.clusters)
        size = len(app.services) * C + len(app.edges) * C * C
        p = plan_milp(app, fed, **kw) if size <= exact_limit else plan_greedy(app, fed, **kw)
    kw.pop("time_limit", None)
    if kw.get("routing") == "locality":
        p = replicate_chains(app, fed, p, **kw)
    if min_clusters:
        p = spread_replicas(app, fed, p, min_clusters, **kw)
    return p


def _descendants(app: Application) -> list[list[int]]:
    """Per service (application order): itself and every service it reaches, as indices."""
    idx = {n: i for i, n in enumerate(app.names)}
    down: list[list[int]] = [[] for _ in app.services]
    for e in app.edges:
        down[idx[e.caller]].append(idx[e.callee])
    out = []
    for s in range(len(app.services)):
        seen, stack = {s}, [s]
        while stack:
            for t in down[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        out.append(sorted(seen))
    return out


def replicate_chains(app: Application, fed: Federation, start: Plan, *, contention_weight: float = 1.0,
                     pinned: dict[str, str] | None = None, client: str | dict[str, float] | None = None,
                     routing: str = "locality", time_limit: float = 5.0) -> Plan:
    """Copies of whole services under locality routing, from ``start``: a service may run a full
    copy (its ``replicas``, Karmada ``Duplicated``) in several clusters, and with locality routing
    each caller (and each user region) uses the copy in its own cluster, else the nearest
    (:func:`federation.core.cost.routing_matrix`). Local search, best improving move first, with
    the exact cost (:func:`federation.core.cost.evaluate_counts`), within every cluster's
    available cores, until no move lowers the expected latency (by more than 1e-6 relative) or
    ``time_limit`` s pass. Moves, for each service ``s`` and cluster ``c``: add a copy of ``s``
    in ``c``; add copies of ``s`` *and every service it reaches* in ``c`` (a chain: one copy alone
    rarely pays, since its calls would still cross; the chain from the entry is the application
    replicated for a region); drop ``s``'s copy in ``c``; drop the chain's copies in ``c`` (a
    service keeps at least one copy). Pinned services and services ``start`` divides over
    several clusters keep their placement. A copy costs cores but no latency in this model, so a
    copy that lowers nothing is never added. With ``routing="proportional"`` (calls spread over
    every copy) it returns ``start`` unchanged: there a copy never lowers the expected latency
    of calls that reach it in proportion."""
    if check_routing(routing) != "locality":
        return start
    prob = build_problem(app, fed, contention_weight=contention_weight, pinned=pinned, client=client, routing=routing)
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    N0 = start.counts(prob)
    reps = np.array([svc.replicas for svc in app.services], float)
    fixed = np.zeros(prob.S, bool)
    fixed[list(prob.pinned)] = True
    fixed |= (N0 > 0).sum(axis=1) > 1
    X = N0 > 0
    desc = _descendants(app)

    def counts(M: np.ndarray) -> np.ndarray:
        return np.where(fixed[:, None], N0, M * reps[:, None])

    def load(M: np.ndarray) -> np.ndarray:
        return (counts(M) * prob.cpu[:, None]).sum(axis=0)

    cur = evaluate_counts(prob, counts(X)).total_ms
    while time.perf_counter() < deadline:
        best = None
        for s in range(prob.S):
            if fixed[s]:
                continue
            for c in range(prob.C):
                if X[s, c]:
                    moves = [[s]] if X[s].sum() > 1 else []
                    chain = [t for t in desc[s] if not fixed[t] and X[t, c] and X[t].sum() > 1]
                    if len(chain) > 1:
                        moves.append(chain)
                    add = False
                else:
                    chain = [t for t in desc[s] if not fixed[t] and not X[t, c]]
                    moves = [[s]] + ([chain] if len(chain) > 1 else [])
                    add = True
                for ts in moves:
                    M = X.copy()
                    M[ts, c] = add
                    if add and load(M)[c] > prob.capacity[c] + 1e-9:
                        continue
                    cst = evaluate_counts(prob, counts(M)).total_ms
                    if cst < cur - 1e-6 * max(1.0, abs(cur)) and (best is None or cst < best[0]):
                        best = (cst, M)
        if best is None:
            break
        cur, X = best
    if np.array_equal(X, N0 > 0):
        return start
    out = _plan_from_counts(prob, counts(X).astype(int), start.method + "+replicas", "")
    out.solve_seconds = start.solve_seconds + time.perf_counter() - t0
    for svc in app.services:
        where = sorted(out.replicas[svc.name])
        if svc.name in out.duplicated:
            out.explanation[svc.name] = (f"a copy in each of {where} (Karmada Duplicated): with locality routing each "
                                         f"cluster's callers and users stay in their cluster")
        else:
            out.explanation[svc.name] = start.explanation.get(svc.name, "") or f"in {where}"
    return out


def _check_min_clusters(app: Application, fed: Federation, min_clusters: dict[str, int]) -> dict[int, int]:
    idx = {n: i for i, n in enumerate(app.names)}
    out = {}
    for s, k in min_clusters.items():
        if s not in idx:
            raise FederationError(f"min_clusters names unknown service {s!r}")
        if int(k) != k or k < 1:
            raise FederationError(f"min_clusters[{s!r}] must be an integer >= 1, got {k}")
        svc = app.service(s)
        if k > min(svc.replicas, len(fed.clusters)):
            raise FederationError(f"{s!r} has {svc.replicas} replicas and the federation {len(fed.clusters)} members: "
                                  f"it cannot span {k} clusters")
        out[idx[s]] = int(k)
    return out


def spread_replicas(app: Application, fed: Federation, start: Plan, min_clusters: dict[str, int], *,
                    contention_weight: float = 1.0, pinned: dict[str, str] | None = None,
                    client: str | dict[str, float] | None = None, time_limit: float = 5.0,
                    routing: str = "proportional") -> Plan:
    """Replica-level placement from ``start``: first each service in ``min_clusters`` is spread
    until it spans that many clusters (one replica at a time, from its fullest cluster to the
    cluster with room where the expected latency rises least), then local search over single
    replica moves (any service not pinned, any pair of clusters, within capacity and the spread
    requirement) with the exact fractional cost (:func:`federation.core.cost.evaluate_counts`),
    best improving move first, until none improves or ``time_limit`` s pass. Services ``start``
    copies whole into several clusters (:func:`replicate_chains`) keep their copies. Raises
    :class:`FederationError` for an impossible requirement (more clusters than replicas or
    members) or when capacity leaves no cluster to spread to."""
    prob = build_problem(app, fed, contention_weight=contention_weight, pinned=pinned, client=client, routing=routing)
    need = _check_min_clusters(app, fed, min_clusters)
    for s in need:
        if s in prob.pinned and need[s] > 1:
            raise FederationError(f"{app.services[s].name!r} is pinned to one cluster and cannot span {need[s]}")
    t0 = time.perf_counter()
    names = fed.names
    N = np.zeros((prob.S, prob.C), int)
    for i, svc in enumerate(app.services):
        for c, n in start.replicas[svc.name].items():
            N[i, names.index(c)] = n
    cpu = np.array([svc.cpu_per_replica for svc in app.services])
    load = (N * cpu[:, None]).sum(axis=0)

    copied = {app.names.index(n) for n in start.duplicated}

    def cost(M: np.ndarray) -> float:
        return evaluate_counts(prob, M).total_ms

    for s, k in need.items():
        while np.count_nonzero(N[s]) < k:
            a = int(np.argmax(N[s]))
            best = None
            for b in range(prob.C):
                if N[s, b] or load[b] + cpu[s] > prob.capacity[b] + 1e-9:
                    continue
                N[s, a] -= 1; N[s, b] += 1
                cst = cost(N)
                N[s, a] += 1; N[s, b] -= 1
                if best is None or cst < best[0]:
                    best = (cst, b)
            if best is None:
                raise FederationError(f"no cluster has room to spread {app.services[s].name!r} over {k} clusters")
            b = best[1]
            N[s, a] -= 1; N[s, b] += 1; load[a] -= cpu[s]; load[b] += cpu[s]
    cur = cost(N)
    deadline = t0 + time_limit
    while time.perf_counter() < deadline:
        best = None
        for s in range(prob.S):
            if s in prob.pinned or s in copied:
                continue
            for a in np.flatnonzero(N[s]):
                for b in range(prob.C):
                    if b == a or load[b] + cpu[s] > prob.capacity[b] + 1e-9:
                        continue
                    if N[s, a] == 1 and N[s, b] > 0 and np.count_nonzero(N[s]) - 1 < need.get(s, 1):
                        continue
                    N[s, a] -= 1; N[s, b] += 1
                    cst = cost(N)
                    N[s, a] += 1; N[s, b] -= 1
                    if cst < cur - 1e-9 and (best is None or cst < best[0]):
                        best = (cst, s, int(a), b)
        if best is None:
            break
        cur, s, a, b = best
        N[s, a] -= 1; N[s, b] += 1; load[a] -= cpu[s]; load[b] += cpu[s]
    out = _plan_from_counts(prob, N, start.method + "+spread", "")
    out.solve_seconds = start.solve_seconds + time.perf_counter() - t0
    out.explanation = {svc.name: (f"{start.explanation.get(svc.name, '')}; spread over {sorted(out.replicas[svc.name])}"
                                  if len(out.replicas[svc.name]) > 1 else start.explanation.get(svc.name, ""))
                       for svc in app.services}
    return out


# ---- baselines ------------------------------------------------------------------------------

def _plan_from_counts(prob: Problem, counts: np.ndarray, method: str, why: str) -> Plan:
    names = prob.fed.names
    reps = {s.name: {names[c]: int(counts[i, c]) for c in range(prob.C) if counts[i, c] > 0} for i, s in enumerate(prob.app.services)}
    return Plan(prob.app.name, method, reps, evaluate_counts(prob, counts), {s.name: why for s in prob.app.services},
                duplicated=duplicated_services(prob.app, reps))


def duplicated_services(app: Application, replicas: dict[str, dict[str, int]]) -> list[str]:
    """Services copied whole into several clusters (Karmada ``replicaSchedulingType:
    Duplicated``): every cluster holding them has the service's full ``replicas``, so the counts
    add up to more than ``replicas``. A service whose counts add up to ``replicas`` is divided
    (``Divided``). Sorted names."""
    out = []
    for s in app.services:
        reps = [n for n in replicas.get(s.name, {}).values() if n > 0]
        if len(reps) > 1 and sum(reps) != s.replicas and all(n == s.replicas for n in reps):
            out.append(s.name)
    return out


def _pin(prob: Problem, counts: np.ndarray) -> None:
    """Move every replica of each pinned service to its pinned cluster (in place)."""
    for s, c in prob.pinned.items():
        counts[s, :] = 0
        counts[s, c] = prob.app.services[s].replicas


def plan_all_in_one(app: Application, fed: Federation, *, cluster: str | None = None, contention_weight: float = 1.0,
                    client: str | dict[str, float] | None = None, pinned: dict[str, str] | None = None,
                    min_clusters: dict[str, int] | None = None, routing: str = "proportional") -> Plan:
    """Everything in one cluster, capacity ignored (``cost.overload_cores`` shows any
    overcommit); pinned services stay where pinned; ``min_clusters`` is ignored. Default
    cluster: the client's when the whole application fits there, else the one with the most
    available cores (the 'hub' a centralised deployment would use)."""
    prob = build_problem(app, fed, contention_weight=contention_weight, client=client, pinned=pinned, routing=routing)
    if cluster:
        c = fed.index(cluster)
    elif client and prob.demand.sum() <= prob.capacity[fed.index(home_cluster(client))] + 1e-9:
        c = fed.index(home_cluster(client))
    else:
        c = int(np.argmax(prob.capacity))
    counts = np.zeros((prob.S, prob.C), int)
    counts[:, c] = [s.replicas for s in app.services]
    _pin(prob, counts)
    return _plan_from_counts(prob, counts, "all-in-one", f"centralised in {fed.names[c]}")


def plan_karmada_static(app: Application, fed: Federation, *, weights: dict[str, int] | None = None,
                        contention_weight: float = 1.0, client: str | dict[str, float] | None = None,
                        pinned: dict[str, str] | None = None, min_clusters: dict[str, int] | None = None,
                        routing: str = "proportional") -> Plan:
    """Karmada ``Divided`` / ``Weighted`` with a ``staticWeightList`` (default: weight 1 for
    every member), divided by Karmada's own algorithm
    (:func:`federation.core.division.static_weight_division`: Webster); a pinned service's
    policy names only its cluster (``clusterAffinity``); ``min_clusters`` is not enforced (the
    benchmark reports whether the division happens to meet it). Capacity is not checked, as
    Karmada's static weights do not (``cost.overload_cores`` shows any overcommit). Raises
    :class:`FederationError` for an unknown cluster or a non-integer / negative weight."""
    prob = build_problem(app, fed, contention_weight=contention_weight, client=client, pinned=pinned, routing=routing)
    for k in weights or {}:
        fed.index(k)
    w = {n: (weights or {}).get(n, 0 if weights else 1) for n in fed.names}
    counts = np.zeros((prob.S, prob.C), int)
    for i, s in enumerate(app.services):
        for c, n in static_weight_division(s.replicas, w, fed.names).items():
            counts[i, fed.index(c)] = n
    _pin(prob, counts)
    return _plan_from_counts(prob, counts, "karmada-static", f"static weights {w} (Webster division, as karmada-scheduler)")


def available_replicas(cores: float, cpu_per_replica: float) -> int:
    """How many more replicas requesting ``cpu_per_replica`` cores fit in ``cores`` free cores
    (Karmada's general estimator: allocatable minus allocated, divided by the request, floored).
    A 1e-9 slack keeps 0.3 / 0.1 from flooring to 2."""
    if cpu_per_replica <= 0:
        return 10**9
    return max(0, int(np.floor(cores / cpu_per_replica + 1e-9)))


def _dynamic(app: Application, fed: Federation, prob: Problem, k_of: dict[str, int] | None, method: str) -> np.ndarray:
    """Replica counts ``(S, C)`` of Karmada dynamic weights (``k_of`` None) or of spread
    constraints with equal static weights over the selected clusters (``k_of``: service ->
    clusters to select), services in order, each seeing the cores the earlier ones took."""
    free = np.array([c.available_cores for c in fed.clusters], float)
    counts = np.zeros((prob.S, prob.C), int)
    for i, s in enumerate(app.services):
        avail = {n: available_replicas(free[k], s.cpu_per_replica) for k, n in enumerate(fed.names)}
        if i in prob.pinned:
            avail = {fed.names[prob.pinned[i]]: avail[fed.names[prob.pinned[i]]]}
        elif k_of is not None:
            # spreadConstraints spreadByField cluster, minGroups = maxGroups = k: the k clusters
            # ranked first (equal scores on a first scheduling, then more available replicas,
            # then name: selectBestClustersByCluster in pkg/scheduler/core/spreadconstraint)
            k = k_of.get(s.name, 1)
            top = sorted(avail, key=lambda n: (-avail[n], n))[:k]
            avail = {n: avail[n] for n in top}
        try:
            if k_of is not None and i not in prob.pinned:
                if sum(avail.values()) < s.replicas:
                    raise FederationError(f"clusters available replicas {sum(avail.values())} are not enough to schedule {s.replicas}")
                div = static_weight_division(s.replicas, {n: 1 for n in avail})
            else:
                div = dynamic_weight_division(s.replicas, avail)
        except FederationError as err:
            raise FederationError(f"{method}: service {s.name!r} is unschedulable: {err}") from None
        for c, n in div.items():
            k = fed.index(c)
            counts[i, k] = n
            free[k] -= n * s.cpu_per_replica
    return counts


def plan_karmada_dynamic(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                         client: str | dict[str, float] | None = None, pinned: dict[str, str] | None = None,
                         min_clusters: dict[str, int] | None = None, routing: str = "proportional") -> Plan:
    """Karmada ``dynamicWeight: AvailableReplicas``: each service's replicas divided (Webster,
    :func:`federation.core.division.dynamic_weight_division`) in proportion to how many of its
    replicas each cluster still has room for (a pinned service: only its cluster). Services are
    scheduled one after another in the application's order, each seeing the cores the earlier
    ones took (as the estimator sees running pods). Raises :class:`FederationError` when a
    service does not fit (Karmada leaves it unschedulable)."""
    prob = build_problem(app, fed, contention_weight=contention_weight, client=client, pinned=pinned, routing=routing)
    counts = _dynamic(app, fed, prob, None, "karmada-dynamic")
    return _plan_from_counts(prob, counts, "karmada-dynamic", "weights = available replicas per cluster, services in order (Webster division)")


def plan_karmada_spread(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                        client: str | dict[str, float] | None = None, pinned: dict[str, str] | None = None,
                        min_clusters: dict[str, int] | None = None, routing: str = "proportional") -> Plan:
    """Karmada with ``spreadConstraints`` (``spreadByField: cluster``, ``minGroups = maxGroups =
    min_clusters[s]``, default 1): per service the clusters with the most available replicas
    are selected (scores tie on a first scheduling), then its replicas divided over them with
    equal static weights (Webster), the setting Karmada's high-availability guide pairs with
    spread constraints (dynamic weights would give a selected cluster no replica whenever the
    other has far more room: 2 replicas over 160 and 40 available go 2/0). Raises
    :class:`FederationError` when a service does not fit."""
    prob = build_problem(app, fed, contention_weight=contention_weight, client=client, pinned=pinned, routing=routing)
    if min_clusters:
        _check_min_clusters(app, fed, min_clusters)
    counts = _dynamic(app, fed, prob, dict(min_clusters or {}), "karmada-spread")
    return _plan_from_counts(prob, counts, "karmada-spread", f"spreadConstraints cluster x {dict(min_clusters or {})}, equal static weights")


def plan_nearest_fit(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                     client: str | dict[str, float] | None = None, pinned: dict[str, str] | None = None,
                     min_clusters: dict[str, int] | None = None, routing: str = "proportional") -> Plan:
    """The rule a user would write first: the whole application in the cluster nearest the
    users (lowest RTT from ``client``, or its largest share; default: the first member) that can
    hold it, ties to the larger free capacity; pinned services stay where pinned (their cores
    counted where they are).

    When no single cluster holds it, **spill** (next-fit): clusters ranked by RTT from the users
    (ties to the larger free capacity), services taken in call order (:meth:`Application.
    topological_order`: the entry first, then what it calls, as one lists a pipeline front to
    back; ties in the application's own order); each goes to the current cluster while it fits,
    and the first service that does not fit moves the rest on to the next cluster ("fill the
    nearest cluster, spill the rest to the next nearest"): so a chain is cut once per cluster,
    where the nearest cluster happens to fill up, whatever that edge's call rate.

    A service that must span ``k`` clusters gets its replicas divided evenly (Webster) over its
    cluster and the ``k - 1`` next nearest. Raises :class:`FederationError` when even spilling
    over every cluster does not place it, or the spread overfills a cluster."""
    prob = build_problem(app, fed, contention_weight=contention_weight, client=client, pinned=pinned, routing=routing)
    home = fed.index(home_cluster(client)) if client else 0
    free = prob.capacity.copy()
    for s, c in prob.pinned.items():
        free[c] -= prob.demand[s]
    need = sum(prob.demand[s] for s in range(prob.S) if s not in prob.pinned)
    fits = [c for c in range(prob.C) if need <= free[c] + 1e-9]
    counts = np.zeros((prob.S, prob.C), int)
    if fits:
        c = min(fits, key=lambda k: (fed.rtt_ms[home, k], -free[k]))
        counts[:, c] = [s.replicas for s in app.services]
        where = [c] * prob.S
        why = f"all in {fed.names[c]}, the nearest cluster (RTT {fed.rtt_ms[home, c]:.1f} ms) that holds {need:.2f} cores"
    else:
        ranked = sorted(range(prob.C), key=lambda k: (fed.rtt_ms[home, k], -free[k]))
        where = [-1] * prob.S
        k = 0
        left = free.copy()
        idx = {n: i for i, n in enumerate(app.names)}
        for name in app.topological_order():
            s = idx[name]
            if s in prob.pinned:
                continue
            while k < len(ranked) and prob.demand[s] > left[ranked[k]] + 1e-9:
                k += 1
            if k == len(ranked):
                raise FederationError(f"nearest-fit: no single cluster holds {need:.2f} cores (largest free: {free.max():.2f}), "
                                      f"and spilling in call order leaves {name!r} without room")
            where[s] = ranked[k]
            left[ranked[k]] -= prob.demand[s]
            counts[s, ranked[k]] = app.services[s].replicas
        used = [fed.names[c] for c in ranked if c in where]
        why = (f"no single cluster holds {need:.2f} cores: filled {' then '.join(used)} in call order, the rest spilling "
               f"to the next nearest cluster")
    _pin(prob, counts)
    for s, c in prob.pinned.items():
        where[s] = c
    for name, k in (min_clusters or {}).items():
        i = app.names.index(name)
        if i in prob.pinned or k <= 1:
            continue
        order = sorted(range(prob.C), key=lambda j: (j != where[i], fed.rtt_ms[home, j], -free[j]))
        counts[i, :] = 0
        for cl, n in static_weight_division(app.services[i].replicas, {fed.names[j]: 1 for j in order[:k]}).items():
            counts[i, fed.index(cl)] = n
    load = (counts * np.array([s.cpu_per_replica for s in app.services])[:, None]).sum(axis=0)
    if np.any(load > prob.capacity + 1e-9):
        raise FederationError(f"nearest-fit: the spread overfills {[fed.names[j] for j in np.flatnonzero(load > prob.capacity + 1e-9)]}")
    return _plan_from_counts(prob, counts, "nearest-fit", why)


BASELINES = {"nearest-fit": plan_nearest_fit, "all-in-one": plan_all_in_one, "karmada-static": plan_karmada_static,
             "karmada-dynamic": plan_karmada_dynamic, "karmada-spread": plan_karmada_spread}

BASELINE_DESCRIPTIONS = {
    "nearest-fit": "the whole application in the nearest cluster (RTT from the users) that can hold it; when none can, "
                   "fill the nearest in call order and spill the rest to the next nearest (next-fit)",
    "all-in-one": "the whole application in the users' cluster if it fits, else in the largest cluster (capacity ignored)",
    "karmada-static": "Karmada staticWeightList, weight 1 per member, Webster division as karmada-scheduler",
    "karmada-dynamic": "Karmada dynamicWeight AvailableReplicas, Webster division as karmada-scheduler",
    "karmada-spread": "Karmada spreadConstraints (cluster, min = max = the required spread), equal weights over the selected clusters",
}


def run_baselines(app: Application, fed: Federation, **kw) -> tuple[dict[str, Plan], dict[str, str]]:
    """Every baseline of :data:`BASELINES`: ``(plans, unschedulable)`` where ``unschedulable``
    maps a baseline that cannot place the application (nearest-fit with no cluster that holds
    it, Karmada dynamic weights out of room) to the reason."""
    plans, why = {}, {}
    for name, fn in BASELINES.items():
        try:
            plans[name] = fn(app, fed, **kw)
        except FederationError as err:
            why[name] = str(err)
    return plans, why


def brute_force(app: Application, fed: Federation, *, contention_weight: float = 1.0,
                pinned: dict[str, str] | None = None, client: str | dict[str, float] | None = None,
                routing: str = "proportional") -> tuple[float, np.ndarray]:
    """Exhaustive search over all ``C**S`` whole-service assignments that fit (tests only);
    returns ``(best total ms, assignment)``; raises :class:`FederationError` if none fits."""
    prob = build_problem(app, fed, contention_weight=contention_weight, pinned=pinned, client=client, routing=routing)
    best, arg = np.inf, None
    for a in itertools.product(range(prob.C), repeat=prob.S):
        a = np.array(a)
        if any(a[s] != c for s, c in prob.pinned.items()):
            continue
        load = np.zeros(prob.C)
        np.add.at(load, a, prob.demand)
        if np.any(load > prob.capacity + 1e-9):
            continue
        cst = evaluate(prob, assignment_matrix(a, prob.C)).total_ms
        if cst < best:
            best, arg = cst, a
    if arg is None:
        raise FederationError("no assignment fits")
    return best, arg
