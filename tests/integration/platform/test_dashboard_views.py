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


@pytest.fixture
def headline_kind():
    """A registered kind with a headline and a page, removed again afterwards."""
    from webapp import experiments as ex

    def headline(exp):
        r = exp.result
        return ex.Headline(engine="test engine", metric="mean JCT", ours=f"{r['ours']:.1f} h", baseline_name="FIFO",
                           baseline=f"{r['fifo']:.1f} h", ratio=r["ours"] / r["fifo"])

    ex.register_experiment_kind(ex.ExperimentKind(kind="test-headline", run=lambda e, r: {}, headline=headline,
                                                  page=lambda e: f"/test/{e.pk}/"))
    yield "test-headline"
    ex._REGISTRY.pop("test-headline", None)


def test_landing_page_shows_latest_headline_and_links_to_engine_page(client, django_user_model, headline_kind):
    from django.utils import timezone

    u = django_user_model.objects.create_user("op", password="pw")
    old = Experiment.objects.create(owner=u, kind=headline_kind, name="old", state="succeeded", result={"ours": 9.0, "fifo": 10.0},
                                    finished_at=timezone.now() - timezone.timedelta(hours=1))
    new = Experiment.objects.create(owner=u, kind=headline_kind, name="new", state="succeeded", result={"ours": 6.0, "fifo": 8.0},
                                    finished_at=timezone.now())
    Experiment.objects.create(owner=u, kind="training-probe", name="queued probe")  # not succeeded: not shown
    client.force_login(u)
    html = client.get("/").content.decode()
    assert "6.0 h" in html and "FIFO: 8.0 h" in html and "0.750" in html  # 6 / 8, computed by hand
    assert "verdict-better" in html and f'href="/test/{new.pk}/"' in html
    assert "9.0 h" not in html and old.name not in html.split('id="headlines"')[1].split("</section>")[0]
    assert 'data-kind="training-probe"' not in html
    # the experiment list links to the engine page when the kind names one, else to the API result
    listing = client.get("/experiments/").content.decode()
    assert f'href="/test/{new.pk}/"' in listing
    probe = Experiment.objects.get(name="queued probe")
    assert f'href="/api/v1/experiments/{probe.pk}/result/"' in listing


def test_landing_page_empty_state_says_why(client, django_user_model):
    u = django_user_model.objects.create_user("op", password="pw")
    client.force_login(u)
    html = client.get("/").content.decode()
    assert "Nothing has run yet: no experiment has succeeded" in html


def test_a_result_without_the_headline_fields_says_so(client, django_user_model, headline_kind):
    from django.utils import timezone

    u = django_user_model.objects.create_user("op", password="pw")
    Experiment.objects.create(owner=u, kind=headline_kind, state="succeeded", result={"other": 1}, finished_at=timezone.now())
    client.force_login(u)
    html = client.get("/").content.decode()
    assert "no headline for this result (KeyError: &#x27;ours&#x27;)" in html
