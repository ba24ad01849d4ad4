"""The engine plug: the one shape in which every engine's work reaches the platform.

Importing this module needs no Django, Celery or heavy library, so an engine's Django-free
pipeline, its management command and its benchmark can all use it.

Every engine has the same three places:

``<engine>/pipeline.py`` (Django-free)
    ``run(params, *, report, record) -> dict``: does the work. ``params`` is a plain dict of
    already-validated parameters (the engine's serializer defines them). ``report(percent,
    message)`` gives progress (percent 0-100) and raises :class:`Cancelled` once the caller wants
    the work to stop, so long work stops at its next report. ``record(table, rows)`` hands over
    result rows (tuning records, per-job outcomes, learning-curve points, ...) as soon as they
    exist, so a caller can keep them: nothing measured waits for the end of the run. The return
    value is the JSON-serialisable result summary. ``resume`` (keyword, default ``None``) is
    ``{table: rows}`` of everything recorded by an earlier, interrupted run of the same work
    (:func:`webapp.experiments.run_pipeline` passes it on a redelivery), so a pipeline skips
    what it already finished instead of starting again from zero.

``<engine>/experiment.py`` (Django)
    The experiment kind(s): the parameters serializer, the runner ``(experiment, reporter) ->
    dict`` that binds ``report`` and ``record`` to the database and calls the pipeline, and the
    :class:`webapp.experiments.ExperimentKind` that ties them together.

``<engine>/apps.py``
    Only registers: the kind(s), the demo step, the job scheduler.

The Celery task (``tandem.run_experiment``), the engine's management command and its benchmark
all go through ``pipeline.run``; none drives the heavy library itself.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

#: ``report(percent, message)``: progress, percent 0-100; may raise :class:`Cancelled`.
Report = Callable[[float, str], None]
#: ``record(table, rows)``: result rows as soon as they exist; ``table`` names the kind of row.
Record = Callable[[str, list[dict[str, Any]]], None]


class Cancelled(Exception):
    """Raised by a ``report`` callback when the work must stop (the owner cancelled it, or the
    process got SIGINT/SIGTERM). A pipeline lets it propagate after keeping what it measured."""


class Pipeline(Protocol):
    """An engine's Django-free entry point (see the module docstring)."""

    def __call__(self, params: Mapping[str, Any], *, report: Report, record: Record,
                 resume: Mapping[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
        ...


def no_report(percent: float, message: str = "") -> None:
    """A ``report`` that ignores progress (for notebooks and benchmarks that print nothing)."""


class Collect:
    """A ``record`` that keeps every row in memory, by table: ``collect.rows["records"]``."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.rows.setdefault(table, []).extend(rows)
