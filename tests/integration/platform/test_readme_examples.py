"""The README's quick start, run as a new user would paste it: every ``sh`` block of the section
"Quick start" in one bash session against a live server, with curl. Each submission must be
accepted (curl -f fails the script on any HTTP error) and stored as written in the README."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[3] / "README.md"


def quick_start_blocks(text: str) -> list[str]:
    """The ``sh`` code blocks of the README section whose heading starts with "Quick start"."""
    section = re.search(r"^## Quick start.*?$(.*?)(?=^## )", text, flags=re.M | re.S)
    assert section, "README has no '## Quick start' section"
    return re.findall(r"^```sh\n(.*?)^```", section.group(1), flags=re.M | re.S)


def submissions(blocks: list[str]) -> list[tuple[str, str, dict]]:
    """``(kind, name, parameters)`` of every ``submit KIND NAME 'JSON'`` call in the blocks (the
    JSON may span lines), parsed here independently of the shell."""
    calls = re.findall(r"^(?:\w+=\$\()?submit (\S+) (\S+) '(.*?)'\)?$", "\n".join(blocks), flags=re.M | re.S)
    return [(kind, name, json.loads(params)) for kind, name, params in calls]


def kept(stored, sent) -> bool:
    """True when every value in ``sent`` is in ``stored`` (dicts may gain defaulted keys)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and kept(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(kept, stored, sent))
    return stored == sent


def test_quick_start_blocks_parse():
    blocks = quick_start_blocks(README.read_text())
    kinds = {k for k, _, _ in submissions(blocks)}
    from webapp.experiments import registered_kinds

    assert set(registered_kinds()) <= kinds, f"kinds without a README example: {set(registered_kinds()) - kinds}"


@pytest.mark.django_db(transaction=True)
def test_quick_start_curl_examples_against_live_server(live_server, django_user_model, settings):
    from webapp.models import Experiment

    import redis

    django_user_model.objects.create_user("operator", password="readme-pw-1")
    blocks = quick_start_blocks(README.read_text())
    script = "set -euo pipefail\n" + "\n".join(blocks)
    script = script.replace("export TANDEM=http://127.0.0.1:8000 TANDEM_USER=operator TANDEM_PASSWORD=printed-by-make-demo",
                            f"export TANDEM={live_server.url} TANDEM_USER=operator TANDEM_PASSWORD=readme-pw-1")
    assert live_server.url in script, "the README's first block no longer sets TANDEM as this test expects"
    try:
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    finally:
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # nothing here runs the messages
    assert run.returncode == 0, f"README quick start failed:\nstdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"

    expected = submissions(blocks)
    stored = {e.name: e for e in Experiment.objects.all()}
    for kind, name, params in expected:
        assert name in stored, f"{name} not stored"
        assert stored[name].kind == kind
        # what the README sent is what the serializer kept (it may add defaults)
        assert kept(stored[name].parameters, params), (name, stored[name].parameters, params)
    assert len(stored) == len(expected)
    # the last block printed the probe's detail (JSON with its id) and a filtered list
    listing = json.loads(run.stdout.strip().splitlines()[-1])
    assert [r["kind"] for r in listing["results"]] == ["simulation"]
