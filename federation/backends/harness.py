"""Micro-benchmark harness: runs an application for real on this machine, as a federation.

* Each **member cluster** is a CPU set: cluster ``k`` gets CPU ``k mod n`` of this process's
  affinity mask unless ``cpu_map`` says otherwise (``os.sched_setaffinity`` in each process).
  This machine has 2 cores, so with 3 or more clusters some clusters share a core: their
  processes (and injected contention) then compete with each other, which the numbers include.
  Network namespaces per cluster are not used: every process listens on 127.0.0.1, and
  isolation between clusters comes only from the proxies below.
* Each **service** is one process per cluster holding its replicas
  (:mod:`federation.backends.service`; replicas of a service in one cluster are one process).
  Which cluster's process a caller calls follows the federation's **routing**, computed by the
  cost model's own :func:`federation.core.cost.route_row` so the world and the model agree:
  ``"proportional"`` (default), with probability proportional to the replica counts;
  ``"locality"``, the process in the caller's own cluster when there is one, else the nearest
  cluster's (by RTT; ties by replica count), as Istio locality failover / Cilium
  ``affinity: local`` route.
* Every call that **crosses clusters** goes through a delay proxy
  (:mod:`federation.backends.proxy`) with one-way delay ``rtt[i, j] * latency_scale / 2`` (and
  optionally the link's bandwidth); calls inside a cluster go straight over loopback.
* **Contention** ``rho`` in a cluster is injected with ``stress-ng --taskset <cpus>`` (Debian
  package ``stress-ng``) as ``k = rho / (1 - rho)`` CPU hogs per CPU (``ceil(k)`` stressors at
  ``--cpu-load 100 k / ceil(k)``): under Linux's fair-share scheduler a thread competing with
  ``k`` busy hogs gets ``1 / (1 + k) = 1 - rho`` of the CPU, so the others take the fraction
  ``rho`` and a call's CPU time stretches by ``1 / (1 - rho)``, the slowdown the cost model
  (:mod:`federation.core.cost`) assumes.
* A **load generator** (threads in this process) sends requests to the entry service at a fixed
  rate, open loop (each request's latency counts from its scheduled send time, so queueing behind
  slow requests is measured, not hidden: Tene's "coordinated omission"), from the ``client``
  cluster (through a proxy if the entry runs elsewhere), and reports percentiles and throughput.
  Users in several regions (``client`` = ``{cluster: share}``): each request comes from one
  region, by share, and goes to the entry the routing picks from that region (under locality,
  the region's own entry); the result also gives each region's percentiles.

Every process the harness starts is in its own process group and is stopped (SIGTERM, then
SIGKILL) when the :class:`Harness` context exits: on success, on error, on KeyboardInterrupt,
and at interpreter exit (``atexit``); and should the harness process itself be killed outright,
each child gets SIGTERM from the kernel (:mod:`federation.backends.lifeline`).
"""
from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from federation.core.model import Application, Federation, FederationError

REPO = Path(__file__).resolve().parents[2]


class HarnessError(RuntimeError):
    """A harness process failed to start, or stress-ng is missing."""


_LIVE: "set[Supervisor]" = set()


@atexit.register
def _stop_all_at_exit() -> None:
    for sup in list(_LIVE):
        sup.stop()


class Supervisor:
    """Starts processes in their own sessions and stops every one of them."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        _LIVE.add(self)

    def start(self, cmd: list[str], *, wait_ready: bool = True, timeout: float = 20.0) -> tuple[subprocess.Popen, int | None]:
        """Start ``cmd``; if ``wait_ready``, wait for its ``READY <port>`` line and return the port."""
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
        p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, start_new_session=True, text=True)
        self.procs.append(p)
        if not wait_ready:
            return p, None
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if sel.select(timeout=0.2):
                    line = p.stdout.readline()
                    if line.startswith("READY "):
                        return p, int(line.split()[1])
                    if line == "" and p.poll() is not None:
                        break
                elif p.poll() is not None:
                    break
        finally:
            sel.close()
        err = p.stderr.read()[-2000:] if p.poll() is not None else ""
        raise HarnessError(f"{' '.join(cmd[:4])}... did not become ready (exit {p.poll()}): {err}")

    def stop(self) -> None:
        """SIGTERM every process group, wait up to 3 s, then SIGKILL what is left."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 3.0
        for p in self.procs:
            try:
                p.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for p in self.procs:
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        self.procs.clear()
        _LIVE.discard(self)


