"""The weight-learning experiment end to end: created through the REST API, a real PPO
training of a few thousand steps run by a real Celery worker on PostgreSQL + Redis, result rows,
dashboard page, export API, and the learn_weights command."""
from __future__ import annotations

import json
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from rlweights.models import LearningCurvePoint, WeightStep
from tests.conftest import wait_for
from webapp.models import Experiment
from webapp.states import State
from tests.conftest import token_client

pytestmark = pytest.mark.integration

SMALL = {"train_setups": 2, "train_workloads": 2, "test_setups": 1, "test_workloads": 1, "window_s": 30,
         "budget": 4, "timesteps": 2048, "eval_seeds": [0]}


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("rl-alice", password="pw-alice")


@pytest.fixture
def api(user):
    client = token_client(user)
    return client


def test_ppo_training_runs_on_real_worker(celery_worker_process, api, client, user):
    resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "name": "small", "parameters": SMALL}, format="json")
    assert resp.status_code == 201, resp.content
    pk = resp.json()["id"]
    wait_for(lambda: Experiment.objects.get(pk=pk).is_terminal, timeout=240, what="weight learning to finish")
    exp = Experiment.objects.get(pk=pk)
    assert exp.state == State.SUCCEEDED, exp.error
    r = exp.result
    # 2048 steps of 3-step episodes (budget 4 = reference + 3): about 682 episodes on the curve
    assert LearningCurvePoint.objects.filter(experiment=exp).count() == len(r["curve"]) >= 600
    # PPO collects whole rollouts of n_steps (8 episodes x 3 steps) x 4 envs = 96 steps:
    # ceil(2048 / 96) = 22 rollouts = 2112 steps
    assert r["curve"][-1]["timesteps"] == 2112
    assert WeightStep.objects.filter(experiment=exp, method="ppo").count() == 4
    methods = r["summary"]["methods"]
    assert set(methods) == {"equal", "kube-default", "random-search", "hill-climbing", "cma-es", "tpe", "ppo"}
    assert methods["equal"]["mean_improvement_vs_equal_percent"] == 0.0
    # best-of-budget: a search that measured the equal vector too cannot be worse than equal
    assert methods["ppo"]["mean_improvement_vs_equal_percent"] >= 0.0
    doc = yaml.safe_load(r["kube_scheduler_configuration"])
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    # dashboard
    assert client.get("/rlweights/").status_code == 302  # anonymous: to the login page
    client.force_login(user)
    page = client.get("/rlweights/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Learned weights" in html and "rlw-curve" in html and "kubescheduler.config.k8s.io/v1" in html


def test_bad_parameters_are_rejected_and_nothing_is_stored(api):
    n = Experiment.objects.count()
    resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "parameters": {**SMALL, "budget": 1}}, format="json")
    assert resp.status_code == 400 and "budget" in resp.content.decode()
    resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "parameters": {"w_min": 50, "w_max": 10}}, format="json")
    assert resp.status_code == 400
    resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "parameters": {"policy": "/etc/passwd"}}, format="json")
    assert resp.status_code == 400 and "a path is never read" in resp.content.decode()
    assert Experiment.objects.count() == n


