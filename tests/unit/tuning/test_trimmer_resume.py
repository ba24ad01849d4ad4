"""Resume: Trimmer's per-task best comes from the tuning database of the interrupted run.

``database_best_seconds`` is tested on a stand-in for MetaSchedule's ``Database`` (the three
methods it calls); the expected seconds are the means of the records' run times, by hand.
"""
from types import SimpleNamespace

import pytest

from tuning.backends.trimmer import database_best_seconds


class FakeDatabase:
    """Holds records for one workload ``"mod"``; ``get_top_k`` sorts by mean run time as
    MetaSchedule's JSONDatabase does."""

    def __init__(self, run_secs_lists):
        self.records = [SimpleNamespace(run_secs=r) for r in run_secs_lists]

    def has_workload(self, mod):
        return mod == "mod" and bool(self.records)

    def commit_workload(self, mod):
        return mod

    def get_top_k(self, workload, k):
        valid = [r for r in self.records if r.run_secs]
        return sorted(valid, key=lambda r: sum(r.run_secs) / len(r.run_secs))[:k]


@pytest.mark.parametrize(
    "records, expected",
    [
        ([[2.0e-3, 2.2e-3], [3.0e-3]], 2.1e-3),   # best record's mean: (2.0 + 2.2) / 2 ms
        ([[1e10], [4.0e-3]], 4.0e-3),             # a failed build/run (MetaSchedule's 1e10 s) sorts last
        ([[1e10]], None),                          # only failures: nothing to seed with
        ([], None),                                # fresh database
    ],
)
def test_database_best_seconds(records, expected):
    got = database_best_seconds(FakeDatabase(records), "mod")
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_no_database_means_no_seed():
    assert database_best_seconds(None, "mod") is None
