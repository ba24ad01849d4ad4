"""A real MetaSchedule tuning through the Celery worker and PostgreSQL, killed mid-run and
resumed from its JSON database.

Workload: the built-in ``convnet`` (two convolutions, so several tuning tasks) on LLVM with the
host CPU named. Budget: 8 trials in rounds of 4, so the run is exactly two rounds (small: each
round starts fresh builder processes, ~15 s of CPU each, far more on a loaded machine). The
worker is SIGKILLed once the first round is mirrored; with MetaSchedule's C++ ``GradientBased``
nothing was recorded before every task's first round had been built, while the ``gradient``
scheduler here joins each round first, so the kill lands when exactly one batch of 4 has been
committed. A second worker gets the redelivered task (Redis visibility timeout shortened to 5 s)
and takes it over once the killed run's lease expires (shortened to 5 s); it must keep that
batch and spend only the trials still missing. (The same for the ``trimmer`` scheduler:
``test_tuning_resume_multitask.py``.)
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


def test_tuning_killed_mid_run_resumes_from_database_and_beats_untuned(monkeypatch, start_worker, django_user_model, settings, tmp_path, client):
    from tuning.models import TuningRecord, TuningResult, TuningRound, TuningTask

    settings.VAR_DIR = tmp_path / "var"  # the worker gets the same through TANDEM_VAR_DIR
    monkeypatch.setenv("TANDEM_VAR_DIR", str(settings.VAR_DIR))
    monkeypatch.setenv("CELERY_VISIBILITY_TIMEOUT", "5")
    # the redelivered task waits for the killed run's lease to expire before it takes over: a
    # 5-s lease instead of the production minute (one worker at a time here, so a late renewal
    # cannot hand a live run to another)
    monkeypatch.setenv("TANDEM_LEASE_S", "5")
    # one measurement thread: on this shared 2-core machine other test suites run alongside,
    # and a 2-thread kernel waits at every barrier for its second thread to be scheduled
    monkeypatch.setenv("TANDEM_TUNING_THREADS", "1")
    owner = django_user_model.objects.create_user("tuner", password="pw")
    first = start_worker()
    exp = experiment_create(owner=owner, kind="tuning", parameters={
        "model": "convnet", "target": "llvm", "trials": 8, "trials_per_round": 4, "repeats": 10,
        "runner": "local", "scheduler": "gradient", "options": {"builder_workers": 1, "search": SMALL_SEARCH},
    })
    wait_for(lambda: TuningRound.objects.filter(experiment=exp).count() >= 1, timeout=600, what="the first tuning round")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    mid = Experiment.objects.get(pk=exp.pk)
    assert mid.state == State.RUNNING and mid.attempts == 1
    assert TuningTask.objects.filter(experiment=exp).count() >= 2  # a multi-task model
    kept = {(r.trace_hash, r.candidate_index) for r in TuningRecord.objects.filter(experiment=exp)}
    assert len(kept) == 4, kept  # one batch, committed before anything else was built
    assert ExperimentRecord.objects.filter(experiment=exp, table="rounds").count() == 1
    work_dir = settings.VAR_DIR / "tuning" / f"exp-{exp.pk}"
    db_lines = [json.loads(x) for x in (work_dir / "database_tuning_record.json").read_text().splitlines() if x.strip()]
    assert len(db_lines) == 4  # the JSON database holds the finished trials

    start_worker()
    wait_for(lambda: Experiment.objects.get(pk=exp.pk).is_terminal, timeout=900, what="the resumed tuning to finish")
    done = Experiment.objects.get(pk=exp.pk)
    assert done.state == State.SUCCEEDED, done.error
    assert done.progress == 100 and done.attempts == 2
    res = done.result

    # resume: the second attempt measured only the missing trials, not all 8 again
    assert res["resumed_from_trials"] == len(db_lines) < 8
    assert res["trials_this_attempt"] == 8 - len(db_lines)
    assert res["trials_in_database"] == 8
    after = {(r.trace_hash, r.candidate_index) for r in TuningRecord.objects.filter(experiment=exp)}
    assert kept <= after and len(after) == 8  # the first batch kept, not measured again
    rounds = list(TuningRound.objects.filter(experiment=exp).order_by("round_index"))
    assert [(r.round_index, r.attempt) for r in rounds] == [(0, 1), (1, 2)]
    assert [r.num_candidates for r in rounds] == [4, res["trials_this_attempt"]]

    # records mirrored with target, threads, timings and energy with its label
    tasks = list(TuningTask.objects.filter(experiment=exp))
    assert sum(t.trials_done for t in tasks) == 8 and all(t.weight > 0 for t in tasks)
    rec = TuningRecord.objects.filter(experiment=exp, error="").first()
    assert rec is not None and rec.mean_seconds > 0 and len(rec.run_seconds) >= 1
    assert rec.target["kind"] == "llvm" and rec.target["mcpu"] == res["host_cpu"] and rec.num_threads == 1
    assert rec.energy_source in ("rapl", "estimate") and rec.energy_joules >= 0
    for r in rounds:
        assert r.build_seconds > 0 and r.measure_seconds > 0 and r.energy_source == res["energy_source"]
        assert r.search_joules + r.build_joules + r.measure_joules > 0
    assert rounds[1].wall_seconds > rounds[0].wall_seconds  # cumulative across attempts
    assert res["energy_source"] in ("rapl", "estimate") and res["tuning_joules"] > 0

    # end-to-end: tuned build faster than the untuned build, both measured by the worker in this test
    result = TuningResult.objects.get(experiment=exp)
    assert result.tuned_latency["median_s"] < result.untuned_latency["median_s"]
    assert result.eager_latency["median_s"] > 0 and result.num_threads == 1
    ort = result.details["onnxruntime"]  # the onnxruntime peer, same threads, interleaved
    assert ort["median_s"] > 0 and ort["session"]["intra_op_num_threads"] == 1, ort
    assert result.details["speedup_vs_onnxruntime"] == ort["median_s"] / result.tuned_latency["median_s"]

    # the dashboard draws the curves and the comparison from the stored rows
    client.force_login(owner)
    page = client.get(f"/tuning/?experiment={exp.pk}")
    assert page.status_code == 200
    for div in (b"tuning-curve-time", b"tuning-curve-energy", b"tuning-latency", b"tuning-split"):
        assert div in page.content
    assert b"tuning-latency-table" in page.content and b"onnxruntime (CPU execution provider)" in page.content
    from django.template.defaultfilters import floatformat

    assert floatformat(ort["median_s"] * 1e3, 3).encode() in page.content  # its median in ms, as stored
