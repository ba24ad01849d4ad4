"""A private PostgreSQL cluster and a private Redis server for tests that stop and restart them
(tests/integration/platform/test_fault_matrix.py), so the suite's own database and broker are
never disturbed. Each object touches only the processes and files it created.

PostgreSQL refuses to run as root (CI runs as root), so as root ``initdb``, ``pg_ctl`` and the
server run as the ``postgres`` OS user (``runuser -u postgres --``) in a temporary directory
owned by that user; the cluster trusts local connections (``initdb -A trust``) and listens on
127.0.0.1 and a socket in that directory only.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin() -> Path:
    """The newest PostgreSQL server binaries' directory (Debian: ``/usr/lib/postgresql/<v>/bin``;
    elsewhere the directory of ``initdb`` on ``PATH``). Raises ``RuntimeError`` naming what to
    install when there are none."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install -y postgresql")


class PrivatePostgres:
    """A PostgreSQL cluster of its own in a temporary directory, on a free port.

    ``start()``, ``stop(mode)`` (``"fast"``: roll back and disconnect every client, as a restart
    does), ``url(db)`` (a ``DATABASE_URL``), ``sql(statement, db)``, ``destroy()`` (stop and
    remove the directory). Raises ``RuntimeError`` with the server log when a command fails."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="tandem-pg-"))
        if self.as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = free_port()
        self._pg("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")

    def _pg(self, tool: str, *args: str) -> str:
        cmd = [str(self.bin / tool), *args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}\n{log}")
        return out.stdout

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._pg("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, db: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def sql(self, statement: str, db: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=db, autocommit=True, connect_timeout=10) as c:
            c.execute(statement)

    def destroy(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A Redis server of its own on a free port, without persistence (``--save "" --appendonly
    no``), so a restart loses every queued and unacknowledged message, as a broker restart
    without persistence does. ``start()``, ``stop()``, ``url`` (database 0)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not found: apt-get install -y redis-server")
        log = open(self.dir / "redis.log", "a")
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                      "--dir", str(self.dir), "--daemonize", "no"], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        import redis

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1).ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError(f"private redis-server on port {self.port} did not answer:\n{(self.dir / 'redis.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
