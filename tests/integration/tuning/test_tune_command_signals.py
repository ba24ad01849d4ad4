"""``manage.py tune`` stopped by SIGTERM (``kill``, a service manager) or SIGINT (Ctrl-C) in the
middle of a real MetaSchedule tuning on LLVM must end its experiment ``cancelled`` with the
signal named, instead of leaving it ``running`` with nobody running it or crashing inside TVM
(an exception raised by the signal handler in TVM's loop segfaulted; PostgreSQL, real processes).

Workload: the built-in ``mlp`` (one tuning task), rounds of 2 out of 64 trials, so the tuning is
still going when the first round has been mirrored to the database and the signal is sent.
Both signals are tested in ONE test by two ``manage.py tune`` processes started together (each
with its own owner and var dir, so their experiments and device locks are apart): their fixed
start-up (imports, task extraction, the first builder process) overlaps instead of being paid
twice in a row.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO, _worker_env, wait_for
from tests.integration.tuning import SMALL_SEARCH
from webapp.models import Experiment
from webapp.states import State

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_sigterm_and_sigint_mid_tuning_cancel_their_experiments(transactional_db, tmp_path):
    from tuning.models import TuningRound

    sigs = (signal.SIGTERM, signal.SIGINT)
    procs: dict[signal.Signals, subprocess.Popen] = {}
    logs = {sig: tmp_path / f"tune-{sig.name}.log" for sig in sigs}
    handles = []
    try:
        for sig in sigs:
            env = _worker_env()
            env.update(TANDEM_VAR_DIR=str(tmp_path / f"var-{sig.name}"), TANDEM_TUNING_THREADS="1")
            fh = open(logs[sig], "w")
            handles.append(fh)
            cmd = [sys.executable, "manage.py", "tune", "--model", "mlp", "--target", "llvm", "--trials", "64",
                   "--trials-per-round", "2", "--runner", "local", "--option", "builder_workers=1", "--option", "search=" + json.dumps(SMALL_SEARCH), "--no-eager",
                   "--repeats", "3", "--owner", f"sig-{sig.name.lower()}", "--json"]
            procs[sig] = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=fh, text=True)

        outs: dict[signal.Signals, str] = {}
        exps: dict[signal.Signals, Experiment] = {}
        for sig in sigs:  # a round mirrored to the database: MetaSchedule's loop is running
            proc = procs[sig]
            owner = f"sig-{sig.name.lower()}"
            wait_for(lambda: TuningRound.objects.filter(experiment__owner__username=owner).exists()
                     or proc.poll() is not None, timeout=600, what=f"the first tuning round ({sig.name})")
            assert proc.poll() is None, logs[sig].read_text()[-3000:]
            exps[sig] = Experiment.objects.get(kind="tuning", owner__username=owner)
            assert exps[sig].state == State.RUNNING
            proc.send_signal(sig)
        for sig in sigs:
            outs[sig], _ = procs[sig].communicate(timeout=300)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for fh in handles:
            fh.close()
    for sig in sigs:
        err = logs[sig].read_text()
        exp = exps[sig]
        assert procs[sig].returncode == 1, err[-3000:]  # CommandError; not killed by the signal, no segfault (-11)
        exp.refresh_from_db()
        assert exp.state == State.CANCELLED, (sig.name, exp.state, exp.error)
        assert f"stopped by {sig.name}" in exp.error
        assert f"tuning experiment {exp.pk} cancelled" in err
        assert outs[sig] == ""  # no summary for a tuning that did not finish
        assert exp.parameters["trials"] == 64  # what was submitted is kept
