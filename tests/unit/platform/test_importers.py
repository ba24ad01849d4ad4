"""Node-file parsing: Kubernetes quantities, v1/Node YAML and the PAI machine-spec CSV.

Expected values are read by hand from the files under data/ (see each test)."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from webapp.importers import (
    NodeImportError, cpu_cores, memory_mib, parse_k8s_nodes, parse_node_file, parse_pai_machine_spec, parse_quantity,
    unknown_gpu_warnings,
)

DATA = Path(__file__).resolve().parents[3] / "data"
K8S = DATA / "k8s-scheduler-sim-examples"
PAI = DATA / "alibaba-pai-gpu-2020" / "pai_machine_spec.csv"


@pytest.mark.parametrize(
    "text, value",
    [
        ("64", Decimal(64)), (64, Decimal(64)), ("500m", Decimal("0.5")), ("3500m", Decimal("3.5")),
        ("256000Mi", Decimal(256000 * 2**20)), ("32Gi", Decimal(32 * 2**30)), ("1Ki", Decimal(1024)),
        ("1k", Decimal(1000)), ("1G", Decimal(10**9)), ("1e3", Decimal(1000)), ("1.5Gi", Decimal(3 * 2**29)),
        ("100n", Decimal("1e-7")), (".5", Decimal("0.5")),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "12XB", "1.2.3", "-1", "Gi", None, True, "1 Gi"])
def test_parse_quantity_rejects(bad):
    with pytest.raises(NodeImportError):
        parse_quantity(bad)


@pytest.mark.parametrize("text, mib", [("256000Mi", 256000), ("32Gi", 32768), ("1G", 953), ("1048576Ki", 1024), ("1Ti", 1048576)])
def test_memory_mib(text, mib):
    assert memory_mib(text) == mib


def test_cpu_cores_millis():
    assert cpu_cores("250m") == 0.25


def test_hkust_example_nodes():
    # pai-node-00.yaml: cpu 64, memory 256000Mi, alibabacloud.com/gpu-count '2', gpu-card-model V100
    # pai-node-01.yaml: same with gpu-count "4"
    specs = []
    for f in sorted((K8S / "hkust-adsl/example/test-cluster/node").glob("*.yaml")):
        specs += parse_node_file(f)[1]
    assert [(s.name, s.cpu_cores, s.memory_mib, s.gpu_count, s.gpu_model, s.gpu_memory_mib) for s in specs] == [
        ("pai-node-00", 64.0, 256000, 2, "V100", 16384),
        ("pai-node-01", 64.0, 256000, 4, "V100", 16384),
    ]
    assert specs[0].labels["node-ip"] == "192.168.0.100"
    assert specs[0].labels["node-role.kubernetes.io/master"] == ""


def test_kubernetes_sigs_template_is_not_a_node_object():
    # the simulator's node template has neither kind nor metadata.name (only generateName)
    with pytest.raises(NodeImportError, match="expected apiVersion v1, kind Node; got kind None"):
        parse_node_file(K8S / "kubernetes-sigs/templates/node.yaml")


def test_pod_file_is_wrong_kind():
    with pytest.raises(NodeImportError, match="kind Node; got kind 'Pod'"):
        parse_node_file(K8S / "hkust-adsl/example/test-cluster/pod/gpu-pod-00.yaml")


NODE = """apiVersion: v1
kind: Node
metadata: {name: %s, labels: {nvidia.com/gpu.product: T4}}
spec:
  taints: [{key: gpu, value: "true", effect: NoSchedule}]
status:
  allocatable: {cpu: 7500m, memory: 30Gi, nvidia.com/gpu: "%s"}
