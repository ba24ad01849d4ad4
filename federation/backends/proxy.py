"""A delay-injecting TCP proxy: the inter-cluster link of the harness.

Run as its own process (``python -m federation.backends.proxy --target HOST:PORT --one-way-ms
20``). It listens on ``--listen-port`` (0 = any free port), prints ``READY <port>`` on stdout,
and for every accepted connection opens one to the target and pipes both directions, each chunk
delivered ``one_way_ms`` after it arrived, in order. So a request/response exchange through it
takes the link's RTT = 2 x ``one_way_ms`` more than a direct one (the TCP handshake to the
proxy is local and not delayed; the harness keeps connections alive, as service meshes do).

With ``--bandwidth-mbps`` each direction is also a serial link of that rate: a chunk of ``n``
bytes occupies it ``8 n / rate`` seconds after the previous one left (a token-bucket-free FIFO
model of a bottleneck link, the same shape as netem ``rate``), then propagates ``one_way_ms``.

Both sockets of every connection have ``TCP_NODELAY`` set, so the proxy never adds a Nagle /
delayed-ACK stall of its own, and every connection is served by its own threads, so connections
never wait on each other.
"""
from __future__ import annotations

import argparse
import queue
import signal
import socket
import sys
import threading
import time


def _nodelay(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _pipe(src: socket.socket, dst: socket.socket, delay_s: float, bw_bps: float | None, done: threading.Event) -> None:
    """Forward ``src`` -> ``dst``: a reader thread stamps each chunk with its due time (arrival, or
    the moment the serial link finishes sending it, plus ``delay_s``) and a writer thread sends
    it then, in order. ``time.sleep`` (``clock_nanosleep``) wakes within about 0.1 ms; an asyncio
    timer rounds every wait up to the next millisecond of ``epoll_wait`` (0.9 ms late, median,
    measured here), which a link adds twice per round trip."""
    q: queue.SimpleQueue = queue.SimpleQueue()

    def rx() -> None:
        link_free = 0.0
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            now = time.monotonic()
            if bw_bps and data:
                link_free = max(link_free, now) + len(data) * 8.0 / bw_bps
                q.put((link_free + delay_s, data))
            else:
                q.put((max(now, link_free) + delay_s, data))
            if not data:
                return

    def tx() -> None:
        try:
            while True:
                due, data = q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return
        finally:
            done.set()

    threading.Thread(target=rx, daemon=True).start()
    threading.Thread(target=tx, daemon=True).start()


def _connection(client: socket.socket, target: tuple[str, int], delay_s: float, bw_bps: float | None) -> None:
    try:
        upstream = socket.create_connection(target)
    except OSError:
        client.close()
        return
    for s in (client, upstream):
        _nodelay(s)
    a, b = threading.Event(), threading.Event()
    _pipe(client, upstream, delay_s, bw_bps, a)
    _pipe(upstream, client, delay_s, bw_bps, b)
    a.wait()
    b.wait()
    for s in (client, upstream):
        s.close()


def serve(target_host: str, target_port: int, one_way_ms: float, *, listen_host: str = "127.0.0.1",
          listen_port: int = 0, bandwidth_mbps: float | None = None, ready=None, stop: threading.Event | None = None) -> None:
    """Accept connections until ``stop`` is set (forever when None), each served by its own
    threads (so connections never wait on each other). ``ready(port)`` is called once
    listening. ``one_way_ms``: delay per direction, ms; ``bandwidth_mbps``: serial link rate per
    direction of each connection, Mbit/s (None: unlimited)."""
    delay = one_way_ms / 1000.0
    bw = bandwidth_mbps * 1e6 if bandwidth_mbps else None
    srv = socket.create_server((listen_host, listen_port), backlog=256)
    srv.settimeout(0.2)
    if ready:
        ready(srv.getsockname()[1])
    try:
        while stop is None or not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            threading.Thread(target=_connection, args=(conn, (target_host, target_port), delay, bw), daemon=True).start()
    finally:
        srv.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--one-way-ms", type=float, required=True, help="delay added to each direction, ms")
    ap.add_argument("--bandwidth-mbps", type=float, default=None, help="serial link rate, Mbit/s (default: unlimited)")
    ap.add_argument("--listen-port", type=int, default=0)
    ap.add_argument("--parent-pid", type=int, default=0, help="exit when this process dies")
    a = ap.parse_args(argv)
    if a.parent_pid:
        from federation.backends.lifeline import die_with_parent

        die_with_parent(a.parent_pid)
    if a.one_way_ms < 0 or (a.bandwidth_mbps is not None and a.bandwidth_mbps <= 0):
        ap.error("one-way delay must be >= 0 and bandwidth > 0")
    host, port = a.target.rsplit(":", 1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    def ready(p: int) -> None:
        print(f"READY {p}", flush=True)

    try:
        serve(host, int(port), a.one_way_ms, listen_port=a.listen_port, bandwidth_mbps=a.bandwidth_mbps, ready=ready)
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
