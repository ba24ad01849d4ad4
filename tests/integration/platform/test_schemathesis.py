"""schemathesis against the live app: every operation of ``/api/schema/``, no server error, and
every response as the schema documents it (status code, content type, headers, body).

The CLI (``schemathesis run``) fuzzes a live server (pytest-django's ``live_server``, the real
WSGI app on this test's PostgreSQL database) as a staff user with an API token, seeded with one
object of each kind so that ``{id}`` paths reach real rows. Phases ``examples`` and ``fuzzing``
with ``--max-examples`` per operation and a fixed seed bound the run (about 65 s on this 2-core
machine; the coverage phase adds ~4,000 requests, ~5 min, and is left to manual runs:
docs/platform.md). No timing is asserted: a request that hangs past ``--request-timeout`` is an
error of the run, and the subprocess has an outer limit.
Every check of schemathesis runs except ``positive_data_acceptance``: a body valid under the
JSON Schema may still be refused with a 400 for what a schema cannot say (a unique name, an
existing foreign key, "exactly one of model and onnx"), and that 400 is documented. The
response-time check's limit is the request timeout (60 s), not schemathesis's default of 10 s:
that would be a timing assertion (the first prediction fits the utilisation predictor, ~8 s on a
quiet machine, 19 s once on a loaded one), and timings belong in ``bench/``.

What happens to enqueued work: jobs and experiments the run submits are committed and their
Celery messages go to this test's Redis database, where no worker consumes them (none is
started); the broker database is flushed at the end. So no engine runs: the test asserts that
every experiment and job is still ``queued`` (or ``cancelled`` by the fuzzer).

The token operations (``/api/v1/auth/``) run separately, last: ``DELETE`` revokes and
``rotate`` replaces the token the run authenticates with.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rest_framework.test import APIClient

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MAX_EXAMPLES = 12
SEED = 20261206
AUTH_PATHS = r"^/api/v1/auth/"
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
#: Every check but positive_data_acceptance (see the module docstring).
EXCLUDED_CHECKS = "positive_data_acceptance"
#: Seconds: a request's timeout, and the response-time check's limit (see the module docstring).
REQUEST_TIMEOUT_S = 60


def schema_operations() -> dict[tuple[str, str], re.Pattern]:
    """``(METHOD, path template) -> regex matching its concrete paths``, read from the schema."""
    doc = yaml.safe_load(APIClient().get("/api/schema/").content)
    ops = {}
    for path, item in doc["paths"].items():
        rx = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$")
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                ops[(method.upper(), path)] = rx
    return ops


def seed(staff) -> dict[str, list]:
    """One object of each kind for ``{id}`` paths and foreign keys; returns their ids."""
    from placement.models import PlacementDecision, SimulationJobOutcome
    from webapp.models import Cluster, Experiment, GPUDevice, Job, Node
    from webapp.states import State

    cluster = Cluster.objects.create(name="fuzz-c0", kind="kubernetes")
    node = Node.objects.create(cluster=cluster, name="fuzz-n0", cpu_cores=8, memory_mib=32768)
    gpu = GPUDevice.objects.create(node=node, index=0, model="V100", memory_mib=16384)
    job = Job.objects.create(owner=staff, model_name="resnet18", batch_size=8, num_gpus=1, steps=10)
    decision = PlacementDecision.objects.create(job=job, policy="horus", gpu_ids=[gpu.pk], predicted_util_pct=50.0,
                                                predicted_memory_mib=2048.0)
    sim = Experiment.objects.create(owner=staff, kind="simulation", parameters={"trace": "gavel:2869ce"},
                                    state=State.SUCCEEDED, result={"policies": {}})
    outcome = SimulationJobOutcome.objects.create(
        experiment=sim, policy="horus", job_index=0, model="resnet18", num_gpus=1, arrival_s=0.0, start_s=0.0,
        finish_s=60.0, queueing_delay_s=0.0, jct_s=60.0, slowdown=1.0, gpu_ids=[0])
    karmada = yaml.safe_dump_all([
        {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport", "metadata": {"name": "frontend"}},
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "frontend"}}])
    plan = Experiment.objects.create(owner=staff, kind="federation-plan", parameters={"application": "hotelReservation"},
                                     state=State.SUCCEEDED, result={"karmada_yaml": karmada})
    tuning = Experiment.objects.create(owner=staff, kind="tuning", parameters={"model": "convnet"})
    return {
        "ids": sorted({o.pk for o in (cluster, node, gpu, job, decision, sim, outcome, plan, tuning)}),
        "clusters": [cluster.pk], "nodes": [node.pk],
        "experiments": [sim.pk, plan.pk, tuning.pk], "jobs": [job.pk],
        # the row each of these operations must reach at least once (see write_config)
        "reach": {"/api/v1/clusters/{id}/": cluster.pk, "/api/v1/federation/plans/{id}/karmada/": plan.pk,
                  "/api/v1/tuning/experiments/{id}/": tuning.pk, "/api/v1/placement/outcomes/{id}/": outcome.pk},
    }


def write_config(path: Path, ids: dict[str, list]) -> Path:
    """schemathesis.toml: seeded ids and known model names are drawn half the time for the
    parameters that need them, random values the other half. The operations in ``ids["reach"]``
    draw their own row's id (not any seeded id: an id of another kind is a 404 there), so that
    reaching a real row does not depend on the pks a shared database happens to hand out."""
    reach = "".join(f"""
