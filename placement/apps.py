from django.apps import AppConfig


class PlacementConfig(AppConfig):
    name = "placement"

    def ready(self) -> None:
        # Engines register their experiment kinds here (webapp.experiments.register_experiment_kind).
        pass
