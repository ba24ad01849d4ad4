"""DOPpler on LLVM with two local TVM RPC servers behind a local tracker (real processes).

``manage.py tune --runner doppler`` runs a real MetaSchedule tuning of a small real workload (the
built-in ``matmul`` model, one Linear(512, 512) at batch 64) against PostgreSQL; DOPpler's runner
takes every server of the key from the tracker (``TANDEM_DOPPLER_DEVICES=rpc://...``) as one
measurement slot. The test asserts both servers measured candidates, from two independent
sources: the engine's per-batch record of which server measured what, and each server's own log
(it logs ``load_module`` for every candidate loaded on it).
"""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration]

KEY = "doppler-it"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 60.0) -> None:
    """Until something accepts connections on 127.0.0.1:``port``; raises ``RuntimeError`` with
    ``log``'s tail when ``proc`` exits first or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the RPC tracker exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the RPC tracker did not listen on port {port} in {timeout_s} s:\n{log.read_text()[-2000:]}")


def _wait_servers(port: int, n: int, timeout_s: float = 60.0) -> None:
    from tuning.backends.doppler import count_rpc_servers

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if count_rpc_servers("127.0.0.1", port, KEY) >= n:
                return
        except Exception:  # noqa: BLE001 - tracker not up yet
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{n} RPC servers did not register with the tracker on port {port} in {timeout_s} s")


@pytest.fixture
def rpc_cluster(tmp_path):
    """A tracker and two RPC servers (subprocesses), killed at teardown. Yields (port, [log paths])."""
    port = _free_port()
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start(args: list[str], log: Path) -> None:
        fh = open(log, "w")
        procs.append(subprocess.Popen([sys.executable, "-m", *args], stdout=fh, stderr=subprocess.STDOUT,
                                      start_new_session=True, env={**os.environ, "TVM_NUM_THREADS": "1"}))

    try:
        start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)],
              tmp_path / "tracker.log")
        # a server that finds no tracker yet retries only after 5 s (TVM's connect_with_retry)
        _wait_listening(port, procs[0], tmp_path / "tracker.log")
        for i in range(2):
            sp = _free_port()
            log = tmp_path / f"server{i}.log"
            logs.append(log)
            start(["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(sp), "--port-end", str(sp + 1),
                   "--tracker", f"127.0.0.1:{port}", "--key", KEY], log)
        _wait_servers(port, 2)
        yield port, logs
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.mark.django_db(transaction=True)
def test_tune_command_with_doppler_on_two_rpc_servers(rpc_cluster, tmp_path, settings, monkeypatch):
    from django.core.management import call_command

    from tuning.models import TuningRecord, TuningRound

    port, server_logs = rpc_cluster
    settings.VAR_DIR = tmp_path / "var"
    monkeypatch.setenv("TANDEM_DOPPLER_DEVICES", f"rpc://127.0.0.1:{port}/{KEY}")
    out = io.StringIO()
    # matmul: one Linear(512, 512) at batch 64, one tuning task; 16 trials = 2 rounds of 8
    # the peers (PyTorch eager, onnxruntime) measured too
    call_command("tune", "--model", "matmul", "--target", "llvm", "--runner", "doppler", "--trials", "16",
                 "--trials-per-round", "8", "--threads", "1", "--repeats", "5", "--json", stdout=out)
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert summary["runner"] == "doppler" and summary["trials_in_database"] == 16
    # the four peers, interleaved in 3 rounds of ceil(5 / 3) = 2 timings each
    for peer in ("tuned", "untuned", "eager", "onnxruntime"):
        assert summary[peer]["repeats"] == 6 and summary[peer]["median_s"] > 0, (peer, summary[peer])
    ort = summary["onnxruntime"]
    assert ort["session"]["intra_op_num_threads"] == 1 and ort["session"]["providers"] == ["CPUExecutionProvider"]
    assert summary["speedup_vs_onnxruntime"] == pytest.approx(ort["median_s"] / summary["tuned"]["median_s"])
    assert (tmp_path / "var" / "tuning" / f"exp-{summary['experiment']}" / "model.onnx").is_file()  # exported once

    rounds = list(TuningRound.objects.filter(experiment_id=summary["experiment"]).order_by("round_index"))
    decisions = [r.details["doppler"] for r in rounds]
    # start at DOP 1, +1 after the first round, capped by the 2 servers
    assert [d["dop"] for d in decisions] == [1, 2]
    # a DOP-1 round is its own serial measurement: nothing re-measured; the DOP-2 round had a
    # serial sample (ceil(0.2 * 8) = 2 at least) measured on one server
    assert decisions[0]["check"] == "serial-equivalent" and decisions[0]["n_serial"] == 0
    assert decisions[1]["check"] == "serial-sample" and decisions[1]["n_serial"] >= 2
    assert sum(decisions[1]["serial_by"].values()) == decisions[1]["n_serial"]
    # an early-stopped candidate has exactly one timed repeat, the others min_repeats (3) to
    # max_repeats (6); "repeats" counts the parallel phase's timed repeats.
    # (Every candidate of the DOP-2 round can be early-stopped: two measurements at once on two
    # cores run slower than the serial best they are screened against.)
    for d in decisions:
        e, rest = d["early_stops"], d["n_candidates"] - d["early_stops"]
        failed = d["n_errors"] + d["induced_failures"]  # a failed measurement has no timed repeat
        assert 0 <= e <= d["n_candidates"], json.dumps(decisions)
        assert e + 3 * (rest - failed) <= d["repeats"] <= e + 6 * rest, json.dumps(decisions)
    # the DOP-2 round's parallel phase ran on two distinct host:port servers, 8 measurements in all
    parallel = decisions[1]["measured_by"]
    assert len([k for k in parallel if ":" in k]) == 2, json.dumps(decisions)
    assert sum(parallel.values()) == 8, json.dumps(decisions)
    # each server's own log shows it loaded candidates
    for log in server_logs:
        assert "load_module" in log.read_text(), log.read_text()[-2000:]
    recs = TuningRecord.objects.filter(experiment_id=summary["experiment"])
    assert recs.count() == 16 and recs.filter(error="", mean_seconds__gt=0).exists()
    work = settings.VAR_DIR / "tuning" / f"exp-{summary['experiment']}"
    assert [json.loads(x)["dop"] for x in (work / "doppler_decisions.jsonl").read_text().splitlines()] == [1, 2]
