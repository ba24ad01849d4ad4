"""Live placement through the job API on PostgreSQL (and a real Celery worker running the
scheduling passes on queue ``control``): Horus places
jobs on registered GPUs, rejects never-fitting jobs with 400, keeps must-wait jobs queued and
places them when capacity frees; decisions are visible in the placement API."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from placement.models import PlacementDecision
from tests.conftest import wait_for
from webapp.models import Cluster, GPUDevice, Job, Node
from webapp.states import State
from tests.conftest import token_client

pytestmark = [pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def api(alice):
    c = token_client(alice)
    return c


@pytest.fixture
def two_gpus():
    node = Node.objects.create(cluster=Cluster.objects.create(name="lab"), name="n0", cpu_cores=8, memory_mib=65536)
    return [GPUDevice.objects.create(node=node, index=i, model="V100", memory_mib=8192) for i in range(2)]


def _post(api, **job):
    return api.post("/api/v1/jobs/", {"steps": 2, **job}, format="json")


def _pass() -> None:
    """The scheduling pass a submission or a cancel asked the control worker for, run here (the
    worker's own run of it: test_real_worker_runs_queued_jobs_as_capacity_frees)."""
    from webapp.services import job_schedule_requested

    job_schedule_requested()


@pytest.mark.django_db(transaction=True)
def test_never_fits_is_400_and_stores_nothing(api, two_gpus):
    r = _post(api, model_name="resnet18", batch_size=16, num_gpus=3)
    assert r.status_code == 400 and "only 2 are registered" in r.json()["num_gpus"][0]
    # resnet50 at batch 64: 8,212 MiB graph estimate > 8,192 MiB GPUs
    r = _post(api, model_name="resnet50", batch_size=64, num_gpus=1)
    assert r.status_code == 400 and "largest GPU registered has 8192 MiB" in r.json()["batch_size"][0]
    assert Job.objects.count() == 0 and PlacementDecision.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_must_wait_is_placed_when_capacity_frees(api, two_gpus):
    a = _post(api, model_name="vgg16", batch_size=16, num_gpus=2).json()  # 3,861 MiB per GPU
    b = _post(api, model_name="vgg16", batch_size=16, num_gpus=2).json()  # co-located: 2 tasks per GPU
    c = _post(api, model_name="resnet18", batch_size=16, num_gpus=1).json()  # Horus k_max = 2: waits
    assert not Job.objects.filter(gpus__isnull=False).exists()  # placement is not the request's work
    _pass()
    ids = sorted(g.pk for g in two_gpus)
    assert sorted(Job.objects.get(pk=a["id"]).gpus.values_list("pk", flat=True)) == ids
    assert sorted(Job.objects.get(pk=b["id"]).gpus.values_list("pk", flat=True)) == ids
    jc = Job.objects.get(pk=c["id"])
    assert jc.state == State.QUEUED and not jc.gpus.exists() and not jc.placement_decisions.exists()

    assert api.post(f"/api/v1/jobs/{a['id']}/cancel/").status_code == 200
    _pass()
    jc.refresh_from_db()
    assert jc.gpus.count() == 1
    dec = api.get(f"/api/v1/placement/decisions/?job={c['id']}").json()["results"]
    assert len(dec) == 1 and dec[0]["policy"] == "horus"
    cands = dec[0]["explanation"]["candidates"]
    assert {"memory", "utilisation", "tasks", "cost"} <= set(cands[0])
    assert cands[0]["tasks"] == 1.0  # both GPUs still hold job b
    assert dec[0]["explanation"]["prediction"]["util_sources"] == ["gavel-throughput-derived"]


@pytest.mark.django_db(transaction=True)
def test_real_worker_runs_queued_jobs_as_capacity_frees(api, two_gpus, celery_worker_process):
    ids = [_post(api, model_name="resnet18", batch_size=2, num_gpus=2, steps=2).json()["id"] for _ in range(3)]
    wait_for(lambda: Job.objects.filter(pk__in=ids, state=State.SUCCEEDED).count() == 3, timeout=240,
             what="three jobs to succeed")
    decisions = {d.job_id: d for d in PlacementDecision.objects.filter(job_id__in=ids)}
    assert set(decisions) == set(ids)
    first_done = min(Job.objects.get(pk=i).finished_at for i in ids[:2])
    # the third (2 GPUs x 2 tasks already taken) was placed only after one of the first two ended
    assert decisions[ids[2]].created_at >= first_done
    # node n0 has no worker (no GPU report, no heartbeat): each job says where it really ran
    for i in ids:
        res = Job.objects.get(pk=i).result
        assert res["device"] == "cpu" and "node n0, which no Tandem worker reports" in res["note"], res


@pytest.mark.django_db(transaction=True)
def test_jobs_naming_a_cluster_go_there(api, two_gpus):
    other = Cluster.objects.create(name="other")
    node = Node.objects.create(cluster=other, name="m0", cpu_cores=4, memory_mib=16384)
    lone = GPUDevice.objects.create(node=node, index=0, model="V100", memory_mib=16384)
    r = _post(api, model_name="resnet18", batch_size=16, num_gpus=2, cluster=other.pk)
    assert r.status_code == 400 and "only 1 are registered in cluster other" in r.json()["num_gpus"][0]
    # fits the 8 GiB GPUs of "lab" too, but it names "other"
    j = _post(api, model_name="resnet18", batch_size=16, num_gpus=1, cluster=other.pk).json()
    _pass()
    assert list(Job.objects.get(pk=j["id"]).gpus.values_list("pk", flat=True)) == [lone.pk]
    k = _post(api, model_name="resnet18", batch_size=16, num_gpus=1).json()  # no cluster: "lab" sorts first
    _pass()
    assert Job.objects.get(pk=k["id"]).gpus.get().node.cluster.name == "lab"


@pytest.mark.django_db
def test_predict_and_profiles_api(api):
    ok = api.post("/api/v1/placement/predict/", {"model_name": "resnet18", "batch_size": 32, "gpu_type": "V100"},
                  format="json")
    assert ok.status_code == 200
    body = ok.json()
    assert body["sources"] == ["gavel-throughput-derived"] and body["training_rows"] == 26
    cfg = body["predictor_config"]  # the grid point chosen by leave-one-model-out on the V100 rows
    assert set(cfg) == {"max_depth", "min_child_weight", "shrink"} and 0 <= cfg["shrink"] <= 1
    assert body["features"]["forward_flops"] == pytest.approx(32 * 2 * 1.814e9, rel=0.02)
    assert body["memory_source"] == "graph-estimate"
    none = api.post("/api/v1/placement/predict/", {"model_name": "resnet18", "batch_size": 32, "gpu_type": "T4"},
                    format="json")
    assert none.status_code == 400 and "manage.py profile_gpu" in none.json()["gpu_type"][0]
    bad = api.post("/api/v1/placement/predict/", {"model_name": "no-such-net", "batch_size": 1}, format="json")
    assert bad.status_code == 400 and "unknown model" in bad.json()["model_name"][0]
    for name, msg in (("onnx:/etc/passwd", "not in the ONNX zoo"), ("gavel:Nope", "unknown Gavel family")):
        r = api.post("/api/v1/placement/predict/", {"model_name": name, "batch_size": 1}, format="json")
        assert r.status_code == 400 and msg in r.json()["model_name"][0], (name, r.content)
    gavel = api.post("/api/v1/placement/predict/", {"model_name": "ResNet-18", "batch_size": 32}, format="json")
    assert gavel.status_code == 200, gavel.content
    prof = api.get("/api/v1/placement/profiles/?gpu_type=k80").json()
    assert prof["count"] == 26 and {r["gpu_type"] for r in prof["results"]} == {"K80"}
    assert APIClient().get("/api/v1/placement/decisions/").status_code == 401


@pytest.mark.django_db
def test_capacity_check_matches_counting_the_rows():
    """The submission-time check (one statement that stops early) against counting and taking
    the maximum of the registered GPUs in Python, cluster by cluster and overall."""
    import random

    from placement.services import _capacity_check

    assert _capacity_check(None, 1, 10.0) == (False, False, False)  # nothing registered: placement off
    rng = random.Random(3)
    mems = {}
    for c in range(3):
        cluster = Cluster.objects.create(name=f"c{c}")
        mems[cluster.id] = []
        for n in range(c + 1):  # c2 has 3 nodes; c0 one
            node = Node.objects.create(cluster=cluster, name=f"n{n}", cpu_cores=8, memory_mib=1024)
            for i in range(rng.randint(0, 4)):
                m = rng.choice([8192, 16384, 32768])
                GPUDevice.objects.create(node=node, index=i, model="V100", memory_mib=m)
                mems[cluster.id].append(m)
    everything = [m for ms in mems.values() for m in ms]
    for cid in [None, *mems]:
        ms = everything if cid is None else mems[cid]
        for k in (1, 2, len(ms), len(ms) + 1, 50):
            for mem in (None, 100.0, 16384.0, 16384.5, 32768.0, 40000.0):
                want = (True, len(ms) >= k, mem is None or any(m >= mem for m in ms))
                assert _capacity_check(cid, k, mem) == want, (cid, k, mem)
