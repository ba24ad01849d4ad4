"""Option ``search``: MetaSchedule's evolutionary-search settings, checked at submission and
handed to every task's tune context (real TVM objects, no mocks)."""
import pytest

from tuning.backends.options import SEARCH_FIELDS, search_settings, validate_options


def test_defaults_are_tvm_defaults():
    import inspect

    from tvm.s_tir.meta_schedule.search_strategy import EvolutionarySearch

    tvm_defaults = {k: p.default for k, p in inspect.signature(EvolutionarySearch.__init__).parameters.items()
                    if k != "self"}
    assert search_settings({}) == tvm_defaults
    assert set(SEARCH_FIELDS) == set(tvm_defaults)


@pytest.mark.parametrize("search, needle", [
    ([], "must be an object"),
    ({"population": 64}, "unknown search setting"),
    ({"population_size": 1}, "search.population_size"),
    ({"population_size": 64.0}, "search.population_size"),
    ({"population_size": True}, "search.population_size"),
    ({"genetic_mutate_prob": 1.5}, "search.genetic_mutate_prob"),
    ({"eps_greedy": "0.1"}, "search.eps_greedy"),
    ({"population_size": 16, "init_min_unmeasured": 50}, "must not exceed"),
])
def test_bad_search_settings_are_refused_naming_the_field(search, needle):
    with pytest.raises(ValueError, match=needle):
        validate_options({"search": search}, num_threads=1, scheduler="gradient", runner="local")


def test_settings_reach_every_tasks_context(tmp_path):
    from tvm.s_tir import meta_schedule as ms

    from tuning.pipeline import extract_tasks, load_model, tune_contexts
    from tuning.backends.targets import make_target

    model = load_model({"model": "convnet"})
    tasks = extract_tasks(model, make_target("llvm", 1))
    assert len(tasks) >= 2
    contexts, weights = tune_contexts(tasks, tmp_path, 1, 0, {"population_size": 24, "init_min_unmeasured": 8})
    assert len(contexts) == len(tasks) == len(weights)
    strategies = [c.search_strategy for c in contexts]
    assert all(isinstance(s, ms.search_strategy.EvolutionarySearch) for s in strategies)
    assert [s.population_size for s in strategies] == [24] * len(tasks)
    assert [s.init_min_unmeasured for s in strategies] == [8] * len(tasks)
    assert len({id(s) for s in strategies}) == len(tasks)  # one per task, not a shared object
    default, _ = tune_contexts(tasks[:1], tmp_path, 1, 0, None)
    assert default[0].search_strategy.population_size == 512


@pytest.mark.parametrize("value", [0, -1, 1025, 1.0, True, "2", None])
def test_bad_search_threads_are_refused(value):
    with pytest.raises(ValueError, match="search_threads"):
        validate_options({"search_threads": value}, num_threads=2, scheduler="gradient", runner="local")


def test_search_threads_is_accepted_with_every_scheduler():
    for scheduler in ("gradient", "round-robin", "trimmer"):
        validate_options({"search_threads": 1}, num_threads=2, scheduler=scheduler, runner="doppler")
