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
         "budget": 4, "timesteps": 500, "eval_seeds": [0]}


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
    # PPO collects whole rollouts of n_steps (8 episodes x 3 steps) x 4 envs = 96 steps:
    # ceil(500 / 96) = 6 rollouts = 576 steps, of 3-step episodes (budget 4 = reference + 3):
    # 192 episodes on the curve
    assert r["curve"][-1]["timesteps"] == 576
    assert LearningCurvePoint.objects.filter(experiment=exp).count() == len(r["curve"]) >= 180
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
    nt = exp.result["inputs"]["node_table"]
    assert (nt["source"], nt["name"], nt["cluster_id"], nt["rows"]) == ("cluster", "lab", c.pk, 3)
    assert exp.result["inputs"]["workload"]["use"] == "replayed" and exp.result["inputs"]["workload"]["rows"] == 199
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


# --------------------------------------------------------------------------- operator inputs

LAB_TABLE = "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm-a,CPU,16,64,0\nm-b,T4,32,128,2\nm-c,V100,8,32,8\n"
FN_TRACE = ("app,func,end_timestamp,duration\n"
            "appA,f1,1.0,0.5\nappA,f1,2.5,1.0\nappA,f2,3.0,2.0\nappB,g1,4.0,0.2\nappA,f1,5.5,0.5\nappB,g1,6.0,1.5\n"
            "appA,f2,8.0,3.0\nappB,g1,9.0,0.4\nappA,f1,10.0,0.3\nappB,g1,11.5,2.0\nappA,f2,12.0,1.0\nappA,f1,13.0,0.8\n")
TINY_EVAL = {"mode": "evaluate", "budget": 3, "eval_seeds": [0], "seed": 1, "test_setups": 1, "test_workloads": 1,
             "window_s": 20}
INPUT_KEYS = {"node_table", "node_table_format", "node_table_name", "workload", "workload_name", "workload_speedup"}


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_inline_node_table_and_workload_through_the_api_and_a_real_worker(celery_worker_process, api):
    import hashlib

    import numpy as np

    from rlweights.core.cluster import DEFAULT_PAI_SPEC, ClusterSetup
    from rlweights.core.scheduler import Node
    from rlweights.core.serverless import simulate
    from rlweights.core.workload import DEFAULT_AZURE_SAMPLE, parse_azure_trace, replay_workload

    inline = {**TINY_EVAL, "node_table": LAB_TABLE, "node_table_name": "lab", "workload": FN_TRACE, "workload_name": "fn-trace"}
    ids = []
    for params in (inline, TINY_EVAL):
        resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "parameters": params}, format="json")
        assert resp.status_code == 201, resp.content
        ids.append(resp.json()["id"])
    wait_for(lambda: all(Experiment.objects.get(pk=i).is_terminal for i in ids), timeout=120, what="both evaluations")
    mine, shipped = (Experiment.objects.get(pk=i) for i in ids)
    assert mine.state == State.SUCCEEDED, mine.error
    assert shipped.state == State.SUCCEEDED, shipped.error
    a, b = mine.result, shipped.result
    # the result names the inputs it used: name, rows (counted by hand above), sha256 of the content
    assert a["inputs"] == {
        "node_table": {"source": "inline", "name": "lab", "format": "pai", "rows": 3, "sha256": _sha(LAB_TABLE)},
        "workload": {"source": "inline", "name": "fn-trace", "rows": 12, "functions": 3, "sha256": _sha(FN_TRACE),
                     "use": "replayed", "speedup": 1.0}}
    assert a["test_scenarios"] == ["lab/fn-trace"]
    nt, wl = b["inputs"]["node_table"], b["inputs"]["workload"]
    assert (nt["source"], nt["rows"], nt["sha256"]) == ("shipped", 1897, hashlib.sha256(DEFAULT_PAI_SPEC.read_bytes()).hexdigest())
    assert (wl["source"], wl["rows"], wl["sha256"]) == ("shipped", 199, hashlib.sha256(DEFAULT_AZURE_SAMPLE.read_bytes()).hexdigest())
    assert b["test_scenarios"] == ["unseen1101-0/unseen1102-0"]
    # ... and differs from the run on the shipped defaults only through them: same parameters
    # otherwise, same methods, same shape of result
    assert {k: v for k, v in a["params"].items() if k not in INPUT_KEYS} == {k: v for k, v in b["params"].items() if k not in INPUT_KEYS}
    assert a["params"]["node_table"] == f"sha256:{_sha(LAB_TABLE)}" and b["params"]["node_table"] == ""
    assert set(a) == set(b) and set(a["summary"]["methods"]) == set(b["summary"]["methods"])
    # the worker measured on exactly those inputs: equal weights on the lab nodes (written out by
    # hand from the table: cores x 1000, GB as GiB) with the trace replayed, profiles seed 1102
    setup = ClusterSetup("lab", [Node("m-a", 16000, 64 * 2**30, labels={"gpu_type": "CPU"}),
                                 Node("m-b", 32000, 128 * 2**30, labels={"gpu_type": "T4"}),
                                 Node("m-c", 8000, 32 * 2**30, labels={"gpu_type": "V100"})])
    trace = replay_workload(parse_azure_trace(FN_TRACE), np.random.default_rng(1102), name="fn-trace")
    (eq,) = [r for r in a["rows"] if r["method"] == "equal"]
    assert eq["best_metric"] == pytest.approx(simulate(setup, trace, np.full(7, 100), 0).mean_s, rel=1e-12)
    assert WeightStep.objects.filter(experiment=mine, scenario="lab/fn-trace").count() == 3


