"""Job submissions under load: gunicorn + PostgreSQL with the demo's imported cluster, offered at
fixed rates by a bounded loopback load generator (open loop: request i is sent at i / rate
seconds, whatever the answers; at most --connections requests in flight, a send that finds none
free is counted as "not sent").

Per offered rate it prints the achieved rate of acknowledged (201) submissions, latency p50/p99
of the answered ones, errors by kind, and the exactly-once audit: every job the server
acknowledged is stored exactly once (by its unique name), and no submission that was not
acknowledged (timeout, 5xx) is stored. The server's write deadline (TANDEM_WRITE_DEADLINE_S) is
set below the client's timeout, so an abandoned request can never commit later. Placement runs
as in production, in a ``control`` worker on the same machine (webapp.services.job_schedule_soon):
"placed" counts the acknowledged jobs that hold GPUs once the worker caught up, and "lag s" is
how long after the rate's last send that took.

    python bench/api_load.py                      # 100, 200, 300, 500 /s for 10 s each
    python bench/api_load.py --rates 300 --duration 20 --gunicorn-workers 3

Needs PostgreSQL (DATABASE_URL's server; a scratch database ``tandem_apiload`` is created and
dropped) and Redis (db 13, flushed). Targets (issue): >= 300 accepted/s with p99 < 250 ms on a
quiet 2-core machine (goal 500/s, p99 < 200 ms), 0 lost or duplicated.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DB = "tandem_apiload"
PG = os.environ.get("APILOAD_PG", "postgres://postgres@127.0.0.1:5432")
BROKER = "redis://127.0.0.1:6379/13"


def sh(*cmd: str, env: dict | None = None, quiet: bool = True) -> None:
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL if quiet else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env() -> dict[str, str]:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.dev", "DJANGO_DEBUG": "false",
            # the throttles' counters in Redis, as production keeps them (webapp/settings/prod.py)
            "DATABASE_URL": f"{PG}/{DB}", "CELERY_BROKER_URL": BROKER, "TANDEM_CACHE_URL": BROKER, "TANDEM_LOG_LEVEL": "WARNING",
            "TANDEM_THROTTLE_SUBMIT": "1000000/min", "TANDEM_WRITE_DEADLINE_S": "2"}


def setup(env: dict[str, str]) -> str:
    """Fresh database with the demo's PAI cluster and a user; returns the user's token."""
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB}")
    py = sys.executable
    sh(py, "manage.py", "migrate", "--noinput", env=env)
    sh(py, "manage.py", "import_nodes", "data/alibaba-pai-gpu-2020/pai_machine_spec.csv", "--cluster", "alibaba-pai-2020", env=env)
    out = subprocess.run([py, "manage.py", "shell", "-c",
                          "from django.contrib.auth import get_user_model; from rest_framework.authtoken.models import Token;"
                          "u=get_user_model().objects.create_user('load', password='pw-load-1'); print(Token.objects.create(user=u).key)"],
                         cwd=REPO, env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


class Generator:
    """Open-loop sender at ``rate`` requests/s for ``duration`` s over at most ``connections``
    keep-alive connections (one thread each)."""

    def __init__(self, port: int, token: str, rate: float, duration: float, connections: int, tag: str, timeout: float) -> None:
        self.port, self.token, self.rate, self.duration, self.tag, self.timeout = port, token, rate, duration, tag, timeout
        self.todo: queue.Queue = queue.Queue(maxsize=connections)
        self.results: list[tuple[str, int, float]] = []  # (name, status or -1 timeout / -2 error, seconds)
        self.not_sent = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.worker, daemon=True) for _ in range(connections)]

    def worker(self) -> None:
        conn = None
        while True:
            item = self.todo.get()
            if item is None:
                return
            name, t_send = item
            body = json.dumps({"name": name, "model_name": "resnet18", "batch_size": 32, "num_gpus": 1, "steps": 100})
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                conn.request("POST", "/api/v1/jobs/", body, {"Authorization": f"Token {self.token}", "Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                status = r.status
            except socket.timeout:
                status, conn = -1, None
            except (OSError, http.client.HTTPException):
                status, conn = -2, None
            with self.lock:
                self.results.append((name, status, time.monotonic() - t_send))

    def run(self) -> None:
        for t in self.threads:
            t.start()
        t0 = time.monotonic()
        n = int(self.rate * self.duration)
        for i in range(n):
            delay = t0 + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                self.todo.put_nowait((f"{self.tag}-{i}", time.monotonic()))
            except queue.Full:
                self.not_sent += 1
        for _ in self.threads:
            self.todo.put(None)
        for t in self.threads:
            t.join()
        self.wall = time.monotonic() - t0


def stored_names(env: dict[str, str], tag: str) -> list[str]:
    import psycopg

    with psycopg.connect(env["DATABASE_URL"]) as c:
        return [r[0] for r in c.execute("SELECT name FROM webapp_job WHERE name LIKE %s", (f"{tag}-%",))]


def wait_placed(env: dict[str, str], tag: str, want: int, since: float, limit: float) -> tuple[int, float]:
    """Poll until ``want`` jobs of ``tag`` hold GPUs (or ``limit`` s passed); returns how many do
    and the seconds since ``since``."""
    import psycopg

    sql = ("SELECT count(DISTINCT j.id) FROM webapp_job j JOIN webapp_job_gpus g ON g.job_id = j.id "
           "WHERE j.name LIKE %s")
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as c:
        while True:
            n = c.execute(sql, (f"{tag}-%",)).fetchone()[0]
            if n >= want or time.monotonic() - since > limit:
                return n, time.monotonic() - since
            time.sleep(0.2)


def cluster_fill(env: dict[str, str]) -> str:
    """Why jobs stay queued: GPU tasks placed, against the GPUs that can hold this benchmark's job
    (memory at least its estimate) times the live policy's most tasks per GPU (``k_max``). No
    job ever finishes here (no ``gpu`` worker runs them), so the cluster fills up."""
    import psycopg

    from placement.core.policies import make_policy

    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as c:
        tasks = c.execute("SELECT count(*) FROM webapp_job_gpus").fetchone()[0]
        need = c.execute("SELECT min(predicted_memory_mib) FROM placement_placementdecision").fetchone()[0] or 0
        fit = c.execute("SELECT count(*) FROM webapp_gpudevice WHERE memory_mib >= %s", (need,)).fetchone()[0]
    k = make_policy("horus").k_max
    return (f"(not placed: the cluster is full for this job: {tasks:,} GPU tasks placed; {fit:,} GPUs have the "
            f"{need:,.0f} MiB it needs, at most {k} tasks each under Horus = {k * fit:,})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="100,200,300,500", help="offered rates, submissions/s (default %(default)s)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per rate (default %(default)s)")
    ap.add_argument("--connections", type=int, default=64, help="most requests in flight (default %(default)s)")
    ap.add_argument("--gunicorn-workers", type=int, default=3, help="gunicorn worker processes (default %(default)s)")
    ap.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker (gthread; default %(default)s)")
    ap.add_argument("--no-placement", action="store_true",
                    help="start no control worker: the web tier alone (jobs stay queued; 'placed' is then 0)")
    ap.add_argument("--timeout", type=float, default=5.0, help="client timeout, s (> the server's 2 s write deadline)")
    args = ap.parse_args()
    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        ap.error(f"--rates: comma-separated numbers, got {args.rates!r}")
    if any(r <= 0 for r in rates) or args.duration <= 0 or args.connections < 1 or args.gunicorn_workers < 1:
        ap.error("rates, --duration, --connections and --gunicorn-workers must be positive")

    env = server_env()
    print(f"setting up {DB} with the PAI cluster (1,897 nodes, 6,742 GPUs) ...", flush=True)
    token = setup(env)
    port = free_port()
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"api_load-gunicorn-{port}.log"
    log = open(log_path, "w")
    print(f"gunicorn log: {log_path}")
    control_log = open(log_path.with_name(f"api_load-control-{port}.log"), "w")
    control = subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q",
                                "nothing" if args.no_placement else "control", "--pool", "solo",
                                "-l", "WARNING", "--without-mingle", "--without-gossip", "-n", f"control-{port}@%h"],
                               cwd=REPO, env=env, start_new_session=True, stdout=control_log, stderr=subprocess.STDOUT)
    web = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "webapp.wsgi:application", "--bind", f"127.0.0.1:{port}",
                            "--workers", str(args.gunicorn_workers), "--threads", str(args.threads), "--worker-class", "gthread", "--preload",
                            "--timeout", "60", "--log-level", "warning"], cwd=REPO, env=env, start_new_session=True,
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        print(f"load average before: {os.getloadavg()[0]:.2f} (2-core machine; other work on it distorts the figures)")
        head = f"{'offered/s':>9} {'sent':>6} {'not sent':>8} {'acked':>6} {'achieved/s':>10} {'p50 ms':>7} {'p99 ms':>7} " \
               f"{'4xx':>4} {'5xx':>4} {'timeout':>7} {'stored':>6} {'dup':>4} {'unacked stored':>14} {'placed':>6} {'lag s':>6}"
        print(head)
        run_tag = f"load{int(time.time())}"
        for rate in rates:
            tag = f"{run_tag}-r{int(rate)}"
            gen = Generator(port, token, rate, args.duration, args.connections, tag, args.timeout)
            gen.run()
            sent_end = time.monotonic()
            time.sleep(args.timeout)  # let every in-flight request end before the audit
            acked = {n for n, s, _ in gen.results if s == 201}
            unacked = {n for n, s, _ in gen.results if s != 201}
            names = stored_names(env, tag)
            stored = set(names)
            lat = sorted(t for _, s, t in gen.results if s > 0)
            p50 = statistics.median(lat) * 1000 if lat else float("nan")
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000 if lat else float("nan")
            n4 = sum(1 for _, s, _ in gen.results if 400 <= s < 500)
            n5 = sum(1 for _, s, _ in gen.results if s >= 500)
            nt = sum(1 for _, s, _ in gen.results if s < 0)
            print(f"{rate:9.0f} {len(gen.results):6d} {gen.not_sent:8d} {len(acked):6d} {len(acked) / gen.wall:10.1f} {p50:7.1f} {p99:7.1f} "
                  f"{n4:4d} {n5:4d} {nt:7d} {len(stored):6d} {len(names) - len(stored):4d} {len(stored & unacked):14d} ", end="", flush=True)
            placed, lag = wait_placed(env, tag, 0 if args.no_placement else len(stored), sent_end, limit=120.0)
            print(f"{placed:6d} {lag:6.1f}", flush=True)
            if not args.no_placement and placed < len(stored):
                print("  " + cluster_fill(env))
            lost = acked - stored
            if lost:
                print(f"  LOST: {len(lost)} acknowledged submissions not stored, e.g. {sorted(lost)[:3]}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        os.killpg(control.pid, signal.SIGTERM)
        os.killpg(web.pid, signal.SIGTERM)
        try:
            web.wait(timeout=15)
        except subprocess.TimeoutExpired:  # workers still busy with long requests
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()
        try:
            control.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(control.pid, signal.SIGKILL)
            control.wait()
        log.close()
        control_log.close()
        import psycopg
        import redis

        redis.Redis.from_url(BROKER).flushdb()
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
