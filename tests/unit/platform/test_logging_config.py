"""One line per log record: Django's records go to the root handler only (a new-user try saw
every 4xx printed twice in the demo's terminal, once by Django's DEBUG console handler)."""
import logging
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_a_bad_request_warning_is_printed_once_in_the_dev_settings(tmp_path):
    code = ("import django, logging; django.setup(); "
            "logging.getLogger('django.request').warning('Bad Request: /probe/')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"DJANGO_SETTINGS_MODULE": "webapp.settings.dev", "PATH": "/usr/bin:/bin",
                               "TANDEM_VAR_DIR": str(tmp_path / "var")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "Bad Request: /probe/" in ln]
    assert len(lines) == 1 and "WARNING django.request" in lines[0], lines


def test_the_django_logger_has_no_handler_of_its_own():
    assert logging.getLogger("django").handlers == []