def start_proxy(sup: Supervisor, target_port: int, one_way_ms: float, bandwidth_mbps: float | None = None) -> int:
    """Start a delay proxy to ``127.0.0.1:target_port``; returns its listening port."""
    cmd = [sys.executable, "-m", "federation.backends.proxy", "--target", f"127.0.0.1:{target_port}", "--one-way-ms", f"{one_way_ms:.6f}",
           "--parent-pid", str(os.getpid())]
    if bandwidth_mbps:
        cmd += ["--bandwidth-mbps", str(bandwidth_mbps)]
    return sup.start(cmd)[1]


def stress_args(n_cpus: int, contention: float) -> tuple[int, int]:
    """``(stressors, cpu_load_percent)`` giving ``k = rho / (1 - rho)`` hogs per CPU (see module
    docstring). Raises :class:`FederationError` unless ``0 < rho < 1``."""
    if not (0.0 < contention < 1.0):
        raise FederationError(f"contention must be in (0, 1), not {contention}")
    k = contention / (1.0 - contention)
    per_cpu = int(np.ceil(k - 1e-9))
    return n_cpus * per_cpu, int(round(100.0 * k / per_cpu))


def start_stress(sup: Supervisor, cpus: list[int], contention: float) -> subprocess.Popen:
    """Start ``stress-ng`` on ``cpus`` so that other load takes the fraction ``contention`` of
    them (see :func:`stress_args`)."""
    exe = shutil.which("stress-ng")
    if exe is None:
        raise HarnessError("stress-ng is not installed (Debian: apt-get install -y stress-ng)")
    n, load = stress_args(len(cpus), contention)
    cmd = [sys.executable, "-m", "federation.backends.lifeline", str(os.getpid()), exe, "--cpu", str(n), "--cpu-load", str(load),
           "--taskset", ",".join(map(str, cpus)), "--timeout", "3600", "--quiet"]
    return sup.start(cmd, wait_ready=False)[0]


def measure_rtt(port: int, n: int = 20, payload_bytes: int = 0) -> list[float]:
    """Round-trip times (ms) of ``n`` sequential calls to an HTTP service on ``127.0.0.1:port``
    (a probe: through a proxy port it measures the link)."""
    from federation.backends.service import _Pool

    pool = _Pool()
    out = []
    body = b"x" * payload_bytes
    pool.call("127.0.0.1", port, body)  # connect + warm up
    for _ in range(n):
        t = time.perf_counter()
        pool.call("127.0.0.1", port, body)
        out.append((time.perf_counter() - t) * 1000.0)
    return out


@dataclass
class LoadResult:
    """Latency percentiles (ms) of the measured window, throughput (completed OK requests per
    second of the window), and counts. ``contention``: per cluster, the target and what the
    application saw during the run (:mod:`federation.backends.procstat`; filled by
    :meth:`Harness.run_load`). ``by_region``: with labelled endpoints (users' regions), per
    label ``{sent, ok, p50_ms, p95_ms, mean_ms}`` of the requests from there."""

    rate_rps: float
    duration_s: float
    sent: int
    ok: int
    errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    throughput_rps: float
    contention: dict = field(default_factory=dict)
    by_region: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _summary(lats_ms: np.ndarray) -> dict:
    if not len(lats_ms):
        return {"p50_ms": float("nan"), "p95_ms": float("nan"), "p99_ms": float("nan"), "mean_ms": float("nan")}
    return {"p50_ms": float(np.percentile(lats_ms, 50)), "p95_ms": float(np.percentile(lats_ms, 95)),
            "p99_ms": float(np.percentile(lats_ms, 99)), "mean_ms": float(lats_ms.mean())}


