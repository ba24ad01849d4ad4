"""Platform services (HackSoft style: functions that write, keyword-only arguments)."""
from __future__ import annotations

import logging
import os
import socket
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from .experiments import ProgressReporter, get_experiment_kind
from .plug import Cancelled
from .models import Experiment

if TYPE_CHECKING:  # pragma: no cover
    from .models import Job, Node
from .states import State

log = logging.getLogger(__name__)


def experiment_create(*, owner: AbstractBaseUser, kind: str, parameters: dict[str, Any], name: str = "") -> Experiment:
    """Validate ``parameters`` with the kind's serializer, store the experiment as ``queued`` and
    enqueue it on the kind's queue once the transaction commits.

    Raises :class:`webapp.experiments.UnknownExperimentKind` and
    ``rest_framework.exceptions.ValidationError`` (per-field errors, e.g.
    ``{"duration": ["unknown parameter; allowed: a, b"]}`` for a key that is not a field of the
    kind's serializer: it would otherwise be dropped silently); nothing is stored then.
    """
    from rest_framework.exceptions import ValidationError

    spec = get_experiment_kind(kind)
    if spec.parameters_serializer is not None:
        ser = spec.parameters_serializer(data=parameters)
        if isinstance(parameters, dict):
            allowed = sorted(name for name, f in ser.fields.items() if not f.read_only)
            unknown = sorted(str(k) for k in parameters if k not in allowed)
            if unknown:
                msg = f"unknown parameter; allowed: {', '.join(allowed)}"
                raise ValidationError({k: [msg] for k in unknown})
        ser.is_valid(raise_exception=True)
        parameters = dict(ser.validated_data)
    with transaction.atomic():
        exp = Experiment.objects.create(owner=owner, kind=kind, parameters=parameters, name=name)
        transaction.on_commit(lambda: experiment_enqueue(experiment=exp))
    return exp


def experiment_enqueue(*, experiment: Experiment) -> bool:
    """Send the experiment to its kind's Celery queue. Returns ``False`` (and logs why) when the
    broker cannot be reached: the stored row stays ``queued`` and the reconciler sends it again
    once the broker is back (:mod:`webapp.reconcile`), so a submission accepted while the broker
    is down is neither lost nor answered with a 500 for a row that was committed."""
    from kombu.exceptions import OperationalError as BrokerUnreachable

    from workers.tasks.platform import run_experiment

    spec = get_experiment_kind(experiment.kind)
    try:
        run_experiment.apply_async(args=[experiment.pk], queue=spec.queue_for(experiment.parameters))
    except BrokerUnreachable as err:
        log.warning("experiment %s: not enqueued, the broker is unreachable (%s); the reconciler enqueues it later",
                    experiment.pk, err)
        return False
    return True


