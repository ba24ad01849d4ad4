from django.apps import AppConfig


class TuningConfig(AppConfig):
    name = "tuning"

    def ready(self) -> None:
        from webapp.experiments import ExperimentKind, register_experiment_kind

        from .api import TuningParameters
        from .experiment import tuning_experiment_run, tuning_headline, tuning_page
        from .services import queue_for_parameters

        register_experiment_kind(ExperimentKind(
            kind="tuning", run=tuning_experiment_run, parameters_serializer=TuningParameters,
            queue="cpu", route=queue_for_parameters, headline=tuning_headline,
            page=tuning_page))
        try:
            from webapp.demo import register_demo_step

            from .demo import run_tuning_demo

            register_demo_step("tuning", run_tuning_demo, order=40)
        except ImportError:  # demo module not written yet
            pass