[dictionaries.reach{i}]
values = [{pk}]
[[operations]]
include-path = "{path_}"
parameters = {{ "path.id" = {{ dictionary = "reach{i}", probability = 0.5 }} }}
""" for i, (path_, pk) in enumerate(sorted(ids["reach"].items())))
    path.write_text(f"""\
[dictionaries.ids]
values = {ids["ids"]}
[dictionaries.clusters]
values = {ids["clusters"]}
[dictionaries.nodes]
values = {ids["nodes"]}
[dictionaries.models]
values = ["resnet18", "mobilenet_v2"]

[parameters]
"path.id" = {{ dictionary = "ids", probability = 0.5 }}
"body.cluster" = {{ dictionary = "clusters", probability = 0.5 }}
"body.node" = {{ dictionary = "nodes", probability = 0.5 }}
"body.model_name" = {{ dictionary = "models", probability = 0.3 }}
{reach}""")
    return path


def run_schemathesis(url: str, token: str, config: Path, out: Path, *select: str) -> tuple[subprocess.CompletedProcess, dict, list]:
    """``schemathesis run`` against ``url``; returns the process, its JSON report and HAR entries."""
    out.mkdir()
    cmd = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color", "run",
        f"{url}/api/schema/", "-H", f"Authorization: Token {token}",
        "--checks", "all", "--exclude-checks", EXCLUDED_CHECKS,
        "--phases", "examples,fuzzing", "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED),
        "--workers", "1", "--request-timeout", str(REQUEST_TIMEOUT_S), "--max-response-time", str(REQUEST_TIMEOUT_S),
        "--report", "json,har", "--report-json-path", str(out / "report.json"), "--report-har-path", str(out / "run.har"),
        "--output-truncate", "false", *select,
    ]
    # run in ``out``: schemathesis and hypothesis keep caches in the working directory
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=out, env=env)
    report = json.loads((out / "report.json").read_text())
    har = json.loads((out / "run.har").read_text())["log"]["entries"]
    return proc, report, har


def statuses_by_operation(har: list, ops: dict[tuple[str, str], re.Pattern]) -> dict[tuple[str, str], list[int]]:
    """Each response status the run received, under the operation its request matched."""
    seen: dict[tuple[str, str], list[int]] = {}
    for entry in har:
        method = entry["request"]["method"]
        path = "/" + entry["request"]["url"].split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
        match = [op for op, rx in ops.items() if op[0] == method and rx.match(path)]
        # a literal path (/jobs/{id}/cancel/) beats a template that also matches it
        match.sort(key=lambda op: op[1].count("{"))
        key = match[0] if match else (method, path)
        seen.setdefault(key, []).append(entry["response"]["status"])
    return seen


def check_run(proc, report, har, expected_ops) -> dict[tuple[str, str], list[int]]:
    assert proc.returncode == 0, f"schemathesis found failures:\n{proc.stdout[-12000:]}\n{proc.stderr[-3000:]}"
    assert report["failures"] == [] and report["errors"] == [], (report["failures"], report["errors"])
    assert report["operations"]["tested"] == len(expected_ops), report["operations"]
    seen = statuses_by_operation(har, expected_ops)
    server_errors = {op: [s for s in st if s >= 500] for op, st in seen.items() if any(s >= 500 for s in st)}
    assert server_errors == {}
    assert set(seen) == set(expected_ops), set(expected_ops) ^ set(seen)  # no request outside the schema
    return seen


@pytest.mark.slow
def test_schemathesis_every_operation_no_server_error(live_server, django_user_model, tmp_path, settings):
    import redis
    from rest_framework.authtoken.models import Token

    from webapp.models import Experiment, Job
    from webapp.states import State

    staff = django_user_model.objects.create_user("fuzz", password="fuzz-pw-1", is_staff=True, is_superuser=True)
    token = Token.objects.create(user=staff).key
    ids = seed(staff)
    ops = schema_operations()
    main_ops = {op: rx for op, rx in ops.items() if not re.match(AUTH_PATHS, op[1])}
    assert len(main_ops) >= 39, sorted(main_ops)
    config = write_config(tmp_path / "schemathesis.toml", ids)
    try:
        proc, report, har = run_schemathesis(live_server.url, token, config, tmp_path / "main",
                                             "--exclude-path-regex", AUTH_PATHS)
        # nothing consumed the messages: no experiment or job left the queue but by cancellation
        started = Experiment.objects.exclude(pk__in=ids["experiments"]).exclude(
            state__in=[State.QUEUED, State.CANCELLED]).count()
        started_jobs = Job.objects.exclude(state__in=[State.QUEUED, State.CANCELLED]).count()
    finally:
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    seen = check_run(proc, report, har, main_ops)
    assert (started, started_jobs) == (0, 0)
    # the token worked: every operation got an answer other than 401 at least once
    assert [op for op, st in seen.items() if set(st) <= {401}] == []
    # and the seeded ids reached real rows (a 200 on an {id} path of each engine's API)
    for path_ in ids["reach"]:
        assert 200 in seen[("GET", path_)], (path_, seen[("GET", path_)])


def test_schemathesis_token_operations_no_server_error(live_server, django_user_model, tmp_path):
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("fuzz-tokens", password="fuzz-pw-2")
    token = Token.objects.create(user=user).key
    ops = {op: rx for op, rx in schema_operations().items() if re.match(AUTH_PATHS, op[1])}
    assert sorted(ops) == [("DELETE", "/api/v1/auth/token/"), ("POST", "/api/v1/auth/token/"),
                           ("POST", "/api/v1/auth/token/rotate/")]
    config = tmp_path / "schemathesis.toml"
    config.write_text("""\
[dictionaries.users]
values = ["fuzz-tokens"]
[dictionaries.passwords]
values = ["fuzz-pw-2"]
[parameters]
"body.username" = { dictionary = "users", probability = 0.5 }
"body.password" = { dictionary = "passwords", probability = 0.5 }
""")
    proc, report, har = run_schemathesis(live_server.url, token, config, tmp_path / "auth",
                                         "--include-path-regex", AUTH_PATHS)
    seen = check_run(proc, report, har, ops)
    assert 200 in seen[("POST", "/api/v1/auth/token/")], seen  # signed in with the dictionary's password
