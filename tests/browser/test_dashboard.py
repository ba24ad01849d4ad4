"""The dashboard in headless Debian Chromium (Playwright with executable_path): log in, see the
imported cluster and its Plotly capacity figure rendered by the locally served plotly.js."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import call_command

pytestmark = [pytest.mark.browser, pytest.mark.integration]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NODES = Path(__file__).resolve().parents[2] / "data/k8s-scheduler-sim-examples/hkust-adsl/example/test-cluster/node"


@pytest.fixture
def operator_and_cluster(django_user_model):
    """Rows the test needs, written BEFORE Playwright starts: inside sync_playwright the test body
    runs in a greenlet with its own context, where Django would open (and leave open) a second
    database connection."""
    from webapp.models import Experiment

    op = django_user_model.objects.create_user("operator", password="demo-pw", is_staff=True)
    call_command("import_nodes", str(NODES / "pai-node-00.yaml"), str(NODES / "pai-node-01.yaml"),
                 "--cluster", "hkust-sim-example", "--json", stdout=open(os.devnull, "w"))
    return Experiment.objects.create(owner=op, kind="training-probe", name="probe", parameters={})


def _in_thread(fn) -> None:
    """Run an ORM write in a plain thread (its own connection, closed after), as a worker would."""
    import threading

    from django.db import connection

    def run():
        try:
            fn()
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    t.join()


@pytest.fixture
def browser_page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            yield page
        finally:
            browser.close()


def test_login_and_see_imported_cluster_with_figure(live_server, operator_and_cluster, browser_page, tmp_path):
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url  # anonymous users are sent to the login page
    page.fill("#id_username", "operator")
    page.fill("#id_password", "demo-pw")
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    section = page.locator("section.cluster", has_text="hkust-sim-example")
    section.wait_for()
    assert "2" in section.locator("td").first.inner_text()  # 2 nodes
    # plotly.js (served from /static/vendor/plotly.min.js) turned the figure div into a plot
    page.wait_for_selector("section.cluster .js-plotly-plot .main-svg", timeout=15000)
    assert "GPU capacity by type" in section.inner_text()
    assert page.evaluate("typeof Plotly") == "object"
    shot = Path(os.environ.get("TANDEM_SCREENSHOT_DIR", tmp_path)) / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert errors == []


def test_experiment_list_shows_live_progress(live_server, operator_and_cluster, browser_page):
    from webapp.models import Experiment

    exp = operator_and_cluster
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/?next=/experiments/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "demo-pw")
    page.click("#login-form button[type=submit]")
    row = page.locator(f"#experiments tr[data-id='{exp.pk}']")
    row.wait_for()
    assert row.locator(".state").inner_text() == "queued"
    _in_thread(lambda: Experiment.objects.filter(pk=exp.pk).update(state="running", progress=60, progress_message="step 6/10"))
    # the page polls /api/v1/experiments/<id>/ every 2 s and updates the row without a reload
    page.wait_for_function(
        f"document.querySelector(\"#experiments tr[data-id='{exp.pk}'] .pct\").textContent === '60'", timeout=15000
    )
    assert row.locator(".state").inner_text() == "running"
    assert "step 6/10" in row.locator(".msg").inner_text()
