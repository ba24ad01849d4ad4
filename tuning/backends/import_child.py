"""Model import in a child process, so a crash in TVM's importer fails the import, not the caller.

TVM's frontends (``from_exported_program``, ``from_onnx``) run native code on whatever graph a
user hands in; a segmentation fault, an abort or the kernel's OOM killer there would otherwise end
the Celery worker, ``manage.py tune`` or the web process. :func:`import_torch_model_isolated`
and :func:`import_onnx_isolated` run :func:`tuning.backends.frontends.import_torch_model` /
:func:`~tuning.backends.frontends.import_onnx` in a fresh interpreter
(``python -m tuning.backends.import_child REQUEST.json``, started with :mod:`subprocess` in a
session of its own, so a Ctrl-C aimed at the caller does not kill it) and load what it wrote.

How the model comes back (checked on TVM 0.27, ``tests/unit/tuning/test_import_child.py``): the
child writes the Relax ``IRModule`` with ``tvm.ir.save_json`` (parameters are bound as constants,
which TVM's JSON graph carries as base64 tensors) and the parent reads it with
``tvm.ir.load_json``; the module read back is structurally equal to a direct import, builds, and
gives bit-identical outputs (convnet). The PyTorch twin (``torch_module``, for the eager and
onnxruntime peers) is rebuilt in the parent by :func:`tuning.backends.frontends.torch_model`,
which seeds its weights, so it holds the very weights the child imported. resnet18 at
1x3x224x224 is a 63 MB JSON file.

Failures are :class:`tuning.backends.frontends.ModelImportError`:

- the child's own ``ModelImportError`` (unknown model, unsupported operator, a frontend error
  such as numpy's ``MemoryError``): its message, unchanged;
- any other exception in the child: ``"model import of NAME failed in the importer process:
  TYPE: MESSAGE"``;
- the child killed by a signal (``SIGSEGV``, ``SIGABRT``, ``SIGKILL`` from the OOM killer, ...):
  ``"the importer process for NAME was killed by SIGSEGV (signal 11) ..."`` quoting its output
  from ``faulthandler``'s report of the crash (the Python stack at it; TVM's own handler then
  prints the C stack);
- a nonzero exit without a report (``std::terminate`` in a native library, ``os._exit``): the
  exit status and the output's last lines;
- no answer within ``timeout_s`` (default ``TANDEM_IMPORT_TIMEOUT_S``, else
  :data:`DEFAULT_TIMEOUT_S`): the child is killed and the message says after how long.

Nothing the child wrote survives a failure: its files live in a temporary directory the parent
removes, and the module is read only after the child exited 0 and wrote its summary last.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .frontends import ImportedModel, ModelImportError

#: Seconds an import may take before the child is killed (resnet50 from ONNX takes about a minute
#: here; override with ``TANDEM_IMPORT_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = 900.0
#: Characters of the child's output quoted in a crash message.
OUTPUT_TAIL = 1500
#: TEST-ONLY hook: when this environment variable names a signal (e.g. ``SIGSEGV``), the child
#: raises that signal on itself just before calling TVM's frontend, standing in for a crash inside
#: the importer. Only the integration tests set it; nothing in the product does.
TEST_CRASH_ENV = "TANDEM_TEST_IMPORTER_CRASH"

_REPO = Path(__file__).resolve().parents[2]


def import_timeout_s() -> float:
    """The import timeout in seconds: ``TANDEM_IMPORT_TIMEOUT_S`` or :data:`DEFAULT_TIMEOUT_S`.
    ``ValueError`` for a value that is not a positive number."""
    raw = os.environ.get("TANDEM_IMPORT_TIMEOUT_S")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"TANDEM_IMPORT_TIMEOUT_S must be a positive number of seconds, not {raw!r}")
    return value


def import_torch_model_isolated(name: str, input_shape: tuple[int, ...] | list[int] | None = None, *,
                                timeout_s: float | None = None) -> ImportedModel:
    """:func:`tuning.backends.frontends.import_torch_model` in a child process (see the module
    docstring); the ``torch_module`` is rebuilt here with the same seeded weights. Raises
    :class:`ModelImportError`."""
    from .frontends import torch_model

    model = _run_child({"kind": "torch", "name": name, "input_shape": list(input_shape) if input_shape else None},
                       name, timeout_s)
    model.torch_module = torch_model(name)
    return model


def import_onnx_isolated(source: str | Path | bytes, name: str | None = None,
                         shape_dict: dict[str, list[int]] | None = None, *, timeout_s: float | None = None) -> ImportedModel:
    """:func:`tuning.backends.frontends.import_onnx` of ``source`` (path or bytes) in a child
    process (see the module docstring). Raises :class:`ModelImportError`."""
    if isinstance(source, (bytes, bytearray)):
        return _run_child({"kind": "onnx", "bytes": True, "name": name or "uploaded.onnx", "shape_dict": shape_dict},
                          name or "uploaded.onnx", timeout_s, onnx_bytes=bytes(source))
    path = Path(source).resolve()
    return _run_child({"kind": "onnx", "path": str(path), "name": name, "shape_dict": shape_dict},
                      name or path.name, timeout_s)


def _tail(path: Path) -> str:
    """What to quote of the child's output: from ``faulthandler``'s ``Fatal Python error`` line
    (the crash and the Python stack at it) when there is one, else the end; at most
    :data:`OUTPUT_TAIL` characters."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    start = text.find("Fatal Python error")
    if start >= 0:
        part = text[start:].split("\nExtension modules:")[0].strip()  # the list of loaded C modules is noise
        return part if len(part) <= OUTPUT_TAIL else part[:OUTPUT_TAIL] + "..."
    return text if len(text) <= OUTPUT_TAIL else "..." + text[-OUTPUT_TAIL:]