def open_loop(endpoints: list[tuple], *, rate_rps: float, duration_s: float, warmup_s: float = 0.5,
              request_bytes: int = 256, seed: int = 0, max_workers: int = 64) -> LoadResult:
    """Send requests at ``rate_rps`` for ``warmup_s + duration_s`` seconds to ``endpoints``
    (``[(port, weight)]`` or ``[(port, weight, label)]`` on 127.0.0.1, each request to one
    endpoint drawn by weight); only requests scheduled after the warm-up count. With labels the
    result's ``by_region`` summarises each label's requests. Raises :class:`FederationError` for
    a non-positive rate or duration."""
    from federation.backends.service import _Pool

    if rate_rps <= 0 or duration_s <= 0:
        raise FederationError("rate_rps and duration_s must be > 0")
    rng = np.random.default_rng(seed)
    pool = _Pool()
    body = b"x" * request_bytes
    n = int(round(rate_rps * (warmup_s + duration_s)))
    picks = rng.choice(len(endpoints), size=n, p=np.array([e[1] for e in endpoints]) / sum(e[1] for e in endpoints))
    results: list[tuple[float, float, bool, object]] = []
    lock = threading.Lock()

    def one(t_sched: float, port: int, label) -> None:
        try:
            ok = pool.call("127.0.0.1", port, body, timeout=60.0) == 200
        except OSError:
            ok = False
        lat = time.perf_counter() - t_sched
        with lock:
            results.append((t_sched, lat, ok, label))

    t0 = time.perf_counter() + 0.05
    with ThreadPoolExecutor(max_workers=max_workers) as ex:
        for k in range(n):
            t_sched = t0 + k / rate_rps
            d = t_sched - time.perf_counter()
            if d > 0:
                time.sleep(d)
            ep = endpoints[int(picks[k])]
            ex.submit(one, t_sched, ep[0], ep[2] if len(ep) > 2 else None)
    window = [r for r in results if r[0] >= t0 + warmup_s]
    lats = np.array([lat for _, lat, ok, _ in window if ok]) * 1000.0
    oks = len(lats)
    q = _summary(lats)
    res = LoadResult(rate_rps, duration_s, len(window), oks, len(window) - oks, q["p50_ms"], q["p95_ms"], q["p99_ms"],
                     q["mean_ms"], oks / duration_s)
    labels = sorted({e[2] for e in endpoints if len(e) > 2}, key=str)
    for lab in labels:
        mine = [r for r in window if r[3] == lab]
        ok_lats = np.array([lat for _, lat, ok, _ in mine if ok]) * 1000.0
        res.by_region[str(lab)] = {"sent": len(mine), "ok": len(ok_lats), **_summary(ok_lats)}
    return res


