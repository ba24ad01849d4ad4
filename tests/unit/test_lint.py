"""The code's boundaries and hygiene, enforced by `make test`: ruff (ruff.toml) on every file, and
import-linter (.importlinter): an engine's core/ never imports Django, Celery, DRF, torch, tvm,
stable-baselines3 (nor another engine's Django layer); pipelines are Django-free."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_ruff_finds_nothing():
    proc = subprocess.run([str(BIN / "ruff"), "check", "--output-format", "concise", "."], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_contracts_are_kept():
    proc = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def test_import_contract_catches_a_core_module_importing_django(tmp_path):
    """The contract mechanism is live: a core module with a function-level ``import django``
    (the kind of lazy import a reviewer misses) breaks it."""
    pkg = tmp_path / "engine_x"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "algo.py").write_text(textwrap.dedent("""
        def helper():
            from django.conf import settings  # forbidden in core/
            return settings
    """))
    (tmp_path / ".importlinter").write_text(textwrap.dedent("""
        [importlinter]
        root_package = engine_x
        include_external_packages = True

        [importlinter:contract:pure]
        name = core is pure
        type = forbidden
        source_modules = engine_x.core
        forbidden_modules = django
    """))
    proc = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": str(BIN)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "engine_x.core.algo -> django" in proc.stdout