def _run_child(request: dict[str, Any], what: str, timeout_s: float | None, onnx_bytes: bytes | None = None) -> ImportedModel:
    import tvm

    timeout = import_timeout_s() if timeout_s is None else float(timeout_s)
    with tempfile.TemporaryDirectory(prefix="tandem-import-") as tmp:
        out = Path(tmp)
        if onnx_bytes is not None:
            (out / "upload.onnx").write_bytes(onnx_bytes)
            request = {**request, "path": str(out / "upload.onnx")}
        (out / "request.json").write_text(json.dumps(request))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(_REPO), *filter(None, [env.get("PYTHONPATH")])])
        log_path = out / "importer.log"
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.run([sys.executable, "-m", "tuning.backends.import_child", str(out)], env=env,
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                      start_new_session=True, check=False)
            except subprocess.TimeoutExpired:  # subprocess.run has killed and reaped the child
                raise ModelImportError(f"model import of {what} did not finish within {timeout:g} s "
                                       "(TANDEM_IMPORT_TIMEOUT_S); the importer process was killed") from None
        code = proc.returncode
        error_file, summary_file = out / "error.json", out / "model.json"
        if code < 0:
            try:
                sig = signal.Signals(-code)
                sig_name = f"{sig.name} (signal {-code})"
            except ValueError:
                sig_name = f"signal {-code}"
            tail = _tail(log_path)
            raise ModelImportError(f"the importer process for {what} was killed by {sig_name}: TVM's importer crashed "
                                   "or the process was killed (SIGKILL: possibly the kernel's out-of-memory killer); "
                                   "nothing was imported" + (f"; its last output:\n{tail}" if tail else ""))
        if error_file.exists():
            err = json.loads(error_file.read_text())
            if err["type"] == "ModelImportError":
                raise ModelImportError(err["message"])
            raise ModelImportError(f"model import of {what} failed in the importer process: {err['type']}: {err['message']}")
        if code != 0 or not summary_file.exists():
            tail = _tail(log_path)
            raise ModelImportError(f"the importer process for {what} exited with status {code} without a result; "
                                   "nothing was imported" + (f"; its last output:\n{tail}" if tail else ""))
        summary = json.loads(summary_file.read_text())
        mod = tvm.ir.load_json((out / "module.json").read_text())
    return ImportedModel(name=summary["name"], source=summary["source"], mod=mod,
                         input_shapes=[tuple(s) for s in summary["input_shapes"]], input_dtypes=list(summary["input_dtypes"]),
                         details=summary["details"])


def _install_test_only_crash_hook() -> None:
    """TEST ONLY (:data:`TEST_CRASH_ENV`): replace TVM's two frontend entry points in this child
    with a function that raises the named signal on the process, so the import dies where TVM's
    importer would run (after torch.export / the ONNX checks), as a native crash there would."""
    import tvm.relax.frontend.onnx as onnx_frontend
    import tvm.relax.frontend.torch as torch_frontend

    sig = signal.Signals[os.environ[TEST_CRASH_ENV]]

    def crash(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(sig)
        raise AssertionError(f"the test hook's {sig.name} did not end the importer process")

    torch_frontend.from_exported_program = crash
    onnx_frontend.from_onnx = crash


def _child_main(out: Path) -> int:
    """The child: read ``out/request.json``, import, write ``module.json`` then ``model.json``
    (``error.json`` instead on an exception). Returns the exit status."""
    try:
        import tvm  # first: TVM installs its own SIGSEGV handler (a C backtrace) on import

        faulthandler.enable()  # then this one: a crash prints the Python stack, then TVM's handler runs
        req = json.loads((out / "request.json").read_text())
        from . import frontends

        if os.environ.get(TEST_CRASH_ENV):  # TEST ONLY: crash where TVM's frontend would run
            _install_test_only_crash_hook()
        if req["kind"] == "torch":
            model = frontends.import_torch_model(req["name"], req.get("input_shape"))
        elif req["kind"] == "onnx":
            src = Path(req["path"])
            model = frontends.import_onnx(src.read_bytes() if req.get("bytes") else src, name=req.get("name"),
                                          shape_dict=req.get("shape_dict"))
        else:
            raise ValueError(f"unknown import kind {req['kind']!r}")
        (out / "module.json").write_text(tvm.ir.save_json(model.mod))
        summary = {"name": model.name, "source": model.source, "input_shapes": [list(s) for s in model.input_shapes],
                   "input_dtypes": list(model.input_dtypes), "details": model.details}
        (out / "model.json.part").write_text(json.dumps(summary))
        os.replace(out / "model.json.part", out / "model.json")  # written last: the sign of success
        return 0
    except BaseException as err:  # noqa: BLE001 - MemoryError, SystemExit, ... all become the report
        msg = str(err)
        (out / "error.json").write_text(json.dumps({"type": type(err).__name__, "message": msg[:4000]}))
        if not isinstance(err, ModelImportError):
            import traceback

            traceback.print_exc()
        return 3


if __name__ == "__main__":
    sys.exit(_child_main(Path(sys.argv[1])))
