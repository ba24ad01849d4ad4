"""Federation experiment kinds through the API, run by a real Celery worker (PostgreSQL + Redis);
the dashboard page; ``manage.py fedbench``."""
from __future__ import annotations

import json
import os
import uuid
from io import StringIO

import psutil
import pytest
import yaml
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from federation.core import karmada
from tests.conftest import wait_for
from webapp.models import Cluster, Experiment, Node
from webapp.states import State
from tests.conftest import token_client

pytestmark = pytest.mark.integration

CLUSTERS = [
    {"name": "eu", "region": "aws:eu-west-1", "capacity_cores": 1.0, "contention": 0.2},
    {"name": "we", "region": "azure:westeurope", "capacity_cores": 4.0},
    {"name": "us", "region": "aws:us-east-1", "capacity_cores": 16.0},
]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("fed", password="pw-fed")


@pytest.fixture
def api(user):
    client = token_client(user)
    return client


# Every process started under this test module carries this token in its environment (the
# harness passes its environment on to its children, and so do a worker this module starts), so
# harness_procs() counts only processes this module's tests started, never another job's.
_TOKEN = f"{os.getpid()}-{uuid.uuid4().hex}"
os.environ["TANDEM_FED_TEST_TOKEN"] = _TOKEN


def harness_procs() -> list[psutil.Process]:
    """Harness processes (services, proxies, stress-ng) started by this test process: its
    descendants, or any process carrying this module's token."""
    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "federation.backends." not in cmd and "stress-ng" not in cmd:
            continue
        try:
            ours = p.pid in mine or p.environ().get("TANDEM_FED_TEST_TOKEN") == _TOKEN
        except psutil.Error:
            ours = False
        if ours:
            out.append(p)
    return out


@pytest.mark.parametrize("params, field", [
    ({"application": "nope", "clusters": CLUSTERS}, "application"),
    ({"application": "sockshop"}, "clusters"),
    ({"application": "sockshop", "clusters": [{"name": "x", "region": "mars:1", "capacity_cores": 1}]}, "non_field_errors"),
    ({"application": "sockshop", "clusters": CLUSTERS, "client": "nowhere"}, "non_field_errors"),
    ({"application": "sockshop", "clusters": CLUSTERS[:2], "rtt_ms": [[0, 1]], "bandwidth_mbps": [[1, 1], [1, 1]]}, "non_field_errors"),
    ({"application": "sockshop", "clusters": [{"name": "x", "capacity_cores": 1, "contention": 1.5}]}, "clusters"),
    ({"application": "sockshop", "clusters": CLUSTERS, "routing": "anycast"}, "routing"),
])
def test_bad_plan_parameters_are_rejected_and_nothing_stored(api, params, field):
    resp = api.post("/api/v1/experiments/", {"kind": "federation-plan", "parameters": params}, format="json")
    assert resp.status_code == 400, resp.content
    assert field in json.dumps(resp.json())
    assert Experiment.objects.count() == 0