class Harness:
    """Context manager that deploys ``app`` with ``replicas`` (service -> {cluster: count}) on
    ``fed`` and tears it all down on exit.

    ``client``: cluster the load comes from, or ``{cluster: share}`` for users in several
    regions (each request comes from one of them by share; default: the entry's first cluster).
    ``routing``: ``"proportional"`` or ``"locality"``, which replica each call and each region's
    users reach (module docstring; :func:`federation.core.cost.route_row`).
    ``latency_scale``: multiplies every RTT (1 = the federation's real RTTs).
    ``work_scale`` / ``payload_scale``: multiply CPU work and payload sizes (to keep runs short).
    ``bandwidth``: shape cross-cluster links to the federation's bandwidth.
    ``contention``: inject each cluster's contention with stress-ng.
    ``cpu_map``: cluster name -> CPU ids (default round-robin over this process's CPUs).
    Raises :class:`FederationError` for a placement that names unknown services/clusters and
    :class:`HarnessError` when a process does not start (everything started is stopped first).
    """

    def __init__(self, app: Application, fed: Federation, replicas: dict[str, dict[str, int]], *, client: str | None = None,
                 latency_scale: float = 1.0, work_scale: float = 1.0, payload_scale: float = 1.0,
                 bandwidth: bool = False, contention: bool = True, cpu_map: dict[str, list[int]] | None = None,
                 routing: str = "proportional") -> None:
        for s in app.names:
            if s not in replicas or not replicas[s] or any(n <= 0 for n in replicas[s].values()):
                raise FederationError(f"placement has no replicas for service {s!r}")
            for c in replicas[s]:
                fed.index(c)
        self.app, self.fed, self.replicas = app, fed, replicas
        from federation.core.cost import check_routing, client_shares

        self.routing = check_routing(routing)
        self.client = client or sorted(replicas[app.entry])[0]
        self.client_shares = client_shares(self.client)
        for k in self.client_shares:
            fed.index(k)
        self.latency_scale, self.work_scale, self.payload_scale = latency_scale, work_scale, payload_scale
        self.bandwidth, self.contention = bandwidth, contention
        cpus = sorted(os.sched_getaffinity(0))
        self.cpu_map = {c.name: [cpus[k % len(cpus)]] for k, c in enumerate(fed.clusters)}
        for name, ids in (cpu_map or {}).items():
            fed.index(name)
            if not ids or not set(ids) <= set(cpus):
                raise FederationError(f"cpu_map[{name!r}] = {ids} must be a non-empty subset of this process's CPUs {cpus}")
        self.cpu_map.update(cpu_map or {})
        self.sup = Supervisor()
        self.ports: dict[tuple[str, str], int] = {}
        self._proxies: dict[tuple[str, str, str], int] = {}
        self.entry_endpoints: list[tuple[int, float, str]] = []
        self.service_pids: dict[str, list[int]] = {c.name: [] for c in fed.clusters}
        self.hog_pids: dict[str, int] = {}

    def _endpoint(self, service: str, at: str, frm: str) -> int:
        if at == frm:
            return self.ports[(service, at)]
        key = (service, at, frm)
        if key not in self._proxies:
            i, j = self.fed.index(frm), self.fed.index(at)
            bw = float(self.fed.bandwidth_mbps[i, j]) if self.bandwidth else None
            self._proxies[key] = start_proxy(self.sup, self.ports[(service, at)], self.fed.rtt_ms[i, j] * self.latency_scale / 2.0, bw)
        return self._proxies[key]

    def __enter__(self) -> "Harness":
        from federation.core.cost import route_row

        try:
            for c in self.fed.clusters:
                if self.contention and c.contention > 0:
                    self.hog_pids[c.name] = start_stress(self.sup, self.cpu_map[c.name], c.contention).pid
            for s in reversed(self.app.topological_order()):
                svc = self.app.service(s)
                # response = the half of each incoming edge's payload that flows back
                incoming = [e.payload_bytes for e in self.app.edges if e.callee == s]
                resp = int(self.payload_scale * (max(incoming) if incoming else 2048) / 2)
                for c, _n in sorted(self.replicas[s].items()):
                    down = []
                    for e in self.app.downstream(s):
                        eps = [["127.0.0.1", self._endpoint(e.callee, at, c), w]
                               for at, w in sorted(route_row(self.fed, self.replicas[e.callee], c, self.routing).items())]
                        down.append({"name": e.callee, "calls": e.calls, "request_bytes": int(self.payload_scale * e.payload_bytes / 2), "endpoints": eps})
                    cfg = {"name": s, "work_ms": svc.work_ms * self.work_scale, "response_bytes": resp,
                           "cpus": self.cpu_map[c], "downstream": down, "parent_pid": os.getpid()}
                    proc, port = self.sup.start([sys.executable, "-m", "federation.backends.service", json.dumps(cfg)])
                    self.ports[(s, c)] = port
                    self.service_pids[c].append(proc.pid)
            self.entry_endpoints = [(self._endpoint(self.app.entry, at, k), share * w, k)
                                    for k, share in sorted(self.client_shares.items())
                                    for at, w in sorted(route_row(self.fed, self.replicas[self.app.entry], k, self.routing).items())]
        except BaseException:
            self.sup.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.sup.stop()

    def run_load(self, *, rate_rps: float, duration_s: float, warmup_s: float = 0.5, seed: int = 0) -> LoadResult:
        """Drive the deployed application open loop (see :func:`open_loop`); the result's
        ``contention`` gives, per cluster with replicas or hogs, the target contention and the
        achieved one (:mod:`federation.backends.procstat`) over the whole run."""
        from federation.backends import procstat

        watched = [c.name for c in self.fed.clusters if self.service_pids[c.name] or c.name in self.hog_pids]
        before = {c: procstat.snapshot(self.service_pids[c], self.hog_pids.get(c)) for c in watched}
        res = open_loop(self.entry_endpoints, rate_rps=rate_rps, duration_s=duration_s, warmup_s=warmup_s, seed=seed,
                        request_bytes=int(2048 * self.payload_scale / 2))
        for c in watched:
            got = procstat.achieved(before[c], procstat.snapshot(self.service_pids[c], self.hog_pids.get(c)), len(self.cpu_map[c]))
            target = self.fed.clusters[self.fed.index(c)].contention if self.contention else 0.0
            res.contention[c] = {"target": target, **got}
        return res


def run_scenario(app: Application, fed: Federation, replicas: dict[str, dict[str, int]], *, rate_rps: float = 5.0,
                 duration_s: float = 3.0, warmup_s: float = 0.5, seed: int = 0, **harness_kw) -> LoadResult:
    """Deploy, drive, tear down; returns the :class:`LoadResult`."""
    with Harness(app, fed, replicas, **harness_kw) as h:
        return h.run_load(rate_rps=rate_rps, duration_s=duration_s, warmup_s=warmup_s, seed=seed)


def probe_cpu_slowdown(cpus: list[int], *, burn_ms: float = 20.0, repeats: int = 5) -> float:
    """Contention probe: wall time / CPU time of ``burn_ms`` of busy work pinned to ``cpus``
    (median of ``repeats``), measured in a thread of this process. 1.0 on an idle CPU; on a CPU
    where other load takes the fraction ``rho`` of the time it is about ``1 / (1 - rho)``."""
    from federation.backends.service import burn_cpu

    out: list[float] = []

    def run() -> None:
        os.sched_setaffinity(0, set(cpus))  # pid 0 = this thread only
        for _ in range(repeats):
            t, c = time.perf_counter(), time.thread_time()
            burn_cpu(burn_ms)
            out.append((time.perf_counter() - t) / max(time.thread_time() - c, 1e-9))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join()
    return float(np.median(out))


