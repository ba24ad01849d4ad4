from django.apps import AppConfig


class FederationConfig(AppConfig):
    """Federation engine: inter-cluster aware placement and the micro-benchmark harness."""

    name = "federation"

    def ready(self) -> None:
        from webapp.demo import register_demo_step
        from webapp.experiments import ExperimentKind, register_experiment_kind

        from . import experiment as e

        register_experiment_kind(ExperimentKind(kind="federation-plan", run=e.plan_run, parameters_serializer=e.FederationPlanParameters,
                                                queue="cpu", headline=e.plan_headline, page=e.page))
        register_experiment_kind(ExperimentKind(kind="federation-benchmark", run=e.benchmark_run,
                                                parameters_serializer=e.FederationBenchmarkParameters, queue="cpu",
                                                headline=e.benchmark_headline, page=e.page))
        register_demo_step("federation", e.federation_demo, order=60)