def test_plan_and_benchmark_run_on_real_worker(celery_worker_process, api, client, user):
    before = {p.pid for p in harness_procs()}
    plan = api.post("/api/v1/experiments/", {"kind": "federation-plan", "parameters": {
        "application": "hotelReservation", "clusters": CLUSTERS, "client": "eu"}}, format="json")
    assert plan.status_code == 201, plan.content
    bench = api.post("/api/v1/experiments/", {"kind": "federation-benchmark", "parameters": {
        "applications": ["inference"], "latencies_ms": [0, 40], "contentions": [0.5], "rate_rps": 4,
        "duration_s": 0.6, "compare": False}}, format="json")
    assert bench.status_code == 201, bench.content
    for pk in (plan.json()["id"], bench.json()["id"]):
        wait_for(lambda: Experiment.objects.get(pk=pk).is_terminal, timeout=180, what=f"experiment {pk}")
        exp = Experiment.objects.get(pk=pk)
        assert exp.state == State.SUCCEEDED, exp.error
    res = Experiment.objects.get(pk=plan.json()["id"]).result
    assert res["plan"]["method"] == "milp" and res["plan"]["optimal"]
    assert set(res["plan"]["replicas"]) == {s["name"] for s in res["services"]}
    assert res["plan"]["cost"]["total_ms"] <= min(b["cost"]["total_ms"] for b in res["baselines"].values()) + 1e-6
    docs = list(yaml.safe_load_all(api.get(f"/api/v1/federation/plans/{plan.json()['id']}/karmada/").content))
    pols = [d for d in docs if d["kind"] == "PropagationPolicy"]
    assert {d["spec"]["resourceSelectors"][0]["name"] for d in pols if d["spec"]["resourceSelectors"][0]["kind"] == "Deployment"} \
        == set(res["plan"]["replicas"])
    assert all(karmada.validate_policy(d) == [] for d in pols)
    rows = Experiment.objects.get(pk=bench.json()["id"]).result["degradation"]
    lat = {r["x"]: r["p95_ms"] for r in rows if r["sweep"] == "latency"}
    assert lat[40.0] > lat[0.0]  # inference spread over two clusters: each crossing adds 40 ms
    assert {p.pid for p in harness_procs()} - before == set()  # the worker's harness left nothing running
    client.force_login(user)
    page = client.get("/federation/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "fed-heatmap" in html and "fed-deg-latency" in html and "Karmada PropagationPolicy" in html


def test_plan_from_registered_clusters(api):
    for name, region, cores in (("reg-eu", "aws:eu-west-1", 8.0), ("reg-us", "aws:us-east-1", 8.0)):
        c = Cluster.objects.create(name=name, region=region, labels={"tandem.io/contention": "0.25"})
        Node.objects.create(cluster=c, name="n0", cpu_cores=cores / 2, memory_mib=1024)
        Node.objects.create(cluster=c, name="n1", cpu_cores=cores / 2, memory_mib=1024)
    from federation.experiment import federation_from_parameters

    ids = list(Cluster.objects.filter(name__startswith="reg-").values_list("pk", flat=True))
    fed = federation_from_parameters({"cluster_ids": ids})
    assert [c.capacity_cores for c in fed.clusters] == [8.0, 8.0]
    assert [c.contention for c in fed.clusters] == [0.25, 0.25]
    assert fed.rtt_ms[0, 1] == pytest.approx(84.933)


def test_dashboard_needs_login(client):
    assert client.get("/federation/").status_code == 302


def test_fedbench_command_json():
    out = StringIO()
    call_command("fedbench", "--apps", "inference", "--latencies", "0,30", "--contentions", "0.5", "--duration", "0.6",
                 "--no-compare", "--json", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1  # --json: stdout carries the JSON summary and nothing else
    summary = json.loads(lines[0])
    assert summary["degradation"]["inference"]["max_latency_factor"] > 1.0
    (c,) = summary["contention"]
    assert c["target"] == 0.5 and 0.0 <= c["achieved"] <= 1.0


def test_applications_endpoint_lists_derived_graphs(api):
    body = api.get("/api/v1/federation/applications/").json()
    by = {a["name"]: a for a in body}
    assert set(by) == {"hotelReservation", "socialNetwork", "sockshop", "batch-training", "inference", "video-analytics"}
    assert {"caller": "user", "callee": "user-db", "calls": 1.0, "payload_bytes": 4096} in by["sockshop"]["edges"]
    assert APIClient().get("/api/v1/federation/applications/").status_code in (401, 403)


# The federation demo step (plan, harness run, benchmark, no process left behind) is checked in
# tests/browser/test_engine_pages.py, where ``manage.py demo`` runs it once for the whole walk.


def test_degradation_factor_at_x0_is_exactly_one():
    from federation.backends.scenarios import degradation_sweep

    rows = degradation_sweep(["inference"], latencies_ms=[0.0, 30.0], contentions=[0.0], duration_s=0.6)
    by = {(r["sweep"], r["x"]): r for r in rows}
    # x = 0 is the sweep's baseline itself: factor 1 by definition, not a second noisy run
    assert by[("latency", 0.0)]["factor"] == 1.0
    assert by[("contention", 0.0)]["factor"] == 1.0
    assert by[("contention", 0.0)]["baseline_p95_ms"] == by[("contention", 0.0)]["central_p95_ms"]
    assert by[("latency", 30.0)]["baseline_p95_ms"] == by[("latency", 0.0)]["p95_ms"]
    assert by[("latency", 30.0)]["factor"] > 1.0  # 30 ms RTT on a cross-cluster call path


@pytest.mark.parametrize("pk", ["abc", "999999"])
def test_karmada_yaml_bad_or_unknown_id_is_a_json_404(api, pk):
    resp = api.get(f"/api/v1/federation/plans/{pk}/karmada/")
    assert resp.status_code == 404
    assert resp["Content-Type"].startswith("application/json")
    assert "no" in resp.json()["detail"]


USER_COMPOSE = """
services:
  web: {image: shop/web, depends_on: [api]}
  api: {image: shop/api, environment: {DB_HOST: "api-db:27017"}}
  api-db: {image: "mongo:6"}
"""


def test_derive_endpoint_shows_the_graph_and_refuses_bad_yaml(api):
    r = api.post("/api/v1/federation/applications/derive/", {"manifests": USER_COMPOSE, "entry": "web", "name": "shop"}, format="json")
    assert r.status_code == 200, r.content
    assert {(e["caller"], e["callee"], e["how"]) for e in r.json()["edges"]} == {("web", "api", "depends_on/links"), ("api", "api-db", "env")}
    bad = api.post("/api/v1/federation/applications/derive/", {"manifests": "services: [", "entry": "web"}, format="json")
    assert bad.status_code == 400 and "YAML" in json.dumps(bad.json())


def test_plan_experiment_accepts_user_manifests_and_rejects_bad_ones(api):
    ok = api.post("/api/v1/experiments/", {"kind": "federation-plan", "parameters": {
        "application": "shop", "manifests": USER_COMPOSE, "entry": "web", "clusters": CLUSTERS, "client": "eu"}}, format="json")
    assert ok.status_code == 201, ok.content
    n = Experiment.objects.count()
    bad = api.post("/api/v1/experiments/", {"kind": "federation-plan", "parameters": {
        "application": "shop", "manifests": USER_COMPOSE, "entry": "nope", "clusters": CLUSTERS}}, format="json")
    assert bad.status_code == 400 and "nope" in json.dumps(bad.json())
    assert Experiment.objects.count() == n


def test_fedapp_command_prints_the_graph_as_json(tmp_path):
    f = tmp_path / "docker-compose.yml"
    f.write_text(USER_COMPOSE)
    clusters = tmp_path / "clusters.json"
    clusters.write_text(json.dumps(CLUSTERS))
    out = StringIO()
    call_command("fedapp", str(f), "--entry", "web", "--clusters", str(clusters), "--client", "eu", "--json", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1
    res = json.loads(lines[0])
    assert {e["callee"] for e in res["graph"]["edges"]} == {"api", "api-db"}
    assert set(res["plan"]["replicas"]) == {"web", "api", "api-db"}


def test_benchmark_with_a_scenario_runs_and_the_page_shows_its_verdict(user):
    """A federation-benchmark experiment with one split-forcing scenario (1 round, short runs),
    run in this process: the result carries the scenario with its verdict against the best
    eligible baseline, /federation/ shows it, and no harness process is left."""
    from webapp.services import experiment_create, experiment_run

    before = {p.pid for p in harness_procs()}
    exp = experiment_create(owner=user, kind="federation-benchmark", parameters={
        "applications": ["inference"], "latencies_ms": [0], "contentions": [0], "duration_s": 0.5, "compare": False,
        "scenarios": ["fits-near"], "rounds": 1})
    exp = experiment_run(experiment_id=exp.pk)
    assert exp.state == State.SUCCEEDED, exp.error
    (scn,) = exp.result["scenarios"]
    assert scn["scenario"] == "fits-near" and scn["verdict"] in {"beats", "ties", "loses"}
    assert "karmada-static" not in {scn["best_baseline"]}  # overcommits home: never the rival
    assert {p.pid for p in harness_procs()} - before == set()
    client = Client()
    client.force_login(user)
    html = client.get("/federation/").content.decode()
    assert "Split-forcing scenarios" in html and "fits-near" in html
