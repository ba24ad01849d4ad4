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
class EngineHeadline:
    """The latest succeeded experiment of one kind and its headline (``None`` when the kind
    gives none, or computing it failed: ``error`` says why)."""

    kind: str
    experiment: Experiment
    headline: object | None
    page: str
    error: str = ""


def engine_headlines(*, user) -> list[EngineHeadline]:
    """For each registered kind, the newest succeeded experiment the user may see, with its
    headline (:attr:`webapp.experiments.ExperimentKind.headline`) and the page that shows it."""
    from .experiments import get_experiment_kind, registered_kinds

    out = []
    for kind in registered_kinds():
        exp = experiment_list(user=user).filter(kind=kind, state="succeeded").order_by("-finished_at", "-id").first()
        if exp is None:
            continue
        spec = get_experiment_kind(kind)
        headline, error = None, ""
        if spec.headline is not None:
            try:
                headline = spec.headline(exp)
            except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as err:  # an older result's shape
                error = f"no headline for this result ({type(err).__name__}: {err})"
        out.append(EngineHeadline(kind=kind, experiment=exp, headline=headline, page=experiment_page(exp), error=error))
    return out


def experiment_page(exp: Experiment) -> str:
    """URL path of the page that shows ``exp``: its engine's page when the kind names one,
    otherwise its result in the API."""
    from .experiments import UnknownExperimentKind, get_experiment_kind

    try:
        spec = get_experiment_kind(exp.kind)
    except UnknownExperimentKind:
        spec = None
    if spec is not None and spec.page is not None:
        return spec.page(exp)
    return f"/api/v1/experiments/{exp.pk}/result/"


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


def cluster_nodes(*, cluster: Cluster):
    """Nodes of ``cluster`` by name, with ``gpu_count``, ``gpu_models`` (distinct, comma-separated
    by the template) and ``busy_gpus`` (held by running jobs) annotated."""
    from django.db.models import Q

    return (
        cluster.nodes.annotate(
            gpu_count=Count("gpus", distinct=True),
            busy_gpus=Count("gpus", filter=Q(gpus__jobs__state=State.RUNNING), distinct=True),
        )
        .prefetch_related("gpus")
        .order_by("name")
    )
