"""The platform REST API on PostgreSQL: authentication, owner scoping, validation, OpenAPI."""
from __future__ import annotations

import pytest
import yaml
from rest_framework.test import APIClient

from webapp.models import Cluster, Experiment, GPUDevice, Job, Node
from webapp.states import State
from tests.conftest import token_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def _client(user) -> APIClient:
    return token_client(user)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("root", password="pw", is_staff=True)


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/experiments/", "/api/v1/clusters/", "/api/v1/nodes/", "/api/v1/gpus/"])
def test_anonymous_is_refused(url):
    resp = APIClient().get(url)
    assert resp.status_code == 401
    assert resp["WWW-Authenticate"] == "Token"


def test_token_endpoint_gives_a_working_token(alice):
    resp = APIClient().post("/api/v1/auth/token/", {"username": "alice", "password": "pw"}, format="json")
    assert resp.status_code == 200
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {resp.json()['token']}")
    assert c.get("/api/v1/jobs/").status_code == 200


def test_job_post_missing_field_is_400_naming_it(alice):
    resp = _client(alice).post("/api/v1/jobs/", {"model_name": "resnet18"}, format="json")
    assert resp.status_code == 400
    assert set(resp.json()) == {"batch_size"}
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"model_name": "no-such-net", "batch_size": 8}, "model_name"),
        ({"model_name": "resnet18", "batch_size": 0}, "batch_size"),
        ({"model_name": "resnet18", "batch_size": 8, "steps": 0}, "steps"),
        ({"model_name": "resnet18", "batch_size": "eight"}, "batch_size"),
    ],
)
def test_job_invalid_payloads_are_400_per_field(alice, payload, field):
    resp = _client(alice).post("/api/v1/jobs/", payload, format="json")
    assert resp.status_code == 400
    assert field in resp.json(), resp.json()
    assert Job.objects.count() == 0


def test_jobs_are_scoped_to_owner_and_staff_sees_all(alice, bob, staff):
    ja = Job.objects.create(owner=alice, model_name="resnet18", batch_size=8)
    jb = Job.objects.create(owner=bob, model_name="vgg16", batch_size=16)
    a, b, s = _client(alice), _client(bob), _client(staff)
    assert [j["id"] for j in a.get("/api/v1/jobs/").json()["results"]] == [ja.pk]
    assert [j["id"] for j in b.get("/api/v1/jobs/").json()["results"]] == [jb.pk]
    assert sorted(j["id"] for j in s.get("/api/v1/jobs/").json()["results"]) == sorted([ja.pk, jb.pk])
    assert a.get(f"/api/v1/jobs/{jb.pk}/").status_code == 404
    assert a.post(f"/api/v1/jobs/{jb.pk}/cancel/").status_code == 404
    assert Job.objects.get(pk=jb.pk).state == State.QUEUED
    assert s.post(f"/api/v1/jobs/{jb.pk}/cancel/").json()["state"] == "cancelled"
    # a finished job cannot be cancelled again: 409, state unchanged
    assert s.post(f"/api/v1/jobs/{jb.pk}/cancel/").status_code == 409


def test_job_list_filters_and_pagination(alice):
    c = Cluster.objects.create(name="c1")
    for i in range(55):
        Job.objects.create(owner=alice, model_name="resnet18" if i % 2 else "vgg16", batch_size=8, cluster=c if i < 5 else None)
    Job.objects.filter(pk__in=Job.objects.order_by("id").values_list("pk", flat=True)[:3]).update(state=State.FAILED)
    cl = _client(alice)
    page1 = cl.get("/api/v1/jobs/").json()
    assert page1["count"] == 55 and len(page1["results"]) == 50 and page1["next"]
    assert len(cl.get("/api/v1/jobs/?page=2").json()["results"]) == 5
    assert cl.get("/api/v1/jobs/?model=resnet18").json()["count"] == 27  # odd i in 0..54
    assert cl.get("/api/v1/jobs/?model_name=vgg16").json()["count"] == 28
    assert cl.get("/api/v1/jobs/?state=failed").json()["count"] == 3
    assert cl.get(f"/api/v1/jobs/?cluster={c.pk}").json()["count"] == 5


