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

**Node performance** (:class:`NodePerf`, used by the serverless model :mod:`rlweights.core.serverless`;
the scheduler never sees it, as kube-scheduler does not): per node a CPU speed factor (work per
second of one fully available core, relative to the reference machine on which a trace's
durations count as "isolated", speed 1.0) and a peak memory bandwidth (GB/s, 10^9 bytes).
The PAI table names GPU types, not CPUs, so the CPU of each machine type is an ASSUMPTION: the
CPU Alibaba Cloud documents for its ECS GPU families with the same GPU (``gn5``, P100: Intel
Xeon E5-2682 v4, Broadwell-EP, 2.5 GHz, 16 cores per socket; ``gn6i`` T4, ``gn6v`` V100 and
``gn6e`` V100 32 GB: Intel Xeon Platinum 8163, Skylake-SP, 2.5 GHz, 24 cores per socket), two
sockets with hyper-threading, which gives exactly PAI's 64 (P100) and 96 (others) CPUs; the
``CPU`` and ``MISC`` machines (96 CPUs) are taken as the Skylake-SP ones. Peak memory bandwidth
= sockets x channels x transfer rate x 8 bytes, channels and DDR4 speed from Intel ARK: E5-2682
v4 4 channels of DDR4-2400 (2 x 76.8 = 153.6 GB/s); the Platinum 8163 is an off-roadmap
variant of the Platinum 8160 (assumption: its memory system), 6 channels of DDR4-2666 (2 x 128.0
= 256.0 GB/s). Speed factors (ASSUMPTION): 1.0 for Skylake-SP (the reference), 0.9 for
Broadwell-EP at the same clock (about a generation's per-core gain; not measured here). Nodes
of other tables without a known CPU: speed 1.0 and the reference's bandwidth per CPU (256.0 / 96
GB/s per CPU, assumption). A node may state its own with the labels :data:`SPEED_LABEL` and
:data:`MEMBW_LABEL` (Kubernetes Node YAML of an operator's table).

**Other real node tables** (:data:`NODE_TABLES`): besides PAI, the cluster shapes of the
Tiresias simulator (Gu et al., NSDI 2019; ``data/tiresias-sim/*.csv``, one row ``num_switch,
num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node``), expanded to their
``num_switch x num_node_p_switch`` identical machines; :func:`cluster_setups` samples any of
them by name.
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
TIRESIAS_DIR = Path(__file__).resolve().parents[2] / "data" / "tiresias-sim"

#: Label the platform's node importer gives a PAI machine-spec row (webapp/importers.py).
PAI_IMPORT_LABEL = "gpu_type"
#: Node labels by which an operator's node states its CPU speed factor and peak memory bandwidth (GB/s).
SPEED_LABEL = "rlweights.tandem.dev/cpu-speed"
MEMBW_LABEL = "rlweights.tandem.dev/memory-bandwidth-gbps"


@dataclass(frozen=True)
class NodePerf:
    """What the serverless model needs of a node beyond its Kubernetes object: ``speed``, the
    work one fully available CPU does per second relative to the reference machine (1.0), and
    ``membw_gbs``, peak memory bandwidth in GB/s (10^9 B/s); ``cpu`` names the CPU the figures
    are for and ``basis`` says where they come from (module docstring)."""

    speed: float
    membw_gbs: float
    cpu: str = "unknown"
    basis: str = "assumption"


_BROADWELL_2S = NodePerf(0.9, 2 * 4 * 2400e6 * 8 / 1e9, "2x Intel Xeon E5-2682 v4 (Broadwell-EP, 2.5 GHz)",
                         "CPU of Alibaba ECS gn5 (P100) assumed; bandwidth from Intel ARK (4 x DDR4-2400); speed assumed")
_SKYLAKE_2S = NodePerf(1.0, 2 * 6 * 2666e6 * 8 / 1e9, "2x Intel Xeon Platinum 8163 (Skylake-SP, 2.5 GHz)",
                       "CPU of Alibaba ECS gn6i/gn6v/gn6e assumed; bandwidth as Platinum 8160 (Intel ARK, 6 x DDR4-2666); reference speed")
#: CPU of each PAI machine type (module docstring: an assumption from Alibaba Cloud's ECS GPU families).
PAI_NODE_PERF: dict[str, NodePerf] = {"P100": _BROADWELL_2S, "T4": _SKYLAKE_2S, "V100": _SKYLAKE_2S,
                                      "V100M32": _SKYLAKE_2S, "CPU": _SKYLAKE_2S, "MISC": _SKYLAKE_2S}
#: Memory bandwidth per CPU of a node whose CPU is unknown (the reference node's, GB/s per CPU; assumption).
DEFAULT_MEMBW_PER_CPU_GBS = _SKYLAKE_2S.membw_gbs / 96


def node_performance(node: Node) -> NodePerf:
    """:class:`NodePerf` of ``node``: its :data:`SPEED_LABEL` / :data:`MEMBW_LABEL` labels when
    present (positive numbers), else the PAI machine type's (label :data:`GPU_TYPE_LABEL`, or
    ``gpu_type`` as the platform's importer labels a PAI CSV row; :data:`PAI_NODE_PERF`), else speed 1.0 and :data:`DEFAULT_MEMBW_PER_CPU_GBS` per CPU.
    Raises ``ValueError`` for a label that is not a positive number."""
    base = PAI_NODE_PERF.get(node.labels.get(GPU_TYPE_LABEL, node.labels.get(PAI_IMPORT_LABEL, "")))
    if base is None:
        base = NodePerf(1.0, DEFAULT_MEMBW_PER_CPU_GBS * node.cpu_milli / 1000.0, "unknown",
                        "assumption: reference speed, reference bandwidth per CPU")
    speed, bw = base.speed, base.membw_gbs
    for label, name in ((SPEED_LABEL, "speed"), (MEMBW_LABEL, "bw")):
        if label in node.labels:
            try:
                v = float(node.labels[label])
            except ValueError:
                v = float("nan")
            if not (v > 0 and v < float("inf")):
                raise ValueError(f"node {node.name}: label {label} must be a positive number, got {node.labels[label]!r}")
            speed, bw = (v, bw) if name == "speed" else (speed, v)
    if (speed, bw) != (base.speed, base.membw_gbs):
        return NodePerf(speed, bw, base.cpu, "node labels")
    return base


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


def load_tiresias_spec(path: str | Path) -> list[Machine]:
    """Machines of a Tiresias cluster shape (``data/tiresias-sim/n32g4.csv`` and the like): header
    ``num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node`` and one row, expanded
    to ``num_switch * num_node_p_switch`` identical machines (GPU type ``unknown``, memory in GB
    read as GiB as for PAI). Raises ``ValueError`` for a malformed file."""
    p = Path(path)
    with open(p, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if len(rows) != 1:
        raise ValueError(f"{p}: expected one cluster-shape row, got {len(rows)}")
    try:
        r = {k: int(v) for k, v in rows[0].items()}
        count = r["num_switch"] * r["num_node_p_switch"]
        return [Machine(f"{p.stem}-{k}", "unknown", r["num_cpu_p_node"], r["mem_p_node"], r["num_gpu_p_node"])
                for k in range(count)]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{p}: not a Tiresias cluster shape: {rows[0]}") from None


#: Real node tables shipped in data/, by name: ``pai`` (1,897 machines, the default) and the
#: Tiresias cluster shapes.
NODE_TABLES = {"pai": lambda: load_pai_machines(),
               **{f"tiresias-{stem}": (lambda stem=stem: load_tiresias_spec(TIRESIAS_DIR / f"{stem}.csv"))
                  for stem in ("cluster_spec", "n1g4", "n32g4", "n160g8", "n256g8")}}


def load_node_table(name: str) -> list[Machine]:
    """The machines of the shipped table ``name`` (:data:`NODE_TABLES`). Raises ``ValueError``
    for an unknown name."""
    if name not in NODE_TABLES:
        raise ValueError(f"unknown node table {name!r}; known: {', '.join(NODE_TABLES)}")
    return NODE_TABLES[name]()


@dataclass
class ClusterSetup:
    """Nodes plus their background pods (``(node index, Pod)``). ``state()`` builds a fresh
    :class:`ClusterState` with the background pods placed."""

    name: str
    nodes: list[Node]
    background: list[tuple[int, Pod]] = field(default_factory=list)
    background_usage: list[float] = field(default_factory=list)
    perf: list[NodePerf] | None = None

    def node_perf(self) -> list[NodePerf]:
        """Per node (index order of ``nodes``) its :class:`NodePerf`: ``perf`` when given, else
        :func:`node_performance` of each node."""
        if self.perf is not None:
            if len(self.perf) != len(self.nodes):
                raise ValueError(f"setup {self.name}: {len(self.perf)} NodePerf entries for {len(self.nodes)} nodes")
            return list(self.perf)
        return [node_performance(n) for n in self.nodes]

    def background_cores(self) -> list[float]:
        """Per node, the CPUs the background (training) pods keep busy: ``background_usage`` when
        given, else the background pods' CPU requests (cores)."""
        busy = [0.0] * len(self.nodes)
        if self.background_usage:
            return [float(x) for x in self.background_usage]
        for i, pod in self.background:
            busy[i] += pod.cpu_milli / 1000.0
        return busy

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


def cluster_setups(seed: int, count: int, n_nodes: tuple[int, int] = (3, 6), prefix: str = "setup",
                   table: str = "pai") -> list[ClusterSetup]:
    """``count`` setups with node counts drawn in ``[n_nodes[0], n_nodes[1]]`` from
    ``numpy.random.default_rng(seed)``, machines from the shipped node table ``table``
    (:data:`NODE_TABLES`); equal seeds give equal setups. Raises ``ValueError`` for an unknown
    table or more nodes than it has."""
    rng = np.random.default_rng(seed)
    machines = load_node_table(table)
    return [sample_cluster_setup(rng, int(rng.integers(n_nodes[0], n_nodes[1] + 1)), machines, name=f"{prefix}{seed}-{i}")
            for i in range(count)]
