"""Operator inputs of a weight-learning experiment (rlweights/inputs.py, the trace parser in
core/workload.py, ``pipeline.check_inputs``): node tables and arrival traces parsed, validated
with errors that name the parameter and the line, and described by name, rows and SHA-256.
Expected values are worked out by hand from the texts below."""
import hashlib

import numpy as np
import pytest

from rlweights import pipeline
from rlweights.core.scheduler import Node
from rlweights.core.serverless import simulate
from rlweights.core.workload import (DEFAULT_AZURE_SAMPLE, MAX_TRACE_ROWS, WorkloadError, parse_azure_trace,
                                     replay_workload)
from rlweights.inputs import (MAX_NODE_ROWS, InputError, cluster_descriptor, detect_node_table_format, parse_node_table,
                              parse_workload, setup_from_cluster)
from webapp.plug import Collect

GiB = 2**30
PAI = "m-a,CPU,16,64,0\nm-b,T4,32,128,2\n"
K8S = """apiVersion: v1
kind: Node
metadata:
  name: k1
  labels: {topology.kubernetes.io/zone: z1}
spec:
  taints: [{key: gpu, value: "yes", effect: PreferNoSchedule}]
status:
  allocatable: {cpu: "7500m", memory: 32Gi, nvidia.com/gpu: "2"}
---
apiVersion: v1
kind: Node
metadata: {name: k2}
status:
  capacity: {cpu: 4, memory: 8192Mi}
"""
TRACE = """app,func,end_timestamp,duration
appA,f1,1.0,0.5
appA,f1,2.5,1.0
appA,f2,3.0,2.0
appB,g1,4.0,0.2
appA,f1,5.5,0.5
appB,g1,6.0,1.5
appA,f2,8.0,3.0
appB,g1,9.0,0.4
appA,f1,10.0,0.3
appB,g1,11.5,2.0
appA,f2,12.0,1.0
appA,f1,13.0,0.8
"""


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- node tables

def test_pai_table_as_the_importer_reads_it():
    cluster, desc = parse_node_table(PAI, name="lab")
    assert desc == {"source": "inline", "name": "lab", "format": "pai", "rows": 2, "sha256": sha(PAI)}
    # cap_mem is GB read as GiB: 64 x 1024 MiB; the importer labels the GPU type, no taints
    assert cluster == {"name": "lab", "nodes": [
        {"name": "m-a", "cpu_cores": 16.0, "memory_mib": 65536, "labels": {"gpu_type": "CPU"}, "taints": []},
        {"name": "m-b", "cpu_cores": 32.0, "memory_mib": 131072, "labels": {"gpu_type": "T4"}, "taints": []}]}
    setup = setup_from_cluster(cluster)
    assert [(n.name, n.cpu_milli, n.memory_bytes) for n in setup.nodes] == [("m-a", 16000, 64 * GiB), ("m-b", 32000, 128 * GiB)]
    assert setup.background == []


def test_pai_header_row_is_allowed_and_keeps_line_numbers():
    text = "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n" + PAI
    cluster, desc = parse_node_table(text)
    assert desc["rows"] == 2 and desc["sha256"] == sha(text) and desc["name"] == "node-table"
    assert [n["name"] for n in cluster["nodes"]] == ["m-a", "m-b"]


def test_pai_error_line_counts_the_header():
    text = "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm-a,CPU,16,64,0\nm-c,CPU,x,1,0\n"  # m-c is line 3
    with pytest.raises(InputError) as err:
        parse_node_table(text, name="t")
    assert err.value.field == "node_table"
    assert err.value.message == "t, line 3: cap_cpu, cap_mem, cap_gpu must be numbers, got 'x', '1', '0'"


