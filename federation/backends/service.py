"""One microservice of the harness: an HTTP server process that does its CPU work per call and
then calls its downstream services.

Run as ``python -m federation.backends.service '<json config>'``; it prints ``READY <port>``.
Config: ``{"name", "work_ms", "response_bytes", "cpus": [..] | null, "downstream": [{"name",
"calls", "request_bytes", "endpoints": [[host, port, weight], ...]}]}``.

Per call served (``POST /``): burn ``work_ms`` of *CPU time* of the serving thread (measured by
``time.thread_time``, so under contention the wall time stretches as on a busy node), then for
each downstream edge make ``calls`` sequential calls, each to an endpoint drawn with probability
proportional to its weight (the callee's replicas in that cluster; a fractional ``calls`` makes
``floor(calls)`` calls plus one more with probability ``calls - floor(calls)``), sending ``request_bytes`` and
reading the callee's response, then answer with ``response_bytes``. Connections are kept alive
per thread (HTTP/1.1). A failed downstream call answers 502, so errors propagate to the load
generator and are counted, not hidden.

Every socket of the HTTP path has ``TCP_NODELAY`` set, and each response goes out in one write
(headers and body buffered together). Without that, ``http.client`` writes the request headers
and body in two segments and the server its headers and body in two more, so Nagle's algorithm
holds the second segment until the first is acknowledged, and the peer's delayed ACK (40 ms on
Linux) sets the pace: about 44 ms per call on loopback that nobody injected (RFC 896 Nagle,
RFC 1122 section 4.2.3.2 delayed ACK; the interaction is the classic write-write-read stall).
"""
from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def burn_cpu(ms: float) -> None:
    """Spin until the calling thread has used ``ms`` milliseconds of CPU time."""
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1


class NoDelayHTTPConnection(http.client.HTTPConnection):
    """``http.client.HTTPConnection`` whose socket has ``TCP_NODELAY`` set (see module docstring)."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Pool(threading.local):
    def __init__(self) -> None:
        self.conns: dict[tuple[str, int], http.client.HTTPConnection] = {}

    def call(self, host: str, port: int, body: bytes, timeout: float = 30.0) -> int:
        for attempt in (0, 1):
            conn = self.conns.get((host, port))
            if conn is None:
                conn = self.conns[(host, port)] = NoDelayHTTPConnection(host, port, timeout=timeout)
            try:
                conn.request("POST", "/", body=body, headers={"Content-Type": "application/octet-stream"})
                resp = conn.getresponse()
                resp.read()
                return resp.status
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                self.conns.pop((host, port), None)
                if attempt:
                    raise
        return 599


def make_handler(cfg: dict):
    pool = _Pool()
    rng = random.Random(os.getpid())
    reply = b"x" * int(cfg.get("response_bytes", 0))
    downstream = cfg.get("downstream", [])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # TCP_NODELAY on the accepted socket (socketserver.StreamRequestHandler)
        wbufsize = 1 << 16  # buffered: headers and body leave in one write, flushed after each request

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", 0) or 0)
            if n:
                self.rfile.read(n)
            burn_cpu(float(cfg.get("work_ms", 0.0)))
            status = 200
            for d in downstream:
                eps = d["endpoints"]
                body = b"x" * int(d.get("request_bytes", 0))
                calls = float(d.get("calls", 1))
                n = int(calls) + (1 if rng.random() < calls - int(calls) else 0)  # fractional calls: expected value kept
                for _ in range(n):
                    host, port, _w = rng.choices(eps, weights=[e[2] for e in eps])[0]
                    try:
                        st = pool.call(host, int(port), body)
                    except OSError:
                        st = 599
                    if st != 200:
                        status = 502
            payload = reply if status == 200 else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(argv: list[str] | None = None) -> None:
    cfg = json.loads((argv or sys.argv[1:])[0])
    if cfg.get("parent_pid"):
        from federation.backends.lifeline import die_with_parent

        die_with_parent(int(cfg["parent_pid"]))
    if cfg.get("cpus"):
        os.sched_setaffinity(0, set(cfg["cpus"]))
    server = ThreadingHTTPServer(("127.0.0.1", int(cfg.get("port", 0))), make_handler(cfg))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
