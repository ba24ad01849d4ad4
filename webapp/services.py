"""Platform services (HackSoft style: functions that write, keyword-only arguments)."""
from __future__ import annotations

import logging
import traceback
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from .experiments import ExperimentCancelled, ProgressReporter, get_experiment_kind
from .models import Experiment
from .states import State

log = logging.getLogger(__name__)


def experiment_create(*, owner: AbstractBaseUser, kind: str, parameters: dict[str, Any], name: str = "") -> Experiment:
    """Validate ``parameters`` with the kind's serializer, store the experiment as ``queued`` and
    enqueue it on the kind's queue once the transaction commits.

    Raises :class:`webapp.experiments.UnknownExperimentKind` and
    ``rest_framework.exceptions.ValidationError`` (per-field errors); nothing is stored then.
    """
    spec = get_experiment_kind(kind)
    if spec.parameters_serializer is not None:
        ser = spec.parameters_serializer(data=parameters)
        ser.is_valid(raise_exception=True)
        parameters = dict(ser.validated_data)
    with transaction.atomic():
        exp = Experiment.objects.create(owner=owner, kind=kind, parameters=parameters, name=name)
        transaction.on_commit(lambda: experiment_enqueue(experiment=exp))
    return exp


def experiment_enqueue(*, experiment: Experiment) -> None:
    """Send the experiment to its kind's Celery queue."""
    from workers.tasks.platform import run_experiment

    spec = get_experiment_kind(experiment.kind)
    run_experiment.apply_async(args=[experiment.pk], queue=spec.queue)


def experiment_run(*, experiment_id: int) -> Experiment:
    """Run an experiment to a terminal state. Idempotent: a terminal experiment is returned as
    it is; a ``running`` one (its worker was lost, the task redelivered) is run again and its
    runner resumes. Errors in the runner mark it ``failed`` with the traceback's last line."""
    with transaction.atomic():
        exp = Experiment.objects.select_for_update().get(pk=experiment_id)
        if exp.is_terminal:
            return exp
        if exp.cancel_requested:
            exp.transition_to(State.CANCELLED)
            exp.save()
            return exp
        if exp.state == State.QUEUED:
            exp.transition_to(State.RUNNING)
        exp.attempts += 1
        exp.save()
    spec = get_experiment_kind(exp.kind)
    reporter = ProgressReporter(exp)
    try:
        result = spec.run(exp, reporter)
    except ExperimentCancelled:
        _finish(exp.pk, State.CANCELLED, error="cancelled by request")
    except Exception as err:  # noqa: BLE001 - any failure of the runner is recorded as data
        log.exception("experiment %s failed", exp.pk)
        _finish(exp.pk, State.FAILED, error=f"{type(err).__name__}: {err}\n\n{traceback.format_exc()[-4000:]}")
    else:
        _finish(exp.pk, State.SUCCEEDED, result=result)
    return Experiment.objects.get(pk=exp.pk)


def _finish(pk: int, state: str, *, result: dict | None = None, error: str = "") -> None:
    with transaction.atomic():
        exp = Experiment.objects.select_for_update().get(pk=pk)
        if exp.is_terminal:
            return
        exp.transition_to(state, error=error)
        if result is not None:
            exp.result = result
        if state == State.SUCCEEDED:
            exp.progress = 100
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
