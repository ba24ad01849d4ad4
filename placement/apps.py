from django.apps import AppConfig


class PlacementConfig(AppConfig):
    name = "placement"

    def ready(self) -> None:
        from webapp.jobs import register_job_scheduler

        from .services import LivePlacementScheduler

        register_job_scheduler(LivePlacementScheduler())
        try:
            from .experiment import register

            register()
        except ImportError:  # pragma: no cover - experiment module optional during bring-up
            pass
