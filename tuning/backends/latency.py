"""End-to-end latency of a compiled model (TVM Relax VM), of PyTorch eager and of onnxruntime,
each measured in a subprocess of its own whose thread count is fixed before any runtime starts
(``TVM_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``; ``torch.set_num_threads``;
onnxruntime ``SessionOptions.intra_op_num_threads``), so tuned, untuned, eager and onnxruntime
numbers use the same threads and are not disturbed by the caller's state.

Procedure, the same for every kind: load the model, one warm-up call whose time sets ``number``
(:func:`_number_for`: back-to-back calls filling about 50 ms, 1 to 100), then timings, each the
mean of ``number`` back-to-back calls (TVM: the VM's ``time_evaluator``; PyTorch and onnxruntime:
a ``time.perf_counter`` loop). Reported as median with 25th/75th percentiles, min and max, in
seconds (:func:`summarise`).

Kinds (``what``): ``"tvm"`` (path of an exported Relax library), ``"torch"`` (a model name of
:func:`tuning.backends.frontends.torch_model`), ``"onnxruntime"`` (path of an ONNX file; an
``InferenceSession`` with ``providers=["CPUExecutionProvider"]``, ``intra_op_num_threads=threads``,
``inter_op_num_threads=1``; its result also carries ``session``: the options read back from the
session and its providers).

:class:`LatencyPeer` keeps one such subprocess alive and times it in rounds, so several peers can
be measured interleaved (:func:`measure_interleaved`); :func:`measure_in_subprocess` is one
peer, one round.

Run as a module: ``python -m tuning.backends.latency tvm LIB.so --shapes '[[16,512]]' --dtypes
'["float32"]' --threads 2`` (or ``torch mlp ...``, ``onnxruntime model.onnx ...``) prints one JSON
line; ``--serve`` is the protocol :class:`LatencyPeer` speaks.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

KINDS = ("tvm", "torch", "onnxruntime")
_TAG = "TANDEM-LATENCY "  # protocol lines on stdout start with this (runtimes may print too)


def summarise(seconds: list[float]) -> dict[str, float]:
    """``{"median_s", "p25_s", "p75_s", "min_s", "max_s", "repeats"}`` of per-run seconds
    (percentiles by numpy's linear interpolation)."""
    arr = np.asarray(seconds, dtype=float)
    if arr.size == 0:
        raise ValueError("no timings to summarise")
    return {"median_s": float(statistics.median(arr)), "p25_s": float(np.percentile(arr, 25)),
            "p75_s": float(np.percentile(arr, 75)), "min_s": float(arr.min()), "max_s": float(arr.max()),
            "repeats": int(arr.size)}


def _number_for(seconds_per_call: float, budget_s: float = 0.05) -> int:
    return max(1, min(100, int(budget_s / max(seconds_per_call, 1e-6))))


def _inputs(shapes: list[tuple[int, ...]], dtypes: list[str]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for shape, dtype in zip(shapes, dtypes):
        if dtype.startswith("int"):
            out.append(rng.integers(0, 100, size=shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def _loop_timer(call: Callable[[], Any]) -> Callable[[int], list[float]]:
    """Warm-up ``call`` once, fix ``number`` from its time; the returned function gives
    ``repeats`` timings (s), each the mean of ``number`` back-to-back calls. Called through
    a calibrate function (see :func:`_make_timer`), never while another peer is timed."""
    t0 = time.perf_counter()
    call()
    number = _number_for(time.perf_counter() - t0)

    def timings(repeats: int) -> list[float]:
        out = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(number):
                call()
            out.append((time.perf_counter() - t0) / number)
        return out

    return timings


def _tvm_timer(lib: str, shapes, dtypes, device: str) -> tuple[Callable[[int], list[float]], dict]:
    import tvm
    from tvm import relax

    dev = tvm.cuda(0) if device == "cuda" else tvm.cpu(0)
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), dev)
    args = [tvm.runtime.tensor(a, dev) for a in _inputs(shapes, dtypes)]

    def calibrate() -> Callable[[int], list[float]]:
        t0 = time.perf_counter()
        vm["main"](*args)
        dev.sync()
        number = _number_for(time.perf_counter() - t0)

        def timings(repeats: int) -> list[float]:
            res = vm.time_evaluator("main", dev, number=number, repeat=repeats)(*args)
            return [float(x) for x in res.results]

        return timings

    return calibrate, {}


def _torch_timer(model: str, shapes, dtypes, threads: int) -> tuple[Callable[[int], list[float]], dict]:
    import torch

    from tuning.backends.frontends import torch_model

    torch.set_num_threads(threads)
    m = torch_model(model)
    args = [torch.from_numpy(a) for a in _inputs(shapes, dtypes)]
    # inference mode for the rest of this (single-purpose) process's main thread, where every
    # call is made, instead of entering it around each call inside the timed loop
    torch.inference_mode().__enter__()
    return (lambda: _loop_timer(lambda: m(*args))), {}


def _onnxruntime_timer(path: str, shapes, dtypes, threads: int) -> tuple[Callable[[int], list[float]], dict]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(shapes):
        raise ValueError(f"{path}: the ONNX graph has {len(names)} inputs ({', '.join(names)}), "
                         f"{len(shapes)} shapes were given")
    feeds = dict(zip(names, _inputs(shapes, dtypes)))
    back = sess.get_session_options()
    info = {"session": {"intra_op_num_threads": int(back.intra_op_num_threads),
                        "inter_op_num_threads": int(back.inter_op_num_threads),
                        "providers": list(sess.get_providers()), "onnxruntime": ort.__version__}}
    return (lambda: _loop_timer(lambda: sess.run(None, feeds))), info


def _make_timer(kind: str, what: str, shapes, dtypes, threads: int, device: str):
    """Load the peer; returns ``(calibrate, info)``: ``calibrate()`` makes the warm-up call, fixes
    ``number`` and returns ``timings(repeats) -> list[float]``. Loading and calibrating are apart
    so that peers can load at the same time and still warm up one at a time."""
    if kind == "tvm":
        return _tvm_timer(what, shapes, dtypes, device)
    if device != "cpu":
        raise ValueError(f"{kind} latency is measured on the CPU only, not {device!r}")
    if kind == "torch":
        return _torch_timer(what, shapes, dtypes, threads)
    if kind == "onnxruntime":
        return _onnxruntime_timer(what, shapes, dtypes, threads)
    raise ValueError(f"unknown latency kind {kind!r}; use one of {', '.join(KINDS)}")


class LatencyPeer:
    """One measured peer (``kind``, ``what``: see the module docstring) in a subprocess kept
    alive: started by the constructor, which waits until the model is loaded (``wait=False``:
    returns at once; then :meth:`wait_loaded` before anything else), then :meth:`timings` as
    often as wanted (the first call makes the warm-up call and fixes ``number`` first, untimed),
    :meth:`close` (or ``with``) at the end.

    ``threads``: the peer's thread count (environment and runtime settings, see the module
    docstring). ``info``: kind-specific facts from the subprocess (onnxruntime: ``session``).
    Raises ``ValueError`` for an unknown kind or non-positive ``threads``, ``RuntimeError``
    (with the subprocess's error output) when it fails to start or to time, and
    ``subprocess.TimeoutExpired`` after ``timeout_s`` seconds without an answer.
    """

    def __init__(self, kind: str, what: str, shapes: list[tuple[int, ...]], dtypes: list[str], *, threads: int,
                 device: str = "cpu", timeout_s: float = 900, wait: bool = True) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown latency kind {kind!r}; use one of {', '.join(KINDS)}")
        if int(threads) < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.kind, self.what, self.threads, self.timeout_s = kind, str(what), int(threads), float(timeout_s)
        env = dict(os.environ, TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        cmd = [sys.executable, "-m", "tuning.backends.latency", kind, self.what, "--threads", str(threads),
               "--device", device, "--shapes", json.dumps([list(s) for s in shapes]),
               "--dtypes", json.dumps(list(dtypes)), "--serve"]
        self._err = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty peer never blocks
        self._buf = b""  # stdout read unbuffered (os.read), so select() never misses a buffered line
        self._proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], env=env, bufsize=0,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err)
        self.info: dict[str, Any] | None = None
        if wait:
            self.wait_loaded()

    def wait_loaded(self) -> dict[str, Any]:
        """Wait until the subprocess has loaded the model; returns (and sets) :attr:`info`.
        On failure the subprocess is closed and the error raised (see the class docstring)."""
        if self.info is None:
            try:
                self.info = self._answer("start")["info"]
            except BaseException:
                self.close()
                raise
        return self.info

    def _answer(self, what: str) -> dict[str, Any]:
        import selectors

        deadline = time.monotonic() + self.timeout_s
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if b"\n" not in self._buf:
                    left = deadline - time.monotonic()
                    if left <= 0 or not sel.select(left):
                        raise subprocess.TimeoutExpired(self._proc.args, self.timeout_s)
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        self._proc.wait(timeout=30)
                        raise RuntimeError(f"latency measurement of {self.kind} {self.what} failed ({what}, exit "
                                           f"{self._proc.returncode}): {self._stderr()}")
                    self._buf += chunk
                    continue
                raw, self._buf = self._buf.split(b"\n", 1)
                line = raw.decode("utf-8", "replace")
                if line.startswith(_TAG):
                    msg = json.loads(line[len(_TAG):])
                    if "error" in msg:
                        raise RuntimeError(f"latency measurement of {self.kind} {self.what} failed ({what}): "
                                           f"{msg['error']}")
                    return msg

    def _stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()[-2000:]

    def timings(self, repeats: int) -> list[float]:
        """``repeats`` (>= 1) timings in seconds, each the mean of ``number`` calls."""
        if int(repeats) < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        self.wait_loaded()
        if self._proc.poll() is not None:
            raise RuntimeError(f"latency peer {self.kind} {self.what} is not running")
        try:
            self._proc.stdin.write((json.dumps({"repeats": int(repeats)}) + "\n").encode())
        except OSError as err:  # it ended between the check and the write
            raise RuntimeError(f"latency peer {self.kind} {self.what} is not running ({err}): {self._stderr()}") from None
        return [float(s) for s in self._answer("timing")["seconds"]]

    def request_exit(self) -> None:
        """Ask the subprocess to end (EOF on its stdin) without waiting; :meth:`close` waits."""
        if self._proc.poll() is None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass

    def close(self) -> None:
        """End the subprocess (EOF on its stdin; killed if it does not exit within 30 s)."""
        if self._proc.poll() is None:
            try:
                self.request_exit()
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._err.close()

    def __enter__(self) -> "LatencyPeer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _result(seconds: list[float], threads: int, info: dict[str, Any]) -> dict[str, Any]:
    return {**summarise(seconds), "threads": threads, **info}


def measure_in_subprocess(kind: str, what: str, shapes: list[tuple[int, ...]], dtypes: list[str], *,
                          threads: int, repeats: int = 20, device: str = "cpu", timeout_s: float = 900) -> dict[str, Any]:
    """Measure ``kind`` (``"tvm"``: compiled library path ``what``; ``"torch"``: model name
    ``what``; ``"onnxruntime"``: ONNX file path ``what``) in a subprocess with ``threads`` threads,
    ``repeats`` timings; returns :func:`summarise` plus ``threads`` (and, for onnxruntime,
    ``session``). Raises ``RuntimeError`` with the subprocess's error output on failure."""
    with LatencyPeer(kind, what, shapes, dtypes, threads=threads, device=device, timeout_s=timeout_s) as peer:
        return _result(peer.timings(repeats), peer.threads, peer.info)


def measure_interleaved(peers: dict[str, tuple[str, str]], shapes: list[tuple[int, ...]], dtypes: list[str], *,
                        threads: int, repeats: int = 20, rounds: int = 3, device: str = "cpu", timeout_s: float = 900,
                        report: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Measure several peers interleaved: ``peers`` maps a label to ``(kind, what)``; each is
    started in its own :class:`LatencyPeer`, all loading at the same time (nothing is timed
    yet; each warms up later, alone, at its first timing), then ``rounds`` rounds each time
    every peer once for ``ceil(repeats / rounds)`` timings, the order rotated by one each round
    (no peer always follows the same one). The idle peers wait on a pipe, using no CPU, while
    one is timed.

    Returns label -> :func:`summarise` over all of its timings (``repeats`` >= the asked
    ``repeats``) plus ``threads`` (and ``session`` for onnxruntime), or ``{"error": "..."}``
    for a peer that failed to start or to time (the others go on). ``report(message)`` is called
    before each start and round. Raises ``ValueError`` for ``rounds`` < 1 or ``repeats`` < 1.
    """
    if int(rounds) < 1 or int(repeats) < 1:
        raise ValueError(f"rounds and repeats must be >= 1, got rounds={rounds}, repeats={repeats}")
    per_round = math.ceil(int(repeats) / int(rounds))
    live: dict[str, LatencyPeer] = {}
    out: dict[str, dict[str, Any]] = {}
    seconds: dict[str, list[float]] = {}
    try:
        for label, (kind, what) in peers.items():
            if report:
                report(f"starting {label}")
            try:
                live[label] = LatencyPeer(kind, what, shapes, dtypes, threads=threads, device=device,
                                          timeout_s=timeout_s, wait=False)
            except ValueError as err:
                out[label] = {"error": str(err)}
        for label, peer in live.items():
            try:
                peer.wait_loaded()
                seconds[label] = []
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                out[label] = {"error": str(err)[-2000:]}
        order = [label for label in live if label not in out]
        for r in range(int(rounds)):
            if report:
                report(f"timing round {r + 1}/{rounds}")
            k = r % len(order) if order else 0
            for label in order[k:] + order[:k]:
                if label in out:
                    continue
                try:
                    seconds[label].extend(live[label].timings(per_round))
                except (RuntimeError, subprocess.TimeoutExpired) as err:
                    out[label] = {"error": str(err)[-2000:]}
    finally:
        for peer in live.values():  # all exit at once (a runtime's teardown can take a second)
            peer.request_exit()
        for peer in live.values():
            peer.close()
    for label in order:
        if label not in out:
            out[label] = _result(seconds[label], live[label].threads, live[label].info)
    return {label: out[label] for label in peers}


_PROTOCOL = sys.stdout  # --serve: a private duplicate of fd 1; fd 1 itself then goes to stderr


def _emit(msg: dict[str, Any]) -> None:
    _PROTOCOL.write(_TAG + json.dumps(msg) + "\n")
    _PROTOCOL.flush()


def _serve(calibrate: Callable[[], Callable[[int], list[float]]]) -> None:
    timer = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            timer = timer or calibrate()
            _emit({"seconds": timer(int(json.loads(line)["repeats"]))})
        except Exception as err:  # noqa: BLE001 - reported to the parent, which decides
            _emit({"error": f"{type(err).__name__}: {err}"})


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=list(KINDS))
    p.add_argument("what")
    p.add_argument("--shapes", required=True)
    p.add_argument("--dtypes", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--device", default="cpu")
    p.add_argument("--serve", action="store_true", help="answer {\"repeats\": N} lines on stdin until EOF")
    a = p.parse_args(argv)
    if a.serve:  # whatever a runtime prints to stdout lands on stderr, not in the protocol
        global _PROTOCOL
        sys.stdout.flush()
        _PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
    shapes = [tuple(s) for s in json.loads(a.shapes)]
    dtypes = json.loads(a.dtypes)
    try:
        timer, info = _make_timer(a.kind, a.what, shapes, dtypes, a.threads, a.device)
    except Exception as err:  # noqa: BLE001 - any load failure is the peer's error
        if not a.serve:
            raise
        _emit({"error": f"{type(err).__name__}: {str(err)[:1500]}"})
        sys.exit(1)
    if a.serve:
        _emit({"info": info})
        _serve(timer)
    else:
        print(json.dumps(_result(timer()(a.repeats), a.threads, info)))


if __name__ == "__main__":
    main()
