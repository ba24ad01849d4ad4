"""The platform's own demo step: a real training job on the worker."""
from __future__ import annotations


def platform_demo(*, owner, stdout) -> None:
    """Submit a short resnet18 training job (10 SGD steps, batch 4, synthetic images of TANDEM_JOB_IMAGE_SIZE px on
    CPU unless a GPU is assigned); the demo's worker runs it once it starts."""
    from .services import job_submit

    job = job_submit(owner=owner, model_name="resnet18", batch_size=4, steps=10, num_gpus=0, name="demo resnet18 job")
    stdout.write(f"submitted {job} (id {job.pk}); it runs on the worker: see the dashboard and /api/v1/jobs/{job.pk}/")
