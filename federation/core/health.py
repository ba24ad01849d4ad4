"""Member-cluster health and re-planning around an unreachable member.

* :class:`HealthTracker`: each member's state, ``ready`` or ``unreachable``, from a stream of
  probe results, as Karmada's cluster status controller does
  (``pkg/controllers/status/cluster_status_controller.go``: a health probe of the member's API
  server; the Ready condition only changes after the new result has held for
  ``--cluster-success-threshold`` / ``--cluster-failure-threshold``, 30 s each by default), so
  one lost probe does not flap the state. Before its first probe a member is ``unknown``.
* :func:`replan`: plan again while some members are unreachable. Without failover, replicas on
  an unreachable member stay where they are and nothing new goes there (karmada#1640: a member
  the control plane cannot reach may still be serving; evicting its replicas on a network
  partition is the failure mode that issue reports). With ``failover=True`` they move to
  reachable members. Either way the result carries the plan diff.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .model import Application, Federation, FederationError, MemberCluster
from .cost import build_problem
from .orchestrator import Plan, _plan_from_counts, plan

READY, UNREACHABLE, UNKNOWN = "ready", "unreachable", "unknown"


@dataclass
class HealthTracker:
    """Per-member state from probe results. ``failure_threshold_s`` / ``success_threshold_s``:
    how long (s) a failing / succeeding probe result must persist before the state changes
    (Karmada defaults: 30 s). Raises :class:`FederationError` for a negative threshold."""

    failure_threshold_s: float = 30.0
    success_threshold_s: float = 30.0
    _state: dict[str, str] = field(default_factory=dict)
    _pending: dict[str, tuple[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.failure_threshold_s < 0 or self.success_threshold_s < 0:
            raise FederationError("health thresholds must be >= 0 s")

    def observe(self, cluster: str, ok: bool, now: float) -> str:
        """Record one probe of ``cluster`` at time ``now`` (s, monotonic) and return its state.
        The first probe sets the state directly; later a different result must hold for the
        threshold (measured from the first probe that disagreed) before the state follows."""
        seen = READY if ok else UNREACHABLE
        cur = self._state.get(cluster)
        if cur is None:
            self._state[cluster] = seen
            return seen
        if seen == cur:
            self._pending.pop(cluster, None)
            return cur
        since = self._pending.setdefault(cluster, (seen, now))[1]
        if self._pending[cluster][0] != seen:
            self._pending[cluster] = (seen, now)
            since = now
        if now - since >= (self.failure_threshold_s if seen == UNREACHABLE else self.success_threshold_s):
            self._state[cluster] = seen
            self._pending.pop(cluster, None)
        return self._state[cluster]

    def state(self, cluster: str) -> str:
        """``ready``, ``unreachable`` or ``unknown`` (never probed)."""
        return self._state.get(cluster, UNKNOWN)

    def unreachable(self) -> set[str]:
        return {c for c, s in self._state.items() if s == UNREACHABLE}


def plan_diff(old: Plan, new: Plan) -> list[dict]:
    """Services whose replicas changed: ``[{service, from, to}]`` sorted by service, where
    ``from`` / ``to`` map cluster -> replicas."""
    out = []
    for s in sorted(set(old.replicas) | set(new.replicas)):
        a, b = old.replicas.get(s, {}), new.replicas.get(s, {})
        if a != b:
            out.append({"service": s, "from": dict(sorted(a.items())), "to": dict(sorted(b.items()))})
    return out


def replan(app: Application, fed: Federation, previous: Plan, unreachable: set[str], *, failover: bool = False,
           pinned: dict[str, str] | None = None, **kw) -> tuple[Plan, list[dict]]:
    """Plan ``app`` again on ``fed`` while the members in ``unreachable`` cannot be reached;
    returns ``(plan, diff against previous)``.

    Without ``failover``: every service with replicas on an unreachable member keeps its
    previous placement (all of it, so a split service keeps its split), the unreachable members
    take nothing new (their capacity is what the kept replicas use), and the other services are
    planned around them. With ``failover``: unreachable members get no replicas at all and
    everything is planned on the reachable ones. ``kw`` goes to
    :func:`federation.core.orchestrator.plan`. Raises :class:`FederationError` for an unknown
    member, a service pinned to an unreachable member under failover, or no room left."""
    for c in unreachable:
        fed.index(c)
    pinned = dict(pinned or {})
    kept = {s: dict(r) for s, r in previous.replicas.items() if set(r) & set(unreachable)} if not failover else {}
    if failover:
        bad = [s for s, c in pinned.items() if c in unreachable]
        if bad:
            raise FederationError(f"services {bad} are pinned to an unreachable member; failover cannot move them")
    svc = {s.name: s for s in app.services}
    used = {c: 0.0 for c in fed.names}
    for s, reps in kept.items():
        for c, n in reps.items():
            used[c] += n * svc[s].cpu_per_replica
    members = []
    for c in fed.clusters:
        if c.name in unreachable:
            avail = used[c.name] if not failover else 0.0
            cores = max(avail / (1.0 - c.contention), 1e-9)
            members.append(MemberCluster(c.name, cores, c.contention, c.region))
        else:
            members.append(c)
    work = Federation(members, fed.rtt_ms, fed.bandwidth_mbps)
    for s, reps in kept.items():
        if len(reps) == 1:
            pinned[s] = next(iter(reps))
    new = plan(app, work, pinned=pinned or None, **kw)
    if any(len(r) > 1 for r in kept.values()):  # split services keep their previous split exactly
        import numpy as np

        prob = build_problem(app, fed, pinned=None, client=kw.get("client"), contention_weight=kw.get("contention_weight", 1.0),
                             routing=kw.get("routing", "proportional"))
        counts = np.zeros((prob.S, prob.C), int)
        for i, s in enumerate(app.names):
            for c, n in (kept.get(s) or new.replicas[s]).items():
                counts[i, fed.index(c)] = n
        new = _plan_from_counts(prob, counts, new.method, "")
    new.method = new.method + ("+failover" if failover else "+keep-unreachable")
    why = f"failover from {sorted(unreachable)}" if failover else f"kept on unreachable {sorted(unreachable)} (karmada#1640)"
    for s in app.names:
        if s in kept:
            new.explanation[s] = f"{why}: stays on {sorted(kept[s])}"
        elif failover and set(previous.replicas.get(s, {})) & set(unreachable):
            new.explanation[s] = f"{why}: moved to {sorted(new.replicas[s])}. " + new.explanation.get(s, "")
    return new, plan_diff(previous, new)
