from django.apps import AppConfig


class RlweightsConfig(AppConfig):
    name = "rlweights"

    def ready(self) -> None:
        from .experiment import register

        register()
