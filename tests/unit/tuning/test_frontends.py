"""Model import: the five ONNX graphs, PyTorch models through torch.export, clear errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from tuning.backends.frontends import ModelImportError, extract_tuning_tasks, import_onnx, import_torch_model, prepare_for_tuning

ONNX = Path(__file__).resolve().parents[3] / "data" / "onnx-light-models"


@pytest.mark.parametrize(
    "name,data_input",
    [
        # input names and shapes read from the graphs with onnx (ModelProto.graph.input)
        ("light_bvlc_alexnet", ("data_0", (1, 3, 224, 224))),
        ("light_resnet50", ("gpu_0/data_0", (1, 3, 224, 224))),
        ("light_shufflenet", ("gpu_0/data_0", (1, 3, 224, 224))),
        ("light_squeezenet", ("data_0", (1, 3, 224, 224))),
        ("light_vgg19", ("data_0", (1, 3, 224, 224))),
    ],
)
def test_onnx_light_models_import(name, data_input):
    m = import_onnx(ONNX / f"{name}.onnx")
    assert m.source == "onnx" and m.name == name
    assert "main" in [gv.name_hint for gv in m.mod.get_global_vars()]
    assert data_input[1] in m.input_shapes
    assert m.details["nodes"] > 0


def test_onnx_bytes_that_do_not_parse():
    with pytest.raises(ModelImportError, match="not a valid ONNX model"):
        import_onnx(b"\x08\x07garbage" * 10)


def test_onnx_unsupported_operator_is_named():
    import onnx  # noqa: F401 - the test needs onnx importable
    from onnx import TensorProto, helper

    node = helper.make_node("TandemNoSuchOp", ["x"], ["y"], domain="")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph)
    with pytest.raises(ModelImportError, match="TandemNoSuchOp"):
        import_onnx(model.SerializeToString())


def test_torch_builtin_imports_and_has_one_matmul_task():
    m = import_torch_model("matmul")
    tasks = extract_tuning_tasks(prepare_for_tuning(m.mod), {"kind": "llvm", "num-cores": 1})
    assert [(t.task_name, t.weight) for t in tasks] == [("matmul", 1)]


def test_mlp_repeated_layer_is_one_task_of_weight_two():
    m = import_torch_model("mlp")
    tasks = extract_tuning_tasks(prepare_for_tuning(m.mod), {"kind": "llvm", "num-cores": 1})
    assert [(t.task_name, t.weight) for t in tasks] == [("fused_matmul_add_relu", 2)]


def test_unknown_model_name():
    with pytest.raises(ModelImportError, match="unknown model 'no-such-net'"):
        import_torch_model("no-such-net")


def test_wrong_input_shape_names_the_cause():
    with pytest.raises(ModelImportError, match=r"torch.export of matmul at input \[2, 3\] failed"):
        import_torch_model("matmul", [2, 3])