def experiment_run(*, experiment_id: int) -> Experiment:
    """Run an experiment to a terminal state, holding its lease (:mod:`webapp.leases`).

    Idempotent: a terminal experiment is returned as it is; a ``running`` one whose lease
    expired (its worker was lost, the task redelivered) is taken over and its runner resumes; a
    ``running`` one whose lease is live is left to its holder (this delivery waits up to two
    lease periods for the holder to finish or die, then returns). Errors in the runner mark it
    ``failed`` with ``error`` = ``"<ExceptionType>: <message>"`` (the traceback goes to the log);
    a lost database connection is re-raised instead (as ``OperationalError`` also when the runner
    raised it wrapped in another error, :func:`database_lost`), so the task is retried and the
    experiment is not failed for the database's restart."""
    import time

    from django.db import InterfaceError, OperationalError
    from django.utils import timezone

    from .leases import Heartbeat, LeaseLost, expiry, lease_seconds, new_holder

    holder = new_holder()
    give_up = time.monotonic() + 2 * lease_seconds()
    waited = False
    while True:
        with transaction.atomic():
            exp = Experiment.objects.select_for_update().get(pk=experiment_id)
            if exp.is_terminal:
                return exp
            if exp.cancel_requested:
                exp.transition_to(State.CANCELLED)
                exp.save()
                return exp
            now = timezone.now()
            held = exp.state == State.RUNNING and exp.lease_owner and exp.lease_expires_at and exp.lease_expires_at > now
            if not held:
                if exp.state == State.QUEUED:
                    exp.transition_to(State.RUNNING)
                previous = exp.lease_owner
                exp.attempts += 1
                exp.lease_owner, exp.lease_expires_at = holder, expiry(now)
                if exp.attempts > 1:
                    exp.progress_message = (f"resumed (attempt {exp.attempts})"
                                            + (f"; the run {previous} stopped renewing its lease" if previous else ""))[:255]
                exp.save()
                break
        if not waited:
            waited = True
            log.info("experiment %s is running under %s; this delivery waits for that run to end or lose its lease",
                     experiment_id, exp.lease_owner)
        if time.monotonic() > give_up:
            log.info("experiment %s is running under %s; this delivery leaves it to that run", experiment_id, exp.lease_owner)
            return exp
        time.sleep(lease_seconds() / 4)

    spec = get_experiment_kind(exp.kind)
    heartbeat = Heartbeat(exp.pk, holder)
    heartbeat.start()
    reporter = ProgressReporter(exp, heartbeat=heartbeat)
    try:
        result = spec.run(exp, reporter)
    except LeaseLost:
        log.warning("experiment %s: stopped, another run took it over", exp.pk)
    except Cancelled:
        _finish(exp.pk, State.CANCELLED, holder, error="cancelled by request")
    except (OperationalError, InterfaceError):
        raise  # the database went away: let the task retry (workers/tasks/platform.py DB_RETRY)
    except Exception as err:  # noqa: BLE001 - any failure of the runner is recorded as data
        if database_lost(err, reporter):  # a lost connection that reached here wrapped in another error
            log.warning("experiment %s: the database went away during the run (%s: %s); retrying",
                        exp.pk, type(err).__name__, str(err)[:200])
            raise OperationalError(f"database lost during the run: {type(err).__name__}: {err}") from err
        log.exception("experiment %s failed", exp.pk)
        _finish(exp.pk, State.FAILED, holder, error=f"{type(err).__name__}: {err}")
    else:
        _finish(exp.pk, State.SUCCEEDED, holder, result=result)
    finally:
        heartbeat.stop()
    return Experiment.objects.get(pk=exp.pk)


def database_lost(err: BaseException, reporter: ProgressReporter | None = None) -> bool:
    """Whether a runner's failure ``err`` came from losing the database (a restart, a failover)
    rather than from the work itself, so the run must be retried, not marked failed.

    True when a ``django.db`` ``OperationalError`` or ``InterfaceError`` is anywhere in the
    error's ``__cause__`` / ``__context__`` chain (an engine wrapped it), or when the run's
    ``reporter`` saw one in a progress report or a recorded row (:attr:`ProgressReporter.database_error`):
    a library may re-raise a callback's exception by its message only (TVM's FFI turns the
    ``OperationalError`` of a MetaSchedule measure callback into a ``RuntimeError`` with neither
    type nor chain), and by then PostgreSQL may be back, so the connection itself proves nothing."""
    from django.db import InterfaceError, OperationalError

    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (OperationalError, InterfaceError)):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return reporter is not None and reporter.database_error is not None


def _finish(pk: int, state: str, holder: str, *, result: dict | None = None, error: str = "") -> None:
    """Write the terminal state, unless another run holds the lease now (then it writes)."""
    with transaction.atomic():
        exp = Experiment.objects.select_for_update().get(pk=pk)
        if exp.is_terminal or (exp.lease_owner and exp.lease_owner != holder):
            return
        exp.transition_to(state, error=error)
        if result is not None:
            exp.result = result
        if state == State.SUCCEEDED:
            exp.progress = 100
        exp.lease_owner, exp.lease_expires_at = "", None
        exp.save()


def experiment_cancel(*, experiment: Experiment) -> Experiment:
    """Cancel a queued experiment at once; ask a running one to stop at its next progress report.

    Raises :class:`webapp.states.IllegalTransition` if it already finished.
    """
    with transaction.atomic():
        exp = Experiment.objects.select_for_update().get(pk=experiment.pk)
        if exp.state == State.QUEUED:
            exp.transition_to(State.CANCELLED, error="cancelled before it started")
        elif exp.state == State.RUNNING:
            exp.cancel_requested = True
        else:
            from .states import check_transition

            check_transition(exp, exp.state, State.CANCELLED)  # raises: terminal
        exp.save()
    return exp


