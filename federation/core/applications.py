"""Applications as service call graphs, derived from real deployment files.

Sources (vendored under ``data/``, see data/NOTICE.md):

* DeathStarBench hotelReservation and socialNetwork: ``docker-compose.yml`` (and for
  hotelReservation the Kubernetes manifests under ``kubernetes/`` for replicas and CPU requests);
* Sock Shop (Weaveworks microservices-demo): ``kubernetes/complete-demo.yaml`` plus
  ``docker-compose/docker-compose.yml``.

Derivation rule (nothing retyped; every service and every edge comes from these files):

1. **Services**: every docker-compose service and every Kubernetes ``Deployment`` (same name ->
   same service). Infrastructure that serves no user request is dropped: names or images
   containing ``consul``, ``jaeger``, ``zipkin``, ``load-test``, ``user-sim``, and Sock Shop's
   ``edge-router`` (the ingress in front of the entry; the load generator takes its place).
2. **Tier** by image: ``mongo``/``mysql``/``-db`` images -> ``db``; ``memcached``/``redis`` ->
   ``cache``; ``rabbitmq`` -> ``queue``; otherwise ``app``.
3. **Replicas** from compose ``deploy.replicas`` or Deployment ``spec.replicas`` (default 1);
   **CPU per replica** from the first container's ``resources.requests.cpu`` (``100m`` = 0.1
   core), else 0.1 core.
4. **Edges** caller -> callee, in this order:
   a. compose ``depends_on`` and ``links``;
   b. an environment variable (compose ``environment`` or Deployment ``env``) whose value names
      another service, alone or as ``host:port`` (Sock Shop's ``MONGO_HOST=user-db:27017``);
   c. a stateful service (db/cache/queue) still without a caller is owned by the application
      service with the same *stem*: the name minus the tokens ``db``, ``mongodb``, ``mongo``,
      ``memcached``, ``redis``, ``mysql``, ``service`` (``carts-db`` -> ``carts``,
      ``social-graph-redis`` -> ``social-graph-service``);
   d. the manifests carry no RPC edges among application services (DeathStarBench finds peers
      through Consul or its Thrift config; Sock Shop through DNS), so the **entry service calls
      every application service that still has no caller, once per request**. This is the one
      modelling assumption of the rule; it makes the graph a two-level fan-out of the real
      services with their real back ends.
   Services not reachable from the entry after (a)-(d) are dropped and listed in ``notes``.
5. **Per-call numbers** (modelling defaults, not measured; override per service/edge): CPU work
   per call app 2.0 ms, db 1.0 ms, cache 0.2 ms, queue 0.3 ms; payload per call (request +
   response) app 2 KiB, db 4 KiB, cache 1 KiB, queue 1 KiB; 1 call per call of the caller.

Besides those, :func:`batch_training` (parameter-server data-parallel training; payload = the
gradient and the updated parameters) and :func:`inference` (a latency-sensitive model-serving
pipeline) build the two other application types of the study, and :func:`video_analytics` a
pipeline whose edges differ six-fold in call rate (where a capacity split cuts it matters).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .model import Application, Edge, FederationError, Service

DATA = Path(__file__).resolve().parents[2] / "data"

INFRA_PATTERNS = ("consul", "jaeger", "zipkin", "load-test", "user-sim", "edge-router")
STEM_TOKENS = {"db", "mongodb", "mongo", "memcached", "redis", "mysql", "service"}
WORK_MS = {"app": 2.0, "db": 1.0, "cache": 0.2, "queue": 0.3}
PAYLOAD = {"app": 2048, "db": 4096, "cache": 1024, "queue": 1024}

# name -> (files relative to data/, entry service). The entry is the service user requests hit.
MANIFEST_APPS: dict[str, tuple[tuple[str, ...], str]] = {
    "hotelReservation": (("deathstarbench-workloads/hotelReservation/docker-compose.yml",
                          "deathstarbench-workloads/hotelReservation/kubernetes"), "frontend"),
    "socialNetwork": (("deathstarbench-workloads/socialNetwork/docker-compose.yml",), "nginx-thrift"),
    "sockshop": (("sockshop-workloads/kubernetes/complete-demo.yaml",
                  "sockshop-workloads/docker-compose/docker-compose.yml"), "front-end"),
}


def _tier(image: str, name: str) -> str:
    s = f"{image} {name}".lower()
    if "mongo" in s or "mysql" in s or re.search(r"-db\b", s) or name.endswith("-db"):
        return "db"
    if "memcached" in s or "redis" in s:
        return "cache"
    if "rabbitmq" in s:
        return "queue"
    return "app"


def _cpu(q: Any) -> float | None:
    if q is None:
        return None
    s = str(q)
    try:
        return float(s[:-1]) / 1000.0 if s.endswith("m") else float(s)
    except ValueError:
        return None


def _is_infra(name: str, image: str) -> bool:
    s = f"{name} {image}".lower()
    return any(p in s for p in INFRA_PATTERNS)


def _stem(name: str) -> str:
    return "-".join(t for t in name.lower().split("-") if t not in STEM_TOKENS)


def _env_values(env: Any) -> list[str]:
    if isinstance(env, dict):
        return [str(v) for v in env.values() if v is not None]
    out = []
    for item in env or []:
        if isinstance(item, str) and "=" in item:
            out.append(item.split("=", 1)[1])
        elif isinstance(item, dict) and "value" in item:
            out.append(str(item["value"]))
    return out


def _read_docs(path: Path) -> list[dict]:
    files = sorted(path.rglob("*.yaml")) + sorted(path.rglob("*.yml")) if path.is_dir() else [path]
    docs: list[dict] = []
    for f in files:
        try:
            with open(f) as fh:
                docs.extend(d for d in yaml.safe_load_all(fh) if isinstance(d, dict))
        except yaml.YAMLError as err:
            raise FederationError(f"{f}: not valid YAML: {err}") from None
    return docs


def application_from_manifests(paths: list[Path], entry: str, *, name: str = "") -> Application:
    """Build an :class:`Application` from docker-compose files and/or Kubernetes manifests by the
    module's derivation rule. Raises :class:`FederationError` when a file is missing or not
    YAML, or ``entry`` is not a service found there."""
    docs: list[dict] = []
    for p in paths:
        if not p.exists():
            raise FederationError(f"manifest {p} does not exist")
        docs += _read_docs(p)
    source = "; ".join(str(p.relative_to(DATA)) if p.is_relative_to(DATA) else str(p) for p in paths)
    return application_from_documents(docs, entry, name=name, source=source)


MAX_MANIFEST_BYTES = 2_000_000


def application_from_text(text: str, entry: str, *, name: str = "") -> Application:
    """An :class:`Application` from manifests given as text: one or more YAML documents, each a
    docker-compose file (a ``services:`` mapping) or a Kubernetes object (``Deployment``s are
    read, other kinds ignored), by the module's derivation rule. Raises
    :class:`FederationError` for text that is not YAML, larger than 2 MB, has no service, or
    lacks ``entry``."""
    if len(text.encode()) > MAX_MANIFEST_BYTES:
        raise FederationError(f"manifests larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError as err:
        raise FederationError(f"manifests are not valid YAML: {err}") from None
    if not any(isinstance(d.get("services"), dict) or d.get("kind") == "Deployment" for d in docs):
        raise FederationError("no docker-compose services and no Kubernetes Deployment in the manifests")
    try:
        return application_from_documents(docs, entry, name=name or entry, source="manifests given by the user")
    except FederationError:  # already says what is wrong (a ValueError too: not a type error)
        raise
    except (TypeError, ValueError, AttributeError) as err:  # e.g. replicas: "three"
        raise FederationError(f"manifests: a field has the wrong type ({err})") from None


def derived_graph(app: Application) -> dict:
    """The call graph for a user to confirm: services (tier, replicas, CPU request) and edges,
    each with ``how`` it was derived (``depends_on/links``, ``env``: read from the files;
    ``stem``, ``entry-fan-out``: inferred by the rule's assumptions) and ``inferred``."""
    how = {}
    for n in app.notes:
        if n.startswith("edge ") and ": " in n:
            pair, why = n[5:].split(": ", 1)
            how[tuple(pair.split("->", 1))] = why
    edges = []
    for e in app.edges:
        h = how.get((e.caller, e.callee), "given")
        edges.append({"caller": e.caller, "callee": e.callee, "calls": e.calls, "payload_bytes": e.payload_bytes, "how": h,
                      "inferred": h in ("stem", "entry-fan-out")})
    return {"name": app.name, "entry": app.entry, "source": app.source,
            "services": [{"name": s.name, "tier": s.tier, "replicas": s.replicas, "cpu_per_replica": s.cpu_per_replica,
                          "work_ms": s.work_ms} for s in app.services],
            "edges": edges, "notes": [n for n in app.notes if not n.startswith("edge ")],
            "rule": {"depends_on/links": "compose depends_on / links (read)", "env": "an environment variable names the service (read)",
                     "stem": "inferred: a data store owned by the application service with the same name stem",
                     "entry-fan-out": "inferred: the entry calls an application service that nothing else calls"}}


def application_from_documents(docs: list[dict], entry: str, *, name: str = "", source: str = "") -> Application:
    """The derivation rule over parsed YAML documents (see module docstring). Raises
    :class:`FederationError` when ``entry`` is not a service found there."""
    info: dict[str, dict[str, Any]] = {}
    raw_edges: list[tuple[str, str]] = []
    envs: dict[str, list[str]] = {}

    def svc(n: str) -> dict[str, Any]:
        return info.setdefault(n, {"image": "", "replicas": None, "cpu": None})

    for doc in docs:
        if "services" in doc and isinstance(doc["services"], dict):  # docker-compose
            for n, spec in doc["services"].items():
                spec = spec or {}
                s = svc(n)
                s["image"] = s["image"] or str(spec.get("image", ""))
                rep = (spec.get("deploy") or {}).get("replicas")
                if rep is not None and s["replicas"] is None:
                    s["replicas"] = int(rep)
                deps = spec.get("depends_on") or []
                deps = list(deps.keys()) if isinstance(deps, dict) else list(deps)
                links = [str(x).split(":")[0] for x in spec.get("links") or []]
                raw_edges += [(n, d) for d in deps + links]
                envs.setdefault(n, []).extend(_env_values(spec.get("environment")))
        elif doc.get("kind") == "Deployment":
            n = str((doc.get("metadata") or {}).get("name") or "")
            if not n:
                raise FederationError("a Deployment without metadata.name")
            s = svc(n)
            podspec = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
            ctrs = podspec.get("containers") or [{}]
            s["image"] = str(ctrs[0].get("image", "")) or s["image"]
            s["replicas"] = int((doc.get("spec") or {}).get("replicas", 1))
            cpu = _cpu(((ctrs[0].get("resources") or {}).get("requests") or {}).get("cpu"))
            if cpu is not None:
                s["cpu"] = cpu
            for c in ctrs:
                envs.setdefault(n, []).extend(_env_values(c.get("env")))

    keep = {n for n, s in info.items() if not _is_infra(n, s["image"])}
    if entry not in keep:
        raise FederationError(f"entry service {entry!r} not found in {source or 'the manifests'}; services: {', '.join(sorted(keep))}")
    tiers = {n: _tier(info[n]["image"], n) for n in keep}
    edges: dict[tuple[str, str], str] = {}
    ignored: list[str] = []
    for a, b in raw_edges:
        if a in keep and b in keep and a != b:
            edges.setdefault((a, b), "depends_on/links")
        elif a == b and a in keep:
            ignored.append(f"{a} depends on itself: ignored")
    for a, vals in envs.items():
        if a not in keep:
            continue
        for v in vals:
            host = v.split(":")[0].strip()
            if host in keep and host != a:
                edges.setdefault((a, host), "env")
    called = {b for _, b in edges}
    apps = sorted(n for n in keep if tiers[n] == "app")
    for n in sorted(keep):
        if tiers[n] != "app" and n not in called:
            owners = [a for a in apps if _stem(a) == _stem(n)]
            if len(owners) == 1:
                edges[(owners[0], n)] = "stem"
                called.add(n)
    for n in apps:
        if n != entry and n not in called:
            if _reaches(edges, n, entry):  # n calls the entry: a fan-out edge would close a cycle
                ignored.append(f"{n} calls the entry {entry} ({n} -> ... -> {entry}), so nothing the entry calls "
                               f"reaches it; is {n!r} the entry?")
                continue
            edges[(entry, n)] = "entry-fan-out"
            called.add(n)

    services = [Service(n, replicas=info[n]["replicas"] or 1, cpu_per_replica=info[n]["cpu"] or 0.1,
                        work_ms=WORK_MS[tiers[n]], tier=tiers[n]) for n in sorted(keep)]
    edge_list = [Edge(a, b, 1.0, PAYLOAD[tiers[b]]) for (a, b) in sorted(edges)]
    app = Application(name or entry, services, edge_list, entry, "microservices", source=source)
    full = set(app.names)
    app = app.reachable()
    dropped = sorted(full - set(app.names))
    app.notes = [f"edge {a}->{b}: {why}" for (a, b), why in sorted(edges.items()) if a in app.names]
    app.notes += ignored
    if dropped:
        app.notes.append("dropped (not reachable from the entry): " + ", ".join(dropped))
    return app


def _reaches(edges: dict[tuple[str, str], str], start: str, goal: str) -> bool:
    """Whether ``goal`` is reachable from ``start`` along ``edges`` (caller, callee) keys."""
    seen, todo = {start}, [start]
    while todo:
        a = todo.pop()
        if a == goal:
            return True
        for (x, y) in edges:
            if x == a and y not in seen:
                seen.add(y)
                todo.append(y)
    return False


def manifest_application(name: str) -> Application:
    """One of the vendored benchmarks by name: ``hotelReservation``, ``socialNetwork``,
    ``sockshop``. Raises :class:`FederationError` for another name."""
    if name not in MANIFEST_APPS:
        raise FederationError(f"unknown application {name!r}; known: {', '.join(known_applications())}")
    rel, entry = MANIFEST_APPS[name]
    return application_from_manifests([DATA / r for r in rel], entry, name=name)


def batch_training(*, workers: int = 4, params_mib: float = 97.5, step_ms: float = 50.0,
                   ps_work_ms: float = 5.0, name: str = "batch-training") -> Application:
    """Data-parallel training with one parameter server (Li et al., OSDI 2014): a ``chief``
    starts each step (one request = one training step), each of ``workers`` computes for
    ``step_ms`` and pushes its gradient to and pulls parameters from ``ps``: payload per
    worker->ps call = 2 x ``params_mib`` MiB (default 97.5 MiB = ResNet-50's 25.6 M fp32
    parameters). Throughput-bound: bandwidth dominates its cross-cluster cost."""
    if workers < 1:
        raise FederationError("batch training needs at least one worker")
    svcs = [Service("chief", 1, 0.5, 0.5, "job"), Service("ps", 1, 2.0, ps_work_ms, "job")]
    edges = []
    for i in range(workers):
        svcs.append(Service(f"worker-{i}", 1, 4.0, step_ms, "job"))
        edges.append(Edge("chief", f"worker-{i}", 1.0, 512))
        edges.append(Edge(f"worker-{i}", "ps", 1.0, int(2 * params_mib * 2**20)))
    return Application(name, svcs, edges, "chief", "batch-training", source="parameter-server template")


def inference(*, model_ms: float = 8.0, replicas: int = 2, image_kib: float = 150.0,
              name: str = "inference") -> Application:
    """Latency-sensitive model serving: ``gateway`` -> ``preprocess`` -> ``model-server``
    (``model_ms`` of CPU per call, ``replicas`` replicas) -> ``feature-cache``; payload = an
    image of ``image_kib`` KiB to preprocess and a tensor of the same size to the model."""
    payload = int(image_kib * 1024)
    svcs = [Service("gateway", 1, 0.2, 0.3, "app"), Service("preprocess", 1, 0.5, 1.5, "app"),
            Service("model-server", replicas, 1.0, model_ms, "app"), Service("feature-cache", 1, 0.2, 0.2, "cache")]
    edges = [Edge("gateway", "preprocess", 1.0, payload), Edge("preprocess", "model-server", 1.0, payload),
             Edge("model-server", "feature-cache", 2.0, 1024)]
    return Application(name, svcs, edges, "gateway", "inference", source="model-serving template")


def video_analytics(*, frames: int = 6, frame_kib: float = 48.0, name: str = "video-analytics") -> Application:
    """A video-analytics pipeline (template; the call rates and costs are modelling figures, not
    measured): ``ingest`` takes a clip (one request), ``decode`` samples ``frames`` frames and
    calls ``detect`` once per frame (the hot edge: ``frames`` calls of ``frame_kib`` KiB per
    request), then calls ``aggregate`` once with the detections, which writes one record to
    ``store``. A tree whose edges differ ``frames``-fold in call rate, so where a capacity split
    cuts it matters: cutting ``decode -> detect`` crosses ``frames`` times per request, cutting
    ``ingest -> decode`` or ``decode -> aggregate`` once. CPU per replica (cores): ingest 0.2,
    decode 0.4, detect 0.6, aggregate 0.4, store 0.2 (1.8 in all); CPU time per call (ms): 0.5,
    3.0, 2.0 (per frame), 1.0, 0.5. Raises :class:`FederationError` for fewer than one frame."""
    if frames < 1:
        raise FederationError("a video-analytics request needs at least one frame")
    frame = int(frame_kib * 1024)
    svcs = [Service("ingest", 1, 0.2, 0.5, "app"), Service("decode", 1, 0.4, 3.0, "app"), Service("detect", 1, 0.6, 2.0, "app"),
            Service("aggregate", 1, 0.4, 1.0, "app"), Service("store", 1, 0.2, 0.5, "db")]
    edges = [Edge("ingest", "decode", 1.0, 65536), Edge("decode", "detect", float(frames), frame),
             Edge("decode", "aggregate", 1.0, 2048), Edge("aggregate", "store", 1.0, 1024)]
    return Application(name, svcs, edges, "ingest", "pipeline", source="video-analytics pipeline template")


def known_applications() -> list[str]:
    """Names accepted by :func:`get_application`."""
    return sorted(MANIFEST_APPS) + ["batch-training", "inference", "video-analytics"]


def get_application(name: str) -> Application:
    """Any application type by name (see :func:`known_applications`)."""
    if name == "batch-training":
        return batch_training()
    if name == "inference":
        return inference()
    if name == "video-analytics":
        return video_analytics()
    return manifest_application(name)
