"""Karmada's replica division, ported from Karmada's source (Apache-2.0), so the Karmada
baselines divide replicas exactly as ``karmada-scheduler`` does.

Source: ``karmada-io/karmada`` ``pkg/util/helper/webstermethod.go``, function
``AllocateWebsterSeats`` with ``WebsterPriorityQueue.Less`` (Karmada 1.16 series). Since the
static-weight dispenser was migrated onto it (karmada#6793, for karmada#6735) and then the
dynamic-weight and aggregated assignments (karmada#6837; umbrella karmada#6739), Karmada divides
``Divided`` replicas by the Webster / Sainte-Laguë divisor method: each replica in turn goes to
the cluster with the highest priority ``votes / (2 * seats + 1)``; equal priorities go to the
cluster with fewer seats, then to the lexicographically smaller name. ``votes`` are the static
weights (``staticWeightList``, clusters matched with weight 0 left out; all weights 1 when none
is positive: ``getStaticWeightInfoList`` in ``pkg/scheduler/core/division_algorithm.go``) or,
for ``dynamicWeight: AvailableReplicas``, each cluster's available replicas (how many more
replicas of the workload fit in it), and the dynamic division refuses a workload whose replicas
exceed the clusters' total available replicas (``dynamicDivideReplicas``: "Clusters available
replicas %d are not enough to schedule").

The earlier division here (floor of the quota, remainders to the largest fractions) was the
Hamilton / largest-remainder method, which is not what Karmada shipped either (before the
migration Karmada's ``Dispenser.TakeByWeight`` in ``pkg/util/helper/binding.go`` gave the
remainders one each in weight order, not by fraction). Neither is house-monotone: adding a
replica can take one away from a cluster (karmada#6735; the Alabama paradox of apportionment).
A divisor method such as Webster's is house-monotone (Balinski & Young, Fair Representation,
1982, ch. 6).

Hand-worked: karmada#6424 (2 replicas, weights a=2, b=1): priorities 2 and 1, a takes the
first (now 2/3), then b's 1 beats 2/3: a=1, b=1 (the old dispenser gave a=2, b=0).
"""
from __future__ import annotations

import heapq
from collections.abc import Mapping

from .model import FederationError


def webster_seats(new_seats: int, votes: Mapping[str, int], initial: Mapping[str, int] | None = None) -> dict[str, int]:
    """Allocate ``new_seats`` by the Webster method on top of ``initial`` seats (Karmada
    ``AllocateWebsterSeats``). ``votes``: name -> integer weight >= 0 (a party only in
    ``initial`` has 0 votes: priority 0, it gets seats only when every other priority is 0 too).
    Priorities are compared exactly (cross-multiplied integers), so float rounding never decides
    a tie. Returns name -> seats for every party named in ``votes`` or ``initial``.

    Raises :class:`FederationError` for negative seats, votes or initial assignments, or seats to
    allocate with no party."""
    if new_seats < 0:
        raise FederationError(f"seats to allocate must be >= 0, got {new_seats}")
    parties: dict[str, list[int]] = {}
    for n, s in (initial or {}).items():
        if int(s) < 0:
            raise FederationError(f"initial seats must be >= 0, got {n}={s}")
        parties[n] = [0, int(s)]
    for n, v in votes.items():
        if int(v) != v or v < 0:
            raise FederationError(f"votes must be integers >= 0, got {n}={v}")
        parties.setdefault(n, [0, 0])[0] = int(v)
    if new_seats and not parties:
        raise FederationError("no cluster to allocate replicas to")

    class _Key:
        """Heap order = Karmada ``WebsterPriorityQueue.Less``: higher v/(2s+1) first, then fewer
        seats, then smaller name."""

        __slots__ = ("name", "v", "s")

        def __init__(self, name: str, v: int, s: int) -> None:
            self.name, self.v, self.s = name, v, s

        def __lt__(self, o: "_Key") -> bool:
            left, right = self.v * (2 * o.s + 1), o.v * (2 * self.s + 1)
            if left != right:
                return left > right
            if self.s != o.s:
                return self.s < o.s
            return self.name < o.name

    heap = [_Key(n, v, s) for n, (v, s) in parties.items()]
    heapq.heapify(heap)
    for _ in range(new_seats):
        top = heapq.heappop(heap)
        heapq.heappush(heap, _Key(top.name, top.v, top.s + 1))
    return {k.name: k.s for k in sorted(heap, key=lambda k: k.name)}


def static_weight_division(replicas: int, weights: Mapping[str, int], clusters: list[str] | None = None) -> dict[str, int]:
    """Karmada ``staticWeightList`` division of ``replicas`` over ``clusters`` (default: the
    clusters named in ``weights``). Clusters with weight 0 (or not listed) get nothing; when no
    weight is positive every cluster counts with weight 1 (``getStaticWeightInfoList``).
    Returns cluster -> replicas, zero-replica clusters omitted. Raises :class:`FederationError`
    for negative or non-integer weights or an empty cluster list."""
    clusters = list(weights) if clusters is None else list(clusters)
    if not clusters:
        raise FederationError("static weights need at least one cluster")
    votes = {c: weights.get(c, 0) for c in clusters}
    for c, w in votes.items():
        if int(w) != w or w < 0:
            raise FederationError(f"static weights must be integers >= 0 (Karmada int64), got {c}={w}")
    votes = {c: int(w) for c, w in votes.items() if w > 0} or {c: 1 for c in clusters}
    return {c: n for c, n in webster_seats(replicas, votes).items() if n > 0}


def dynamic_weight_division(replicas: int, available_replicas: Mapping[str, int]) -> dict[str, int]:
    """Karmada ``dynamicWeight: AvailableReplicas`` division (first scheduling): the votes are
    each cluster's available replicas. Returns cluster -> replicas, zeros omitted. Raises
    :class:`FederationError` when the clusters' available replicas sum to less than
    ``replicas`` (Karmada's ``UnschedulableError``) or a count is negative."""
    for c, a in available_replicas.items():
        if int(a) != a or a < 0:
            raise FederationError(f"available replicas must be integers >= 0, got {c}={a}")
    total = sum(int(a) for a in available_replicas.values())
    if total < replicas:
        raise FederationError(f"clusters available replicas {total} are not enough to schedule {replicas}")
    return {c: n for c, n in webster_seats(replicas, {c: int(a) for c, a in available_replicas.items()}).items() if n > 0}
