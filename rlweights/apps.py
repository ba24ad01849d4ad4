from django.apps import AppConfig


class RlweightsConfig(AppConfig):
    name = "rlweights"

    def ready(self) -> None:
        # Engines register their experiment kinds here (webapp.experiments.register_experiment_kind).
        pass