"""


def test_list_multi_doc_taints_and_nvidia_gpus():
    text = NODE % ("a", 1) + "---\n" + "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        "- " + "\n  ".join((NODE % (n, 2)).splitlines()) + "\n" for n in ("b", "c"))
    specs = parse_k8s_nodes(text)
    assert [(s.name, s.cpu_cores, s.memory_mib, s.gpu_count, s.gpu_model, s.gpu_memory_mib) for s in specs] == [
        ("a", 7.5, 30720, 1, "T4", 16384), ("b", 7.5, 30720, 2, "T4", 16384), ("c", 7.5, 30720, 2, "T4", 16384),
    ]
    assert specs[0].taints == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    "text, message",
    [
        ("apiVersion: v1\nkind: Node\nmetadata: {name: x}\nstatus: {allocatable: {cpu: lots, memory: 1Gi}}", "not a Kubernetes quantity: 'lots'"),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: x}\nstatus: {allocatable: {memory: 1Gi}}", "missing status.allocatable.cpu"),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: x}\n", "missing status.allocatable and status.capacity"),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: x}\nstatus: {allocatable: {cpu: 1, memory: 1Gi, nvidia.com/gpu: 1500m}}", "not a whole number"),
        (NODE % ("a", 1) + "---\n" + NODE % ("a", 1), "appears twice"),
        ("kind: Node\n  bad: [", "not valid YAML"),
        ("apiVersion: v1\nkind: Node\nmetadata: {generateName: node-}\nstatus: {allocatable: {cpu: 1, memory: 1Gi}}", "missing metadata.name"),
    ],
)
def test_bad_yaml_is_refused_with_reason(text, message):
    with pytest.raises(NodeImportError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_k8s_nodes(text, source="f.yaml")


def test_pai_machine_spec_real_file():
    # Counts by gpu_type from SOURCE.md: P100 798, T4 497, MISC 280, V100M32 135, V100 104, CPU 83;
    # they sum to 1,897 (= `wc -l`, all machine ids distinct; SOURCE.md's "1,896 machines" is off by one).
    specs = parse_pai_machine_spec(PAI.read_text())
    assert len(specs) == 1897
    by = {}
    for s in specs:
        by[s.labels["gpu_type"]] = by.get(s.labels["gpu_type"], 0) + 1
    assert by == {"P100": 798, "T4": 497, "MISC": 280, "V100M32": 135, "V100": 104, "CPU": 83}
    # line 1: 7399a758eb02bae1a3621236,CPU,96,512,0
    first = specs[0]
    assert (first.name, first.cpu_cores, first.memory_mib, first.gpu_count, first.gpu_model) == ("7399a758eb02bae1a3621236", 96.0, 512 * 1024, 0, "")
    # every P100 machine in the file: 64 cores, 512 GB, 2 GPUs; V100M32: 96 cores, 384 GB, 8 GPUs of 32 GiB
    p100 = [s for s in specs if s.labels["gpu_type"] == "P100"]
    assert {(s.cpu_cores, s.memory_mib, s.gpu_count, s.gpu_memory_mib) for s in p100} == {(64.0, 524288, 2, 16384)}
    v32 = [s for s in specs if s.labels["gpu_type"] == "V100M32"]
    assert {(s.cpu_cores, s.memory_mib, s.gpu_count, s.gpu_memory_mib) for s in v32} == {(96.0, 393216, 8, 32768)}
    assert sum(s.gpu_count for s in specs) == 798 * 2 + 497 * 2 + 280 * 8 + 135 * 8 + 104 * 8


@pytest.mark.parametrize(
    "text, message",
    [
        ("m1,T4,96,512,2\nm2,T4,96,512\n", "line 2: expected 5 columns"),
        ("m1,T4,96,512,2\nm2,T4,96,lots,2\n", "line 2: cap_cpu, cap_mem, cap_gpu must be numbers"),
        ("m1,T4,96,512,-2\n", "line 1: negative capacity"),
        ("m1,T4,96,512,2\nm1,T4,96,512,2\n", "'m1' appears twice"),
        (",T4,96,512,2\n", "line 1: empty machine id"),
        ("", "no rows"),
    ],
)
def test_bad_pai_rows_name_the_line(text, message):
    with pytest.raises(NodeImportError, match=message):
        parse_pai_machine_spec(text, source="spec.csv")


@pytest.mark.parametrize(
    "text, message",
    [
        # the reported OOM row: 10**20 GPUs would be 10**20 GPU rows
        ("m1,V100,96,512,99999999999999999999\n", r"line 1 \(machine m1\): 99999999999999999999 GPUs exceeds the limit of 64 per node"),
        ("m1,T4,96,512,2\nm2,T4,96,512,65\n", r"line 2 \(machine m2\): 65 GPUs exceeds the limit of 64"),
        ("m1,T4,4097,512,2\n", r"line 1 \(machine m1\): 4097 CPU cores exceeds the limit of 4096"),
        # 65537 GiB = 67109888 MiB > 64 TiB = 67108864 MiB
        ("m1,T4,96,65537,2\n", r"67109888 MiB of memory exceeds the limit of 67108864 MiB \(64 TiB\)"),
        ("m1,T4,nan,512,2\n", r"line 1 \(machine m1\): cap_cpu and cap_mem must be finite"),
        ("m1,T4,96,inf,2\n", r"line 1 \(machine m1\): cap_cpu and cap_mem must be finite"),
    ],
)
def test_pai_capacity_limits(text, message):
    with pytest.raises(NodeImportError, match=message):
        parse_pai_machine_spec(text, source="spec.csv")


def test_pai_capacity_at_the_limits_is_accepted():
    # 64 GPUs, 4096 cores, 65536 GiB = 64 TiB exactly
    (spec,) = parse_pai_machine_spec("m1,H100,4096,65536,64\n")
    assert (spec.gpu_count, spec.cpu_cores, spec.memory_mib) == (64, 4096.0, 67108864)


def _k8s(cpu="64", memory="256Gi", gpus="8", labels=""):
    return (
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n" + labels
        + f"status:\n  allocatable:\n    cpu: '{cpu}'\n    memory: '{memory}'\n    nvidia.com/gpu: '{gpus}'\n"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (_k8s(gpus="1e20"), r"document 1 \(node n1\): 100000000000000000000 GPUs exceeds the limit of 64 per node"),
        (_k8s(gpus="65"), r"\(node n1\): 65 GPUs exceeds the limit of 64"),
        (_k8s(cpu="4097"), r"\(node n1\): 4097 CPU cores exceeds the limit of 4096"),
        (_k8s(memory="65Ti"), r"\(node n1\): 68157440 MiB of memory exceeds the limit of 67108864 MiB"),
        (_k8s(labels="  labels:\n    nvidia.com/gpu.memory: '2000000'\n"), r"\(node n1\): 2000000 MiB per GPU exceeds the limit of 1048576"),
    ],
)
def test_k8s_capacity_limits(text, message):
    with pytest.raises(NodeImportError, match=message):
        parse_k8s_nodes(text, source="n.yaml")


def test_unknown_gpu_type_is_a_warning():
    specs = parse_pai_machine_spec("m1,FOO,96,512,2\nm2,T4,96,512,2\nm3,FOO,8,64,1\nm4,CPU,8,64,0\n")
    assert [(s.name, s.gpu_model, s.gpu_memory_mib) for s in specs] == [
        ("m1", "FOO", 0), ("m2", "T4", 16384), ("m3", "FOO", 0), ("m4", "", 0)
    ]
    assert unknown_gpu_warnings(specs) == ["GPU type 'FOO' is unknown (0 MiB assumed) on 2 node(s): m1, m3"]


def test_a_missing_node_file_is_named_as_missing(tmp_path):
    # found by a fresh-clone try: "cannot tell the format from the extension" for a path that does not exist
    with pytest.raises(NodeImportError, match="no such file"):
        parse_node_file(tmp_path / "nonexistent")
    with pytest.raises(NodeImportError, match="not a file"):
        parse_node_file(tmp_path)