BIG = "x" * (2100 * 1024)


@pytest.mark.parametrize("params,field,status", [
    ({"node_table": "m-a,CPU,x,64,0\n"}, "node_table", 400),
    ({"node_table": "  \n"}, "node_table", 400),
    ({"node_table": "m-a,CPU,16,64\n"}, "node_table", 400),
    ({"node_table": "m-a,CPU,-16,64,0\n"}, "node_table", 400),
    ({"node_table": "m-a,CPU,16,inf,0\n"}, "node_table", 400),
    ({"node_table": "m-a,CPU,0.1,1,0\n", "workload": FN_TRACE}, "node_table", 400),  # no pod fits any node
    ({"node_table": "m-a,CPU,16,64,0\n\x00"}, "node_table", 400),  # the JSON parser names it
    ({"node_table": "apiVersion: v1\nkind: Node\nmetadata: {name: k}\nstatus: {allocatable: {cpu: 4}}\n"}, "node_table", 400),
    ({"workload": "app,func,end_timestamp\na,f,1\n"}, "workload", 400),
    ({"workload": "app,func,end_timestamp,duration\na,f,1,nan\n"}, "workload", 400),
    ({"workload": "app,func,end_timestamp,duration\na,f,1,-2\n"}, "workload", 400),
    ({"workload": "app,func,end_timestamp,duration\n"}, "workload", 400),
    ({"workload": FN_TRACE, "azure_sample": True}, "workload", 400),
    ({"workload_name": "two words"}, "workload_name", 400),
    ({"node_table_format": "xlsx"}, "node_table_format", 400),
    ({"node_table": BIG}, "", 413),  # over the 2 MiB JSON body limit
])
def test_bad_inputs_are_refused_at_submission_naming_the_field(api, params, field, status):
    n = Experiment.objects.count()
    resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "parameters": {"mode": "evaluate", **params}}, format="json")
    assert resp.status_code == status, resp.content[:500]
    if status == 400:
        body = resp.json()
        # a serializer error is {"parameters": {field: [message]}}; the JSON parser's (NUL) names the path
        assert field in body.get("parameters", {}) or f"parameters.{field}" in body.get("detail", ""), body
    assert Experiment.objects.count() == n


