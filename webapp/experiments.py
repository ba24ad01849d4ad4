"""Registry of experiment kinds and the progress reporter every engine's runner uses.

An engine registers its kind once, in its ``AppConfig.ready()``::

    register_experiment_kind(ExperimentKind(
        kind="simulation", run=simulation_run, parameters_serializer=SimulationParams, queue="cpu"))

``run(experiment, reporter) -> dict`` does the work and returns the JSON-serialisable result
summary. It must be idempotent or resumable: a worker lost mid-run means the same experiment is
run again (``experiment.attempts`` tells how often it started). It reports progress through
``reporter.report(percent, message)``, which also raises :class:`ExperimentCancelled` once a
cancellation was requested, so long work stops at the next report.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from rest_framework.serializers import Serializer

    from .models import Experiment


from .plug import Cancelled


class ExperimentCancelled(Cancelled):
    """Raised by :meth:`ProgressReporter.report` when the experiment's owner cancelled it (a
    :class:`webapp.plug.Cancelled`, so a pipeline treats it like any other stop request)."""


class UnknownExperimentKind(KeyError):
    """Raised for a kind nobody registered; the message lists the registered kinds."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class ExperimentKind:
    """How to run one kind of experiment.

    ``run``: ``(experiment, reporter) -> dict`` result summary.
    ``parameters_serializer``: DRF serializer class validating ``parameters`` (``None``: any dict).
    ``queue``: Celery queue, ``"cpu"`` or ``"gpu"``.
    ``route``: optional ``(parameters) -> queue`` for kinds whose queue depends on the
    parameters (tuning: ``gpu`` for a CUDA target, ``cpu`` otherwise); overrides ``queue``.
    ``headline``: optional ``(experiment) -> Headline | None``: a succeeded experiment's main
    figure against its baseline, shown on the landing page and in the demo's summary table.
    ``page``: optional ``(experiment) -> URL path`` of the engine page that shows it (the
    experiment list links there; without it, to the result in the API).
    """

    kind: str
    run: Callable[["Experiment", "ProgressReporter"], dict[str, Any]]
    parameters_serializer: type["Serializer"] | None = None
    queue: str = "cpu"
    route: Callable[[dict[str, Any]], str] | None = None
    headline: Callable[["Experiment"], "Headline | None"] | None = None
    page: Callable[["Experiment"], str] | None = None

    def queue_for(self, parameters: dict[str, Any]) -> str:
        """The Celery queue of an experiment with these parameters."""
        queue = self.route(parameters) if self.route is not None else self.queue
        if queue not in ("cpu", "gpu"):
            raise ValueError(f"queue must be 'cpu' or 'gpu', not {queue!r}")
        return queue


@dataclass(frozen=True)
class Headline:
    """One engine's headline: ``metric`` (e.g. ``"mean JCT"``), our value and the baseline's,
    already formatted with units (``"11.8 h"``), the baseline's name, and ``ratio`` = ours /
    baseline (``None`` where a ratio means nothing). ``better`` says which way is good:
    ``"lower"`` or ``"higher"``."""

    engine: str
    metric: str
    ours: str
    baseline_name: str
    baseline: str
    ratio: float | None = None
    better: str = "lower"
    note: str = ""

    @property
    def verdict(self) -> str:
        """``"better"``, ``"worse"`` or ``"tie"`` (within 2 %) by ``ratio`` and ``better``;
        ``""`` without a ratio."""
        if self.ratio is None:
            return ""
        if abs(self.ratio - 1.0) <= 0.02:
            return "tie"
        good = self.ratio < 1.0 if self.better == "lower" else self.ratio > 1.0
        return "better" if good else "worse"


_REGISTRY: dict[str, ExperimentKind] = {}


def register_experiment_kind(spec: ExperimentKind) -> None:
    """Register (or re-register, e.g. on autoreload) the runner of an experiment kind."""
    if spec.queue not in ("cpu", "gpu"):
        raise ValueError(f"queue must be 'cpu' or 'gpu', not {spec.queue!r}")
    _REGISTRY[spec.kind] = spec


def get_experiment_kind(kind: str) -> ExperimentKind:
    """Return the registered spec of ``kind``; raises :class:`UnknownExperimentKind`."""
    try:
        return _REGISTRY[kind]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownExperimentKind(f"unknown experiment kind {kind!r}; registered kinds: {known}") from None


def registered_kinds() -> list[str]:
    """Sorted names of the registered experiment kinds."""
    return sorted(_REGISTRY)