# --- Jobs -------------------------------------------------------------------------------
# Contract: webapp/jobs.py. A job is validated by the registered job scheduler, stored queued,
# and after commit ``schedule()`` decides which queued jobs start now; each is dispatched to the
# worker exactly once (``dispatched_at``), runs real training steps (job_run) and, when it ends,
# frees its GPUs and calls ``schedule()`` again.


class JobCancelled(Exception):
    """Raised inside :func:`job_run`'s step callback when the job was cancelled meanwhile."""


class StepWatch:
    """When :func:`job_run`'s per-step callback touches the database: it writes ``progress``
    (integer percent) when the percent changes, and checks for cancellation then AND whenever
    ``interval_s`` seconds of wall time (``clock``, default :func:`time.monotonic`) passed since
    the last check, so a cancel of a long job (e.g. 100000 steps: a percent every 1000 steps)
    takes effect within about ``interval_s`` seconds plus one step.
    """

    def __init__(self, steps: int, *, interval_s: float = 1.0, clock=None) -> None:
        import time

        self.steps, self.interval_s = steps, interval_s
        self.clock = clock or time.monotonic
        self.last_pct = -1
        self.last_check: float | None = None

    def step(self, i: int) -> tuple[int | None, bool]:
        """For step ``i`` (1-based): ``(percent to write or None, whether to check cancellation)``."""
        now = self.clock()
        pct = int(100 * i / self.steps)
        write = pct if pct != self.last_pct else None
        self.last_pct = pct
        check = write is not None or self.last_check is None or now - self.last_check >= self.interval_s
        if check:
            self.last_check = now
        return write, check


def job_submit(
    *,
    owner: AbstractBaseUser,
    model_name: str,
    batch_size: int,
    num_gpus: int = 1,
    steps: int = 100,
    name: str = "",
    cluster=None,
) -> "Job":
    """Validate and store a job as ``queued``; after commit, ask a ``control`` worker for a
    scheduling pass (:func:`job_schedule_soon`), which places and dispatches the queued jobs that
    start now.

    Raises :class:`webapp.jobs.JobRejected` (``.field`` names the offending field) for an
    unknown torchvision model, a non-positive size, or a job the scheduler says can never run;
    nothing is stored then.
    """
    from .backends.training import torchvision_model_names
    from .jobs import JobRejected, get_job_scheduler
    from .models import Job

    if model_name not in torchvision_model_names():
        raise JobRejected(f"unknown model {model_name!r}: not a torchvision classification model", field="model_name")
    for field, value in (("batch_size", batch_size), ("steps", steps)):
        if value < 1:
            raise JobRejected(f"{field} must be at least 1, got {value}", field=field)
    if num_gpus < 0:
        raise JobRejected(f"num_gpus must be 0 or more, got {num_gpus}", field="num_gpus")
    job = Job(owner=owner, model_name=model_name, batch_size=batch_size, num_gpus=num_gpus, steps=steps, name=name, cluster=cluster)
    get_job_scheduler().validate(job)
    # no savepoint: inside the API's transaction one would cost two round trips, and an error
    # here rolls back the whole submission anyway
    with transaction.atomic(savepoint=False):
        job.save()
        transaction.on_commit(job_schedule_soon)
    return job


# --- The scheduling pass ----------------------------------------------------------------
# Placement at the scale of an imported cluster takes seconds (the PAI table: 6,742 GPUs), so it
# runs in a worker on the ``control`` queue, never in the web process: a pass there held the web
# process's GIL and every request thread waited (bench/api_load.py: ~70 acknowledged submissions/s,
# p99 2-3 s). A submission only asks for a pass; requests for a pass that has not started yet are
# one request (debounced in the broker's Redis), and passes are coalesced (at most one running,
# one waiting) across control workers.

