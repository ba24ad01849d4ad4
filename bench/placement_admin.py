"""Admin page times at the demo's scale: 6,748 GPUs registered (issue 21: the job page took
13-17 s with a select of every GPU).

Creates (in ``DATABASE_URL``, a scratch database: what it makes is deleted at the end) one
cluster of 843 nodes x 8 + 1 x 4 V100s, a superuser and one job on one GPU with a placement
decision, then times ``--repeats`` GETs (Django test client, in process, so no network) of the
job change page, the decision change page and the GPU list. Prints one JSON line: median and
max ms per page, the page size and the load average. Not a test: timings only.

    DATABASE_URL=postgres://.../tandem_<you> nice python bench/placement_admin.py
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
    ap = argparse.ArgumentParser(description="Admin page times with 6,748 GPUs registered (one JSON line)")
    ap.add_argument("--repeats", type=int, default=5, help="GETs per page (default 5)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")
    import django

    django.setup()
    import numpy as np
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from placement.models import PlacementDecision
    from webapp.models import Cluster, GPUDevice, Job, Node

    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS.append("testserver")
    call_command("migrate", verbosity=0)
    User = get_user_model()
    User.objects.filter(username="bench-admin").delete()
    admin = User.objects.create_superuser("bench-admin", password="x")
    name = "bench-admin-6748"
    Cluster.objects.filter(name=name).delete()
    cluster = Cluster.objects.create(name=name)
    nodes = Node.objects.bulk_create([Node(cluster=cluster, name=f"n{i}", cpu_cores=64, memory_mib=512 * 1024)
                                      for i in range(844)])
    gpus = GPUDevice.objects.bulk_create([GPUDevice(node=n, index=g, model="V100", memory_mib=16384)
                                          for k, n in enumerate(nodes) for g in range(8 if k < 843 else 4)])
    out = {"bench": "placement_admin", "gpus": GPUDevice.objects.count()}
    try:
        job = Job.objects.create(owner=admin, model_name="resnet18", batch_size=32, num_gpus=1, cluster=cluster)
        job.gpus.set(gpus[:1])
        d = PlacementDecision.objects.create(job=job, policy="horus", gpu_ids=[gpus[0].pk],
                                             predicted_util_pct=10.0, predicted_memory_mib=1000.0)
        c = Client()
        c.force_login(admin)
        pages = {"job_change": f"/admin/webapp/job/{job.pk}/change/",
                 "decision_change": f"/admin/placement/placementdecision/{d.pk}/change/",
                 "gpu_list": "/admin/webapp/gpudevice/"}
        for key, url in pages.items():
            c.get(url)  # warm (templates, session)
            ms, size = [], 0
            for _ in range(args.repeats):
                t = time.perf_counter()
                r = c.get(url)
                ms.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {r.status_code}")
                size = len(r.content)
            out[key] = {"median_ms": round(float(np.median(ms)), 1), "max_ms": round(max(ms), 1), "bytes": size}
    finally:
        Job.objects.filter(owner=admin).delete()
        cluster.delete()
        admin.delete()
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