def test_kubernetes_node_yaml_as_the_importer_reads_it():
    cluster, desc = parse_node_table(K8S, name="k")
    assert desc == {"source": "inline", "name": "k", "format": "k8s", "rows": 2, "sha256": sha(K8S)}
    a, b = cluster["nodes"]
    assert (a["name"], a["cpu_cores"], a["memory_mib"]) == ("k1", 7.5, 32768)
    assert a["labels"] == {"topology.kubernetes.io/zone": "z1"}
    assert a["taints"] == [{"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"}]
    assert (b["name"], b["cpu_cores"], b["memory_mib"]) == ("k2", 4.0, 8192)
    setup = setup_from_cluster(cluster)
    assert setup.nodes[0].cpu_milli == 7500 and setup.nodes[0].taints[0].effect == "PreferNoSchedule"


@pytest.mark.parametrize("text,fmt", [
    (PAI, "pai"), (K8S, "k8s"), ("# a comment\n\n" + PAI, "pai"), ("---\n" + K8S, "k8s"),
    ("apiVersion: v1\n", "k8s"), ("", "pai"),
])
def test_detect_node_table_format(text, fmt):
    assert detect_node_table_format(text) == fmt


BAD_TABLES = [
    ("", "pai", "the node table is empty"),
    ("  \n\n", "auto", "the node table is empty"),
    ("machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n", "pai", "t: no rows"),
    ("m-a,CPU,16,64\n", "pai", "t, line 1: expected 5 columns (machine,gpu_type,cap_cpu,cap_mem,cap_gpu), got 4"),
    ("m-a,CPU,sixteen,64,0\n", "pai", "t, line 1: cap_cpu, cap_mem, cap_gpu must be numbers"),
    ("m-a,CPU,nan,64,0\n", "pai", "t, line 1 (machine m-a): cap_cpu and cap_mem must be finite"),
    ("m-a,CPU,16,inf,0\n", "pai", "t, line 1 (machine m-a): cap_cpu and cap_mem must be finite"),
    ("m-a,CPU,-16,64,0\n", "pai", "t, line 1: negative capacity"),
    ("m-a,CPU,16,64,-1\n", "pai", "t, line 1: negative capacity"),
    ("m-a,CPU,16,64,0\nm-b,CPU,8,\x0032,0\n", "pai", "t, line 2: contains a NUL character"),
    ("m-a,CPU,0,64,0\n", "pai", "t: node m-a: allocatable CPU and memory must be positive"),
    ("m-a,CPU,16,0,0\n", "pai", "t: node m-a: allocatable CPU and memory must be positive"),
    ("m-a,CPU,16,64,0\nm-a,T4,8,32,1\n", "pai", "t: node 'm-a' appears twice"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: k}\nstatus: {allocatable: {cpu: 4}}\n", "auto",
     "t, document 1 (node k): missing status.allocatable.memory"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "auto", "t, document 1: expected apiVersion v1, kind Node; got kind 'Pod'"),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: k}\nstatus: {allocatable: {cpu: '-1', memory: 1Gi}}\n", "k8s",
     "t, document 1 (node k): negative quantity: '-1'"),
    ("key: [unclosed\n", "k8s", "t: not valid YAML"),
]


@pytest.mark.parametrize("text,fmt,message", BAD_TABLES)
def test_bad_node_tables_name_the_parameter_and_the_place(text, fmt, message):
    with pytest.raises(InputError) as err:
        parse_node_table(text, fmt=fmt, name="t")
    assert err.value.field == "node_table"
    assert err.value.message.startswith(message), err.value.message


def test_node_table_row_limit():
    rows = "".join(f"m{i},CPU,4,16,0\n" for i in range(MAX_NODE_ROWS + 1))
    with pytest.raises(InputError, match=f"{MAX_NODE_ROWS + 1} nodes; at most {MAX_NODE_ROWS}"):
        parse_node_table(rows, name="big")
    cluster, desc = parse_node_table(rows[: rows.index(f"m{MAX_NODE_ROWS},")], name="big")
    assert desc["rows"] == MAX_NODE_ROWS == len(cluster["nodes"])


def test_unknown_format_names_its_parameter():
    with pytest.raises(InputError) as err:
        parse_node_table(PAI, fmt="xlsx")
    assert err.value.field == "node_table_format"


