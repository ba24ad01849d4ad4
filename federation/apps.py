from django.apps import AppConfig


class FederationConfig(AppConfig):
    """Federation engine: inter-cluster aware placement and the micro-benchmark harness."""

    name = "federation"

    def ready(self) -> None:
        from webapp.demo import register_demo_step
        from webapp.experiments import ExperimentKind, register_experiment_kind

        from .serializers import FederationBenchmarkParameters, FederationPlanParameters
        from .services import federation_benchmark_run, federation_demo, federation_plan_run

        register_experiment_kind(ExperimentKind(kind="federation-plan", run=federation_plan_run,
                                                parameters_serializer=FederationPlanParameters, queue="cpu"))
        register_experiment_kind(ExperimentKind(kind="federation-benchmark", run=federation_benchmark_run,
                                                parameters_serializer=FederationBenchmarkParameters, queue="cpu"))
        register_demo_step("federation", federation_demo, order=60)
