"""The fault matrix: every experiment kind under each fault a deployment meets.

Faults, one test each; in each test every kind runs at once on one private deployment:

* ``kill -9``: the worker running every experiment is SIGKILLed (its whole process group) mid-run,
  a second worker standing by; the visibility timeout is the production hour, so only the
  reconciler (Celery beat) brings the lost runs back, by their expired leases.
* Redis restart: the broker (no persistence) is stopped mid-run, so every queued and
  unacknowledged message is lost, and started again once a worker has logged the lost
  connection; an experiment is submitted while it is down (stored, and enqueued by the
  reconciler).
* PostgreSQL restart: the database is stopped mid-run (``pg_ctl stop -m fast``: every client is
  disconnected) for 8 s and started again; a submission meanwhile gets a 503 and is retried
  with its ``Idempotency-Key``.
* a run longer than the visibility timeout (2 s, two workers): Redis hands every running task out
  again and again while it runs.

"Mid-run": the long kinds are submitted in waves so that all of them are running together when
the fault strikes, tuning inside MetaSchedule's tuning loop (its next database write is a measure
callback that TVM's FFI re-raises as a ``RuntimeError``). ``federation-plan`` plans in well under
a second, so it cannot be caught mid-run; it is submitted at the fault (the worker dead, the
broker down, the database down) instead: a submission's message lost or waiting for a worker.
Every registered kind is covered (a test fails when a kind is added without parameters here).

Afterwards, for every experiment: it succeeded (each runner resumes or reruns; none may be
failed by the fault); it ran at most once at a time (the lease holders, sampled every 0.1 s, never
return to an earlier holder and are no more than its attempts; under the visibility timeout one
holder and one attempt; and recorded rows are fenced by the lease); its progress never went
backwards (the same samples); its result rows are not duplicated (counted per kind against what
its parameters imply, and no two identical recorded rows); nothing a user submitted is lost (the
stored experiments are exactly the acknowledged submissions); and no process of a lost run is
left behind.

Why private servers: the restarts must not touch the suite's own PostgreSQL and Redis (other
tests, and other runs on the machine, use them), so each test runs a deployment of its own: a
PostgreSQL cluster made with ``initdb`` for this module (as the ``postgres`` OS user when the
suite runs as root; one migrated template database, cloned per test), a ``redis-server`` per
test, and the web side (gunicorn), beat and workers as processes pointed at them. The test
process does not use Django's database connection at all (pytest-django's test database lives on
the suite's server and stays untouched): it submits through the web side's REST API over HTTP and
reads the private database with psycopg, so no Django connection is re-pointed mid-test, and a
restart cannot leave the test's own connection broken. Everything runs niced, with the smallest
parameters the kinds' own integration tests use.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, spawn_ready, stop_processes
from tests.integration.platform.private_servers import PrivatePostgres, PrivateRedis, free_port
from tests.integration.tuning import SMALL_SEARCH

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "f" * 40
#: Parameters per kind: the smallest of each kind's own integration tests, long enough (several
#: seconds on two busy cores) to be mid-run when the fault strikes.
LONG = {
    # tests/integration/platform/test_worker_faults.py
    "training-probe": {"model_name": "resnet18", "batch_size": 2, "steps": 60, "image_size": 96},
    # tests/integration/placement/test_simulation_experiment.py's Philly trace, its first 3,000 jobs
    "simulation": {"trace": "philly", "policies": ["fifo", "gandiva", "horus"], "limit": 3000, "seed": 0},
    # tests/integration/tuning/test_tuning_worker.py: mlp, one task, two rounds of 4 trials
    "tuning": {"model": "mlp", "target": "llvm", "trials": 8, "trials_per_round": 4, "repeats": 3, "num_threads": 1,
               "measure_eager": False, "measure_onnxruntime": False,
               "options": {"builder_workers": 1, "search": SMALL_SEARCH}},
    # tests/integration/rlweights/test_weight_learning.py with half its PPO steps: training is
    # nearly all of this kind's time (1024 steps: 44 s of 48 s alone here, ~70 s in the matrix,
    # the longest kind); 512 steps take 31 s alone, still long past the last wave's start
    "weight-learning": {"train_setups": 2, "train_workloads": 2, "test_setups": 1, "test_workloads": 1, "window_s": 30,
                        "budget": 4, "timesteps": 512, "eval_seeds": [0]},
    # tests/integration/federation/test_experiments.py
    "federation-benchmark": {"applications": ["inference"], "latencies_ms": [0, 40], "contentions": [0.5], "rate_rps": 4,
                             "duration_s": 1.0, "compare": False},
}
QUICK = {
    "federation-plan": {"application": "hotelReservation", "client": "eu", "clusters": [
        {"name": "eu", "region": "aws:eu-west-1", "capacity_cores": 1.0, "contention": 0.2},
        {"name": "we", "region": "azure:westeurope", "capacity_cores": 4.0},
        {"name": "us", "region": "aws:us-east-1", "capacity_cores": 16.0}]},
}
#: Submitted in waves, each once the previous one is mid-run, so that every kind is mid-run when
#: the fault strikes: tuning takes ~45 s to reach its search (importing TVM's tensor intrinsics,
#: the model, extracting tasks), the probe and PPO ~10 s to their first step, the others ~1 s.
WAVES = (("tuning",), ("training-probe", "weight-learning"), ("simulation", "federation-benchmark"))
#: Progress (percent) that counts as mid-run: tuning inside MetaSchedule's tuning loop (5 % when it
#: starts; 85 % after the last round), where its next database write is a measure callback that
#: TVM's FFI re-raises as a RuntimeError; the others between their first report and the last.
MID_RUN = {"tuning": (5, 85)}

#: Short lease and reconciler periods so a lost run is noticed within seconds (a lease of a few
#: seconds is too short here: on two busy cores a heartbeat thread can wait that long for a CPU,
#: and a live run would be taken over).
FAST = {"TANDEM_LEASE_S": "10", "TANDEM_RECONCILE_S": "2", "TANDEM_QUEUED_GRACE_S": "6",
        "CELERY_UNACKED_RESTORE_S": "1", "CELERY_UNACKED_RESTORE_THROTTLE": "1",
        "TANDEM_TORCH_THREADS": "1", "TANDEM_TUNING_THREADS": "1"}
TERMINAL = ("succeeded", "failed", "cancelled")
CONCURRENCY = len(LONG) + 1  # every long kind at once, and a slot for the reconciler and the quick one


def test_every_registered_kind_is_in_the_matrix():
    from webapp.experiments import registered_kinds

    assert sorted(LONG | QUICK) == registered_kinds()


@pytest.fixture(scope="module")
def pg():
    """This module's PostgreSQL cluster with a migrated template database holding one user and
    its API token."""
    server = PrivatePostgres()
    try:
        server.start()
        server.sql("CREATE DATABASE tandem_template")
        env = _env(server.url("tandem_template"), "redis://127.0.0.1:1/0", Path(server.root))
        for args in (["migrate", "--noinput", "-v", "0"],
                     ["shell", "-c", "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token; "
                                     f"Token.objects.create(user=User.objects.create_user('faults', password='pw-faults'), key='{TOKEN}')"]):
            out = subprocess.run(["nice", "-n", "19", sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr[-3000:]
        yield server
    finally:
        server.destroy()


def _env(database_url: str, broker_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "TANDEM_"))}
    env.update(DJANGO_SETTINGS_MODULE="webapp.settings.test", DATABASE_URL=database_url, CELERY_BROKER_URL=broker_url,
               TANDEM_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1", **extra)
    return env


class Deployment:
    """One private deployment: a database cloned from the template, a Redis server, and the web
    side, beat and workers started on demand (all niced, all stopped at teardown)."""

    def __init__(self, pg: PrivatePostgres, tmp: Path, name: str, **env: str) -> None:
        self.pg, self.tmp, self.db = pg, tmp, f"tandem_{name}"
        pg.sql(f"DROP DATABASE IF EXISTS {self.db}")
        pg.sql(f"CREATE DATABASE {self.db} TEMPLATE tandem_template")
        self.redis = PrivateRedis(tmp / "redis")
        self.redis.start()
        self.env = _env(pg.url(self.db), self.redis.url, tmp / "var", **FAST, **env)
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.web_port = free_port()

    # --- processes ---------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str], ready: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return spawn_ready(["nice", "-n", "19", *cmd], env={**self.env, **(env or {})}, log=self.tmp / f"{name}.log",
                           procs=self.procs, ready=ready, timeout=180)

    def start_web(self) -> None:
        self._spawn("web", [sys.executable, "-m", "gunicorn", "webapp.wsgi:application", "--preload", "--workers", "1",
                            "--timeout", "60", "--bind", f"127.0.0.1:{self.web_port}"], ready="Booting worker")

    def start_beat(self) -> None:
        self._spawn("beat", [sys.executable, "-m", "celery", "-A", "workers", "beat", "-l", "INFO",
                             "-s", str(self.tmp / "celerybeat-schedule")], ready="beat: Starting")

    def start_worker(self) -> subprocess.Popen:
        n = len(self.workers)
        self.workers.append(None)  # type: ignore[arg-type]  (reserve the number)
        proc = self._spawn(f"worker{n}", [sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "control,cpu,gpu",
                                          "-c", str(CONCURRENCY), "--pool", "prefork", "-l", "INFO", "-n", f"faults{n}@%h",
                                          "--without-mingle", "--without-gossip"],  # as manage.py serve, and tests/conftest.py
                           ready="ready.")
        self.workers[n] = proc
        return proc

    def start(self, workers: int = 1) -> None:
        """The web side, beat and ``workers`` workers, started side by side."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2 + workers) as pool:
            futures = [pool.submit(self.start_web), pool.submit(self.start_beat)]
            futures += [pool.submit(self.start_worker) for _ in range(workers)]
            for f in futures:
                f.result()

    def logs(self) -> str:
        return "".join(p.log_path.read_text(errors="replace") for p in self.procs)  # type: ignore[attr-defined]

    def strays(self) -> list[str]:
        """Processes of this deployment (its ``DATABASE_URL`` in their environment) outside the
        process groups of its live processes: what a killed worker left running."""
        import psutil

        live = {p.pid for p in self.procs if p.poll() is None}
        out = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if proc.environ().get("DATABASE_URL") != self.env["DATABASE_URL"] or os.getpgid(proc.pid) in live:
                    continue
                out.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:160]}")
            except (psutil.Error, ProcessLookupError):
                continue
        return out

    def close(self) -> None:
        for p in self.procs:  # nothing here is worth a graceful stop
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        stop_processes(self.procs)
        self.redis.stop()
        try:
            if not self.pg.running():
                self.pg.start()
            self.pg.sql(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")
        except RuntimeError:
            pass

    # --- the web side and the database --------------------------------------------------------
    def post(self, kind: str, parameters: dict, *, key: str | None = None, timeout: float = 60) -> tuple[int, dict]:
        """POST /api/v1/experiments/ through the web side: ``(status, body)``; status 0 when
        the connection failed."""
        body = json.dumps({"kind": kind, "name": f"fault-{kind}", "parameters": parameters}).encode()
        headers = {"Authorization": f"Token {TOKEN}", "Content-Type": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        req = urllib.request.Request(f"http://127.0.0.1:{self.web_port}/api/v1/experiments/", data=body, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw)
            except ValueError:
                return err.code, {"body": raw[:500].decode(errors="replace")}
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            return 0, {"error": str(err)}

    def query(self, sql: str, *args) -> list[tuple]:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.pg.port, user="postgres", dbname=self.db, connect_timeout=5) as c:
            return c.execute(sql, args).fetchall()


class Watch(threading.Thread):
    """Samples every experiment's progress, lease holder and state every 0.1 s from its own
    connection, through database restarts (it reconnects)."""

    def __init__(self, dep: Deployment) -> None:
        super().__init__(daemon=True)
        self.dep = dep
        self.progress: dict[int, list[int]] = {}
        self.holders: dict[int, list[str]] = {}  # distinct consecutive holders, in order
        self.stop_event = threading.Event()

    def run(self) -> None:
        import psycopg

        conn = None
        while not self.stop_event.wait(0.1):
            try:
                if conn is None:
                    conn = psycopg.connect(host="127.0.0.1", port=self.dep.pg.port, user="postgres", dbname=self.dep.db,
                                           connect_timeout=2, autocommit=True)
                rows = conn.execute("SELECT id, progress, lease_owner FROM webapp_experiment").fetchall()
            except psycopg.Error:
                conn = None
                continue
            for pk, progress, holder in rows:
                self.progress.setdefault(pk, []).append(progress)
                seen = self.holders.setdefault(pk, [])
                if holder and (not seen or seen[-1] != holder):
                    seen.append(holder)
        if conn is not None:
            conn.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


@pytest.fixture
def deployment(pg, tmp_path, request):
    made: list[Deployment] = []

    def make(**env: str) -> Deployment:
        dep = Deployment(pg, tmp_path, re.sub(r"\W", "_", request.node.name)[:40], **env)
        made.append(dep)
        return dep

    yield make
    for dep in made:
        dep.close()


def submit(dep: Deployment, kinds) -> dict[int, str]:
    ids = {}
    for kind in kinds:
        status, body = dep.post(kind, LONG[kind])
        assert status == 201, (kind, status, body)
        ids[body["id"]] = kind
    return ids


def states(dep: Deployment) -> dict[int, tuple]:
    return {pk: (kind, state, progress, attempts) for pk, kind, state, progress, attempts in
            dep.query("SELECT id, kind, state, progress, attempts FROM webapp_experiment")}


def mid_run(kind: str, state: str, progress: int) -> bool:
    low, high = MID_RUN.get(kind, (1, 99))
    return state == "running" and low <= progress < high


def wait_mid_run(dep: Deployment, ids: dict[int, str], timeout: float = 300) -> None:
    """Until every experiment in ``ids`` is mid-run (all of them at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = states(dep)
        if all(mid_run(kind, now[pk][1], now[pk][2]) for pk, kind in ids.items()):
            return
        late = {kind: now[pk][1:3] for pk, kind in ids.items()
                if now[pk][1] in TERMINAL or now[pk][2] >= MID_RUN.get(kind, (1, 99))[1]}
        assert not late, f"past mid-run before the others got there (make them longer): {late}; all: {now}"
        time.sleep(0.2)
    raise AssertionError(f"not every experiment was mid-run within {timeout:.0f} s: {states(dep)}")


def wait_terminal(dep: Deployment, timeout: float = 600) -> dict[int, tuple]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            now = states(dep)
        except Exception:  # noqa: BLE001 - database restarting
            time.sleep(0.5)
            continue
        if all(s[1] in TERMINAL for s in now.values()):
            return now
        time.sleep(0.5)
    raise AssertionError(f"experiments not terminal after {timeout:.0f} s: {states(dep)}\n{dep.logs()[-6000:]}")


def wait_logged(dep: Deployment, text: str, timeout: float = 60) -> None:
    """Until ``text`` appears in the deployment's logs (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in dep.logs():
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not logged within {timeout:.0f} s:\n{dep.logs()[-6000:]}")


def submit_until_accepted(dep: Deployment, kind: str, parameters: dict, key: str, timeout: float = 120) -> tuple[int, list]:
    """Submit with an ``Idempotency-Key`` until accepted (201), as a client retrying through an
    outage does: ``(id, [statuses of the refused tries])``. A refusal must be a 503 or no
    connection, never a 4xx or a 500."""
    refused = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = dep.post(kind, parameters, key=key, timeout=30)
        if status in (200, 201):
            return body["id"], refused
        refused.append(status)
        assert status in (0, 503), (status, body)
        time.sleep(1)
    raise AssertionError(f"{kind} not accepted within {timeout:.0f} s: {refused}")


def check_matrix(dep: Deployment, watch: Watch, accepted: dict[int, str], final: dict[int, tuple]) -> None:
    """What every fault must leave (the module docstring), for every experiment."""
    assert set(final) == set(accepted), f"stored {sorted(final)} but accepted {sorted(accepted)}: lost or extra submissions"
    for pk, kind in accepted.items():
        state, attempts = final[pk][1], final[pk][3]
        error, result = dep.query("SELECT error, result FROM webapp_experiment WHERE id = %s", pk)[0]
        assert (final[pk][0], state) == (kind, "succeeded"), (pk, kind, state, error)
        seen = watch.progress.get(pk, [])
        assert seen == sorted(seen), f"{kind}: progress went backwards: {seen}"
        holders = watch.holders.get(pk, [])
        assert len(set(holders)) == len(holders) <= attempts, f"{kind}: two runs held it in turn: {holders}, attempts {attempts}"
        check_rows(dep, pk, kind, result)
    dup = dep.query('SELECT experiment_id, "table", count(*) FROM webapp_experimentrecord GROUP BY experiment_id, "table", row '
                    "HAVING count(*) > 1")
    assert not dup, f"result rows recorded twice: {dup}"
    assert not dep.strays(), f"processes left running by a lost run: {dep.strays()}"


def check_rows(dep: Deployment, pk: int, kind: str, result: dict) -> None:
    """The kind's result rows, counted against what its parameters imply."""
    def count(sql: str) -> int:
        return dep.query(sql, pk)[0][0]

    def records(table: str) -> list:
        return [r[0] for r in dep.query('SELECT row FROM webapp_experimentrecord WHERE experiment_id = %s AND "table" = %s ORDER BY seq',
                                        pk, table)]

    params = (LONG | QUICK)[kind]
    if kind == "training-probe":
        assert result["steps"] == params["steps"]
    elif kind == "simulation":
        # the first ``limit`` jobs of the trace, one outcome row each per policy
        policies = params["policies"]
        assert sorted(result["policies"]) == sorted(policies) and result["jobs"] == params["limit"]
        assert count("SELECT count(*) FROM placement_simulationjoboutcome WHERE experiment_id = %s") == params["limit"] * len(policies)
        assert sorted(r["policy"] for r in records("policies")) == sorted(policies)
    elif kind == "tuning":
        rounds = dep.query("SELECT round_index, num_candidates FROM tuning_tuninground WHERE experiment_id = %s ORDER BY round_index", pk)
        assert result["trials_in_database"] == params["trials"]
        assert [r[0] for r in rounds] == list(range(len(rounds)))
        n = count("SELECT count(*) FROM tuning_tuningrecord WHERE experiment_id = %s")
        assert n == sum(r[1] for r in rounds) == params["trials"], (rounds, n)
        assert count("SELECT count(DISTINCT (round_id, candidate_index)) FROM tuning_tuningrecord WHERE experiment_id = %s") == n
    elif kind == "weight-learning":
        curve = result["curve"]
        assert curve and count("SELECT count(*) FROM rlweights_learningcurvepoint WHERE experiment_id = %s") == len(curve)
        assert count("SELECT count(*) FROM rlweights_weightstep WHERE experiment_id = %s") == params["budget"]
        assert len(records("comparison")) == params["test_setups"] * params["test_workloads"]
    elif kind == "federation-benchmark":
        assert len(records("degradation")) == len(result["degradation"]) > 0
    elif kind == "federation-plan":
        assert set(result["plan"]["replicas"]) == {s["name"] for s in result["services"]}


def start_matrix(dep: Deployment) -> tuple[dict[int, str], Watch]:
    """Submit every long kind in :data:`WAVES`; return once all are mid-run together."""
    watch = Watch(dep)
    watch.start()
    ids: dict[int, str] = {}
    for wave in WAVES:
        ids |= submit(dep, wave)
        wait_mid_run(dep, ids)
    return ids, watch


def test_worker_killed_mid_run(deployment):
    dep = deployment()
    dep.start()
    ids, watch = start_matrix(dep)
    victim = dep.workers[0]
    dep.start_worker()  # the one that takes over (started first: it only sees new messages)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    plan, refused = submit_until_accepted(dep, "federation-plan", QUICK["federation-plan"], key="plan-kill")
    assert refused == []
    final = wait_terminal(dep)
    watch.stop()
    check_matrix(dep, watch, ids | {plan: "federation-plan"}, final)
    assert all(final[pk][3] >= 2 for pk in ids), final  # each killed run was resumed by another


def test_redis_restart_mid_run(deployment):
    dep = deployment()
    dep.start()
    ids, watch = start_matrix(dep)
    dep.redis.stop()
    plan, refused = submit_until_accepted(dep, "federation-plan", QUICK["federation-plan"], key="plan-redis")
    assert refused == []  # stored while the broker is down; the reconciler enqueues it once it is back
    wait_logged(dep, "Connection to broker lost")  # the fault struck: the workers lost the broker
    dep.redis.start()
    final = wait_terminal(dep)
    watch.stop()
    check_matrix(dep, watch, ids | {plan: "federation-plan"}, final)
    logs = dep.logs()
    assert "Connection to broker lost" in logs and re.search(rf"'requeued': \[[^\]]*\b{plan}\b", logs), "the fault did not strike"


def test_postgres_restart_mid_run(deployment):
    dep = deployment()
    dep.start()
    ids, watch = start_matrix(dep)
    dep.pg.stop("fast")
    status, body = dep.post("federation-plan", QUICK["federation-plan"], key="plan-pg", timeout=30)
    assert status in (0, 503), (status, body)  # refused while the database is down, never a half-stored 500
    time.sleep(8)  # runs that write meanwhile meet the outage and are retried; the others carry on
    dep.pg.start()
    plan, _ = submit_until_accepted(dep, "federation-plan", QUICK["federation-plan"], key="plan-pg")
    final = wait_terminal(dep)
    watch.stop()
    check_matrix(dep, watch, ids | {plan: "federation-plan"}, final)
    assert "retry: Retry in" in dep.logs(), "no run met the outage"


def test_runs_longer_than_the_visibility_timeout(deployment):
    """No single moment of fault: every run lasts longer than the 2-s visibility timeout, so Redis
    hands each task out again (and again) while it runs; all kinds are submitted at once."""
    dep = deployment(CELERY_VISIBILITY_TIMEOUT="2")
    dep.start(workers=2)
    watch = Watch(dep)
    watch.start()
    ids = submit(dep, LONG)
    plan, _ = submit_until_accepted(dep, "federation-plan", QUICK["federation-plan"], key="plan-vt")
    final = wait_terminal(dep)
    watch.stop()
    check_matrix(dep, watch, ids | {plan: "federation-plan"}, final)
    logs = dep.logs()
    for pk, kind in ids.items():
        assert final[pk][3] == 1 and len(watch.holders[pk]) == 1, (kind, final[pk], watch.holders[pk])
        assert f"experiment {pk} is running under" in logs, f"{kind}: never handed out again while it ran"
