from django.apps import AppConfig


class TuningConfig(AppConfig):
    name = "tuning"

    def ready(self) -> None:
        # Engines register their experiment kinds here (webapp.experiments.register_experiment_kind).
        pass
