"""webapp.experiments.run_pipeline: rows recorded by a pipeline are committed before record()
returns (another connection sees them) and come back as ``resume`` when the experiment runs again."""
from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from webapp.experiments import ProgressReporter, run_pipeline
from webapp.models import Experiment, ExperimentRecord

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class Crash(RuntimeError):
    pass


def _count_from_another_connection(pk: int) -> int:
    """Rows of experiment ``pk`` as seen by a new database connection (a committed read)."""
    out: list[int] = []

    def read() -> None:
        try:
            out.append(ExperimentRecord.objects.filter(experiment_id=pk).count())
        finally:
            connection.close()

    t = threading.Thread(target=read)
    t.start()
    t.join()
    return out[0]


def test_records_are_committed_at_once_and_resume_a_rerun():
    user = get_user_model().objects.create_user("pipe")
    exp = Experiment.objects.create(owner=user, kind="simulation", parameters={"items": [1, 2, 3, 4]})
    seen_committed: list[int] = []
    resumes: list[dict] = []

    def pipeline(params, *, report, record, resume=None):
        """Squares items one by one, skipping those already recorded; crashes after item 2 on
        its first run."""
        resumes.append({k: list(v) for k, v in (resume or {}).items()})
        done = {r["item"] for r in (resume or {}).get("square", [])}
        for i, item in enumerate(params["items"]):
            if item in done:
                continue
            record("square", [{"item": item, "square": item * item}])
            seen_committed.append(_count_from_another_connection(exp.pk))
            report(100 * (i + 1) / len(params["items"]), f"item {item}")
            if item == 2 and not done:
                raise Crash("worker lost")
        return {"items": len(params["items"])}

    with pytest.raises(Crash):
        run_pipeline(exp, ProgressReporter(exp), pipeline)
    assert seen_committed == [1, 2]  # each row was visible to another connection at once
    assert resumes[0] == {}

    mirrored: list[tuple[str, list]] = []
    run_pipeline(exp, ProgressReporter(exp), pipeline, on_record=lambda t, rows: mirrored.append((t, rows)))
    assert resumes[1] == {"square": [{"item": 1, "square": 1}, {"item": 2, "square": 4}]}
    rows = list(ExperimentRecord.objects.filter(experiment=exp).values_list("seq", "row"))
    assert rows == [(0, {"item": 1, "square": 1}), (1, {"item": 2, "square": 4}),
                    (2, {"item": 3, "square": 9}), (3, {"item": 4, "square": 16})]
    assert mirrored == [("square", [{"item": 3, "square": 9}]), ("square", [{"item": 4, "square": 16}])]


def test_a_row_that_is_not_a_dict_is_refused_and_nothing_is_stored():
    user = get_user_model().objects.create_user("pipe2")
    exp = Experiment.objects.create(owner=user, kind="simulation", parameters={})

    def pipeline(params, *, report, record, resume=None):
        record("bad", [{"ok": 1}, [1, 2]])
        return {}

    with pytest.raises(TypeError, match="every row must be a dict"):
        run_pipeline(exp, ProgressReporter(exp), pipeline)
    assert ExperimentRecord.objects.filter(experiment=exp).count() == 0


def test_restart_tables_replace_an_interrupted_runs_rows():
    """A pipeline that computes a table again from the start on a rerun leaves one set of rows."""
    user = get_user_model().objects.create_user("pipe3")
    exp = Experiment.objects.create(owner=user, kind="federation-benchmark", parameters={})
    runs = []

    def pipeline(params, *, report, record, resume=None):
        runs.append(dict(resume or {}))
        record("sweep", [{"point": 0}, {"point": 1}])
        record("kept", [{"run": len(runs)}])
        if len(runs) == 1:
            raise Crash("worker lost")
        return {}

    with pytest.raises(Crash):
        run_pipeline(exp, ProgressReporter(exp), pipeline, restart_tables=("sweep",))
    run_pipeline(exp, ProgressReporter(exp), pipeline, restart_tables=("sweep",))
    assert runs[1] == {"kept": [{"run": 1}]}  # the restarted table is not handed back
    rows = [(t, r) for t, r in ExperimentRecord.objects.filter(experiment=exp).order_by("seq").values_list("table", "row")]
    assert rows == [("kept", {"run": 1}), ("sweep", {"point": 0}), ("sweep", {"point": 1}), ("kept", {"run": 2})]


def test_a_run_that_lost_its_lease_records_nothing():
    """Fencing: rows from a run presumed dead (another run took the lease) are refused."""
    from webapp.leases import LeaseLost

    class Holder:
        holder, lost = "host:1:old", False

    user = get_user_model().objects.create_user("pipe4")
    exp = Experiment.objects.create(owner=user, kind="simulation", parameters={}, lease_owner="host:2:new")

    def pipeline(params, *, report, record, resume=None):
        record("rows", [{"x": 1}])
        return {}

    with pytest.raises(LeaseLost, match="another run holds it now"):
        run_pipeline(exp, ProgressReporter(exp, heartbeat=Holder()), pipeline)
    assert ExperimentRecord.objects.filter(experiment=exp).count() == 0
    Experiment.objects.filter(pk=exp.pk).update(lease_owner=Holder.holder)
    run_pipeline(exp, ProgressReporter(exp, heartbeat=Holder()), pipeline)
    assert ExperimentRecord.objects.filter(experiment=exp).count() == 1
