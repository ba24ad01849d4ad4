"""Seeded random federations and applications for property tests and the planning-time bench.

Clusters sit at random points in a 2-D plane of ``extent_ms`` RTT across (RTT = distance, a
metric, as inter-region RTT roughly is); bandwidth falls with distance from 10 Gbit/s to
1 Gbit/s. Applications are random call DAGs: a random tree from the entry plus extra forward
edges (``extra_edges``), 1-3 calls and 512 B-64 KiB payload per edge, 0.2-5 ms work per call.
"""
from __future__ import annotations

import numpy as np

from .model import Application, Edge, Federation, MemberCluster, Service


def random_federation(rng: np.random.Generator, n_clusters: int, *, extent_ms: float = 150.0,
                      capacity_range: tuple[float, float] = (4.0, 32.0), max_contention: float = 0.6) -> Federation:
    """``n_clusters`` members named ``c0..``; see the module docstring."""
    pts = rng.uniform(0, extent_ms, size=(n_clusters, 2))
    d = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1)
    rtt = d + np.where(np.eye(n_clusters, dtype=bool), 0.5, 1.0)
    bw = 10_000.0 - 9_000.0 * d / max(d.max(), 1e-9)
    clusters = [MemberCluster(f"c{i}", float(rng.uniform(*capacity_range)), float(rng.uniform(0, max_contention)))
                for i in range(n_clusters)]
    return Federation(clusters, rtt, bw)


def random_application(rng: np.random.Generator, n_services: int, *, extra_edges: int | None = None,
                       cpu_range: tuple[float, float] = (0.1, 1.0), max_replicas: int = 3) -> Application:
    """A random call DAG of ``n_services`` services ``s0`` (entry) .. ``s{n-1}``."""
    svcs = [Service(f"s{i}", int(rng.integers(1, max_replicas + 1)), float(rng.uniform(*cpu_range)),
                    float(rng.uniform(0.2, 5.0))) for i in range(n_services)]
    edges = {}
    for i in range(1, n_services):
        edges[(int(rng.integers(0, i)), i)] = True
    for _ in range(n_services // 2 if extra_edges is None else extra_edges):
        a, b = sorted(rng.choice(n_services, 2, replace=False))
        edges[(int(a), int(b))] = True
    el = [Edge(f"s{a}", f"s{b}", float(rng.choice([1.0, 1.0, 1.0, 2.0])), int(rng.integers(512, 65536))) for a, b in sorted(edges)]
    return Application(f"random-{n_services}", svcs, el, "s0", "microservices", source="synthetic")
