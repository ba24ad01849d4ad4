"""``manage.py fedapp FILE... --entry SERVICE``: the call graph derived from your docker-compose
files and/or Kubernetes manifests (the rule of :mod:`federation.core.applications`), each edge
with how it was derived and whether it was inferred, for confirmation; with ``--clusters``
(a JSON file of member clusters, as the ``federation-plan`` kind takes them) it also plans it
through the engine's pipeline. ``--json`` prints one JSON line only."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from federation.core.model import FederationError


class Command(BaseCommand):
    help = "Derive (and optionally plan) an application from docker-compose / Kubernetes YAML files."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="docker-compose and/or Kubernetes YAML files")
        parser.add_argument("--entry", required=True, help="the service user requests hit")
        parser.add_argument("--name", default="", help="application name (default: the entry)")
        parser.add_argument("--clusters", default="", help="JSON file: [{name, capacity_cores, contention, region}] to plan on")
        parser.add_argument("--client", default="", help="member cluster where the users are")
        parser.add_argument("--json", action="store_true", help="print only a JSON line")

    def handle(self, *args, **o):
        from federation import pipeline
        from federation.core.applications import application_from_text, derived_graph
        from webapp.plug import Collect, no_report

        texts = []
        for f in o["files"]:
            p = Path(f)
            if not p.is_file():
                raise CommandError(f"{f}: no such file")
            texts.append(p.read_text())
        text = "\n---\n".join(texts)
        try:
            graph = derived_graph(application_from_text(text, o["entry"], name=o["name"]))
            out = {"graph": graph}
            if o["clusters"]:
                try:
                    clusters = json.loads(Path(o["clusters"]).read_text())
                except (OSError, ValueError) as err:
                    raise CommandError(f"--clusters {o['clusters']}: {err}") from None
                res = pipeline.run({"task": "plan", "application": graph["name"], "manifests": text, "entry": o["entry"],
                                    "clusters": clusters, "client": o["client"] or None}, report=no_report, record=Collect())
                out["plan"] = {"replicas": res["plan"]["replicas"], "expected_ms": res["plan"]["cost"]["total_ms"],
                               "baselines_expected_ms": {k: v["cost"]["total_ms"] for k, v in res["baselines"].items()}}
                out["karmada_yaml"] = res["karmada_yaml"]
        except FederationError as err:
            raise CommandError(str(err)) from None
        if o["json"]:
            self.stdout.write(json.dumps(out))
            return
        self.stdout.write(f"{graph['name']}: {len(graph['services'])} services, entry {graph['entry']}")
        for s in graph["services"]:
            self.stdout.write(f"  service {s['name']:28s} {s['tier']:6s} replicas {s['replicas']}  cpu {s['cpu_per_replica']:g}")
        for e in graph["edges"]:
            self.stdout.write(f"  edge {e['caller']} -> {e['callee']}: {e['how']}{' (inferred)' if e['inferred'] else ''}")
        for n in graph["notes"]:
            self.stdout.write(f"  note: {n}")
        if "plan" in out:
            self.stdout.write(f"plan: expected {out['plan']['expected_ms']:.1f} ms/request; " + ", ".join(
                f"{s} -> {sorted(r)}" for s, r in out["plan"]["replicas"].items()))