def test_cluster_descriptor_hashes_canonical_json():
    cluster = {"name": "lab", "id": 4, "nodes": [{"name": "n0", "cpu_cores": 8.0, "memory_mib": 1024, "labels": {}, "taints": []}]}
    canon = '[{"cpu_cores":8.0,"labels":{},"memory_mib":1024,"name":"n0","taints":[]}]'
    assert cluster_descriptor(cluster) == {"source": "cluster", "name": "lab", "cluster_id": 4, "rows": 1, "sha256": sha(canon)}
    with pytest.raises(InputError) as err:
        cluster_descriptor({"name": "z", "nodes": [{"name": "n0", "cpu_cores": 0, "memory_mib": 1024}]})
    assert err.value.field == "cluster_id" and "allocatable CPU and memory must be positive" in err.value.message


# --------------------------------------------------------------------------- traces

def test_trace_rows_by_hand():
    rows, desc = parse_workload(TRACE, name="fn-trace")
    assert desc == {"source": "inline", "name": "fn-trace", "rows": 12, "functions": 3, "sha256": sha(TRACE)}
    # arrival = end - duration
    assert rows.arrival_s.tolist() == pytest.approx([0.5, 1.5, 1.0, 3.8, 5.0, 4.5, 5.0, 8.6, 9.7, 9.5, 11.0, 12.2])
    assert rows.duration_s.tolist() == [0.5, 1.0, 2.0, 0.2, 0.5, 1.5, 3.0, 0.4, 0.3, 2.0, 1.0, 0.8]
    assert rows.func_ids[:4] == ["appA/f1", "appA/f1", "appA/f2", "appB/g1"]
    wl = replay_workload(rows, np.random.default_rng(0), speedup=2.0, name="fn-trace")
    assert wl.name == "fn-trace-x2" and len(wl) == 12
    assert wl.arrival_s.tolist() == pytest.approx(sorted((a - 0.5) / 2 for a in rows.arrival_s))
    assert [f.func_id for f in wl.functions] == ["appA/f1", "appA/f2", "appB/g1"]


def test_trace_columns_may_come_in_any_order_with_extras_and_start_before_zero():
    rows = parse_azure_trace("duration,extra,end_timestamp,func,app\n1.0,x,0.5,f,a\n0.25,y,2,g,b\n")
    assert rows.func_ids == ["a/f", "b/g"]
    assert rows.arrival_s.tolist() == [0.0, 1.75]  # 0.5 - 1.0 < 0: clamped to the trace start


BAD_TRACES = [
    ("", "the workload is empty"),
    ("app,func,end_timestamp,duration\n", "w: no invocations"),
    ("app,func,end\na,f,1\n", "w, line 1: the header must name the columns app,func,end_timestamp,duration; missing duration, end_timestamp"),
    ("app,func,end_timestamp,duration\na,f,1\n", "w, line 2: expected at least 4 columns"),
    ("app,func,end_timestamp,duration\na,f,1,0.5\na,f,x,0.5\n", "w, line 3: end_timestamp and duration must be numbers, got 'x', '0.5'"),
    ("app,func,end_timestamp,duration\na,f,nan,0.5\n", "w, line 2: end_timestamp and duration must be finite"),
    ("app,func,end_timestamp,duration\na,f,1,inf\n", "w, line 2: end_timestamp and duration must be finite"),
    ("app,func,end_timestamp,duration\na,f,1,-0.5\n", "w, line 2: end_timestamp and duration must be >= 0"),
    ("app,func,end_timestamp,duration\na,f,-1,0.5\n", "w, line 2: end_timestamp and duration must be >= 0"),
    ("app,func,end_timestamp,duration\n,f,1,0.5\n", "w, line 2: empty app or func"),
    ("app,func,end_timestamp,duration\na,f,1,0.5\na,\x00f,2,0.5\n", "w, line 3: contains a NUL character"),
]


