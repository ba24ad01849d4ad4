"""``manage.py simulate``: replay a trace under placement policies (no services needed)."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from placement.demo import comparison_table
from placement.experiment import SimulationParams, run_simulations


class Command(BaseCommand):
    help = "Simulate a trace (gavel:<vc>, philly, tiresias60) under one or more placement policies"

    def add_arguments(self, parser):
        parser.add_argument("--trace", default="gavel:2869ce",
                            help="gavel:<vc> (one of the 15 Gavel VCs), philly or tiresias60 (default gavel:2869ce)")
        parser.add_argument("--policies", default="fifo,sjf,tiresias,gandiva,horus,horus+,random",
                            help="comma-separated policies (default: all seven)")
        parser.add_argument("--cluster", default="", help="NxG nodes x GPUs per node; default: shaped like the trace")
        parser.add_argument("--seed", type=int, default=0,
                            help="simulation seed (random co-location, Horus+ k-means) and Philly's model draw")
        parser.add_argument("--limit", type=int, default=0, help="first N jobs only (0 = all)")
        parser.add_argument("--json", action="store_true", help="print the per-policy summaries as JSON")

    def handle(self, *args, **o):
        ser = SimulationParams(data={"trace": o["trace"], "policies": o["policies"].split(","), "cluster": o["cluster"],
                                     "seed": o["seed"], "limit": o["limit"]})
        if not ser.is_valid():
            lines = dict.fromkeys(f"--{field}: {msg}" for field, msg in _flat(ser.errors))  # each once
            raise CommandError("; ".join(lines))
        params = dict(ser.validated_data)
        bar = tqdm(total=100, desc="simulate", disable=o["json"])

        def report(pct, msg):
            bar.n = int(pct)
            bar.set_postfix_str(msg)
            bar.refresh()

        try:
            result = run_simulations(params, report)
        except ValueError as err:  # e.g. a job that can never fit the cluster
            raise CommandError(str(err)) from None
        finally:
            bar.close()
        if o["json"]:
            self.stdout.write(json.dumps({"trace": result["trace"], "jobs": result["jobs"], "gpus": result["gpus"],
                                          "policies": {k: v["summary"] for k, v in result["policies"].items()}}))
        else:
            self.stdout.write(comparison_table(result))


def _flat(errors, field: str | None = None):
    """(field, message) pairs of a DRF ``errors`` structure (dicts by field or list index,
    lists of messages); a list item's index is dropped (``--policies: "x" is not a policy``)."""
    if isinstance(errors, dict):
        for k, v in errors.items():
            yield from _flat(v, field if isinstance(k, int) or str(k).isdigit() else (field or str(k)))
    elif isinstance(errors, (list, tuple)):
        for v in errors:
            yield from _flat(v, field)
    else:
        yield field or "error", str(errors)
