"""Celery tasks of the placement engine (thin: IDs in, one service call).

Simulation experiments run through the platform's ``tandem.run_experiment`` task (kind
``simulation`` on the ``cpu`` queue). Live placement runs inside the platform's job services.
This module adds GPU profiling on a GPU node (queue ``gpu``).
"""
from __future__ import annotations

from celery import shared_task


@shared_task(name="placement.profile_gpu", acks_late=True, reject_on_worker_lost=True)
def profile_gpu(models: str, batch_sizes: str = "16,32,64", steps: int = 200) -> str:
    """Run ``manage.py profile_gpu`` on the worker's GPU (idempotent: rows are upserted by
    model, batch size, GPU type and source). Returns its JSON summary."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("profile_gpu", models=models, batch_sizes=batch_sizes, steps=steps, json=True, stdout=out)
    return out.getvalue()
