"""Dashboard pages (server-rendered) and the local plotly.js, with the Django test client."""
from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command

from webapp.models import Cluster, Experiment, GPUDevice, Node

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_pages_need_login(client):
    for url in ("/", "/experiments/"):
        resp = client.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/")


def test_overview_shows_capacity_and_figure(client, django_user_model):
    u = django_user_model.objects.create_user("op", password="pw")
    node = Node.objects.create(cluster=Cluster.objects.create(name="lab", region="eu"), name="n", cpu_cores=32, memory_mib=262144)
    for i in range(4):
        GPUDevice.objects.create(node=node, index=i, model="T4", memory_mib=16384, utilisation_percent=[10, 20, 30, None][i])
    client.force_login(u)
    html = client.get("/").content.decode()
    assert "lab" in html and "GPU capacity by type" in html
    assert "20.0 %" in html  # mean utilisation of the three GPUs with a reading: (10+20+30)/3
    assert "/static/vendor/plotly.min.js" in html and "cdn.plot.ly" not in html


def test_experiment_list_only_own(client, django_user_model):
    a = django_user_model.objects.create_user("a", password="pw")
    b = django_user_model.objects.create_user("b", password="pw")
    Experiment.objects.create(owner=a, kind="training-probe", name="mine", progress=40, progress_message="step 4/10")
    Experiment.objects.create(owner=b, kind="training-probe", name="theirs")
    client.force_login(a)
    html = client.get("/experiments/").content.decode()
    assert "mine" in html and "step 4/10" in html and "theirs" not in html


def test_plotly_js_found_and_collected(tmp_path, settings):
    path = finders.find("vendor/plotly.min.js")
    assert path and path.endswith("plotly/package_data/plotly.min.js")
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / "vendor/plotly.min.js").stat().st_size > 1_000_000
    assert (tmp_path / "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").exists()


def test_cluster_detail_lists_nodes_paginated(client, django_user_model):
    from pathlib import Path

    pai = Path(__file__).resolve().parents[3] / "data/alibaba-pai-gpu-2020/pai_machine_spec.csv"
    call_command("import_nodes", str(pai), "--cluster", "pai", "--json", stdout=open("/dev/null", "w"))
    client.force_login(django_user_model.objects.create_user("op", password="pw"))
    c = Cluster.objects.get(name="pai")
    html = client.get(f"/clusters/{c.pk}/").content.decode()
    assert "1897 nodes" in html and "page 1 of 38" in html  # ceil(1897 / 50)
    # first node by name in the file's machine ids, read with `cut -d, -f1 | sort | head -1`
    first = sorted(line.split(",")[0] for line in pai.read_text().splitlines())[0]
    assert f"<td>{first}</td>" in html
    last = client.get(f"/clusters/{c.pk}/?page=38").content.decode()
    assert last.count("<tr><td>") == 1897 - 37 * 50
