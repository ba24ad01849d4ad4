"""Unit tests of the energy meter: hand-computed estimate, RAPL wrap-around on a fake sysfs."""
from __future__ import annotations

from collections import namedtuple

import pytest

from tuning.backends import energy
from tuning.backends.energy import EnergyReading, EstimatedEnergyMeter, RaplEnergyMeter, make_energy_meter

CpuTimes = namedtuple("CpuTimes", "user system children_user children_system")


class FakeProcess:
    def __init__(self, pid, times, kids=()):
        self.pid, self._times, self._kids = pid, times, kids

    def cpu_times(self):
        return self._times

    def children(self, recursive=False):
        return list(self._kids)


class FakePsutil:
    """Just enough of psutil for process_tree_cpu_seconds."""

    class Error(Exception):
        pass

    def __init__(self):
        self.tree = {}

    def Process(self, pid):  # noqa: N802 - psutil's name
        return self.tree[pid]


def test_process_tree_cpu_seconds_sums_self_children_and_exited_children():
    ps = FakePsutil()
    child = FakeProcess(2, CpuTimes(3.0, 1.0, 0.0, 0.0))
    ps.tree[1] = FakeProcess(1, CpuTimes(2.0, 0.5, 4.0, 0.5), kids=[child])
    # 2.0 + 0.5 + 4.0 + 0.5 (exited children) + 3.0 + 1.0 (live child) = 11.0
    assert energy.process_tree_cpu_seconds(ps, pid=1) == pytest.approx(11.0)


@pytest.mark.parametrize(
    "watts,cpu_before,cpu_after,expected_j",
    [
        (5.0, 10.0, 13.0, 15.0),  # 3 CPU-s x 5 W
        (4.375, 0.0, 8.0, 35.0),  # 8 CPU-s x 280/64 W
        (2.0, 1.0, 1.0, 0.0),  # idle
    ],
)
def test_estimate_is_cpu_seconds_times_watts(watts, cpu_before, cpu_after, expected_j):
    ps = FakePsutil()
    ps.tree[7] = FakeProcess(7, CpuTimes(cpu_before, 0.0, 0.0, 0.0))
    m = EstimatedEnergyMeter(watts, cpu_seconds=lambda: energy.process_tree_cpu_seconds(ps, pid=7))
    ps.tree[7] = FakeProcess(7, CpuTimes(cpu_after / 2, cpu_after / 2, 0.0, 0.0))
    r = m.read()
    assert r.joules == pytest.approx(expected_j)
    assert (r.source, r.measured) == ("estimate", False)


def test_default_watts_from_env(monkeypatch):
    monkeypatch.setenv("TANDEM_WATTS_PER_CORE", "10")
    m = EstimatedEnergyMeter(cpu_seconds=iter([1.0, 3.5]).__next__)
    assert m.watts_per_core == 10.0
    assert m.read().joules == pytest.approx(25.0)
    monkeypatch.delenv("TANDEM_WATTS_PER_CORE")
    assert EstimatedEnergyMeter(cpu_seconds=lambda: 0.0).watts_per_core == pytest.approx(280 / 64)


def test_estimate_never_decreases_when_children_vanish():
    m = EstimatedEnergyMeter(2.0, cpu_seconds=iter([0.0, 5.0, 3.0]).__next__)
    assert m.read().joules == pytest.approx(10.0)
    assert m.read().joules == pytest.approx(10.0)


def _domain(root, name, value, max_range=1000):
    d = root / name
    d.mkdir()
    (d / "energy_uj").write_text(f"{value}\n")
    (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    return d


def test_rapl_wraparound(tmp_path):
    pkg = _domain(tmp_path, "intel-rapl:0", 900, max_range=999)
    _domain(tmp_path, "intel-rapl:0:0", 5)  # sub-domain: not summed
    m = RaplEnergyMeter(tmp_path)
    (pkg / "energy_uj").write_text("950\n")
    assert m.read().joules == pytest.approx(50e-6)
    (pkg / "energy_uj").write_text("100\n")  # wrapped: 950 -> 999 -> 0 -> 100 = 50 + 100 uJ more
    r = m.read()
    assert r.joules == pytest.approx((50 + 50 + 100) * 1e-6)
    assert (r.source, r.measured) == ("rapl", True)


def test_rapl_sums_packages(tmp_path):
    a = _domain(tmp_path, "intel-rapl:0", 0, max_range=10**9)
    b = _domain(tmp_path, "intel-rapl:1", 1000, max_range=10**9)
    m = RaplEnergyMeter(tmp_path)
    (a / "energy_uj").write_text("2000000\n")
    (b / "energy_uj").write_text("3001000\n")
    assert m.read().joules == pytest.approx(5.0)


def test_make_energy_meter_falls_back_to_estimate_without_rapl(tmp_path):
    m = make_energy_meter("cpu", watts_per_core=3.0, rapl_root=tmp_path)
    assert isinstance(m, EstimatedEnergyMeter)
    assert "assumed" in m.sources
    r = m.read()
    assert isinstance(r, EnergyReading) and r.source == "estimate" and not r.measured


def test_make_energy_meter_prefers_rapl(tmp_path):
    _domain(tmp_path, "intel-rapl:0", 1)
    assert make_energy_meter("cpu", rapl_root=tmp_path).read().source == "rapl"


@pytest.mark.parametrize("bad", ["tpu", "metal"])
def test_unknown_device(bad):
    with pytest.raises(ValueError, match="unknown device"):
        make_energy_meter(bad)


def test_reading_difference():
    d = EnergyReading(10.0, 4.0, "rapl", True) - EnergyReading(4.0, 1.0, "rapl", True)
    assert (d.joules, d.seconds) == (6.0, 3.0)
