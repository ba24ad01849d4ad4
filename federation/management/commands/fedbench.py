"""``manage.py fedbench``: the federation harness benchmark from the command line.

Runs the degradation sweep (latency and contention against a centralised baseline, per
application type) and, unless ``--no-compare``, the orchestrator's plan against every baseline,
with real processes on this machine. Progress bar on stderr; ``--json`` prints one JSON summary.
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from federation.core.applications import known_applications
from federation.core.model import FederationError


def _floats(s: str) -> list[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"not a comma-separated list of numbers: {s!r}") from None


class Command(BaseCommand):
    help = "Measure latency/contention degradation and the orchestrator vs baselines in the federation harness."

    def add_arguments(self, parser):
        parser.add_argument("--apps", default="hotelReservation,inference", help=f"comma-separated, of: {', '.join(known_applications())}")
        parser.add_argument("--latencies", default="0,20,50", help="RTTs between the two clusters, ms")
        parser.add_argument("--contentions", default="0,0.5,0.8", help="injected contention, fractions 0-1")
        parser.add_argument("--rate", type=float, default=4.0, help="requests per second (open loop)")
        parser.add_argument("--duration", type=float, default=2.0, help="seconds measured per point")
        parser.add_argument("--no-compare", action="store_true", help="skip orchestrator vs baselines")
        parser.add_argument("--json", action="store_true", help="print a JSON summary line")

    def handle(self, *args, **o):
        from federation.backends.scenarios import compare_plans, degradation_sweep
        from federation.services import degradation_summary

        apps = [a.strip() for a in o["apps"].split(",") if a.strip()]
        bad = [a for a in apps if a not in known_applications()]
        if bad or not apps:
            raise CommandError(f"unknown applications {bad}; known: {', '.join(known_applications())}")
        if o["rate"] <= 0 or o["duration"] <= 0:
            raise CommandError("--rate and --duration must be > 0")
        bar = tqdm(total=100 * (1 + (0 if o["no_compare"] else len(apps))), unit="%", disable=None)
        last = [0.0]

        def prog(offset):
            def f(pct, msg):
                bar.update(offset + pct - last[0])
                last[0] = offset + pct
                bar.set_postfix_str(msg[:60])
            return f

        try:
            rows = degradation_sweep(apps, latencies_ms=_floats(o["latencies"]), contentions=_floats(o["contentions"]),
                                     rate_rps=o["rate"], duration_s=o["duration"], progress=prog(0.0))
            comps = []
            if not o["no_compare"]:
                for k, a in enumerate(apps):
                    comps.append(compare_plans(a, rate_rps=o["rate"], duration_s=o["duration"], progress=prog(100.0 * (k + 1))))
        except FederationError as err:
            raise CommandError(str(err)) from None
        finally:
            bar.close()
        summary = {"degradation": degradation_summary(rows),
                   "comparison": {c["app"]: {"p95_ms": {m: round(v["p95_ms"], 2) for m, v in c["measured"].items()},
                                             "orchestrator_best": c["orchestrator_best"]} for c in comps}}
        for r in rows:
            self.stdout.write(f"{r['app']:18s} {r['sweep']:10s} x={r['x']:<6g} p95 {r['p95_ms']:8.1f} ms  factor {r['factor']:.2f}")
        for c in comps:
            self.stdout.write(f"{c['app']}: " + ", ".join(f"{m} p95 {v['p95_ms']:.1f} ms" for m, v in c["measured"].items()))
        if o["json"]:
            self.stdout.write(json.dumps(summary))