#: Celery queue of the scheduling pass and the reconciler (docs/deployment.md: a small worker of
#: its own, so a long experiment on ``cpu`` never delays placement)
CONTROL_QUEUE = "control"
#: Redis key, in the broker's database, that exists while a pass was requested and has not started
SCHEDULE_PENDING_KEY = "tandem:schedule-pending"
#: seconds after which a pending mark whose message was lost stops suppressing new requests
SCHEDULE_PENDING_TTL_S = 30
#: seconds a requested pass waits before it starts (the message's countdown), so that the
#: submissions of that window share one pass: each pass reads and locks every GPU row and
#: rebuilds the cluster state, a fixed cost that back-to-back passes paid over and over under
#: load (bench/api_load.py, docs/platform.md). A job waits at most this much longer to be placed.
SCHEDULE_BATCH_S = 0.5

_redis_clients: dict[str, Any] = {}


def _broker_redis():
    """A client of the broker's Redis (one per process and URL; thread-safe pool), or ``None``
    when the broker is not Redis (the demo's filesystem transport)."""
    from django.conf import settings

    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    if url not in _redis_clients:
        import redis

        _redis_clients[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return _redis_clients[url]


def job_schedule_soon() -> None:
    """Ask a ``control`` worker for a scheduling pass (task ``tandem.schedule_jobs``); called when
    a submission, a cancel or a finished job commits; the pass starts :data:`SCHEDULE_BATCH_S`
    later. At most one request waits at a time: while :data:`SCHEDULE_PENDING_KEY` is set, the
    pass it asked for has not started and will read this caller's committed change, so nothing
    more is sent (one Redis ``SET NX`` per submission instead of one message). Never raises:
    with the broker unreachable the change stays committed and the reconciler's periodic pass
    (every ``TANDEM_RECONCILE_S``) or the next request places it; the failure is logged."""
    from workers.tasks.platform import schedule_jobs

    r = _broker_redis()
    try:
        if r is not None and not r.set(SCHEDULE_PENDING_KEY, "1", nx=True, ex=SCHEDULE_PENDING_TTL_S):
            return
        schedule_jobs.apply_async(queue=CONTROL_QUEUE, countdown=SCHEDULE_BATCH_S)
    except Exception as err:  # noqa: BLE001 - the caller's change is committed; a later pass places it
        log.warning("scheduling pass not requested (%s: %s); the reconciler's pass or the next submission places the job",
                    type(err).__name__, err)
        if r is not None:
            try:
                r.delete(SCHEDULE_PENDING_KEY)
            except Exception:  # noqa: BLE001 - the mark expires after SCHEDULE_PENDING_TTL_S
                pass


def job_schedule_requested() -> list["Job"]:
    """The ``control`` worker's side of :func:`job_schedule_soon`: clear the pending mark (a
    request after this point sends a new message), then run one coalesced pass
    (:func:`job_schedule_coalesced`). Returns the jobs it dispatched.

    A pass that dispatched jobs and left others queued and unsent asks for the next pass itself:
    a policy looks at a window of the queue (Horus: the first 256 jobs), so a burst larger than
    the window would otherwise wait, placeable, until the next submission or the reconciler's
    period (bench/api_load.py: 241 jobs still unplaced 120 s after a 500/s burst). A pass that
    dispatched nothing asks for none: what is left does not fit now, and a finished or
    cancelled job asks for a pass when it frees GPUs."""
    from .models import Job

    r = _broker_redis()
    if r is not None:
        r.delete(SCHEDULE_PENDING_KEY)
    sent = job_schedule_coalesced()
    if sent and Job.objects.filter(state=State.QUEUED, dispatched_at__isnull=True).exists():
        job_schedule_soon()
    return sent


#: PostgreSQL advisory-lock keys of the coalesced scheduling pass (arbitrary, fixed 64-bit ints)
_PASS_RUNNING, _PASS_NEXT = 0x74616E64656D0001, 0x74616E64656D0002
_local_running, _local_next = threading.Lock(), threading.Lock()


def job_schedule_coalesced() -> list["Job"]:
    """:func:`job_schedule`, coalesced: at most one pass runs and at most one waits to run after
    it; a caller that finds a pass already waiting returns at once (``[]``), because that waiting
    pass has not yet read the queue and so will place this caller's jobs (committed before this
    call). Without it a burst of N submissions ran N passes, each locking every GPU row of the
    cluster in turn. On PostgreSQL the two slots are session advisory locks (shared by every
    worker process and machine); elsewhere (the demo's SQLite) thread locks."""
    with _pass_slots() as run:
        return job_schedule() if run else []


@contextmanager
def _pass_slots() -> Iterator[bool]:
    """Yields whether this caller runs a pass (see :func:`job_schedule_coalesced`): take the
    "next" slot or return (False), wait for the "running" slot, free "next", run, free "running"."""
    from django.db import connection

    if connection.vendor != "postgresql":
        if not _local_next.acquire(blocking=False):
            yield False
            return
        try:
            _local_running.acquire()
        finally:
            _local_next.release()
        try:
            yield True
        finally:
            _local_running.release()
        return
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s)", [_PASS_NEXT])
        if not cur.fetchone()[0]:
            yield False
            return
        try:
            cur.execute("SELECT pg_advisory_lock(%s)", [_PASS_RUNNING])
        finally:
            cur.execute("SELECT pg_advisory_unlock(%s)", [_PASS_NEXT])
    try:
        yield True
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", [_PASS_RUNNING])


