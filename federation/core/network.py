"""Inter-cluster link matrices from the Skyplane inter-region measurements.

Source: ``data/skyplane-intercloud-network/`` (Skyplane project, Apache-2.0; see its SOURCE.md).
``latency.csv`` holds ping RTTs in ms (``avg_rtt``) between cloud regions, ``throughput.csv``
iperf3 throughput in bit/s (``throughput_received``, 64 parallel connections, 5 s runs).

Mapping rule: each member cluster names a region id exactly as Skyplane spells it
(``aws:eu-west-1``, ``azure:westeurope``, ``gcp:us-central1-a``). The RTT between two clusters is
the median ``avg_rtt`` over every row measured between their regions, in either direction (rows
differ by network tier and instance class); bandwidth likewise is the median
``throughput_received / 1e6`` (Mbit/s). The diagonal (two services in the same cluster) is not
taken from the inter-region data: it is ``intra_rtt_ms`` (default 0.5 ms, pod-to-pod in one
cluster) and ``intra_bandwidth_mbps`` (default 10,000 Mbit/s); two distinct clusters in the same
region use the same-region rows when Skyplane has them, else the intra values.
"""
from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np

from .model import Federation, FederationError, MemberCluster

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "skyplane-intercloud-network"


@lru_cache(maxsize=4)
def _pairs(path: str, value_col: str, scale: float) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("success", "True") not in ("True", "true", "1"):
                continue
            try:
                v = float(row[value_col]) * scale
            except (KeyError, ValueError):
                continue
            out.setdefault((row["src_region"], row["dst_region"]), []).append(v)
    return out


def skyplane_regions(data_dir: Path = DATA_DIR) -> list[str]:
    """Sorted region ids measured in ``latency.csv``."""
    pairs = _pairs(str(data_dir / "latency.csv"), "avg_rtt", 1.0)
    return sorted({a for a, _ in pairs} | {b for _, b in pairs})


def _median_link(pairs: dict[tuple[str, str], list[float]], a: str, b: str) -> float | None:
    vals = pairs.get((a, b), []) + pairs.get((b, a), [])
    return float(np.median(vals)) if vals else None


def skyplane_matrices(regions: list[str], *, data_dir: Path = DATA_DIR, intra_rtt_ms: float = 0.5,
                      intra_bandwidth_mbps: float = 10_000.0) -> tuple[np.ndarray, np.ndarray]:
    """RTT (ms) and bandwidth (Mbit/s) matrices, shape ``(len(regions), len(regions))``, for
    clusters in ``regions`` (one entry per cluster; repeats allowed), by the mapping rule of this
    module. Raises :class:`FederationError` naming a region with no measurement."""
    lat = _pairs(str(data_dir / "latency.csv"), "avg_rtt", 1.0)
    thr = _pairs(str(data_dir / "throughput.csv"), "throughput_received", 1e-6)
    known = {a for a, _ in lat} | {b for _, b in lat}
    for r in regions:
        if r not in known:
            raise FederationError(f"region {r!r} is not in the Skyplane measurements (e.g. aws:eu-west-1, azure:westeurope, gcp:us-central1-a)")
    n = len(regions)
    rtt = np.zeros((n, n))
    bw = np.zeros((n, n))
    for i, a in enumerate(regions):
        for j, b in enumerate(regions):
            if i == j:
                rtt[i, j], bw[i, j] = intra_rtt_ms, intra_bandwidth_mbps
                continue
            r = _median_link(lat, a, b)
            if r is None:
                if a == b:
                    r = intra_rtt_ms
                else:
                    raise FederationError(f"no RTT measured between {a} and {b}")
            w = _median_link(thr, a, b)
            if w is None:
                if a == b:
                    w = intra_bandwidth_mbps
                else:
                    raise FederationError(f"no throughput measured between {a} and {b}")
            rtt[i, j], bw[i, j] = r, w
    return rtt, bw


def federation_from_skyplane(clusters: Iterable[MemberCluster], **kw) -> Federation:
    """A :class:`Federation` whose links come from the Skyplane data by each cluster's
    ``region``. Raises :class:`FederationError` for a cluster without a (known) region."""
    clusters = list(clusters)
    for c in clusters:
        if not c.region:
            raise FederationError(f"cluster {c.name!r} has no region to map to the Skyplane data")
    rtt, bw = skyplane_matrices([c.region for c in clusters], **kw)
    return Federation(clusters, rtt, bw)
