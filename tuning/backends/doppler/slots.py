"""DOPpler's measurement devices: :class:`SlotSpec` and the device strings that name them
(``"cpu"``, ``"cpu:0-1|2-3"``, ``"cuda"``, ``"cuda:0,1"``, ``"rpc://HOST:PORT/KEY"``; see
:mod:`tuning.backends.doppler`). No TVM import except to count CUDA devices or RPC servers."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SlotSpec:
    """One measurement device. kind: ``"cpu"`` (``cores``: CPU ids), ``"cuda"`` (``gpu``: index)
    or ``"rpc"`` (``tracker``: (host, port), ``key``); ``num_threads``: TVM runtime threads."""

    kind: str
    name: str
    num_threads: int = 1
    cores: tuple[int, ...] = ()
    gpu: int | None = None
    tracker: tuple[str, int] | None = None
    key: str = ""


def _parse_cores(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return tuple(out)


def count_rpc_servers(host: str, port: int, key: str, timeout_s: float = 10.0) -> int:
    """Number of servers registered under ``key`` (free or busy) on the tracker at host:port."""
    from tvm.s_tir.meta_schedule.runner.config import RPCConfig

    cfg = RPCConfig(tracker_host=host, tracker_port=port, tracker_key=key, session_timeout_sec=int(timeout_s))
    return cfg.count_num_servers(allow_missing=True)


def parse_devices(devices: str, num_threads: int) -> list[SlotSpec]:
    """Measurement slots from a device string (see module docstring).

    ``"cpu"`` splits the cores this process may use into sets of ``num_threads`` (at least one
    set, of all the cores, when there are fewer); raises ``ValueError`` on a malformed string, a
    core this process may not use, or a tracker with no server of that key.
    """
    devices = devices.strip()
    if devices == "cpu" or devices.startswith("cpu:"):
        allowed = sorted(os.sched_getaffinity(0))
        if devices == "cpu":
            n = max(1, min(num_threads, len(allowed)))
            sets = [tuple(allowed[i:i + n]) for i in range(0, len(allowed) - n + 1, n)] or [tuple(allowed)]
        else:
            sets = [_parse_cores(s) for s in devices[4:].split("|")]
            bad = sorted({c for s in sets for c in s} - set(allowed))
            if bad or any(not s for s in sets):
                raise ValueError(f"core sets {devices!r} name cores this process may not use: {bad}; allowed {allowed}")
        return [SlotSpec(kind="cpu", name=f"cpu{'-'.join(map(str, s))}", num_threads=len(s), cores=s) for s in sets]
    if devices == "cuda" or devices.startswith("cuda:"):
        if devices == "cuda":
            import tvm

            ids, i = [], 0
            while tvm.cuda(i).exist:
                ids.append(i)
                i += 1
            if not ids:
                raise ValueError("devices 'cuda': no CUDA device is visible")
        else:
            ids = [int(x) for x in devices[5:].split(",") if x.strip()]
        return [SlotSpec(kind="cuda", name=f"cuda{i}", gpu=i, num_threads=num_threads) for i in ids]
    m = re.fullmatch(r"rpc://([^:/]+):(\d+)/(.+)", devices)
    if m:
        host, port, key = m.group(1), int(m.group(2)), m.group(3)
        n = count_rpc_servers(host, port, key)
        if n == 0:
            raise ValueError(f"no RPC server with key {key!r} is registered at tracker {host}:{port}")
        return [SlotSpec(kind="rpc", name=f"rpc{i}", tracker=(host, port), key=key, num_threads=num_threads)
                for i in range(n)]
    raise ValueError(f"unknown devices {devices!r}; use 'cpu', 'cpu:0-1|2-3', 'cuda', 'cuda:0,1' or 'rpc://HOST:PORT/KEY'")