def job_schedule() -> list["Job"]:
    """Ask the registered job scheduler for the jobs that start now and dispatch each of them
    once (:func:`job_dispatch`). Returns the jobs dispatched by this call."""
    from .jobs import get_job_scheduler

    return job_dispatch(jobs=get_job_scheduler().schedule())


def job_dispatch(*, jobs: list["Job"]) -> list["Job"]:
    """Send each queued job of ``jobs`` to the ``run_job`` Celery task unless it was already sent,
    all in one transaction: the rows are locked, those still ``queued`` and unsent are stamped
    ``dispatched_at``, and their messages go out after the commit (``gpu`` queue for a job holding
    GPUs, else ``cpu``). Concurrent schedulers never send a job twice: the row lock and the
    ``dispatched_at IS NULL`` condition decide. Returns the jobs this call sent, in order.
    (One transaction per job cost ~6 ms each: a pass placing 100 jobs spent 0.6 s there.)"""
    from django.utils import timezone

    from .models import Job

    if not jobs:
        return []
    with transaction.atomic():
        ids = [j.pk for j in jobs]
        list(Job.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))  # lock, in pk order
        unsent = Job.objects.filter(pk__in=ids, state=State.QUEUED, dispatched_at__isnull=True)
        claimed = set(unsent.values_list("pk", flat=True))
        if not claimed:
            return []
        Job.objects.filter(pk__in=claimed).update(dispatched_at=timezone.now())
        holding = set(Job.gpus.through.objects.filter(job_id__in=claimed).values_list("job_id", flat=True))
        sent = [j for j in jobs if j.pk in claimed]
        queues = [(j.pk, "gpu" if j.num_gpus and j.pk in holding else "cpu") for j in sent]
        transaction.on_commit(lambda: _send_jobs(queues))
    return sent


def _send_jobs(queues: list[tuple[int, str]]) -> None:
    """Publish ``run_job`` for each ``(job id, queue)`` (after :func:`job_dispatch` committed)."""
    from workers.tasks.platform import run_job

    with run_job.app.producer_or_acquire() as producer:  # one broker connection for the batch
        for pk, queue in queues:
            run_job.apply_async(args=[pk], queue=queue, producer=producer)


def job_cancel(*, job: "Job") -> "Job":
    """Cancel a job: a queued one at once, a running one at its next training step (the worker
    sees the state and stops). Frees its GPUs and lets the scheduler use them.

    Raises :class:`webapp.states.IllegalTransition` for a finished job.
    """
    from .models import Job

    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        locked.transition_to(State.CANCELLED, error="cancelled by request")
        locked.save()
        locked.gpus.clear()
        transaction.on_commit(job_schedule_soon)
    return locked


