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
