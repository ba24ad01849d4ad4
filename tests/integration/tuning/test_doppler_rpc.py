"""DOPpler on LLVM with two local TVM RPC servers behind a local tracker (real processes).

A real MetaSchedule tuning of a small real workload (a 128x128x128 float32 matmul) runs with
DOPpler's builder and runner; the runner takes every server of the key from the tracker as one
measurement slot. The test asserts both servers measured candidates, from two independent
sources: the engine's per-batch record of which server measured what, and each server's own log
(it logs ``load_module`` for every candidate loaded on it).
"""
from __future__ import annotations

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


def test_doppler_tunes_on_two_rpc_servers(rpc_cluster, tmp_path):
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    from tuning.backends.registry import TuningSetup, make_runner

    port, server_logs = rpc_cluster
    a = te.placeholder((128, 128), name="A")
    b = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    c = te.compute((128, 128), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})

    work = tmp_path / "work"
    setup = TuningSetup(target={"kind": "llvm", "num-cores": 1}, num_threads=1, work_dir=work, seed=1,
                        max_trials_global=16, num_trials_per_iter=8,
                        options={"doppler": {"devices": f"rpc://127.0.0.1:{port}/{KEY}", "build_workers": 1}})
    builder, runner = make_runner("doppler", setup)
    engine = runner.engine
    try:
        assert [s.kind for s in engine.slot_specs] == ["rpc", "rpc"]
        db = ms.tune_tir(mod, setup.target, str(work), max_trials_global=16, num_trials_per_iter=8,
                         builder=builder, runner=runner, seed=1)
        decisions = list(engine.decisions)
    finally:
        engine.close()

    # 16 trials in batches of 8: the first at DOP 1, the second at DOP 2 (start 1, +1, max = 2 servers)
    assert [d["dop"] for d in decisions] == [1, 2]
    servers = set()
    for d in decisions:
        servers.update(k for k in d["measured_by"] if ":" in k)
    assert len(servers) == 2, decisions  # two distinct host:port servers measured candidates
    # each server's own log shows it loaded candidates
    for log in server_logs:
        assert "load_module" in log.read_text(), log.read_text()[-2000:]
    # tuning records with run times landed in MetaSchedule's database
    workload = db.commit_workload(mod)
    best = db.get_top_k(workload, 1)
    assert best and float(best[0].run_secs[0]) > 0
    lines = (work / "doppler_decisions.jsonl").read_text().splitlines()
    assert [json.loads(x)["dop"] for x in lines] == [1, 2]
