"""WSGI entry point (gunicorn webapp.wsgi; runserver through ``WSGI_APPLICATION``).

The process warms up before it serves (:func:`warm_up`): the first job submission in each server
process used to import torch and torchvision (~3 s, more on a busy machine) inside the request,
so a cold server answered its first submissions after the client's timeout."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")
application = get_wsgi_application()


def warm_up() -> None:
    """Load what every job submission needs (torchvision's model list, the placement zoo's graph
    features) now, once per server process, instead of in a request."""
    from webapp.backends.training import torchvision_model_names
    from webapp.jobs import get_job_scheduler

    torchvision_model_names()
    validate_tables = getattr(get_job_scheduler(), "warm_up", None)
    if validate_tables is not None:
        validate_tables()
    # the URLconf imports every view, serializer and engine API module: resolve it now, not in
    # each worker's first request
    from django.urls import get_resolver

    get_resolver().url_patterns
    # What is loaded now lives as long as the process: keep it out of the cyclic garbage
    # collector's scans. After this warm-up a process holds about 430,000 objects (torch,
    # torchvision, Django, DRF) and one full collection over them took ~210 ms, during which
    # every request thread of the worker waits (bench/api_load.py at 300/s: seconds with a p50
    # over 100 ms without the freeze, p99 72-87 ms with it). Under ``gunicorn --preload`` the
    # workers fork after this and share the frozen objects.
    import gc

    gc.collect()
    gc.freeze()


if os.environ.get("TANDEM_WARM_UP", "1") != "0":
    warm_up()