def device_note(*, assigned: list[tuple[str, bool]], device: str, worker_node: str) -> str:
    """Why a job's run differs from its placement, in words for the operator ("" when it does not).

    ``assigned``: one ``(node name, node has a Tandem GPU worker)`` per GPU the scheduler gave the
    job (a node has a worker once a ``--gpu`` worker has reported it: ``Node.last_heartbeat`` is
    set); ``device``: where the worker actually ran it (``"cpu"`` or ``"cuda:<i>"``);
    ``worker_node``: the worker's node name (``TANDEM_NODE_NAME``, default the host name).
    Imported nodes (a PAI table, Kubernetes ``Node`` objects) have no worker: a job placed on them
    runs on whichever worker took its task, on that worker's CPU when it has no GPU.
    """
    if not assigned:
        return ""
    nodes = sorted({name for name, _ in assigned})
    without = sorted({name for name, has_worker in assigned if not has_worker})
    parts = []
    if without:
        parts.append(f"placed on GPUs of node{'s' if len(without) > 1 else ''} {', '.join(without)}, "
                     "which no Tandem worker reports (an imported node)")
    elif worker_node not in nodes:
        parts.append(f"placed on GPUs of {', '.join(nodes)} but taken by the worker on {worker_node}")
    if device == "cpu":
        parts.append(f"it ran on the CPU of worker {worker_node}")
    elif parts:
        parts.append(f"it ran on {device} of worker {worker_node}")
    return "; ".join(parts)


def job_run(*, job_id: int) -> "Job":
    """The worker's execution of a job: ``steps`` real SGD steps of torchvision ``model_name``
    at ``batch_size`` on synthetic images (see :func:`webapp.backends.training.train_steps`)
    on CUDA when available and GPUs are assigned, else CPU. Progress is written as steps go;
    a cancel is seen within about a second of steps (:class:`StepWatch`).

    Idempotent: a terminal job is returned untouched; a ``running`` job (its worker was lost
    and the task redelivered) is restarted from step 0; the result (``steps``, ``seconds``,
    ``samples_per_second``, ``device``, ``gpus``, ``worker``: the worker's node name, and ``note``
when it did not run where it was placed) is written once, together with the terminal
    state, under a row lock. Failures mark the job ``failed`` with the error. Afterwards the
    job's GPUs are freed and the scheduler is asked for the next jobs.
    """
    from django.conf import settings

    from .backends.training import pick_device, train_steps
    from .models import Job

    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.is_terminal:
            return job
        if job.state == State.QUEUED:
            job.transition_to(State.RUNNING)
        job.attempts += 1
        job.progress = 0
        job.save()
        gpus = list(job.gpus.select_related("node").order_by("index"))

    watch = StepWatch(job.steps, interval_s=1.0)

    def on_step(i: int) -> None:
        pct, check = watch.step(i)
        if pct is not None:
            Job.objects.filter(pk=job_id).update(progress=pct)
        if check and Job.objects.filter(pk=job_id, state=State.CANCELLED).exists():
            raise JobCancelled(f"job {job_id} was cancelled")

    result = None
    error = ""
    try:
        device = pick_device([g.index for g in gpus])
        res = train_steps(
            model_name=job.model_name, batch_size=job.batch_size, steps=job.steps,
            device=device, image_size=settings.JOB_IMAGE_SIZE, seed=job.pk, threads=settings.TORCH_THREADS,
            on_step=on_step,
        )
        result = res.as_dict() | {"gpus": [g.pk for g in gpus], "attempt": job.attempts}
        worker_node = os.environ.get("TANDEM_NODE_NAME", socket.gethostname())
        result["worker"] = worker_node
        note = device_note(assigned=[(g.node.name, g.node.last_heartbeat is not None) for g in gpus],
                           device=device, worker_node=worker_node)
        if note:
            result["note"] = note
            log.warning("job %s: %s", job_id, note)
    except JobCancelled:
        pass
    except Exception as err:  # noqa: BLE001 - recorded as data on the job
        log.exception("job %s failed", job_id)
        error = f"{type(err).__name__}: {err}"
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if not job.is_terminal:
            if result is not None:
                job.transition_to(State.SUCCEEDED)
                job.result = result
                job.progress = 100
            else:
                job.transition_to(State.FAILED, error=error or "stopped")
            job.save()
        job.gpus.clear()
        transaction.on_commit(job_schedule_soon)
    return job


