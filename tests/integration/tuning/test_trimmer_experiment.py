"""A tuning experiment with ``scheduler: trimmer`` run by a real Celery worker on PostgreSQL + Redis.

Workload: the built-in ``convnet`` (Conv2d(16, 32, 3) + ReLU + Conv2d(32, 32, 3) on 1x16x32x32),
LLVM with the host CPU named, measured through runner ``doppler`` (its build and measurement
worker processes live for the whole run; MetaSchedule's ``local`` pair starts fresh ones every
round, which cost most of this test's time; on 2 threads and 2 cores DOPpler has ONE measurement
slot, so every round is a plain serial measurement). Trimmer options: ``patience=1`` (a task stops at its first round
that does not improve its best), every round judged (``preempt_warmup=0``: at 48 trials the
default cost-model warm-up of 100 candidates would never end) and the model-level stop off, so the run ends when the tasks
have plateaued or the 48-trial budget (rounds of 4) is spent. Checked against the rules, not
against recorded numbers: a task is stored as preempted, with the round that preempted it, that
round did not improve the task's best, no later round belongs to it; every mirrored round has
Trimmer's energy attribution (> 0 J); the result holds the non-contributing energy share.
"""
from __future__ import annotations

import pytest

from tests.conftest import wait_for
from webapp.models import Experiment
from webapp.services import experiment_create
from webapp.states import State

from tests.integration.tuning import SMALL_SEARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_trimmer_experiment_preempts_and_attributes_energy(monkeypatch, start_worker, django_user_model, settings, tmp_path):
    from tuning.models import TuningResult, TuningRound, TuningTask

    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv("TANDEM_VAR_DIR", str(settings.VAR_DIR))
    monkeypatch.setenv("TANDEM_TUNING_THREADS", "2")
    owner = django_user_model.objects.create_user("trimmer", password="pw")
    start_worker()
    trials = 48
    exp = experiment_create(owner=owner, kind="tuning", parameters={
        "model": "convnet", "target": "llvm", "trials": trials, "trials_per_round": 4, "repeats": 5,
        "runner": "doppler", "scheduler": "trimmer", "measure_eager": False,
        "options": {"search": SMALL_SEARCH, "doppler": {"build_workers": 1, "build_timeout_s": 240}, "patience": 1, "preempt_warmup": 0,
                    "min_rel_improvement": 0.0},
    })
    wait_for(lambda: Experiment.objects.get(pk=exp.pk).is_terminal, timeout=1500, what="the Trimmer tuning to finish")
    done = Experiment.objects.get(pk=exp.pk)
    assert done.state == State.SUCCEEDED, done.error
    res = done.result
    assert res["scheduler"] == "trimmer" and "trimmer" in res

    report = TuningResult.objects.get(experiment=exp).details["trimmer"]
    rounds = list(TuningRound.objects.filter(experiment=exp).order_by("round_index"))
    assert len(rounds) == report["n_rounds"] > 0
    for r in rounds:  # energy attributed to every round; preempt_warmup 0: every round counted
        assert r.details["trimmer"]["joules"] > 0, r.details
        assert r.details["trimmer"]["judged"] is True, r.details
    assert sum(r.details["trimmer"]["joules"] for r in rounds) == pytest.approx(report["joules"])
    assert 0.0 <= report["non_contributing_share"] <= 1.0

    preempted = list(TuningTask.objects.filter(experiment=exp, state=TuningTask.State.PREEMPTED))
    assert preempted, [(t.name, t.state, t.details) for t in TuningTask.objects.filter(experiment=exp)]
    for task in preempted:
        at = task.details["preempted_at_round"]
        rnd = next(r for r in rounds if r.round_index == at)
        assert rnd.task_id == task.pk and rnd.details["trimmer"]["preempted_task"] and not rnd.details["trimmer"]["improved"]
        assert not any(r.task_id == task.pk for r in rounds if r.round_index > at)
    assert report["n_candidates"] < trials