def test_experiment_validation_and_scoping(alice, bob):
    a = _client(alice)
    bad_kind = a.post("/api/v1/experiments/", {"kind": "astrology", "parameters": {}}, format="json")
    assert bad_kind.status_code == 400 and "kind" in bad_kind.json()
    bad_params = a.post("/api/v1/experiments/", {"kind": "training-probe", "parameters": {"model_name": "resnet18"}}, format="json")
    assert bad_params.status_code == 400
    assert set(bad_params.json()["parameters"]) == {"batch_size", "steps"}
    assert Experiment.objects.count() == 0
    e = Experiment.objects.create(owner=bob, kind="training-probe", parameters={})
    assert a.get(f"/api/v1/experiments/{e.pk}/").status_code == 404
    assert a.get("/api/v1/experiments/").json()["count"] == 0
    b = _client(bob)
    assert b.get(f"/api/v1/experiments/{e.pk}/result/").json() == {"id": e.pk, "kind": "training-probe", "state": "queued", "result": {}, "error": ""}
    assert b.post(f"/api/v1/experiments/{e.pk}/cancel/").json()["state"] == "cancelled"


def test_cluster_node_gpu_crud_staff_writes_users_read(alice, staff):
    s, a = _client(staff), _client(alice)
    cid = s.post("/api/v1/clusters/", {"name": "lab", "region": "eu", "kind": "kubernetes"}, format="json").json()["id"]
    nid = s.post("/api/v1/nodes/", {"cluster": cid, "name": "n1", "cpu_cores": 8, "memory_mib": 32768, "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}, format="json").json()["id"]
    gid = s.post("/api/v1/gpus/", {"node": nid, "index": 0, "model": "T4", "memory_mib": 15360}, format="json").json()["id"]
    assert a.get(f"/api/v1/nodes/{nid}/").json()["gpu_count"] == 1
    assert a.post("/api/v1/clusters/", {"name": "mine"}, format="json").status_code == 403
    assert a.delete(f"/api/v1/gpus/{gid}/").status_code == 403
    assert s.patch(f"/api/v1/gpus/{gid}/", {"memory_mib": 16384}, format="json").json()["memory_mib"] == 16384
    bad = s.post("/api/v1/nodes/", {"cluster": cid, "name": "n2", "cpu_cores": 8, "memory_mib": 1, "taints": ["x"]}, format="json")
    assert bad.status_code == 400 and "taints" in bad.json()
    assert s.delete(f"/api/v1/clusters/{cid}/").status_code == 204
    assert (Cluster.objects.count(), Node.objects.count(), GPUDevice.objects.count()) == (0, 0, 0)


def test_unknown_experiment_parameters_are_refused(alice):
    a = _client(alice)
    r = a.post("/api/v1/experiments/", {"kind": "federation-benchmark", "parameters": {"duration": 100000000}}, format="json")
    assert r.status_code == 400
    from federation.experiment import FederationBenchmarkParameters

    names = ", ".join(sorted(FederationBenchmarkParameters().fields))  # the engine's own list, whatever it grows to
    assert "duration_s" in names and "latencies_ms" in names
    assert r.json() == {"parameters": {"duration": [f"unknown parameter; allowed: {names}"]}}
    r = a.post("/api/v1/experiments/", {"kind": "training-probe", "parameters": {
        "model_name": "resnet18", "batch_size": 2, "steps": 3, "epochs": 5, "lr": 0.1}}, format="json")
    assert r.status_code == 400
    allowed = "unknown parameter; allowed: batch_size, image_size, model_name, steps"
    assert r.json() == {"parameters": {"epochs": [allowed], "lr": [allowed]}}
    assert Experiment.objects.count() == 0


def test_node_and_gpu_capacity_limits(staff):
    s = _client(staff)
    cid = s.post("/api/v1/clusters/", {"name": "lab", "kind": "kubernetes"}, format="json").json()["id"]
    big = s.post("/api/v1/nodes/", {"cluster": cid, "name": "n1", "cpu_cores": 4097, "memory_mib": 67108865}, format="json")
    assert big.status_code == 400
    assert big.json() == {
        "cpu_cores": ["Ensure this value is less than or equal to 4096."],
        "memory_mib": ["Ensure this value is less than or equal to 67108864."],
    }
    nid = s.post("/api/v1/nodes/", {"cluster": cid, "name": "n1", "cpu_cores": 4096, "memory_mib": 67108864}, format="json").json()["id"]
    gpu = s.post("/api/v1/gpus/", {"node": nid, "index": 64, "model": "T4", "memory_mib": 1048577}, format="json")
    assert gpu.status_code == 400
    assert gpu.json() == {
        "index": ["Ensure this value is less than or equal to 63."],
        "memory_mib": ["Ensure this value is less than or equal to 1048576."],
    }
    assert (Node.objects.count(), GPUDevice.objects.count()) == (1, 0)


def test_openapi_schema_is_valid_openapi_3():
    from openapi_spec_validator import validate

    resp = APIClient().get("/api/schema/")  # public: it describes the API, holds no data
    assert resp.status_code == 200
    doc = yaml.safe_load(resp.content)
    assert doc["openapi"].startswith("3.")
    validate(doc)  # raises on an invalid document
    for p in ("/api/v1/jobs/", "/api/v1/jobs/{id}/cancel/", "/api/v1/experiments/{id}/result/", "/api/v1/clusters/"):
        assert p in doc["paths"], p


def test_openapi_schema_gives_every_kinds_parameters():
    # the README says every parameter of every kind is in the schema: each registered kind's
    # serializer is a component, and an experiment's parameters are anyOf them (several match {})
    from webapp.experiments import get_experiment_kind, registered_kinds

    doc = yaml.safe_load(APIClient().get("/api/schema/").content)
    schemas = doc["components"]["schemas"]
    one_of = {r["$ref"].rsplit("/", 1)[1] for r in schemas["Experiment"]["properties"]["parameters"]["anyOf"]}
    kinds = [k for k in registered_kinds() if get_experiment_kind(k).parameters_serializer is not None]
    assert len(one_of) == len(kinds) >= 6, (one_of, kinds)
    for kind in kinds:
        name = get_experiment_kind(kind).parameters_serializer.__name__
        assert name in one_of and schemas[name]["properties"], (kind, name)
    sim = schemas["SimulationParams"]["properties"]
    policy_enum = schemas[sim["policies"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert sim["policies"]["type"] == "array" and "horus" in policy_enum["enum"]
    assert sim["seed"]["minimum"] == 0
    assert "trials_per_round" in schemas["TuningParameters"]["properties"]


def test_swagger_ui_served_from_local_static(alice):
    c = APIClient()
    c.force_login(alice)
    html = c.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()


def test_healthz_checks_database_and_broker(client, settings):
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json() == {"status": "ok", "database": "ok", "broker": "ok", "cache": "local"}
    # a Redis cache that answers, then one that does not: reported, the status stays ok
    for url, want in ((settings.CELERY_BROKER_URL, "ok"), ("redis://127.0.0.1:1/0", "ConnectionError")):
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                                       "OPTIONS": {"socket_connect_timeout": 0.5}}}  # Django re-reads CACHES
        resp = client.get("/healthz")
        assert resp.status_code == 200 and resp.json()["cache"] == want, resp.json()


def test_schema_generation_has_no_warnings(tmp_path):
    from django.core.management import call_command

    # drf-spectacular's own validation; warnings (untyped path parameters, enum collisions) fail
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "openapi: 3" in (tmp_path / "schema.yaml").read_text()


def _schema() -> dict:
    return yaml.safe_load(APIClient().get("/api/schema/").content)


def _operations(doc):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                yield method.upper(), path, op


def test_openapi_documents_the_4xx_answers_of_every_operation():
    doc = _schema()
    responses = doc["components"]["responses"]
    ops = list(_operations(doc))
    assert len(ops) >= 42
    for method, path, op in ops:
        codes = set(op["responses"])
        where = f"{method} {path}"
        assert "401" in codes, where  # every operation checks a given token, even the sign-in
        if "{" in path:
            assert "404" in codes, where
        if "requestBody" in op:
            assert {"400", "415"} <= codes, where
            if "application/json" in op["requestBody"]["content"]:
                assert "413" in codes, where
        if method != "GET":
            assert "403" in codes, where
    by_op = {(m, p): op for m, p, op in ops}
    for m, p in [("POST", "/api/v1/jobs/"), ("POST", "/api/v1/experiments/")]:
        op = by_op[(m, p)]
        assert {"201", "400", "401", "403", "413", "415", "422", "429", "503"} <= set(op["responses"]), p
        assert [x["name"] for x in op["parameters"] if x["in"] == "header"] == ["Idempotency-Key"]
    assert "409" in by_op[("POST", "/api/v1/jobs/{id}/cancel/")]["responses"]
    assert "429" in by_op[("POST", "/api/v1/auth/token/")]["responses"]
    assert "429" not in by_op[("GET", "/api/v1/jobs/")]["responses"]  # only submissions are throttled
    # the bodies are DRF's: {"detail": ...}, and per-field lists for a 400
    assert responses["ValidationFailed"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ValidationError"}
    assert doc["components"]["schemas"]["Error"]["required"] == ["detail"]
    assert responses["Unauthenticated"]["headers"]["WWW-Authenticate"]
    assert responses["Throttled"]["headers"]["Retry-After"]


@pytest.mark.parametrize("method, path, body, status", [
    # each documented error body, from a real answer: the schema must describe what the API sends
    ("get", "/api/v1/jobs/", None, 401),
    ("post", "/api/v1/jobs/", {"model_name": "resnet18", "batch_size": 0}, 400),
    ("post", "/api/v1/experiments/", {"kind": "simulation", "parameters": {"limit": -1}}, 400),
    ("post", "/api/v1/clusters/", {"name": "c"}, 403),
    ("get", "/api/v1/jobs/987654/", None, 404),
    ("get", "/api/v1/no-such-endpoint/", None, 404),
    ("post", "/api/v1/rlweights/export/", "weights=a", 415),
])
def test_error_answers_match_their_documented_schema(alice, method, path, body, status):
    import jsonschema

    doc = _schema()
    client = APIClient() if status == 401 else _client(alice)
    if status == 415:
        resp = client.generic("POST", path, body, content_type="text/plain")
    else:
        resp = getattr(client, method)(path, body, format="json") if body is not None else getattr(client, method)(path)
    assert resp.status_code == status, resp.content
    assert resp["Content-Type"] == "application/json"
    component = {401: "Unauthenticated", 400: "ValidationFailed", 403: "Forbidden", 404: "NotFound",
                 415: "UnsupportedMediaType"}[status]
    ref = doc["components"]["responses"][component]["content"]["application/json"]["schema"]["$ref"]
    schema = {"$ref": ref, "components": doc["components"]}
    jsonschema.validate(resp.json(), schema)


def test_rlweights_export_response_is_documented_as_it_is_answered(alice):
    import jsonschema

    doc = _schema()
    ok = doc["paths"]["/api/v1/rlweights/export/"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    component = doc["components"]["schemas"][ok["$ref"].rsplit("/", 1)[1]]
    resp = _client(alice).post("/api/v1/rlweights/export/", {"weights": {"ImageLocality": 80}}, format="json")
    assert resp.status_code == 200
    body = resp.json()
    # the three formats, as the endpoint's docstring and docs/engines/rlweights.md give them
    assert set(component["properties"]) == set(body) == {
        "kube_scheduler_configuration", "volcano_nodeorder_arguments", "volcano_scheduler_conf"}
    assert set(component["required"]) == set(body)
    jsonschema.validate(body, {**component, "components": doc["components"]})
    assert yaml.safe_load(body["kube_scheduler_configuration"])["kind"] == "KubeSchedulerConfiguration"
    # the request body is what was documented before: weights, not the answer
    req = doc["paths"]["/api/v1/rlweights/export/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "weights" in doc["components"]["schemas"][req["$ref"].rsplit("/", 1)[1]]["properties"]
