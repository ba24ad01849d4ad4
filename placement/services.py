"""Services of the placement engine (functions that write): live placement (the job scheduler
registered with the platform) and the "simulation" experiment runner."""
from __future__ import annotations

from dataclasses import dataclass

import functools
from pathlib import Path

from django.conf import settings
from django.db import transaction

from webapp.jobs import JobRejected
from webapp.models import GPUDevice, Job
from webapp.states import State

from .core import policies as core_policies
from .core import profiles as core_profiles
from .core.types import ClusterState, GPUSpec, JobSpec
from .models import PlacementDecision, ProfileRow, SimulationJobOutcome

LIVE_POLICY = getattr(settings, "PLACEMENT_POLICY", "horus")


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[list[dict], list[dict]]:
    data = Path(settings.DATA_DIR) / "placement"
    return (core_profiles.read_csv_rows(data / "gavel_profile.csv"),
            core_profiles.read_csv_rows(data / "zoo_features.csv"))


def profile_rows_all() -> list[dict]:
    """Shipped Gavel-derived rows plus ProfileRow rows in the database (profiler output)."""
    shipped, _ = _tables()
    db = list(ProfileRow.objects.values("model", "batch_size", "gpu_type", "util_mean_pct", "util_peak_pct",
                                        "memory_mib", "source"))
    return shipped + db


def job_features(model_name: str, batch_size: int) -> dict:
    """Graph features of (model, batch): the shipped zoo table, else traced now on the meta
    device (~0.4 s; kept per process, :func:`_traced_features`). Raises ``KeyError`` for a model
    outside the zoo."""
    _, feats = _tables()
    for r in feats:
        if r["model"].removeprefix("gavel:") == model_name and int(r["batch_size"]) == batch_size:
            return r
    return dict(_traced_features(model_name, batch_size))


@functools.lru_cache(maxsize=1024)
def _traced_features(model_name: str, batch_size: int) -> tuple:
    """:func:`placement.backends.features.model_features` as ``(key, value)`` pairs, kept: every
    submission is checked against it, and tracing each time let any batch size outside the zoo
    table cost ~0.4 s of a server thread."""
    from .backends.features import model_features

    return tuple(model_features(model_name, batch_size).as_dict().items())


_PREDICTOR: dict = {}


def _predictor():
    """The utilisation predictor, rebuilt only when the ProfileRow table changes."""
    from django.db.models import Count, Max

    from .backends.predictor import UtilisationPredictor

    agg = ProfileRow.objects.aggregate(n=Count("id"), last=Max("id"))
    key = (agg["n"], agg["last"])
    if _PREDICTOR.get("key") != key:
        # ``memo``: job_profile's answers for this predictor, dropped with it
        _PREDICTOR.update(key=key, predictor=UtilisationPredictor(profile_rows_all(), _tables()[1]), memo={})
    return _PREDICTOR["predictor"]


def profile_gpu_type(gpu_type: str, predictor=None) -> str | None:
    """The GPU type whose profile rows predict ``gpu_type``: itself if it has rows, else the
    longest profiled type its name starts with (same family, e.g. ``V100M32`` -> ``V100``),
    else ``None`` (e.g. PAI's ``MISC``). ``predictor``: the current one, if the caller has it."""
    known = {r["gpu_type"].upper() for r in (predictor or _predictor()).profile_rows
             if r.get("util_mean_pct") not in (None, "")}
    name = gpu_type.upper()
    if name in known:
        return name
    family = [k for k in known if name.startswith(k)]
    return max(family, key=len) if family else None


def job_profile(model_name: str, batch_size: int, gpu_type: str, *, predictor=None,
                copy_provenance: bool = True) -> tuple[float, float, dict]:
    """Predicted (util %, memory MiB, provenance) of a job on ``gpu_type``. Memory: graph
    estimate. Utilisation: XGBoost predictor on the profile rows of that GPU type, or of its
    family (:func:`profile_gpu_type`, named in the provenance's ``profile_gpu_type`` and
    ``note``); with none, 0 and a provenance note saying so (never an invented number).
    Answers are kept per (model, batch, GPU type) until the ProfileRow table changes (the live
    scheduler asks for every queued job on every pass). ``predictor``: the current one
    (:func:`_predictor`), when the caller just got it: a scheduling pass asks once, not once per
    job (a query each). ``copy_provenance=False``: the memo's own provenance dict, which the
    caller must not change (a pass scores every queued job and copies only the placed ones'; a
    deep copy per queued job per pass was a third of a pass with a long queue)."""
    import copy

    pred = predictor if predictor is not None else _predictor()
    memo = _PREDICTOR["memo"]
    key = (model_name, batch_size, gpu_type)
    if key not in memo:
        memo[key] = _job_profile(model_name, batch_size, gpu_type, pred)
    util, mem, prov = memo[key]
    return util, mem, copy.deepcopy(prov) if copy_provenance else prov  # callers add to the provenance


