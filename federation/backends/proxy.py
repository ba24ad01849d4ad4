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
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float, bw_bps: float | None) -> None:
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue()

    async def rx() -> None:
        link_free = 0.0
        while True:
            try:
                data = await reader.read(65536)
            except (ConnectionError, OSError):
                data = b""
            now = loop.time()
            if bw_bps and data:
                link_free = max(link_free, now) + len(data) * 8.0 / bw_bps
                q.put_nowait((link_free + delay_s, data))
            else:
                q.put_nowait((max(now, link_free) + delay_s, data))
            if not data:
                return

    async def tx() -> None:
        while True:
            due, data = await q.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    if writer.can_write_eof():
                        writer.write_eof()
                except (ConnectionError, OSError):
                    pass
                return
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                return

    await asyncio.gather(rx(), tx())


async def serve(target_host: str, target_port: int, one_way_ms: float, *, listen_host: str = "127.0.0.1",
                listen_port: int = 0, bandwidth_mbps: float | None = None, ready=None) -> None:
    """Serve forever (until cancelled). ``ready(port)`` is called once listening."""
    delay = one_way_ms / 1000.0
    bw = bandwidth_mbps * 1e6 if bandwidth_mbps else None

    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(target_host, target_port)
        except OSError:
            cw.close()
            return
        try:
            await asyncio.gather(_pipe(cr, uw, delay, bw), _pipe(ur, cw, delay, bw))
        finally:
            for w in (uw, cw):
                w.close()

    server = await asyncio.start_server(handle, listen_host, listen_port)
    port = server.sockets[0].getsockname()[1]
    if ready:
        ready(port)
    async with server:
        await server.serve_forever()


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
        asyncio.run(serve(host, int(port), a.one_way_ms, listen_port=a.listen_port, bandwidth_mbps=a.bandwidth_mbps, ready=ready))
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
