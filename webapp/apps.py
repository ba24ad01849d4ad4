from django.apps import AppConfig


class WebappConfig(AppConfig):
    """The platform app: clusters, nodes, GPUs, jobs, experiments, the API root and dashboard."""

    name = "webapp"
    verbose_name = "Tandem platform"
