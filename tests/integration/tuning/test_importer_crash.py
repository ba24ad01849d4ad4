"""A crash in TVM's model importer fails the import cleanly, for every caller: the Celery worker,
``manage.py tune`` and the ONNX upload API (PostgreSQL, Redis, a real worker, real processes).

The crash: the importer child (:mod:`tuning.backends.import_child`) raises ``SIGSEGV`` on itself
where TVM's frontend would run, through the test-only hook ``TANDEM_TEST_IMPORTER_CRASH`` (set
only here; no ONNX graph found makes TVM 0.27's importer crash natively: the malformed graphs
tried all raise Python exceptions, which the unit tests cover). Each test checks that the
experiment (or upload) failed with a message naming the signal, that the calling process is
alive, and that nothing half-written is left: no tasks, rounds, records, result or work
directory, no stored upload.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import REPO, _worker_env, token_client, wait_for
from tuning.backends.import_child import TEST_CRASH_ENV
from webapp.models import Experiment, ExperimentRecord
from webapp.services import experiment_create
from webapp.states import State

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KILLED = "ModelImportError: the importer process for convnet was killed by SIGSEGV (signal 11): "


def _nothing_left(exp: Experiment, var_dir: Path) -> None:
    from tuning.models import TuningRecord, TuningResult, TuningRound, TuningTask

    assert exp.result in (None, {})
    for model in (TuningTask, TuningRound, TuningRecord, TuningResult):
        assert not model.objects.filter(experiment=exp).exists(), model.__name__
    assert not ExperimentRecord.objects.filter(experiment_id=exp.pk).exists()
    assert not (var_dir / "tuning" / f"exp-{exp.pk}").exists()


def test_importer_crash_in_the_worker_fails_the_experiment_and_the_worker_lives(monkeypatch, start_worker, django_user_model,
                                                                                settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv("TANDEM_VAR_DIR", str(settings.VAR_DIR))
    monkeypatch.setenv("TANDEM_TUNING_THREADS", "1")
    owner = django_user_model.objects.create_user("crash", password="pw")
    worker = start_worker(env={TEST_CRASH_ENV: "SIGSEGV"})
    exp = experiment_create(owner=owner, kind="tuning", parameters={
        "model": "convnet", "target": "llvm", "trials": 4, "trials_per_round": 4, "repeats": 3, "measure_eager": False})
    wait_for(lambda: Experiment.objects.get(pk=exp.pk).is_terminal, timeout=600, what="the experiment to end")
    exp.refresh_from_db()
    assert exp.state == State.FAILED
    assert exp.error.startswith(KILLED), exp.error
    assert "Fatal Python error: Segmentation fault" in exp.error  # the child's crash report, quoted
    assert exp.attempts == 1  # failed once, not redelivered into a crash loop
    _nothing_left(exp, settings.VAR_DIR)
    # the worker and its pool process lived: billiard logs a pool process that died of a signal
    assert worker.poll() is None
    log = worker.log_path.read_text()
    assert "exited with 'signal" not in log and "WorkerLostError" not in log, log[-3000:]


def test_importer_crash_under_manage_py_tune_fails_the_experiment(transactional_db, tmp_path):
    env = _worker_env()
    env.update(TANDEM_VAR_DIR=str(tmp_path / "var"), TANDEM_TUNING_THREADS="1", **{TEST_CRASH_ENV: "SIGSEGV"})
    proc = subprocess.run([sys.executable, "manage.py", "tune", "--model", "convnet", "--target", "llvm", "--trials", "4",
                           "--trials-per-round", "4", "--no-eager", "--owner", "crash-cli", "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]  # a CommandError, not the command dying of the signal
    exp = Experiment.objects.get(kind="tuning", owner__username="crash-cli")
    assert f"CommandError: tuning experiment {exp.pk} failed: {KILLED}" in proc.stderr
    assert proc.stdout == ""
    assert exp.state == State.FAILED and exp.error.startswith(KILLED), exp.error
    _nothing_left(exp, tmp_path / "var")


def test_importer_crash_refuses_the_onnx_upload(monkeypatch, django_user_model, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv(TEST_CRASH_ENV, "SIGSEGV")  # the importer child inherits it; this process does not crash
    api = token_client(django_user_model.objects.create_user("uploader", password="pw"))
    data = (REPO / "data" / "onnx-light-models" / "light_squeezenet.onnx").read_bytes()
    resp = api.post("/api/v1/tuning/onnx/", {"file": SimpleUploadedFile("m.onnx", data)}, format="multipart")
    assert resp.status_code == 400, resp.content
    (msg,) = resp.json()["file"]
    assert msg.startswith("the importer process for uploaded.onnx was killed by SIGSEGV (signal 11): "), msg
    uploads = settings.VAR_DIR / "tuning" / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []
    monkeypatch.delenv(TEST_CRASH_ENV)  # and the same process still imports: the caller lived
    ok = api.post("/api/v1/tuning/onnx/", {"file": SimpleUploadedFile("m.onnx", data)}, format="multipart")
    assert ok.status_code == 201, ok.content
    assert len(list(uploads.glob("*.onnx"))) == 1