def probed_contention(fed: Federation, cpu_map: dict[str, list[int]] | None = None, **kw) -> dict[str, float]:
    """Each cluster's effective contention: the probed background slowdown ``b`` of its CPU set
    combined with its injected contention ``rho``: total slowdown ``b / (1 - rho)``, returned as
    ``1 - (1 - rho) / b`` (capped at 0.95)."""
    cpus = sorted(os.sched_getaffinity(0))
    cmap = {c.name: [cpus[k % len(cpus)]] for k, c in enumerate(fed.clusters)}
    cmap.update(cpu_map or {})
    cache: dict[tuple[int, ...], float] = {}
    out = {}
    for c in fed.clusters:
        key = tuple(cmap[c.name])
        if key not in cache:
            cache[key] = max(1.0, probe_cpu_slowdown(list(key), **kw))
        out[c.name] = min(0.95, 1.0 - (1.0 - c.contention) / cache[key])
    return out


def measured_contention(fed: Federation, cpu_map: dict[str, list[int]] | None = None, *, burst_ms: float = 20.0,
                        gap_ms: float = 50.0, bursts: int = 20) -> dict[str, float]:
    """The contention a request's work actually sees in each cluster, measured: with every
    cluster's ``stress-ng`` hogs running (as the harness injects them), a thread pinned to the
    cluster's CPU set does ``bursts`` bursts of ``burst_ms`` CPU time ``gap_ms`` apart, and the
    median stretch ``b`` = wall / CPU time of a burst gives ``1 - 1/b`` (0 to 0.95). Includes
    whatever else runs on those CPUs. Everything started is stopped before it returns. Raises
    :class:`HarnessError` without stress-ng.

    ``burst_ms`` should be the CPU time one request needs (the scenarios pass the application's
    ``sum(visits x work_ms)``, 28.8 ms for hotelReservation): the kernel's scheduler favours a
    thread that wakes after sleeping (CFS sleeper placement, EEVDF lag), so short bursts run
    ahead of CPU-bound hogs and see almost none of their share. Measured on this machine at a
    configured 0.75 on one CPU: 2 ms bursts 20 ms apart 0.002; 14 bursts of 2 ms 0.2 ms apart
    0.13; one 28.8 ms burst 0.49, beside 0.52-0.61 wait share of the application's own threads
    from /proc in the harness (docs/engines/federation.md). How much a short burst is favoured
    depends on the machine (the CI machine measured 0.48 for 2 ms bursts); a request-sized burst
    measures about the processor share on both."""
    from federation.backends.service import burn_cpu

    cpus = sorted(os.sched_getaffinity(0))
    cmap = {c.name: [cpus[k % len(cpus)]] for k, c in enumerate(fed.clusters)}
    cmap.update(cpu_map or {})
    sup = Supervisor()
    try:
        for c in fed.clusters:
            if c.contention > 0:
                start_stress(sup, cmap[c.name], c.contention)
        time.sleep(0.3)
        cache: dict[tuple[int, ...], float] = {}
        out = {}
        for c in fed.clusters:
            key = tuple(cmap[c.name])
            if key not in cache:
                stretch: list[float] = []

                def run(ids=key) -> None:
                    os.sched_setaffinity(0, set(ids))
                    for _ in range(bursts):
                        t, cp = time.perf_counter(), time.thread_time()
                        burn_cpu(burst_ms)
                        stretch.append((time.perf_counter() - t) / max(time.thread_time() - cp, 1e-9))
                        time.sleep(gap_ms / 1000.0)

                th = threading.Thread(target=run, daemon=True)
                th.start()
                th.join()
                cache[key] = float(np.median(stretch))
            out[c.name] = round(float(min(0.95, max(0.0, 1.0 - 1.0 / cache[key]))), 4)
        return out
    finally:
        sup.stop()


def with_measured_contention(fed: Federation, measured: dict[str, float]) -> Federation:
    """``fed`` with each cluster's contention replaced by the measured one, keeping its available
    cores (the capacity left by other tenants is a fact of the cluster; only the slowdown they
    cause is measured): ``capacity' = capacity (1 - rho) / (1 - rho_measured)``."""
    ms = []
    for c in fed.clusters:
        r = measured.get(c.name, c.contention)
        ms.append(type(c)(c.name, c.available_cores / (1.0 - r), r, c.region))
    return Federation(ms, fed.rtt_ms, fed.bandwidth_mbps)
