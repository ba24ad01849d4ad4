"""The "simulation" experiment kind through the API, run by a real Celery worker on
PostgreSQL + Redis, and shown on the placement dashboard."""
from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import wait_for
from webapp.models import Experiment
from webapp.states import State
from tests.conftest import token_client

pytestmark = [pytest.mark.integration]


@pytest.mark.django_db(transaction=True)
def test_simulation_experiment_end_to_end(django_user_model, celery_worker_process):
    alice = django_user_model.objects.create_user("alice", password="pw")
    api = token_client(alice)
    bad = api.post("/api/v1/experiments/", {"kind": "simulation", "parameters": {
        "trace": "gavel:nope", "policies": ["horus", "lottery"], "cluster": "4 by 8"}}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()["parameters"]) == {"trace", "policies", "cluster"}
    assert Experiment.objects.count() == 0

    r = api.post("/api/v1/experiments/", {"kind": "simulation", "parameters": {
        "trace": "gavel:51b7ef", "policies": ["fifo", "horus"], "cluster": "1x8", "seed": 0}}, format="json")
    assert r.status_code == 201, r.content
    pk = r.json()["id"]
    wait_for(lambda: Experiment.objects.get(pk=pk).state == State.SUCCEEDED, timeout=120, what="simulation to succeed")
    res = api.get(f"/api/v1/experiments/{pk}/result/").json()["result"]
    assert res["jobs"] == 18 and res["gpus"] == 8 and set(res["policies"]) == {"fifo", "horus"}
    for p in res["policies"].values():
        s = p["summary"]
        assert s["jobs"] == 18 and s["makespan_s"] > 0 and len(p["jct_quantiles_s"]) == 101
    # Horus co-locates, so nobody waits longer than under FIFO exclusive on the same 8 GPUs
    assert res["policies"]["horus"]["summary"]["mean_queueing_delay_s"] <= res["policies"]["fifo"]["summary"]["mean_queueing_delay_s"]

    out = api.get(f"/api/v1/placement/outcomes/?experiment={pk}&policy=horus").json()
    assert out["count"] == 18
    row = out["results"][0]
    assert row["jct_s"] == pytest.approx(row["finish_s"] - row["arrival_s"])
    assert row["queueing_delay_s"] == pytest.approx(row["start_s"] - row["arrival_s"])
    # a redelivered task runs the runner again: same summary, and the rows are stored once
    from placement.experiment import simulation_run
    from webapp.experiments import ProgressReporter

    exp = Experiment.objects.get(pk=pk)
    assert simulation_run(exp, ProgressReporter(exp))["policies"]["horus"]["summary"] == res["policies"]["horus"]["summary"]
    assert api.get(f"/api/v1/placement/outcomes/?experiment={pk}").json()["count"] == 36

    web = Client()
    web.force_login(alice)
    page = web.get(f"/placement/experiments/{pk}/").content.decode()
    assert "Job completion time CDF" in page and "GPU utilisation over time" in page
    assert "gavel:51b7ef" in web.get("/placement/").content.decode()


@pytest.mark.django_db
def test_demo_step_prints_the_comparison(django_user_model):
    from io import StringIO

    from placement.demo import run_placement_demo

    out = StringIO()
    run_placement_demo(owner=django_user_model.objects.create_user("demo"), stdout=out)
    text = out.getvalue()
    for name in ("fifo", "sjf", "gandiva", "horus", "horus+"):
        assert f"\n{name} " in text
    exp = Experiment.objects.get(kind="simulation")
    assert exp.state == State.SUCCEEDED and exp.result["jobs"] == 533


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_simulation(django_user_model, celery_worker_process):
    """Review P0: cancel used to set cancel_requested while the simulation carried on to the
    end. The full Philly trace under Horus runs ~20 s here; cancelled once it reports progress
    from inside the simulation, it must stop there: cancelled, with no per-job outcomes."""
    from placement.models import SimulationJobOutcome

    alice = django_user_model.objects.create_user("alice", password="pw")
    api = token_client(alice)
    r = api.post("/api/v1/experiments/", {"kind": "simulation", "parameters": {
        "trace": "philly", "policies": ["horus"], "seed": 0}}, format="json")
    assert r.status_code == 201, r.content
    pk = r.json()["id"]
    wait_for(lambda: "jobs done" in Experiment.objects.get(pk=pk).progress_message, timeout=90,
             what="progress reported from inside the simulation")
    assert api.post(f"/api/v1/experiments/{pk}/cancel/").status_code in (200, 202)
    wait_for(lambda: Experiment.objects.get(pk=pk).state == State.CANCELLED, timeout=60, what="cancellation")
    exp = Experiment.objects.get(pk=pk)
    assert exp.progress < 100 and exp.result.get("policies") is None
    assert SimulationJobOutcome.objects.filter(experiment_id=pk).count() == 0
