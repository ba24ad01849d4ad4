"""``manage.py fedbench``: the federation harness benchmark from the command line, through the
engine's pipeline (:func:`federation.pipeline.run`, task ``benchmark``, or ``scenarios`` with
``--scenarios``).

Runs the degradation sweep (latency and contention against the sweep's own x=0 baseline, per
application type, with the achieved contention beside the target) and, unless ``--no-compare``,
the orchestrator's plan against every baseline, with real processes on this machine. With
``--scenarios`` it runs the split-forcing scenarios instead. Progress bar on stderr; with
``--json`` stdout carries exactly one line, the JSON summary, and nothing else.
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
        parser.add_argument("--scenarios", default="", help="run these split-forcing scenarios instead (comma-separated, or 'all')")
        parser.add_argument("--rounds", type=int, default=3, help="repeats per scenario and plan (with --scenarios)")
        parser.add_argument("--json", action="store_true", help="print only a JSON summary line on stdout")

    def handle(self, *args, **o):
        from federation import pipeline
        from webapp.plug import Collect

        apps = [a.strip() for a in o["apps"].split(",") if a.strip()]
        bad = [a for a in apps if a not in known_applications()]
        if bad or not apps:
            raise CommandError(f"unknown applications {bad}; known: {', '.join(known_applications())}")
        if o["rate"] <= 0 or o["duration"] <= 0 or o["rounds"] < 1:
            raise CommandError("--rate and --duration must be > 0, --rounds >= 1")
        if o["scenarios"]:
            params = {"task": "scenarios", "rounds": o["rounds"], "rate_rps": o["rate"], "duration_s": o["duration"],
                      "scenarios": None if o["scenarios"] == "all" else [s.strip() for s in o["scenarios"].split(",") if s.strip()]}
        else:
            params = {"task": "benchmark", "applications": apps, "latencies_ms": _floats(o["latencies"]),
                      "contentions": _floats(o["contentions"]), "rate_rps": o["rate"], "duration_s": o["duration"],
                      "compare": not o["no_compare"]}
        bar = tqdm(total=100, unit="%", disable=None)
        last = [0.0]

        def report(pct, msg):
            bar.update(max(0.0, pct - last[0]))
            last[0] = max(last[0], pct)
            bar.set_postfix_str(msg[:60])

        try:
            res = pipeline.run(params, report=report, record=Collect())
        except FederationError as err:
            raise CommandError(str(err)) from None
        finally:
            bar.close()
        if o["scenarios"]:
            summary = {"scenarios": {s["scenario"]: {"verdict": s["verdict"], "verdict_configured": s.get("verdict_configured"),
                                                     "best_baseline": s["best_baseline"], "ratio_p95": s["ratio"],
                                                     "binding": sorted(k for k, v in s["binding"].items() if v["binds"]),
                                                     "p95_ms": {m: round(v["p95_ms"], 2) for m, v in s["measured"].items()}}
                                     for s in res["scenarios"]}}
        else:
            summary = {"degradation": res["summary"],
                       "contention": [{"app": r["app"], "target": r["x"], "achieved": r.get("achieved_contention"), "note": r.get("note", "")}
                                      for r in res["degradation"] if r["sweep"] == "contention" and r["x"] > 0],
                       "comparison": {c["app"]: {"p95_ms": {m: round(v["p95_ms"], 2) for m, v in c["measured"].items()},
                                                 "orchestrator_best": c["orchestrator_best"]} for c in res["comparisons"]}}
        if o["json"]:
            self.stdout.write(json.dumps(summary))
            return
        if o["scenarios"]:
            for s in res["scenarios"]:
                self.stdout.write(f"{s['scenario']:12s} {s['verdict']:6s} vs {s['best_baseline']}: "
                                  + ", ".join(f"{m} p95 {v['p95_ms']:.1f} [{v['p95_min']:.1f}-{v['p95_max']:.1f}] ms" for m, v in s["measured"].items()))
            return
        for r in res["degradation"]:
            extra = ""
            if r["sweep"] == "contention" and r["x"] > 0:
                a = r.get("achieved_contention")
                extra = f"  achieved contention {a:.2f}" if a is not None else "  achieved contention n/a"
                if r.get("note"):
                    extra += f" ({r['note']})"
            self.stdout.write(f"{r['app']:18s} {r['sweep']:10s} x={r['x']:<6g} p95 {r['p95_ms']:8.1f} ms  factor {r['factor']:.2f}{extra}")
        for c in res["comparisons"]:
            self.stdout.write(f"{c['app']}: " + ", ".join(f"{m} p95 {v['p95_ms']:.1f} ms" for m, v in c["measured"].items()))
