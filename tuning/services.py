"""Services of the tuning engine (functions that write): the runtime directories, ONNX uploads,
database import/export. The experiment runner is :func:`tuning.experiment.tuning_experiment_run`,
which calls the Django-free :func:`tuning.pipeline.run`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings

from webapp.models import Experiment

from .pipeline import DEFAULTS, default_num_threads, device_lock  # noqa: F401  (re-exported)


def tuning_root() -> Path:
    """Root of the tuning engine's runtime files (work dirs, imported databases, uploads, locks)."""
    p = Path(settings.VAR_DIR) / "tuning"
    p.mkdir(parents=True, exist_ok=True)
    return p


def experiment_work_dir(experiment_id: int) -> Path:
    """Work directory of a tuning experiment (JSON database, logs, compiled libraries)."""
    return tuning_root() / f"exp-{experiment_id}"


def queue_for_parameters(parameters: dict[str, Any]) -> str:
    """Celery queue of a tuning: ``gpu`` for a CUDA target, ``cpu`` otherwise."""
    return "gpu" if parameters.get("target") == "cuda" else "cpu"


def resolve_onnx(ref: str) -> Path:
    """An ONNX reference: an upload id (``uploads/<sha256>.onnx`` under the tuning root) or a
    file under ``settings.DATA_DIR``, given relative to it (``onnx-light-models/x.onnx``), or
    as a path from the working directory or absolute (``data/onnx-light-models/x.onnx``).
    Raises ``FileNotFoundError`` for anything else (a file outside ``DATA_DIR`` too)."""
    root = tuning_root() / "uploads"
    data = Path(settings.DATA_DIR).resolve()
    for c in (root / f"{ref}.onnx", data / ref, Path(ref)):
        c = c.resolve()
        if c.is_file() and (c.is_relative_to(data) or c.is_relative_to(root.resolve())):
            return c
    # one message whether or not a file exists elsewhere: an API caller learns nothing of the disk
    raise FileNotFoundError(f"no ONNX model {ref!r}: give an upload id or a file under the data folder "
                            "(relative to it, or a path that leads into it, e.g. data/...)")


def onnx_upload_store(*, data: bytes) -> dict[str, Any]:
    """Store an uploaded ONNX model after checking it imports; returns ``{"id", "name", ...}``.
    The import runs in a child process (:mod:`tuning.backends.import_child`), so a crash in
    TVM's importer is a refused upload, not a dead web process. Raises
    :class:`tuning.backends.frontends.ModelImportError` (nothing stored) or ``ValueError`` for
    an oversized file."""
    import hashlib

    from .backends.import_child import import_onnx_isolated

    if len(data) > settings.MAX_UPLOAD_MIB * 1024 * 1024:
        raise ValueError(f"ONNX file larger than {settings.MAX_UPLOAD_MIB} MiB")
    model = import_onnx_isolated(data)
    digest = hashlib.sha256(data).hexdigest()
    root = tuning_root() / "uploads"
    root.mkdir(exist_ok=True)
    tmp = root / f".{digest}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, root / f"{digest}.onnx")
    return {"id": digest, "inputs": [list(s) for s in model.input_shapes], **model.details}


def tuning_database_import(*, src: str | os.PathLike[str], name: str, overwrite: bool = False) -> dict[str, Any]:
    """Import the MetaSchedule JSON database in directory ``src`` as ``name`` (usable as
    ``seed_database``). Raises :class:`tuning.backends.database.DatabaseImportError`."""
    from .backends.database import check_database_name, import_database

    check_database_name(name)
    return import_database(src, tuning_root() / "databases" / name, overwrite=overwrite)


def tuning_database_export(*, experiment: Experiment, dest: str | os.PathLike[str]) -> dict[str, Any]:
    """Export a tuning experiment's MetaSchedule database to directory ``dest``."""
    from .backends.database import export_database

    return export_database(experiment_work_dir(experiment.pk), dest)