@pytest.mark.django_db
def test_node_table_and_cluster_id_together_are_refused(api):
    from webapp.models import Cluster, Node

    c = Cluster.objects.create(name="both")
    Node.objects.create(cluster=c, name="n0", cpu_cores=16, memory_mib=65536)
    resp = api.post("/api/v1/experiments/", {"kind": "weight-learning", "parameters": {
        "mode": "evaluate", "cluster_id": c.pk, "node_table": LAB_TABLE}}, format="json")
    assert resp.status_code == 400, resp.content
    assert resp.json() == {"parameters": {"node_table": ["give a node table or a registered cluster (cluster_id), not both"]}}
    assert not Experiment.objects.filter(kind="weight-learning").exists()


@pytest.mark.django_db
def test_learn_weights_command_takes_a_registered_cluster_and_a_trace_file(user, tmp_path):
    from webapp.models import Cluster, Node

    c = Cluster.objects.create(name="lab-reg")
    for i, cores in enumerate((16, 32)):
        Node.objects.create(cluster=c, name=f"n{i}", cpu_cores=cores, memory_mib=65536)
    trace = tmp_path / "fn-trace.csv"
    trace.write_bytes(FN_TRACE.encode())
    out = StringIO()
    call_command("learn_weights", "--mode", "evaluate", "--budget", "3", "--eval-seeds", "0", "--cluster-id", str(c.pk),
                 "--workload", str(trace), "--record", "--owner", user.username, "--json", stdout=out, stderr=StringIO())
    summary = json.loads(out.getvalue())
    nt, wl = summary["inputs"]["node_table"], summary["inputs"]["workload"]
    canon = ('[{"cpu_cores":16.0,"labels":{},"memory_mib":65536,"name":"n0","taints":[]},'
             '{"cpu_cores":32.0,"labels":{},"memory_mib":65536,"name":"n1","taints":[]}]')
    assert nt == {"source": "cluster", "name": "lab-reg", "cluster_id": c.pk, "rows": 2, "sha256": _sha(canon)}
    assert (wl["name"], wl["rows"], wl["sha256"]) == ("fn-trace", 12, _sha(FN_TRACE))  # sha256sum of the file
    assert summary["test_scenarios"] == ["lab-reg/fn-trace"]
    exp = Experiment.objects.get(owner=user, kind="weight-learning")
    # recorded parameters carry the cluster's id and the trace's hash, not a copy of either
    assert exp.parameters["cluster_id"] == c.pk and "cluster" not in exp.parameters
    assert exp.parameters["workload"] == f"sha256:{_sha(FN_TRACE)}"


@pytest.mark.django_db
@pytest.mark.parametrize("args,message", [
    (["--node-table", "{bad}"], "--node-table: bad, line 1: cap_cpu, cap_mem, cap_gpu must be numbers"),
    (["--node-table", "{tiny}", "--workload", "{trace}"], "--node-table: no invocation of fn-trace can be placed"),
    (["--node-table", "/nonexistent/nodes.csv"], "--node-table: /nonexistent/nodes.csv: no such file"),
    (["--workload", "/nonexistent/trace.csv"], "--workload: /nonexistent/trace.csv: no such file"),
    (["--workload-csv", "app,func,end_timestamp,duration\na,f,1,inf\n"], "--workload-csv: workload, line 2: end_timestamp and duration must be finite"),
    (["--workload", "{trace}", "--azure-sample"], "--workload: give a workload or azure_sample, not both"),
    (["--cluster-id", "999999"], "--cluster-id: no cluster 999999"),
    (["--node-table-name", "two words"], "--node-table-name: 1-48 letters"),
])
def test_learn_weights_input_errors_name_the_option(tmp_path, args, message):
    from django.core.management.base import CommandError

    files = {"bad": "m-a,CPU,x,64,0\n", "tiny": "m-a,CPU,0.1,1,0\n", "trace": FN_TRACE}
    paths = {}
    for k, text in files.items():
        p = tmp_path / (f"{k}.csv" if k != "trace" else "fn-trace.csv")
        p.write_text(text)
        paths[k] = str(p)
    args = [a.format(**paths) for a in args]
    with pytest.raises(CommandError) as err:
        call_command("learn_weights", "--mode", "evaluate", *args, stdout=StringIO(), stderr=StringIO())
    assert str(err.value).startswith(message), str(err.value)
    assert not Experiment.objects.filter(kind="weight-learning").exists()
