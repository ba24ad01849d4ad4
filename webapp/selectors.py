"""Platform reads (HackSoft style): querysets scoped to the user, and dashboard summaries."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, QuerySet, Sum

from .models import Cluster, Experiment, GPUDevice, Job
from .states import State


def job_list(*, user) -> QuerySet[Job]:
    """Jobs the user may see: all for staff, their own otherwise; newest first."""
    qs = Job.objects.select_related("owner").prefetch_related("gpus")
    return qs if user.is_staff else qs.filter(owner=user)


def experiment_list(*, user) -> QuerySet[Experiment]:
    """Experiments the user may see: all for staff, their own otherwise; newest first."""
    qs = Experiment.objects.select_related("owner")
    return qs if user.is_staff else qs.filter(owner=user)


@dataclass
class ClusterSummary:
    """Capacity and current use of one cluster. Memory in MiB, CPU in cores, utilisation in
    percent (mean over GPUs with a reading; ``None`` when none has one)."""

    cluster: Cluster
    nodes: int
    cpu_cores: float
    memory_mib: int
    gpus: int
    gpus_busy: int
    gpu_memory_mib: int
    mean_gpu_utilisation: float | None
    gpus_by_model: dict[str, int] = field(default_factory=dict)
    gpu_memory_by_model: dict[str, int] = field(default_factory=dict)


def cluster_summaries() -> list[ClusterSummary]:
    """One :class:`ClusterSummary` per cluster, by name. A GPU is busy when a running job holds it."""
    out = []
    for c in Cluster.objects.annotate(
        n_nodes=Count("nodes", distinct=True),
    ).order_by("name"):
        agg = c.nodes.aggregate(cpu=Sum("cpu_cores"), mem=Sum("memory_mib"))
        gpus = GPUDevice.objects.filter(node__cluster=c)
        by_model: dict[str, int] = defaultdict(int)
        mem_by_model: dict[str, int] = defaultdict(int)
        utils = []
        for g in gpus.only("model", "memory_mib", "utilisation_percent"):
            by_model[g.model] += 1
            mem_by_model[g.model] += g.memory_mib
            if g.utilisation_percent is not None:
                utils.append(g.utilisation_percent)
        busy = gpus.filter(jobs__state=State.RUNNING).distinct().count()
        out.append(
            ClusterSummary(
                cluster=c, nodes=c.n_nodes, cpu_cores=float(agg["cpu"] or 0), memory_mib=int(agg["mem"] or 0),
                gpus=sum(by_model.values()), gpus_busy=busy, gpu_memory_mib=sum(mem_by_model.values()),
                mean_gpu_utilisation=(sum(utils) / len(utils)) if utils else None,
                gpus_by_model=dict(sorted(by_model.items())), gpu_memory_by_model=dict(sorted(mem_by_model.items())),
            )
        )
    return out