def _job_profile(model_name: str, batch_size: int, gpu_type: str, pred) -> tuple[float, float, dict]:
    from .backends.predictor import NoProfileData

    feats = job_features(model_name, batch_size)
    used = profile_gpu_type(gpu_type, pred) or gpu_type
    try:
        p = pred.predict(feats, gpu_type=used)
        util = p.value
        prov = {"util_sources": p.sources, "util_rows": p.n_rows, "gpu_type": gpu_type.upper(),
                "profile_gpu_type": p.gpu_type, "util_config": p.config}
        if p.gpu_type != gpu_type.upper():
            prov["note"] = (f"no profile rows for {gpu_type.upper()}; predicted from the {p.gpu_type} rows "
                            f"(same GPU family by name)")
    except NoProfileData as err:
        util, prov = 0.0, {"util_sources": [], "gpu_type": gpu_type.upper(), "note": str(err)}
    prov["memory_source"] = "graph-estimate"
    return util, float(feats["memory_mib"]), prov


@dataclass(frozen=True)
class _Device:
    """The fields of a GPUDevice (and its node and cluster) that live placement reads."""

    pk: int
    node_id: int
    cluster_id: int
    cluster_name: str
    node_name: str
    index: int
    model: str
    memory_mib: int

    def __str__(self) -> str:  # as GPUDevice.__str__
        return f"{self.cluster_name}/{self.node_name}/gpu{self.index} ({self.model})"


def _gpu_sql(cluster_id: int | None) -> tuple[str, str]:
    """FROM clause and extra condition selecting the GPUs of ``cluster_id`` (all with ``None``)."""
    gpu, node = GPUDevice._meta.db_table, GPUDevice._meta.get_field("node").related_model._meta.db_table
    if cluster_id is None:
        return f"{gpu} g", "TRUE"
    return f"{gpu} g JOIN {node} n ON n.id = g.node_id", "n.cluster_id = %(cluster)s"


def _capacity_check(cluster_id: int | None, num_gpus: int, memory_mib: float | None) -> tuple[bool, bool, bool]:
    """(any GPU registered at all, at least ``num_gpus`` GPUs in the cluster, one of them with at
    least ``memory_mib`` MiB) in one statement that stops at the first rows that answer: this
    runs on every submission, and counting the 6,742 GPUs of the PAI table took ~0.7 ms of
    PostgreSQL time a request (plus the ORM's query building), a large part of a submission's
    cost under load (bench/api_load.py). ``memory_mib`` ``None``: the third answer is ``True``."""
    from django.db import connection

    source, cond = _gpu_sql(cluster_id)
    sql = (f"SELECT EXISTS (SELECT 1 FROM {GPUDevice._meta.db_table}), "
           f"(SELECT count(*) FROM (SELECT 1 FROM {source} WHERE {cond} LIMIT %(k)s) AS t) >= %(k)s, "
           f"CAST(%(mem)s AS DOUBLE PRECISION) IS NULL OR EXISTS (SELECT 1 FROM {source} WHERE {cond} "
           f"AND g.memory_mib >= CAST(%(mem)s AS DOUBLE PRECISION))")
    with connection.cursor() as cur:
        cur.execute(sql, {"cluster": cluster_id, "k": num_gpus, "mem": memory_mib})
        anywhere, enough, fits = cur.fetchone()
    return bool(anywhere), bool(enough), bool(fits)


def _capacity(cluster_id: int | None) -> tuple[int, int]:
    """(number of GPUs, largest GPU memory in MiB) of the cluster (all with ``None``); only on a
    rejection, for its message."""
    from django.db.models import Count, Max

    qs = GPUDevice.objects.all() if cluster_id is None else GPUDevice.objects.filter(node__cluster_id=cluster_id)
    agg = qs.aggregate(n=Count("id"), biggest=Max("memory_mib"))
    return agg["n"], agg["biggest"] or 0


