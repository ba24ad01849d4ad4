"""A run that loses its database connection is retried, not failed, even when the error reaches
``experiment_run`` wrapped by a library that keeps only its message (TVM's FFI re-raises a
MetaSchedule callback's ``OperationalError`` as ``RuntimeError(message)``), and even though the
database answers again by the time the run ends (issue 24: "a database error that lands in
``except Exception`` just as PostgreSQL comes back can mark an experiment failed"). In-process
against PostgreSQL: the run's connection is closed under it, as a server restart does."""
from __future__ import annotations

import pytest
from django.db import OperationalError, connection

from webapp import experiments as ex
from webapp.models import Experiment
from webapp.services import experiment_run
from webapp.states import State

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _lose_connection_then(raise_as):
    def run(experiment, reporter):
        reporter.report(10, "working")
        connection.connection.close()  # the server went away under this connection
        message = None
        try:
            reporter.report(20, "still working")
        except Exception as err:  # noqa: BLE001
            message = str(err)
        raise raise_as(message)  # outside the except: no cause, no context, as the FFI gives it
    return run


@pytest.fixture
def kind():
    ex.register_experiment_kind(ex.ExperimentKind(kind="test-db-lost", run=_lose_connection_then(RuntimeError)))
    ex.register_experiment_kind(ex.ExperimentKind(kind="test-plain-failure", run=lambda e, r: (_ for _ in ()).throw(RuntimeError("bad input"))))
    yield
    ex._REGISTRY.pop("test-db-lost", None)
    ex._REGISTRY.pop("test-plain-failure", None)


def test_a_wrapped_database_error_is_retried_not_failed(kind, django_user_model):
    exp = Experiment.objects.create(owner=django_user_model.objects.create_user("flo"), kind="test-db-lost")
    try:
        with pytest.raises(OperationalError, match="database lost during the run: RuntimeError"):
            experiment_run(experiment_id=exp.pk)
    finally:
        connection.close()  # as Celery's Django fix-up does after the task
    exp.refresh_from_db()
    assert (exp.state, exp.error, exp.attempts, exp.progress) == (State.RUNNING, "", 1, 10)


def test_a_failure_without_a_database_error_is_recorded(kind, django_user_model):
    exp = Experiment.objects.create(owner=django_user_model.objects.create_user("gil"), kind="test-plain-failure")
    exp = experiment_run(experiment_id=exp.pk)
    assert (exp.state, exp.error) == (State.FAILED, "RuntimeError: bad input")
