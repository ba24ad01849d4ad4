from django.apps import AppConfig


class FederationConfig(AppConfig):
    name = "federation"

    def ready(self) -> None:
        # Engines register their experiment kinds here (webapp.experiments.register_experiment_kind).
        pass
