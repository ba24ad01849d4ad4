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


def test_budget_plan_covers_every_task_weighted_by_cost():
    from tuning.pipeline import budget_plan

    # 3 tasks, minimum 4 each (12), 28 left over split 1:2:4 -> 4 + 8 + 16
    plan = budget_plan([1.0, 2.0, 4.0], 40, 4)
    assert plan["per_task"] == [8, 12, 20] and not plan["short"] and plan["warning"] is None
    assert sum(budget_plan([1.0, 1.0, 1.0], 13, 4)["per_task"]) == 13


def test_budget_plan_too_small_warns_with_the_numbers():
    from tuning.pipeline import budget_plan

    # 188 tasks (DenseNet121-like) at 32 per task need 6016 trials; 64 cover the 2 costliest
    costs = [float(i) for i in range(188)]
    plan = budget_plan(costs, 64, 32)
    assert plan["short"] and plan["needed"] == 188 * 32
    assert [i for i, x in enumerate(plan["per_task"]) if x] == [186, 187]
    assert "gives 32 trials each to 2 of 188 tasks" in plan["warning"] and "6016 trials are needed" in plan["warning"]
    # fewer trials than one task's minimum: the costliest gets them all, and the warning counts
    # only the task left with no trial as untuned (1 of 4 weighted FLOPs), as the summary does
    small = budget_plan([3.0, 1.0], 16, 64)
    assert small["per_task"] == [16, 0]
    assert "gives 64 trials each to 0 of 2 tasks and 16 trials to 1 more" in small["warning"]
    assert "(25% of the model's weighted FLOPs would get no trial)" in small["warning"]
    with pytest.raises(ValueError):
        budget_plan([1.0], 10, 0)