class LivePlacementScheduler:
    """The platform's job scheduler (:mod:`webapp.jobs`): places queued jobs onto the
    registered GPUDevice rows with a policy from :mod:`placement.core.policies` (default
    Horus), recording a :class:`PlacementDecision` per placed job."""

    def __init__(self, policy: str = LIVE_POLICY, seed: int = 0) -> None:
        self.policy_name, self.seed = policy, seed

    def warm_up(self) -> None:
        """Read the shipped zoo tables :meth:`validate` consults (a server process calls this
        before it serves, webapp/wsgi.py)."""
        _tables()

    def validate(self, job: Job) -> None:
        """Reject a job that can never run: more GPUs than its cluster (or, with no cluster
        given, all clusters) has, a model outside the zoo, or more predicted memory than the
        largest GPU. With no GPU registered at all, live placement is off and every job is
        accepted (it runs unplaced, as without a scheduler)."""
        if job.num_gpus == 0:  # a CPU job: nothing to place
            return
        try:
            mem = float(job_features(job.model_name, job.batch_size)["memory_mib"])
            outside_zoo = None
        except KeyError as err:
            mem, outside_zoo = None, str(err).strip("'\"")
        anywhere, enough, fits = _capacity_check(job.cluster_id, job.num_gpus, mem)
        if not anywhere:  # no GPU registered anywhere: placement is off
            return
        where = "registered" if job.cluster_id is None else f"registered in cluster {job.cluster}"
        if not enough:
            n, _ = _capacity(job.cluster_id)
            raise JobRejected(f"the job asks for {job.num_gpus} GPUs but only {n} are {where}", field="num_gpus")
        if outside_zoo is not None:
            raise JobRejected(outside_zoo, field="model_name")
        if not fits:
            _, biggest = _capacity(job.cluster_id)
            raise JobRejected(f"{job.model_name} at batch size {job.batch_size} needs about {mem:.0f} MiB per GPU "
                              f"(graph estimate); the largest GPU {where} has {biggest} MiB", field="batch_size")

    def schedule(self) -> list[Job]:
        """Place the queued, unplaced jobs that fit now, cluster by cluster (a job that names a
        cluster only goes there; others go to the first cluster, by name, where they fit); the
        rest stay queued. CPU jobs (0 GPUs) are returned at once."""
        import copy

        import numpy as np

        unplaced = Job.objects.filter(state=State.QUEUED, gpus__isnull=True, dispatched_at__isnull=True)
        if not unplaced.exists():  # nothing to place: do not lock every GPU row (the reconciler asks each period)
            return []
        with transaction.atomic():
            # plain tuples, not model instances: at 6,748 GPUs building instances cost ~0.4 s
            devices = [_Device(*row) for row in GPUDevice.objects.select_for_update().order_by(
                "node__cluster__name", "pk").values_list("pk", "node_id", "node__cluster_id", "node__cluster__name",
                                                         "node__name", "index", "model", "memory_mib")]
            undispatched = list(unplaced.select_for_update(of=("self",)).order_by("created_at", "pk"))
            if not devices:  # nothing to place onto: behave like the platform's ImmediateScheduler
                return undispatched
            out = [j for j in undispatched if j.num_gpus == 0]
            waiting = [j for j in undispatched if j.num_gpus > 0]
            clusters: dict[int, list[GPUDevice]] = {}
            for d in devices:
                clusters.setdefault(d.cluster_id, []).append(d)
            states, index = {}, {}
            for cid, devs in clusters.items():
                nodes = {nid: i for i, nid in enumerate(sorted({d.node_id for d in devs}))}
                states[cid] = ClusterState([GPUSpec(i, nodes[d.node_id], d.model, float(d.memory_mib))
                                            for i, d in enumerate(devs)])
                index.update({d.pk: (cid, i) for i, d in enumerate(devs)})
            # the jobs that hold GPUs now, as plain rows: (job, GPU) pairs and each job's latest
            # decision. A pass reads every one of them (thousands once an imported cluster
            # fills); as model instances with prefetches that was half of the control worker's
            # time under bench/api_load.py (py-spy).
            active = [State.QUEUED, State.RUNNING]
            held: dict[int, list[tuple[int, int]]] = {}
            for job_id, gpu_pk in Job.gpus.through.objects.filter(job__state__in=active).order_by(
                    "job_id", "gpudevice_id").values_list("job_id", "gpudevice_id"):
                if gpu_pk in index:
                    held.setdefault(job_id, []).append(index[gpu_pk])
            latest: dict[int, tuple[float, float, str]] = {}
            # (selected by the jobs' state, as ``held`` was, not by an IN list of thousands of ids)
            for job_id, util, mem, model_name in PlacementDecision.objects.filter(job__state__in=active).order_by(
                    "job_id", "-created_at", "-id").values_list("job_id", "predicted_util_pct", "predicted_memory_mib",
                                                                "job__model_name"):
                latest.setdefault(job_id, (util, mem, model_name))
            for job_id, where in held.items():
                if job_id not in latest:
                    continue
                util, mem, model_name = latest[job_id]
                cid = where[0][0]
                ids = tuple(i for c, i in where if c == cid)
                states[cid].assign(JobSpec(job_id, 0.0, len(ids), 1.0, util, mem, model_name), ids)
            policy = core_policies.make_policy(self.policy_name)
            pred = _predictor()  # once per pass (job_profile)
            placed_ids: set[int] = set()
            new_holds, decisions = [], []
            for cid, devs in clusters.items():
                here = [j for j in waiting if j.pk not in placed_ids and j.cluster_id in (None, cid)]
                if not here:
                    continue
                # score with the most common GPU type that has profile data (PAI: MISC has none)
                counts = {m: sum(d.model == m for d in devs) for m in {d.model for d in devs}}
                gpu_type = max(counts, key=lambda m: (profile_gpu_type(m, pred) is not None, counts[m], m))
                specs, prov = [], {}
                for j in here:
                    util, mem, pv = job_profile(j.model_name, j.batch_size, gpu_type, predictor=pred, copy_provenance=False)
                    prov[j.pk] = (util, mem, pv)
                    specs.append(JobSpec(j.pk, j.created_at.timestamp(), j.num_gpus, float(j.steps), util, mem,
                                         j.model_name, j.batch_size))
                by_id = {j.pk: j for j in here}
                for p in policy.place(specs, states[cid], 0.0, np.random.default_rng(self.seed)):
                    job = by_id[p.job_id]
                    gpu_pks = [devs[i].pk for i in p.gpu_ids]
                    new_holds.extend(Job.gpus.through(job_id=job.pk, gpudevice_id=g) for g in gpu_pks)
                    util, mem, pv = prov[p.job_id]
                    pv = copy.deepcopy(pv)  # the memo's: this job's decision gets its own
                    placed = [devs[i].model for i in p.gpu_ids]
                    own = max(set(placed), key=lambda m: (placed.count(m), m))
                    if own != gpu_type:  # report the prediction for the GPUs it got, say what was scored
                        util, mem, pv = job_profile(job.model_name, job.batch_size, own, predictor=pred)
                        pv = {**pv, "placement_scored_with": {"gpu_type": gpu_type.upper(),
                                                              "util_pct": prov[p.job_id][0]}}
                    expl = dict(p.explanation)
                    expl["candidates"] = [{**c, "gpu": devs[c["gpu"]].pk, "gpu_name": str(devs[c["gpu"]])}
                                          for c in expl.get("candidates", [])]
                    expl["prediction"] = pv
                    decisions.append(PlacementDecision(job=job, policy=policy.name, gpu_ids=gpu_pks,
                                                       predicted_util_pct=util, predicted_memory_mib=mem,
                                                       explanation=expl))
                    placed_ids.add(job.pk)
                    out.append(job)
            # the placed jobs held no GPU (``unplaced``): their GPU rows and decisions are new rows,
            # written in two statements rather than three or four per job
            Job.gpus.through.objects.bulk_create(new_holds)
            PlacementDecision.objects.bulk_create(decisions)
            return out


def simulation_outcomes_store(*, experiment, policy: str, jobs: list) -> int:
    """Replace the stored per-job outcomes of ``policy`` in ``experiment`` with ``jobs``
    (:class:`placement.core.simulator.JobOutcome`), atomically, so a re-run (redelivered task)
    leaves exactly one set. Returns the number of rows."""
    rows = [SimulationJobOutcome(
        experiment=experiment, policy=policy, job_index=o.job_id, model=o.model[:128], num_gpus=o.num_gpus,
        arrival_s=o.arrival, start_s=o.start, finish_s=o.finish, queueing_delay_s=o.queueing_delay, jct_s=o.jct,
        slowdown=o.slowdown, gpu_ids=list(o.gpu_ids), preemptions=o.preemptions) for o in jobs]
    with transaction.atomic():
        SimulationJobOutcome.objects.filter(experiment=experiment, policy=policy).delete()
        SimulationJobOutcome.objects.bulk_create(rows, batch_size=5000)
    return len(rows)