@pytest.mark.parametrize("text,message", BAD_TRACES)
def test_bad_traces_name_the_parameter_and_the_line(text, message):
    with pytest.raises(InputError) as err:
        parse_workload(text, name="w")
    assert err.value.field == "workload"
    assert err.value.message.startswith(message), err.value.message


def test_trace_row_limit():
    head = "app,func,end_timestamp,duration\n"
    with pytest.raises(WorkloadError, match="more than 3 invocations"):
        parse_azure_trace(head + "a,f,1,0.5\n" * 4, max_rows=3)
    assert len(parse_azure_trace(head + "a,f,1,0.5\n" * 3, max_rows=3).func_ids) == 3
    with pytest.raises(InputError, match=f"more than {MAX_TRACE_ROWS} invocations"):
        parse_workload(head + "a,f,1,0.5\n" * (MAX_TRACE_ROWS + 1))


# --------------------------------------------------------------------------- check_inputs and run

def params(**kw):
    return pipeline.LearnParams(mode="evaluate", budget=3, eval_seeds=[0], **kw)


def test_a_pod_that_fits_no_node_is_reported_and_one_where_none_fits_is_refused():
    # one node of 1 core, 1 GiB: a function fits iff its pod requests <= 1000 m and <= 1 GiB
    table = "solo,CPU,1,1,0\n"
    wl = replay_workload(parse_azure_trace(TRACE), np.random.default_rng(102))  # seed 0: profiles from 1000 * 0 + 102
    counts = {f.func_id: int((wl.func == k).sum()) for k, f in enumerate(wl.functions)}
    too_big = [f.func_id for f in wl.functions if f.cpu_milli > 1000 or f.memory_bytes > GiB]
    # the seeded profiles (assign_profiles, rng 102) request 500 m / 128 MiB, 8000 m / 256 MiB and
    # 500 m / 512 MiB: only appA/f2 is too big, and it has 3 of the 12 invocations (lines 4, 8, 12)
    assert too_big == ["appA/f2"] and counts["appA/f2"] == 3
    inputs = pipeline.check_inputs(params(node_table=table, node_table_name="solo", workload=TRACE, workload_name="t"))
    assert inputs["unschedulable"] == {"solo/t": {"functions": ["appA/f2"], "invocations": 3, "of": 12}}
    with pytest.raises(InputError) as err:
        pipeline.check_inputs(params(node_table="solo,CPU,0.1,1,0\n", workload=TRACE))
    assert err.value.field == "node_table" and "no invocation of workload can be placed" in err.value.message


@pytest.mark.parametrize("kw,field", [
    ({"node_table": PAI, "cluster": {"name": "c", "nodes": [{"name": "n", "cpu_cores": 4, "memory_mib": 1024}]}}, "node_table"),
    ({"workload": TRACE, "azure_sample": True}, "workload"),
    ({"node_table_name": "has space"}, "node_table_name"),
    ({"workload_name": "x" * 49}, "workload_name"),
    ({"workload_speedup": 0.0}, "workload_speedup"),
    ({"node_table_format": "csv"}, "node_table_format"),
])
def test_conflicting_or_bad_input_parameters(kw, field):
    with pytest.raises(InputError) as err:
        pipeline.check_inputs(params(**kw))
    assert err.value.field == field


def test_shipped_inputs_are_described_with_their_files():
    inputs = pipeline.check_inputs(params(test_setups=2, test_workloads=1, window_s=20.0))
    pai = (DEFAULT_AZURE_SAMPLE.parents[1] / "alibaba-pai-gpu-2020" / "pai_machine_spec.csv").read_bytes()
    azure = DEFAULT_AZURE_SAMPLE.read_bytes()
    nt, wl = inputs["node_table"], inputs["workload"]
    assert (nt["source"], nt["name"], nt["rows"], nt["sha256"]) == (
        "shipped", "alibaba-pai-gpu-2020/pai_machine_spec.csv", 1897, hashlib.sha256(pai).hexdigest())
    assert [s["name"] for s in nt["setups"]] == ["unseen101-0", "unseen101-1"]
    assert (wl["source"], wl["name"], wl["rows"], wl["sha256"], wl["use"], wl["workloads"]) == (
        "shipped", "azure-functions-2021-sample/Azure2021_200.csv", 199, hashlib.sha256(azure).hexdigest(), "generated",
        ["unseen102-0"])


