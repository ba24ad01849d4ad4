"""Review findings: bounded / validated simulation clusters through the API, the outcomes
filter, the dashboard's GPU cell for a 1000-GPU job, and the prediction reported for the GPU
type a job was placed on (PostgreSQL; no worker needed)."""
from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from placement.models import PlacementDecision
from webapp.models import Cluster, Experiment, GPUDevice, Job, Node
from tests.conftest import token_client

pytestmark = [pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def api(alice):
    c = token_client(alice)
    return c


@pytest.mark.django_db
@pytest.mark.parametrize("cluster, limit, message", [
    ("100000000x100000000", 0, "cluster '100000000x100000000': at most 10000 nodes"),
    ("0x8", 0, "cluster '0x8': needs at least 1 node and 1 GPU per node"),
    ("1x1", 1, "job 0 (Transformer) needs 4 GPUs but the cluster has 1; "
               "use at least 4 GPUs in all or leave cluster empty (shaped like the trace)"),
])
def test_impossible_cluster_is_400_and_stores_nothing(api, cluster, limit, message):
    r = api.post("/api/v1/experiments/", {"kind": "simulation", "parameters": {
        "trace": "gavel:2869ce", "policies": ["fifo"], "cluster": cluster, "limit": limit}}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["parameters"] == {"cluster": [message]}
    assert Experiment.objects.count() == 0


@pytest.mark.django_db
def test_outcomes_filter_must_be_an_integer(api):
    r = api.get("/api/v1/placement/outcomes/?experiment=abc")
    assert r.status_code == 400
    assert r.json() == {"experiment": ["must be an experiment id (an integer), got 'abc'"]}
    assert api.get("/api/v1/placement/outcomes/?experiment=12").status_code == 200


@pytest.mark.django_db
def test_dashboard_summarises_a_1000_gpu_placement(alice):
    cl = Cluster.objects.create(name="pai")
    nodes = Node.objects.bulk_create([Node(cluster=cl, name=f"n{i:03d}", cpu_cores=8, memory_mib=65536)
                                      for i in range(125)])
    GPUDevice.objects.bulk_create([GPUDevice(node=n, index=i, model="V100M32", memory_mib=32768)
                                   for n in nodes for i in range(8)])
    ids = list(GPUDevice.objects.order_by("pk").values_list("pk", flat=True))
    job = Job.objects.create(owner=alice, model_name="resnet18", batch_size=16, num_gpus=1000)
    PlacementDecision.objects.create(job=job, policy="horus", gpu_ids=ids, predicted_util_pct=50.0,
                                     predicted_memory_mib=1000.0, explanation={})
    web = Client()
    web.force_login(alice)
    page = web.get("/placement/").content.decode()
    assert "1000 GPUs on 125 nodes: n000, n001, n002, ..." in page
    assert f"{ids[0]}, {ids[1]}, {ids[2]}" not in page
    api = APIClient()
    api.force_authenticate(alice)
    assert api.get(f"/api/v1/placement/decisions/?job={job.pk}").json()["results"][0]["gpu_ids"] == ids


@pytest.mark.django_db
def test_prediction_is_for_the_placed_gpus_type(alice, api):
    """PAI-like cluster: most GPUs are MISC (no profile rows, 2 GiB: too small for the job),
    two are V100M32. vgg16 at batch 16 (3,861 MiB graph estimate) can only go on a V100M32;
    its predicted utilisation must be the V100-family prediction, not MISC's 0."""
    from placement.services import LivePlacementScheduler

    cl = Cluster.objects.create(name="pai")
    misc = Node.objects.create(cluster=cl, name="misc0", cpu_cores=8, memory_mib=65536)
    big = Node.objects.create(cluster=cl, name="v100m32", cpu_cores=8, memory_mib=65536)
    for i in range(4):
        GPUDevice.objects.create(node=misc, index=i, model="MISC", memory_mib=2048)
    v100 = {GPUDevice.objects.create(node=big, index=i, model="V100M32", memory_mib=32768).pk for i in range(2)}
    job = Job.objects.create(owner=alice, model_name="vgg16", batch_size=16, num_gpus=1)
    assert [j.pk for j in LivePlacementScheduler().schedule()] == [job.pk]
    dec = PlacementDecision.objects.get(job=job)
    assert set(dec.gpu_ids) <= v100
    expected = api.post("/api/v1/placement/predict/", {"model_name": "vgg16", "batch_size": 16, "gpu_type": "V100"},
                        format="json").json()["util_mean_pct"]
    assert expected > 0
    assert dec.predicted_util_pct == pytest.approx(expected)
    pv = dec.explanation["prediction"]
    assert pv["gpu_type"] == "V100M32" and pv["profile_gpu_type"] == "V100"
    assert pv["note"] == "no profile rows for V100M32; predicted from the V100 rows (same GPU family by name)"
