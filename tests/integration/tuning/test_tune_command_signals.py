"""``manage.py tune`` stopped by SIGTERM (``kill``, a service manager) or SIGINT (Ctrl-C) in the
middle of a real MetaSchedule tuning on LLVM must end its experiment ``cancelled`` with the
signal named, instead of leaving it ``running`` with nobody running it or crashing inside TVM
(an exception raised by the signal handler in TVM's loop segfaulted; PostgreSQL, a real process).

Workload: the built-in ``mlp`` (one tuning task), rounds of 4 out of 64 trials, so the tuning is
still going when the first round has been mirrored to the database and the signal is sent.
"""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO, _worker_env, wait_for
from webapp.models import Experiment
from webapp.states import State

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_tuning_cancels_the_experiment(transactional_db, tmp_path, sig):
    from tuning.models import TuningRound

    env = _worker_env()
    env.update(TANDEM_VAR_DIR=str(tmp_path / "var"), TANDEM_TUNING_THREADS="1")
    log = open(tmp_path / "tune.log", "w")
    cmd = [sys.executable, "manage.py", "tune", "--model", "mlp", "--target", "llvm", "--trials", "64",
           "--trials-per-round", "4", "--runner", "local", "--option", "builder_workers=1", "--no-eager", "--json"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        # a round mirrored to the database: MetaSchedule's loop is running
        wait_for(lambda: TuningRound.objects.exists() or proc.poll() is not None, timeout=600,
                 what="the first tuning round")
        assert proc.poll() is None, (tmp_path / "tune.log").read_text()[-3000:]
        exp = Experiment.objects.get(kind="tuning")
        assert exp.state == State.RUNNING
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    err = (tmp_path / "tune.log").read_text()
    assert proc.returncode == 1, err[-3000:]  # CommandError; not killed by the signal, no segfault (-11)
    exp.refresh_from_db()
    assert exp.state == State.CANCELLED, (exp.state, exp.error)
    assert f"stopped by {sig.name}" in exp.error
    assert f"tuning experiment {exp.pk} cancelled" in err
    assert out == ""  # no summary for a tuning that did not finish
    assert exp.parameters["trials"] == 64  # what was submitted is kept
