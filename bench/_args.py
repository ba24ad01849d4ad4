"""Helpers shared by the bench scripts: refuse bad arguments before a long run starts, write the
result CSV."""
from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path


def check_out_path(ap: argparse.ArgumentParser, path: str | os.PathLike, flag: str = "--out") -> Path:
    """The output file ``path`` as a Path, its folder created; ``ap.error`` (exit 2) when it is a
    folder or cannot be written, so a run never ends by failing to save its results. Writes no
    file itself: a run refused later leaves nothing behind (an earlier file stays as it was)."""
    p = Path(path)
    if p.is_dir():
        ap.error(f"{flag} {p} is a folder; give a file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        ap.error(f"{flag} {p}: cannot create its folder ({err.strerror})")
    if not os.access(p.parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        ap.error(f"{flag} {p}: cannot write there (permission denied)")
    return p


def check_torchvision_models(ap: argparse.ArgumentParser, models: str, flag: str = "--models") -> list[str]:
    """Comma-separated torchvision model names -> list; ``ap.error`` (naming ``flag``) on an empty
    list or an unknown name."""
    import torchvision

    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        ap.error(f"{flag} is empty")
    unknown = [m for m in names if m not in torchvision.models.list_models()]
    if unknown:
        ap.error(f"{flag}: unknown torchvision models {unknown}")
    return names


def task_count(text: str) -> int:
    """``--tasks`` value: a positive integer, or ``all`` (every task the model has: returned as a
    count larger than any model's, which :func:`tuning.pipeline.select_tasks` reads as all).
    Raises ``argparse.ArgumentTypeError`` (argparse's one-line error, exit 2) otherwise."""
    if text.strip().lower() == "all":
        return ALL_TASKS
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'all', got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 or 'all', got {n}")
    return n


# larger than any model's task count (resnet18 19, mobilenet_v2 33, densenet121 ~190)
ALL_TASKS = 1_000_000


def write_csv_rows(path: str | os.PathLike, rows: list[dict]) -> Path:
    """Write ``rows`` (dicts with the same keys; the first row's keys are the header) to ``path``,
    creating its folder; written to a temporary file first and renamed over ``path``, so a run
    killed while writing leaves the previous file whole. Returns the path. Raises ``ValueError``
    on no rows, ``OSError`` on I/O."""
    if not rows:
        raise ValueError("no rows to write")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, p)
    return p
