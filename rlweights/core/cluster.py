"""Cluster setups for weight learning, sampled from the real machine mix of Alibaba PAI.

``data/alibaba-pai-gpu-2020/pai_machine_spec.csv`` (headerless ``machine,gpu_type,cap_cpu,
cap_mem,cap_gpu``; cores, GiB, GPUs; Weng et al., NSDI 2022) lists 1,897 machines: 798 P100
(64 cores), 497 T4, 280 MISC, 135 V100M32, 83 CPU, 104 V100 (96 cores). A setup draws ``n``
machines uniformly without replacement with a seeded generator, so setups follow the real mix.

Assumptions (not in the trace, marked so): each node gets a zone label among ``ZONES``
uniformly; GPU machines carry a ``nvidia.com/gpu=present:PreferNoSchedule`` taint (cloud
providers taint GPU nodes, with ``NoSchedule``; we use the soft effect so CPU functions may spill
there); the training jobs already running on a machine are one background pod per node whose
CPU and memory requests are a fraction ``U(*BACKGROUND_REQUEST_FRACTION)`` of the machine, and
they use a fraction ``U(*BACKGROUND_USAGE_FRACTION)`` of the machine's cores, independent of
the request (data loaders of GPU training jobs keep the host CPUs busy whatever they request;
assumption), so serverless functions share what is left. The use is ``ClusterSetup.background_usage`` (cores).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .scheduler import ZONE_KEY, ClusterState, Node, Pod, Taint

GiB = 2**30
ZONES = ("zone-a", "zone-b", "zone-c")  # assumption
BACKGROUND_REQUEST_FRACTION = (0.2, 0.7)  # assumption
BACKGROUND_USAGE_FRACTION = (0.5, 0.97)  # assumption
GPU_TYPE_LABEL = "alibabacloud.com/gpu-card-model"  # label used by the PAI simulator's Node YAML

DEFAULT_PAI_SPEC = Path(__file__).resolve().parents[2] / "data" / "alibaba-pai-gpu-2020" / "pai_machine_spec.csv"


@dataclass(frozen=True)
class Machine:
    """One row of the PAI machine table: CPU cores, memory GiB, GPU count and type."""

    machine: str
    gpu_type: str
    cpu_cores: int
    memory_gib: int
    gpus: int


def load_pai_machines(path: str | Path = DEFAULT_PAI_SPEC) -> list[Machine]:
    """Read the headerless PAI machine table. Raises ``ValueError`` on a malformed row."""
    out = []
    with open(path, newline="") as fh:
        for i, row in enumerate(csv.reader(fh)):
            if len(row) != 5:
                raise ValueError(f"{path}:{i + 1}: expected 5 columns, got {len(row)}")
            try:
                out.append(Machine(row[0], row[1], int(row[2]), int(row[3]), int(row[4])))
            except ValueError:
                raise ValueError(f"{path}:{i + 1}: non-integer capacity in {row}") from None
    if not out:
        raise ValueError(f"{path}: no machines")
    return out


@dataclass
class ClusterSetup:
    """Nodes plus their background pods (``(node index, Pod)``). ``state()`` builds a fresh
    :class:`ClusterState` with the background pods placed."""

    name: str
    nodes: list[Node]
    background: list[tuple[int, Pod]] = field(default_factory=list)
    background_usage: list[float] = field(default_factory=list)

    def state(self) -> ClusterState:
        import copy

        st = ClusterState([copy.deepcopy(n) for n in self.nodes])
        for i, pod in self.background:
            st.add_pod(i, pod)
        return st

    def summary(self) -> dict:
        """Node count, cores and GPU types (for reports; the RL agent never sees it)."""
        types: dict[str, int] = {}
        for n in self.nodes:
            t = n.labels.get(GPU_TYPE_LABEL, "?")
            types[t] = types.get(t, 0) + 1
        return {"name": self.name, "nodes": len(self.nodes), "cores": sum(n.cpu_milli for n in self.nodes) / 1000, "types": types}


def sample_cluster_setup(rng: np.random.Generator, n_nodes: int, machines: list[Machine] | None = None, name: str = "") -> ClusterSetup:
    """Draw ``n_nodes`` PAI machines (uniformly, without replacement) into a setup.

    Raises ``ValueError`` when ``n_nodes`` is not in 1..len(machines)."""
    machines = machines if machines is not None else load_pai_machines()
    if not 1 <= n_nodes <= len(machines):
        raise ValueError(f"n_nodes must be in 1..{len(machines)}, got {n_nodes}")
    picks = rng.choice(len(machines), size=n_nodes, replace=False)
    nodes, background, usage = [], [], []
    for k, mi in enumerate(picks):
        m = machines[int(mi)]
        taints = (Taint("nvidia.com/gpu", "present", "PreferNoSchedule"),) if m.gpus > 0 else ()
        node = Node(
            name=f"{name or 'setup'}-n{k}", cpu_milli=m.cpu_cores * 1000, memory_bytes=m.memory_gib * GiB,
            labels={GPU_TYPE_LABEL: m.gpu_type, ZONE_KEY: str(ZONES[int(rng.integers(len(ZONES)))])},
            taints=taints,
        )
        nodes.append(node)
        fc, fm = rng.uniform(*BACKGROUND_REQUEST_FRACTION, size=2)
        background.append((k, Pod(f"training-{k}", cpu_milli=int(fc * node.cpu_milli),
                                  memory_bytes=int(fm * node.memory_bytes), labels={"role": "training"})))
        usage.append(float(rng.uniform(*BACKGROUND_USAGE_FRACTION) * m.cpu_cores))
    return ClusterSetup(name=name or f"pai-{n_nodes}", nodes=nodes, background=background, background_usage=usage)


def cluster_setups(seed: int, count: int, n_nodes: tuple[int, int] = (3, 6), prefix: str = "setup") -> list[ClusterSetup]:
    """``count`` setups with node counts drawn in ``[n_nodes[0], n_nodes[1]]`` from
    ``numpy.random.default_rng(seed)``; equal seeds give equal setups."""
    rng = np.random.default_rng(seed)
    machines = load_pai_machines()
    return [sample_cluster_setup(rng, int(rng.integers(n_nodes[0], n_nodes[1] + 1)), machines, name=f"{prefix}{seed}-{i}")
            for i in range(count)]