@pytest.fixture(scope="module")
def inline_run():
    collect = Collect()
    p = {"mode": "evaluate", "budget": 3, "eval_seeds": [0], "seed": 2, "node_table": PAI, "node_table_name": "lab",
         "workload": TRACE, "workload_name": "fn-trace", "workload_speedup": 2.0}
    return p, pipeline.run(p, record=collect), collect.rows


def test_run_measures_on_the_inline_inputs_and_names_them(inline_run):
    p, result, recorded = inline_run
    assert result["inputs"]["node_table"] == {"source": "inline", "name": "lab", "format": "pai", "rows": 2, "sha256": sha(PAI)}
    assert result["inputs"]["workload"] == {"source": "inline", "name": "fn-trace", "rows": 12, "functions": 3,
                                            "sha256": sha(TRACE), "use": "replayed", "speedup": 2.0}
    assert result["test_scenarios"] == ["lab/fn-trace-x2"]
    # the content is not copied into the result or the comparison keys: its hash is
    assert result["params"]["node_table"] == f"sha256:{sha(PAI)}" and result["params"]["workload"] == f"sha256:{sha(TRACE)}"
    assert recorded["comparison"][0]["key"]["workload"] == f"sha256:{sha(TRACE)}"
    # every row's metric equals the core's (serverless) simulation on nodes written out by hand
    # from PAI; the importer's gpu_type label gives them the PAI machine types' CPUs
    from rlweights.core.cluster import ClusterSetup

    setup = ClusterSetup("lab", [Node("m-a", 16000, 64 * GiB, labels={"gpu_type": "CPU"}),
                                 Node("m-b", 32000, 128 * GiB, labels={"gpu_type": "T4"})])
    wl = replay_workload(parse_azure_trace(TRACE), np.random.default_rng(2102), 2.0, name="fn-trace")  # 1000 * seed + 102
    rows = [r for r in result["rows"] if not r.get("skipped")]
    assert {r["method"] for r in rows} >= {"equal", "ppo", "tpe", "random-search"}
    for r in rows:
        assert r["best_metric"] == pytest.approx(simulate(setup, wl, np.array(r["best_weights"]), 0).mean_s, rel=1e-12)


def test_inline_copy_of_the_shipped_sample_gives_the_shipped_results(inline_run):
    # the same content through the inline path and through azure_sample: identical rows; the
    # results differ only in how the workload is described (inline, named, same sha256)
    sample = DEFAULT_AZURE_SAMPLE.read_bytes().decode()
    common = {"mode": "evaluate", "budget": 3, "eval_seeds": [0], "seed": 2, "node_table": PAI, "node_table_name": "lab"}
    shipped = pipeline.run({**common, "azure_sample": True, "azure_speedup": 10.0})
    inline = pipeline.run({**common, "workload": sample, "workload_name": "azure2021-sample", "workload_speedup": 10.0})
    assert inline["test_scenarios"] == shipped["test_scenarios"] == ["lab/azure2021-sample-x10"]
    assert inline["rows"] == shipped["rows"]
    assert inline["learned_weights"] == shipped["learned_weights"]
    assert inline["inputs"]["node_table"] == shipped["inputs"]["node_table"]
    wi, ws = inline["inputs"]["workload"], shipped["inputs"]["workload"]
    assert wi["sha256"] == ws["sha256"] == hashlib.sha256(DEFAULT_AZURE_SAMPLE.read_bytes()).hexdigest()
    assert wi["rows"] == ws["rows"] == 199 and (wi["source"], ws["source"]) == ("inline", "shipped")