class ProgressReporter:
    """Writes an experiment's progress (percent 0-100, message) straight to the database, outside
    any transaction, so the API and dashboard see it live; raises :class:`ExperimentCancelled`
    when a cancellation was requested."""

    def __init__(self, experiment: "Experiment", *, heartbeat=None) -> None:
        self.experiment = experiment
        self.heartbeat = heartbeat  # webapp.leases.Heartbeat of the run, if it holds a lease
        #: The first ``OperationalError`` / ``InterfaceError`` a report or a recorded row met (the
        #: database went away): the run is retried even if a library re-raised it as another type.
        self.database_error: BaseException | None = None

    @contextmanager
    def database_call(self):
        """Context of the run's own database writes: notes a lost connection in
        :attr:`database_error` and re-raises it."""
        from django.db import InterfaceError, OperationalError

        try:
            yield
        except (OperationalError, InterfaceError) as err:
            if self.database_error is None:
                self.database_error = err
            raise

    def report(self, percent: float, message: str = "") -> None:
        """Progress never goes backwards: a resumed run that reports less than an earlier run
        reached keeps the higher figure (its message still shows). Raises
        :class:`webapp.leases.LeaseLost` when another run took the lease over."""
        from .leases import LeaseLost
        from .models import Experiment

        if self.heartbeat is not None and self.heartbeat.lost:
            raise LeaseLost(f"experiment {self.experiment.pk}: another run holds it now")
        pct = int(max(0, min(100, round(percent))))
        with self.database_call():
            rows = Experiment.objects.filter(pk=self.experiment.pk)
            if self.heartbeat is not None:
                rows = rows.filter(lease_owner=self.heartbeat.holder)
            if not rows.filter(progress__lt=pct).update(progress=pct, progress_message=message[:255]):
                rows.update(progress_message=message[:255])
            cancelled = Experiment.objects.filter(pk=self.experiment.pk, cancel_requested=True).exists()
        self.experiment.progress, self.experiment.progress_message = max(pct, self.experiment.progress), message[:255]
        if cancelled:
            raise ExperimentCancelled(f"experiment {self.experiment.pk} was cancelled")

    def cancelled(self) -> bool:
        """True once the owner asked to cancel (for runners that poll instead of reporting)."""
        from .models import Experiment

        return Experiment.objects.filter(pk=self.experiment.pk, cancel_requested=True).exists()


def run_pipeline(
    experiment: "Experiment",
    reporter: ProgressReporter,
    pipeline: Callable[..., dict[str, Any]],
    *,
    params: dict[str, Any] | None = None,
    on_record: Callable[[str, list[dict[str, Any]]], None] | None = None,
    restart_tables: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run an engine's Django-free pipeline (:mod:`webapp.plug`) for ``experiment``: the usual body
    of an experiment kind's runner.

    ``report`` is ``reporter.report`` (progress to the database; raises
    :class:`ExperimentCancelled` once cancelled). ``record(table, rows)`` stores the rows as
    :class:`webapp.models.ExperimentRecord` in their own committed transaction before it returns,
    then calls ``on_record(table, rows)`` (an engine's own mirroring, e.g. tuning records into its
    tables); a run that no longer holds the experiment's lease records nothing and gets
    :class:`webapp.leases.LeaseLost` instead (fencing: a run presumed dead and taken over cannot
    add rows beside its successor's). On a rerun (a redelivered task) the pipeline is called with ``resume={table: [rows in
    order]}`` of everything recorded before, so it can skip finished work; on a first run
    ``resume`` is ``{}``. ``restart_tables``: tables the pipeline computes again from the start on
    a rerun (it does not resume them); their earlier rows are deleted first, so a rerun leaves one
    set, not two. ``params`` defaults to ``experiment.parameters``. Returns the pipeline's result
    summary. Rows must be JSON-serialisable dicts (``TypeError`` otherwise).
    """
    from django.db import transaction
    from django.db.models import Max

    from .leases import LeaseLost
    from .models import Experiment, ExperimentRecord

    # fencing: a run that lost its lease (presumed dead, taken over) records nothing more
    holder = reporter.heartbeat.holder if reporter.heartbeat is not None else None
    if restart_tables:
        ExperimentRecord.objects.filter(experiment_id=experiment.pk, table__in=list(restart_tables)).delete()
    previous: dict[str, list[dict[str, Any]]] = {}
    for rec in ExperimentRecord.objects.filter(experiment_id=experiment.pk).order_by("seq"):
        previous.setdefault(rec.table, []).append(rec.row)

    def record(table: str, rows: list[dict[str, Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        if not all(isinstance(r, dict) for r in rows):
            raise TypeError(f"record({table!r}, rows): every row must be a dict")
        with reporter.database_call():
            with transaction.atomic():
                if holder is not None and not Experiment.objects.select_for_update().filter(pk=experiment.pk, lease_owner=holder).exists():
                    raise LeaseLost(f"experiment {experiment.pk}: another run holds it now; rows of {table!r} not recorded")
                last = ExperimentRecord.objects.filter(experiment_id=experiment.pk).aggregate(m=Max("seq"))["m"]
                start = 0 if last is None else last + 1
                ExperimentRecord.objects.bulk_create([
                    ExperimentRecord(experiment_id=experiment.pk, table=table[:64], seq=start + i, row=row)
                    for i, row in enumerate(rows)])
            if on_record is not None:
                on_record(table, rows)

    return pipeline(dict(experiment.parameters if params is None else params),
                    report=reporter.report, record=record, resume=previous)
