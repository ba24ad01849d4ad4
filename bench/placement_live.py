"""Live placement at the demo's scale: job submission latency with 6,748 GPUs registered.

Creates (in the database of ``DATABASE_URL``, which must be a scratch database: the run
deletes what it created at the end; the dispatched tasks stay in the broker's ``gpu`` queue of
``CELERY_BROKER_URL``'s database: use a scratch one) one cluster of 843 nodes x 8 GPUs + 1 node x 4 = 6,748
V100 16 GiB GPUs, then submits ``--jobs`` one-GPU jobs one after another through
``webapp.services.job_submit`` (validation, store, then the live Horus scheduler places queued
jobs and dispatches them to the Celery broker; no worker needs to run). Prints one JSON line:
p50 / p99 / max submission wall time (ms) and the load average. Not a test: timings only.

    DATABASE_URL=postgres://.../tandem_<you> CELERY_BROKER_URL=redis://.../<db> \\
        nice python bench/placement_live.py --jobs 40
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Job submission latency of live placement with 6,748 GPUs (one JSON line)")
    ap.add_argument("--jobs", type=int, default=40, help="submissions to time (default 40)")
    ap.add_argument("--model", default="resnet18", help="torchvision model of every job (default resnet18)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from webapp.models import Cluster, GPUDevice, Job, Node
    from webapp.services import job_submit

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-live-placement")
    name = "bench-6748"
    Cluster.objects.filter(name=name).delete()
    cluster = Cluster.objects.create(name=name)
    nodes = Node.objects.bulk_create([Node(cluster=cluster, name=f"n{i}", cpu_cores=64, memory_mib=512 * 1024)
                                      for i in range(844)])
    GPUDevice.objects.bulk_create([GPUDevice(node=n, index=g, model="V100", memory_mib=16384)
                                   for k, n in enumerate(nodes) for g in range(8 if k < 843 else 4)])
    n_gpus = GPUDevice.objects.filter(node__cluster=cluster).count()
    times = []
    try:
        job_submit(owner=user, model_name=args.model, batch_size=32, num_gpus=1)  # warm caches (not timed)
        for _ in range(args.jobs):
            t = time.perf_counter()
            job_submit(owner=user, model_name=args.model, batch_size=32, num_gpus=1)
            times.append((time.perf_counter() - t) * 1000)
    finally:
        Job.objects.filter(owner=user).delete()
        cluster.delete()
    a = np.array(times)
    print(json.dumps({"bench": "placement_live", "gpus": n_gpus, "jobs": len(a),
                      "submit_p50_ms": round(float(np.percentile(a, 50)), 1),
                      "submit_p99_ms": round(float(np.percentile(a, 99)), 1), "submit_max_ms": round(float(a.max()), 1),
                      "loadavg": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
