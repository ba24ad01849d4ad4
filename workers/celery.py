"""The Celery app. Queues by capability: ``cpu`` (simulation, weight learning, federation,
jobs) and ``gpu`` (tuning measurement and GPU profiling on GPU nodes)."""
from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")

app = Celery("tandem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("cpu"), Queue("gpu"))
app.autodiscover_tasks(["workers"], related_name="tasks")
app.conf.imports = (
    "workers.tasks.platform",
    "workers.tasks.placement",
    "workers.tasks.tuning",
    "workers.tasks.rlweights",
    "workers.tasks.federation",
)

# ``--gpu``: report this node's GPUs through NVML at start and on a heartbeat (workers/gpu.py).
from click import Option  # noqa: E402

from .gpu import GPUReporter  # noqa: E402

app.user_options["worker"].add(
    Option(("--gpu",), is_flag=True, default=False, help="Report this node's NVIDIA GPUs (NVML) at start and every 60 s.")
)
app.steps["worker"].add(GPUReporter)

# filesystem broker only: fail work left ``running`` by a killed worker (workers/recovery.py)
from . import recovery  # noqa: E402,F401
# Redis: every worker must use the same visibility timeout (workers/visibility.py)
from . import visibility  # noqa: E402,F401
# Redis: a broker restart must not stop the worker (kombu bug, workers/broker_fixes.py)
from .broker_fixes import apply as _survive_broker_restarts  # noqa: E402

_survive_broker_restarts()
