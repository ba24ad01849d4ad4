"""Keys and query parameters the API does not know are refused with a 400 that names them,
never dropped: a misspelt body field would otherwise be replaced by its default, a misspelt
ordering or kind would return an unordered or empty list that looks like an answer."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def staff(django_user_model):
    user = django_user_model.objects.create_user("root", password="pw-root-1", is_staff=True)
    client = APIClient()
    client.force_authenticate(user)
    return client


def counts():
    from webapp.models import Cluster, Experiment, Job, Node

    return [m.objects.count() for m in (Cluster, Node, Job, Experiment)]


@pytest.mark.parametrize("url, body, key", [
    ("/api/v1/jobs/", {"name": "j", "model_name": "resnet18", "batchsize": 8}, "batchsize"),
    ("/api/v1/experiments/", {"kind": "simulation", "parameter": {"trace": "philly"}}, "parameter"),
    ("/api/v1/clusters/", {"name": "c1", "region": "eu", "kind": "gpu", "label": {"a": "b"}}, "label"),
])
def test_unknown_body_field_is_a_400_naming_it_and_nothing_is_stored(staff, url, body, key):
    before = counts()
    r = staff.post(url, body, format="json")
    assert r.status_code == 400, r.content
    assert key in r.json() and "unknown field" in r.json()[key][0]
    assert counts() == before


@pytest.mark.parametrize("method, body, key", [
    ("post", {"name": "c-int", "region": -439881, "kind": "other"}, "region"),
    ("post", {"name": 12, "region": "eu", "kind": "other"}, "name"),
    ("post", {"name": "c-kind", "region": "eu", "kind": 1}, "kind"),
    ("patch", {"region": 7.5}, "region"),
])
def test_a_number_for_a_text_field_is_a_400_and_nothing_changes(staff, method, body, key):
    """Found by schemathesis (ST201): DRF stored ``"region": -439881`` as the text "-439881"."""
    from webapp.models import Cluster

    cluster = Cluster.objects.create(name="c0", region="us", kind="other")
    before = counts()
    url = "/api/v1/clusters/" + (f"{cluster.pk}/" if method == "patch" else "")
    r = getattr(staff, method)(url, body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()[key] == ["must be a string."]
    cluster.refresh_from_db()
    assert counts() == before and (cluster.name, cluster.region) == ("c0", "us")


def test_read_only_fields_sent_back_are_accepted(staff):
    r = staff.post("/api/v1/jobs/", {"name": "j", "model_name": "resnet18", "batch_size": 8, "num_gpus": 1,
                                     "steps": 1, "state": "succeeded", "id": 999}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["state"] == "queued" and r.json()["name"] == "j"


@pytest.mark.parametrize("url, param", [
    ("/api/v1/experiments/?kind=bogus", "kind"),
    ("/api/v1/experiments/?state=bogus", "state"),
    ("/api/v1/experiments/?ordering=bogus", "ordering"),
    ("/api/v1/experiments/?ordering=-created_at,nope", "ordering"),
    ("/api/v1/jobs/?ordering=owner__password", "ordering"),
])
def test_unknown_filter_value_or_ordering_is_a_400(staff, url, param):
    r = staff.get(url)
    assert r.status_code == 400, r.content
    assert param in r.json()


def test_known_kind_and_ordering_filter_the_list(staff, django_user_model):
    from webapp.models import Experiment

    owner = django_user_model.objects.get(username="root")
    a = Experiment.objects.create(owner=owner, kind="simulation", parameters={"trace": "philly"}, name="a")
    b = Experiment.objects.create(owner=owner, kind="weight-learning", parameters={}, name="b")
    r = staff.get("/api/v1/experiments/?kind=simulation")
    assert r.status_code == 200 and [e["id"] for e in r.json()["results"]] == [a.pk]
    r = staff.get("/api/v1/experiments/?ordering=-id")
    assert [e["id"] for e in r.json()["results"]] == [b.pk, a.pk]
    r = staff.get("/api/v1/experiments/?ordering=id")
    assert [e["id"] for e in r.json()["results"]] == [a.pk, b.pk]


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("url", ["/api/v1/nosuch/", "/api/v1/jobs/1/nosuch/", "/api/"])
def test_an_unknown_api_route_is_a_json_404_with_or_without_debug(staff, settings, debug, url):
    """Found by a new user's try: with DEBUG on (the demo's settings) Django answered an
    unknown /api/ route with its HTML debug page, not the JSON 404 docs/platform.md promises."""
    settings.DEBUG = debug
    r = staff.get(url, HTTP_ACCEPT="application/json")
    assert r.status_code == 404 and r["Content-Type"] == "application/json", (r.status_code, r["Content-Type"])
    assert r.json() == {"detail": "Not found."}


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_an_unknown_api_route_is_a_json_404_for_unsafe_methods_too(method, django_user_model):
    """Found by schemathesis (ST105): ``DELETE /api/v1/gpus/-4.09e-283/`` matches no route and got
    the CSRF middleware's HTML 403 page from the catch-all, not the JSON 404."""
    from django.test import Client

    client = Client(enforce_csrf_checks=True)  # as a browser session is checked
    client.force_login(django_user_model.objects.create_user("csrf-user", password="pw-csrf-1"))
    r = getattr(client, method)("/api/v1/gpus/-4.0962721557823093e-283/", HTTP_ACCEPT="application/json")
    assert r.status_code == 404 and r["Content-Type"] == "application/json", (r.status_code, r.content[:200])


def test_an_api_url_without_its_slash_is_still_redirected(staff):
    r = staff.get("/api/v1/jobs")
    assert r.status_code == 301 and r["Location"].endswith("/api/v1/jobs/")
