"""The operator's walk through the dashboard after ``manage.py demo``: the landing page
and every engine page, in headless Debian Chromium, with a data check on every figure.

The data is real: the demo's own steps (each engine's smallest real run on data from ``data/``)
write it, exactly as ``make demo`` does for a new user. Every Plotly figure on a page must
have a title, named axes and at least one trace with points; a page may show no figure only where
it says why in its empty state. Screenshots go to ``$TANDEM_SCREENSHOT_DIR`` (default: the test's
tmp dir); ``docs/img/`` holds the ones the README shows (refresh them with
``TANDEM_SCREENSHOT_DIR=docs/img python -m pytest tests/browser/test_engine_pages.py``).
"""
from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.integration.federation.test_experiments import harness_procs

from .test_dashboard import ARGS, CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

PASSWORD = "walk-pw-123"

#: JavaScript returning, for every Plotly figure on the page, what a reader needs to read it.
FIGURES_JS = """
() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
  const lay = gd.layout || {};
  const title = t => (t && (typeof t === 'string' ? t : t.text)) || '';
  const axes = Object.keys(lay).filter(k => /^[xy]axis\\d*$/.test(k)).map(k => [k, title(lay[k].title)]);
  const points = (gd.data || []).map(tr => {
    for (const key of ['x', 'y', 'values', 'z', 'labels', 'r', 'lat']) {
      if (tr[key] && tr[key].length) return tr[key].length;
    }
    return 0;
  });
  return {id: gd.id, title: title(lay.title), axes: axes, traces: (gd.data || []).length,
          points: points, showlegend: lay.showlegend !== false,
          pie: (gd.data || []).every(tr => ['pie', 'table', 'indicator'].includes(tr.type))};
})
"""


@pytest.fixture
def demo_world(transactional_db, settings, tmp_path):
    """``manage.py demo --no-serve`` into the test database, as a new user would run it:
    ``(its output, the federation harness processes it left behind)``."""
    settings.VAR_DIR = tmp_path / "var"  # fresh work dirs: a tuning must not resume an earlier run's exp-<id>
    before = {p.pid for p in harness_procs()}
    out = io.StringIO()
    call_command("demo", "--no-serve", "--password", PASSWORD, stdout=out)
    print(out.getvalue())  # shown when the test fails: the demo's own summary and step times
    return out.getvalue(), {p.pid for p in harness_procs()} - before


def _figures_ok(page, url: str) -> list[str]:
    """Problems with the figures of the page now open (empty list: every figure is readable)."""
    problems = []
    for fig in page.evaluate(FIGURES_JS):
        where = f"{url} figure {fig['id'] or '?'} ({fig['title'] or 'untitled'})"
        if not fig["title"]:
            problems.append(f"{where}: no title")
        if not fig["pie"]:
            for axis, name in fig["axes"]:
                if not name:
                    problems.append(f"{where}: {axis} has no title")
        if (not fig["traces"] or not any(fig["points"])) and not fig["title"].lower().startswith("no "):
            problems.append(f"{where}: no data, and its title does not say why")  # an empty state must say why
    return problems


def test_walk_landing_page_and_every_engine_page(live_server, demo_world, tmp_path):
    from playwright.sync_api import sync_playwright

    from webapp.models import Experiment

    # what the demo ran, read back before the browser starts (see test_dashboard: greenlets)
    summary, harness_left = demo_world
    assert "Summary" in summary and "failed" not in summary.split("Summary", 1)[1].lower(), summary[-3000:]
    done = {e.kind: e.pk for e in Experiment.objects.filter(state="succeeded").order_by("created_at")}
    for kind in ("simulation", "tuning", "weight-learning", "federation-plan", "federation-benchmark"):
        assert kind in done, f"demo ran no succeeded {kind} experiment: {sorted(done)}"

    # the federation step (checked here, where the demo runs, rather than running it a second time):
    # the plan over Skyplane's latencies, the plan run in the harness, the benchmark, nothing left
    assert "planned hotelReservation over eu-west, westeurope, us-east" in summary
    assert re.search(r"harness ran the plan for 2 s: .*, \d+ requests, 0 errors", summary), summary[-3000:]
    plan = Experiment.objects.get(pk=done["federation-plan"])
    assert plan.result["federation"]["rtt_ms"][0][2] == pytest.approx(84.933)  # Skyplane eu-west-1 <-> us-east-1
    bench = Experiment.objects.get(pk=done["federation-benchmark"])
    # 2 latencies + 2 contentions for one application; the comparison runs the orchestrator and
    # every baseline that can place the application (the others say why not)
    assert len(bench.result["degradation"]) == 4
    cmp0 = bench.result["comparisons"][0]
    assert set(cmp0["measured"]) == {"orchestrator", "nearest-fit", "all-in-one", "karmada-static", "karmada-dynamic",
                                     "karmada-spread"} - set(cmp0["unschedulable"])
    assert harness_left == set(), harness_left

    pages = {
        "landing": "/",
        "experiments": "/experiments/",
        "placement": "/placement/",
        "placement-simulation": f"/placement/experiments/{done['simulation']}/",
        "tuning": "/tuning/",
        "rlweights": f"/rlweights/experiments/{done['weight-learning']}/",
        "federation": "/federation/",
    }
    shots = Path(os.environ.get("TANDEM_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{live_server.url}/accounts/login/")
            page.fill("#id_username", "operator")
            page.fill("#id_password", PASSWORD)
            page.click("#login-form button[type=submit]")
            page.wait_for_url(f"{live_server.url}/")

            # the landing page: one headline row per engine that ran, each linking to its page
            rows = page.locator("#headlines tr.headline")
            assert rows.count() >= 4, page.content()[:3000]
            engines = {rows.nth(i).locator("td").first.inner_text().strip().lower() for i in range(rows.count())}
            assert {"placement", "tuning", "rlweights", "federation"} <= engines, engines
            for i in range(rows.count()):
                text = rows.nth(i).inner_text()
                assert re.search(r"\d", text), f"headline row without a figure: {text!r}"
                assert rows.nth(i).locator("a").count() >= 1, f"headline row links nowhere: {text!r}"

            for name, path in pages.items():
                response = page.goto(f"{live_server.url}{path}")
                assert response is not None and response.status == 200, (path, response and response.status)
                page.wait_for_load_state("networkidle")
                n_figs = page.locator(".js-plotly-plot").count()
                if name not in ("landing", "experiments"):
                    assert n_figs >= 1, f"{path}: no figure rendered"
                    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15000)
                problems += _figures_ok(page, path)
                if name == "federation":  # both degradation sweeps of the demo's benchmark are drawn
                    assert page.locator("#fed-deg-latency .main-svg").count() >= 1
                    assert page.locator("#fed-deg-contention .main-svg").count() >= 1
                page.screenshot(path=str(shots / f"{name}.png"))
            # /experiments/ links every experiment to its engine page (never to raw API JSON only)
            page.goto(f"{live_server.url}/experiments/")
            links = page.locator("#experiments a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
            assert any(h.startswith("/placement/") for h in links), links
            assert any(h.startswith("/rlweights/") for h in links), links
            assert errors == [], errors
        finally:
            browser.close()
    assert problems == [], "\n".join(problems)