def test_export_api(api):
    resp = api.post("/api/v1/rlweights/export/", {"weights": {"ImageLocality": 80, "NodeResourcesLeastAllocated": 5}}, format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    prof = yaml.safe_load(body["kube_scheduler_configuration"])["profiles"][0]
    assert {p["name"]: p["weight"] for p in prof["plugins"]["score"]["enabled"]} == {"NodeResourcesFit": 5, "ImageLocality": 80}
    assert body["volcano_nodeorder_arguments"]["imagelocality.weight"] == 80
    assert api.post("/api/v1/rlweights/export/", {"weights": {"Bogus": 1}}, format="json").status_code == 400
    for empty in ({}, {"ImageLocality": 0, "NodeResourcesLeastAllocated": 0}):  # would disable every plugin
        resp = api.post("/api/v1/rlweights/export/", {"weights": empty}, format="json")
        assert resp.status_code == 400 and "at least one score plugin" in resp.json()["weights"][0], resp.content
    assert APIClient().post("/api/v1/rlweights/export/", {"weights": {}}, format="json").status_code in (401, 403)


@pytest.mark.django_db
def test_learn_weights_command_evaluates_shipped_policy_and_records(user):
    out, err = StringIO(), StringIO()
    call_command("learn_weights", "--mode", "evaluate", "--test-setups", "1", "--azure-sample", "--eval-seeds", "0",
                 "--record", "--owner", user.username, "--json", stdout=out, stderr=err)
    summary = json.loads(out.getvalue())
    assert set(summary["learned_weights"]) == {"NodeResourcesLeastAllocated", "NodeResourcesMostAllocated",
                                               "NodeResourcesBalancedAllocation", "ImageLocality", "PodTopologySpread",
                                               "TaintToleration", "NodeAffinity"}
    assert "ppo" in summary["summary"]["methods"]
    exp = Experiment.objects.get(owner=user, kind="weight-learning")
    assert exp.state == State.SUCCEEDED and WeightStep.objects.filter(experiment=exp).count() == 10


@pytest.mark.django_db
def test_evaluate_shipped_policy_on_registered_cluster(user):
    from webapp.models import Cluster, Node
    from webapp.services import experiment_create, experiment_run

    c = Cluster.objects.create(name="lab")
    for i, cores in enumerate((16, 32, 8)):
        Node.objects.create(cluster=c, name=f"n{i}", cpu_cores=cores, memory_mib=65536, labels={"topology.kubernetes.io/zone": f"z{i % 2}"},
                            taints=[{"key": "gpu", "value": "", "effect": "PreferNoSchedule"}] if i == 2 else [])
    exp = experiment_create(owner=user, kind="weight-learning",
                            parameters={"mode": "evaluate", "cluster_id": c.pk, "azure_sample": True, "eval_seeds": [0]})
    exp = experiment_run(experiment_id=exp.pk)  # on_commit never fires in this transaction: run it here
    assert exp.state == State.SUCCEEDED, exp.error
    assert exp.result["test_scenarios"] == ["lab/azure2021-sample-x10"]
    assert WeightStep.objects.filter(experiment=exp).count() == 10
    with pytest.raises(Exception) as err:
        experiment_create(owner=user, kind="weight-learning", parameters={"mode": "evaluate", "cluster_id": 999999})
    assert "no cluster" in str(err.value)


@pytest.mark.django_db
def test_demo_step_records_an_experiment_the_dashboard_shows(user, client):
    from rlweights.demo import run_demo
    from webapp.demo import demo_steps

    assert "rlweights" in [s.name for s in demo_steps()]
    out = StringIO()
    run_demo(owner=user, stdout=out)
    text = out.getvalue()
    assert "azure2021-sample-x10" in text and "ppo" in text and "tpe" in text
    yaml_part = text[text.index("apiVersion:"):text.index("  (dashboard")]
    assert yaml.safe_load(yaml_part)["kind"] == "KubeSchedulerConfiguration"
    exp = Experiment.objects.get(owner=user, kind="weight-learning")
    assert exp.state == State.SUCCEEDED
    assert set(exp.result["summary"]["methods"]) == {"equal", "kube-default", "random-search", "hill-climbing", "cma-es", "tpe", "ppo"}
    assert WeightStep.objects.filter(experiment=exp).count() == 10  # budget 10: equal + 9 policy steps
    client.force_login(user)
    page = client.get("/rlweights/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "No succeeded weight-learning experiment yet" not in html
    assert 'id="rlw-compare"' in html and 'id="rlw-steps"' in html


@pytest.mark.django_db
def test_learn_weights_record_unknown_owner_is_refused_before_running(user):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user named 'alice'"):
        call_command("learn_weights", "--mode", "evaluate", "--record", "--owner", "alice", stdout=StringIO(), stderr=StringIO())
    assert not Experiment.objects.filter(kind="weight-learning").exists()


def test_learn_weights_missing_policy_names_the_given_path():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as err:
        call_command("learn_weights", "--mode", "evaluate", "--policy", "/tmp/nope-tandem.zip", stdout=StringIO(), stderr=StringIO())
    assert "'/tmp/nope-tandem.zip'" in str(err.value) and ".json" not in str(err.value)
