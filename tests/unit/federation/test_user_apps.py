"""Applications the user gives as docker-compose / Kubernetes YAML: the derived graph, how
each edge was derived, bad input."""
from __future__ import annotations

import pytest

from federation import pipeline
from federation.core.applications import application_from_text, derived_graph
from federation.core.model import FederationError
from webapp.plug import Collect, no_report

COMPOSE = """
services:
  web:
    image: shop/web
    depends_on: [api]
  api:
    image: shop/api
    environment:
      DB_HOST: "api-db:27017"
  api-db:
    image: mongo:6
  mailer:
    image: shop/mailer
  mailer-redis:
    image: redis:7
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - image: shop/api
        resources: {requests: {cpu: 250m}}
"""


def test_graph_from_compose_and_kubernetes_says_how_each_edge_was_found():
    app = application_from_text(COMPOSE + "---\n" + DEPLOYMENT, "web", name="shop")
    g = derived_graph(app)
    edges = {(e["caller"], e["callee"]): (e["how"], e["inferred"]) for e in g["edges"]}
    assert edges == {
        ("web", "api"): ("depends_on/links", False),       # read: depends_on
        ("api", "api-db"): ("env", False),                 # read: DB_HOST names api-db
        ("web", "mailer"): ("entry-fan-out", True),        # inferred: nothing calls mailer
        ("mailer", "mailer-redis"): ("stem", True),        # inferred: same stem 'mailer'
    }
    svc = {s["name"]: s for s in g["services"]}
    assert svc["api"]["replicas"] == 3 and svc["api"]["cpu_per_replica"] == 0.25  # from the Deployment
    assert svc["api-db"]["tier"] == "db" and svc["mailer-redis"]["tier"] == "cache"
    assert g["entry"] == "web" and g["name"] == "shop"


@pytest.mark.parametrize("text, entry, message", [
    ("services: [", "web", "not valid YAML"),
    ("kind: ConfigMap\nmetadata: {name: x}\n", "web", "no docker-compose services"),
    (COMPOSE, "nope", "entry service 'nope' not found"),
    ("services:\n  web:\n    image: x\n    deploy: {replicas: three}\n", "web", "wrong type"),
])
def test_bad_manifests_are_refused_with_the_reason(text, entry, message):
    with pytest.raises(FederationError, match=message):
        application_from_text(text, entry)


def test_plan_task_plans_a_user_application():
    clusters = [{"name": "eu", "region": "aws:eu-west-1", "capacity_cores": 4.0},
                {"name": "us", "region": "aws:us-east-1", "capacity_cores": 4.0}]
    r = pipeline.run({"application": "shop", "manifests": COMPOSE, "entry": "web", "clusters": clusters, "client": "eu"},
                     report=no_report, record=Collect())
    assert set(r["plan"]["replicas"]) == {"web", "api", "api-db", "mailer", "mailer-redis"}
    assert r["plan"]["replicas"]["web"] == {"eu": 1}  # everything fits next to the users
    assert any(e["inferred"] for e in r["graph"]["edges"])
    with pytest.raises(FederationError, match="entry"):
        pipeline.run({"application": "shop", "manifests": COMPOSE, "clusters": clusters}, report=no_report, record=Collect())


def test_a_service_that_calls_the_entry_is_not_fanned_out_into_a_cycle():
    """Found by a fresh-clone try: b depends_on a with entry a was refused as "a field has the
    wrong type (... the call graph has a cycle)": the entry fan-out had added a->b beside b->a."""
    text = "services:\n  a: {image: 'app/a'}\n  b: {image: 'app/b', depends_on: [a]}\n"
    app = application_from_text(text, "a")
    assert app.names == ["a"] and app.edges == []
    assert any("b calls the entry a" in n and "is 'b' the entry?" in n for n in app.notes), app.notes
    assert any(n.startswith("dropped (not reachable from the entry): b") for n in app.notes), app.notes
    # with the entry the file implies, b calls a
    app = application_from_text(text, "b")
    assert [(e.caller, e.callee) for e in app.edges] == [("b", "a")]


def test_a_self_dependency_is_reported_and_a_real_cycle_named_as_one():
    app = application_from_text("services:\n  a: {image: 'app/a', depends_on: [a]}\n", "a")
    assert app.edges == [] and "a depends on itself: ignored" in app.notes
    text = "services:\n  a: {image: 'app/a', depends_on: [b]}\n  b: {image: 'app/b', depends_on: [a]}\n"
    with pytest.raises(FederationError) as err:
        application_from_text(text, "a")
    assert "the call graph has a cycle" in str(err.value) and "wrong type" not in str(err.value)
