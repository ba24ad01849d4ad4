"""Federation dashboard: latency heatmap, degradation curves per application type, the plan."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from . import figures, selectors


def _html(fig, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


@login_required
def dashboard(request):
    """The latest federation plan and benchmark the user may see; without a plan, the links of
    the benchmark's comparison federation (Skyplane measurements)."""
    plan_exp = selectors.latest_plan(user=request.user)
    bench_exp = selectors.latest_benchmark(user=request.user)
    ctx: dict = {"plan_exp": plan_exp, "bench_exp": bench_exp}
    if plan_exp:
        r = plan_exp.result
        fed = r["federation"]
        ctx["heatmap"] = _html(figures.latency_heatmap(fed["names"], fed["rtt_ms"]), "fed-heatmap")
        ctx["plan_rows"] = figures.plan_table(r)
        ctx["plan"] = r["plan"]
        ctx["baselines"] = r["baselines"]
        desc = r.get("baseline_descriptions") or {}
        names = list(r["baselines"]) + [n for n in (r.get("unschedulable_baselines") or {}) if n not in r["baselines"]]
        ctx["baseline_rows"] = [{"name": n, "description": desc.get(n, ""), "cost": (r["baselines"].get(n) or {}).get("cost"),
                                 "why": (r.get("unschedulable_baselines") or {}).get(n, "")} for n in names]
        ctx["karmada_yaml"] = r["karmada_yaml"]
        ctx["result"] = r
    else:
        from federation.backends.scenarios import comparison_federation

        f = comparison_federation()
        ctx["heatmap"] = _html(figures.latency_heatmap(f.names, f.rtt_ms.tolist(), title="Skyplane RTT of the benchmark federation (ms)"), "fed-heatmap")
    if bench_exp:
        rows = bench_exp.result.get("degradation", [])
        ctx["latency_curve"] = _html(figures.degradation_figure(rows, "latency"), "fed-deg-latency")
        ctx["contention_curve"] = _html(figures.degradation_figure(rows, "contention"), "fed-deg-contention")
        ctx["comparisons"] = [_html(figures.plan_comparison_figure(c), f"fed-cmp-{i}") for i, c in enumerate(bench_exp.result.get("comparisons", []))]
        ctx["summary"] = bench_exp.result.get("summary", {})
        ctx["scenarios"] = [{"name": c["scenario"], "description": c["description"], "verdict": c["verdict"],
                             "verdict_configured": c.get("verdict_configured"),
                             "verdict_measured": c.get("verdict_measured"), "best": c["best_baseline"],
                             "binds": ", ".join(k for k, v in c["binding"].items() if v["binds"]) or "none",
                             "orch": c["measured"]["orchestrator"],
                             "base": c["measured"].get(c["best_baseline"]) if c["best_baseline"] else None}
                            for c in bench_exp.result.get("scenarios", [])]
    return render(request, "federation/dashboard.html", ctx)
