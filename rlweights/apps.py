from django.apps import AppConfig


class RlweightsConfig(AppConfig):
    name = "rlweights"

    def ready(self) -> None:
        from webapp.demo import register_demo_step
        from webapp.experiments import ExperimentKind, register_experiment_kind

        from .api import WeightLearningParams
        from .demo import run_demo
        from django.urls import reverse

        from .headline import weight_learning_headline
        from .services import weight_learning_run

        register_experiment_kind(ExperimentKind(
            kind="weight-learning", run=weight_learning_run, parameters_serializer=WeightLearningParams, queue="cpu",
            headline=weight_learning_headline, page=lambda e: reverse("rlweights:experiment", args=[e.pk])))
        register_demo_step("rlweights", run_demo, order=40)
