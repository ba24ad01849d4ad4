from django.apps import AppConfig


class WebappConfig(AppConfig):
    """The platform app: clusters, nodes, GPUs, jobs, experiments, the API root and dashboard."""

    name = "webapp"
    verbose_name = "Tandem platform"

    def ready(self) -> None:
        import workers.celery  # noqa: F401 - binds @shared_task to Tandem's Celery app in every process
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_save

        from .authentication import revoke_tokens_on_password_change

        pre_save.connect(revoke_tokens_on_password_change, sender=get_user_model(), dispatch_uid="tandem-revoke-tokens")

        from .demo import register_demo_step
        from .demo_platform import platform_demo
        from .experiments import ExperimentKind, register_experiment_kind
        from .serializers import TrainingProbeParameters
        from .services import training_probe_run

        register_experiment_kind(
            ExperimentKind(
                kind="training-probe", run=training_probe_run,
                parameters_serializer=TrainingProbeParameters, queue="cpu",
            )
        )
        register_demo_step("platform", platform_demo, order=10)
