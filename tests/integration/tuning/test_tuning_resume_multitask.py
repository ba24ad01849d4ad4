"""A multi-task tuning through the Celery worker and PostgreSQL, SIGKILLed right after its first
measured batch, resumes with that batch's records kept, for the ``trimmer`` scheduler (real
MetaSchedule, real worker processes; the ``gradient`` scheduler's case, with the whole-model
result, is ``test_tuning_worker.py``).

Workload: the built-in ``convnet`` (two convolutions, so several tuning tasks), 8 trials in
rounds of 4. Trimmer's scheduler (like ``gradient`` here) joins each round before building the
next, so the kill lands when exactly one batch has been committed. The redelivered task
(visibility timeout 5 s, taken over once the killed run's 5-s lease expires) must keep those 4
records and spend only the trials still missing.
"""
from __future__ import annotations

import json
import os
import signal

import pytest

from tests.conftest import wait_for
from webapp.models import Experiment, ExperimentRecord
from webapp.services import experiment_create
from webapp.states import State

from tests.integration.tuning import SMALL_SEARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("scheduler", ["trimmer"])
def test_multitask_tuning_killed_after_first_batch_keeps_it(scheduler, monkeypatch, start_worker, django_user_model,
                                                            settings, tmp_path):
    from tuning.models import TuningRecord, TuningRound, TuningTask

    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv("TANDEM_VAR_DIR", str(settings.VAR_DIR))
    monkeypatch.setenv("CELERY_VISIBILITY_TIMEOUT", "5")
    monkeypatch.setenv("TANDEM_LEASE_S", "5")  # the takeover waits for the killed run's lease (test_tuning_worker.py)
    monkeypatch.setenv("TANDEM_TUNING_THREADS", "1")
    owner = django_user_model.objects.create_user(f"tuner-{scheduler}", password="pw")
    first = start_worker()
    options = {"builder_workers": 1, "search": SMALL_SEARCH}  # trimmer: its default warm-up (100 candidates) means no preemption in 8
    exp = experiment_create(owner=owner, kind="tuning", parameters={
        "model": "convnet", "target": "llvm", "trials": 8, "trials_per_round": 4, "repeats": 3,
        "runner": "local", "scheduler": scheduler, "measure_eager": False, "options": options,
    })
    wait_for(lambda: TuningRound.objects.filter(experiment=exp).count() >= 1, timeout=600, what="the first tuning round")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    assert TuningTask.objects.filter(experiment=exp).count() >= 2  # a multi-task model
    kept = {(r.trace_hash, r.candidate_index) for r in TuningRecord.objects.filter(experiment=exp)}
    assert len(kept) == 4, kept  # one batch, committed before anything else was built
    assert ExperimentRecord.objects.filter(experiment=exp, table="rounds").count() == 1
    work_dir = settings.VAR_DIR / "tuning" / f"exp-{exp.pk}"
    db_lines = [json.loads(x) for x in (work_dir / "database_tuning_record.json").read_text().splitlines() if x.strip()]
    assert len(db_lines) == 4

    start_worker()
    wait_for(lambda: Experiment.objects.get(pk=exp.pk).is_terminal, timeout=900, what="the resumed tuning")
    done = Experiment.objects.get(pk=exp.pk)
    assert done.state == State.SUCCEEDED, done.error
    assert done.attempts == 2
    res = done.result
    assert res["resumed_from_trials"] == 4 and res["trials_this_attempt"] == 4 and res["trials_in_database"] == 8
    after = {(r.trace_hash, r.candidate_index) for r in TuningRecord.objects.filter(experiment=exp)}
    assert kept <= after and len(after) == 8  # the first batch kept, not measured again
    rounds = list(TuningRound.objects.filter(experiment=exp).order_by("round_index"))
    assert rounds[0].round_index == 0 and all(r.attempt == 2 for r in rounds[1:])
    assert sum(r.num_candidates for r in rounds) == 8