# --- The platform's own experiment kind: a training probe -------------------------------


def training_probe_run(experiment: Experiment, reporter: ProgressReporter) -> dict[str, Any]:
    """Runner of the ``training-probe`` experiment kind: real training steps of a torchvision
    model on CPU (parameters: ``model_name``, ``batch_size``, ``steps``, ``image_size``),
    reporting progress each step. Result: as :class:`webapp.backends.training.TrainingResult`.
    Restarts from step 0 when redelivered."""
    from django.conf import settings

    from .backends.training import train_steps

    p = experiment.parameters
    steps = int(p["steps"])
    res = train_steps(
        model_name=p["model_name"], batch_size=int(p["batch_size"]), steps=steps,
        device="cpu", image_size=int(p.get("image_size", 224)), seed=experiment.pk, threads=settings.TORCH_THREADS,
        on_step=lambda i: reporter.report(100 * i / steps, f"step {i}/{steps}"),
    )
    return res.as_dict() | {"attempt": experiment.attempts}


# --- Nodes and GPUs reported by workers -------------------------------------------------


def node_report_gpus(*, cluster_name: str, node_name: str, gpus: list[dict[str, Any]], cpu_cores: float, memory_mib: int) -> "Node":
    """Upsert the worker's node (in cluster ``cluster_name``, created if missing) and its GPUs
    as reported by NVML: each ``{"index", "model", "memory_mib", "uuid"}``. GPUs no longer
    reported are deleted; ``last_heartbeat`` is set to now. One transaction."""
    from django.utils import timezone

    from .models import Cluster, GPUDevice, Node

    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(name=cluster_name, defaults={"kind": Cluster.Kind.OTHER})
        node, _ = Node.objects.select_for_update().get_or_create(
            cluster=cluster, name=node_name, defaults={"cpu_cores": cpu_cores, "memory_mib": memory_mib}
        )
        node.last_heartbeat = timezone.now()
        node.save(update_fields=["last_heartbeat"])
        seen = []
        for g in gpus:
            GPUDevice.objects.update_or_create(
                node=node, index=int(g["index"]),
                defaults={"model": g["model"], "memory_mib": int(g["memory_mib"]), "uuid": g.get("uuid", "")},
            )
            seen.append(int(g["index"]))
        node.gpus.exclude(index__in=seen).delete()
    return node


# --- Node import ------------------------------------------------------------------------


def nodes_import(*, cluster_name: str, cluster_kind: str, specs: list, progress=None) -> dict[str, int]:
    """Store parsed :class:`webapp.importers.NodeSpec` rows in cluster ``cluster_name``
    (created with ``cluster_kind`` if missing), in ONE transaction: a node that exists is
    updated and its GPUs replaced, so importing the same file twice changes nothing.
    ``progress(n)`` is called per node (e.g. a tqdm ``update``).

    Returns ``{"nodes_created", "nodes_updated", "gpus"}``. Raises ``ValueError`` if ``specs``
    is empty (nothing is stored).
    """
    from .models import Cluster, GPUDevice, Node

    if not specs:
        raise ValueError("no nodes to import")
    created = updated = ngpus = 0
    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(name=cluster_name, defaults={"kind": cluster_kind})
        existing = {n.name: n for n in cluster.nodes.all()}
        new_gpus = []
        for s in specs:
            node = existing.get(s.name)
            fields = dict(cpu_cores=s.cpu_cores, memory_mib=s.memory_mib, labels=s.labels, taints=s.taints)
            if node is None:
                node = Node.objects.create(cluster=cluster, name=s.name, **fields)
                created += 1
            else:
                for k, v in fields.items():
                    setattr(node, k, v)
                node.save()
                node.gpus.all().delete()
                updated += 1
            new_gpus += [GPUDevice(node=node, index=i, model=s.gpu_model, memory_mib=s.gpu_memory_mib) for i in range(s.gpu_count)]
            ngpus += s.gpu_count
            if progress:
                progress(1)
        GPUDevice.objects.bulk_create(new_gpus, batch_size=1000)
    return {"nodes_created": created, "nodes_updated": updated, "gpus": ngpus}
