"""The tuning engine's plug (:mod:`tuning.pipeline`): Django-free, validated before any work."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO
from webapp.plug import Collect, no_report


def test_pipeline_imports_without_django():
    code = ("import sys, tuning.pipeline as p; assert callable(p.run) and callable(p.select_tasks); "
            "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_run_without_work_dir_is_refused_and_records_nothing():
    from tuning import pipeline

    rec = Collect()
    with pytest.raises(ValueError, match="work_dir"):
        pipeline.run({"model": "mlp"}, report=no_report, record=rec)
    assert rec.rows == {}


def test_defaults_are_the_serializers_defaults():
    """The pipeline's DEFAULTS and the API serializer agree on every default they share."""
    from tuning import pipeline
    from tuning.api import TuningParameters

    fields = TuningParameters().fields
    for name, value in pipeline.DEFAULTS.items():
        if name in fields and fields[name].default is not None and not callable(fields[name].default):
            from rest_framework.fields import empty

            if fields[name].default is not empty:
                assert fields[name].default == value, name
