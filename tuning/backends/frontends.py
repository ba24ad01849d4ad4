"""Model import into TVM Relax and tuning-task extraction.

Sources:

- a torchvision model by name (``resnet18``, ``mobilenet_v2``, ...; built without weights:
  tuning depends on shapes, not values) or a Hugging Face transformers model by config class
  (``transformers:BertConfig`` with small default sizes, no download), or one of the small
  built-in workloads (:data:`BUILTIN_MODELS`, used by tests and the demo), through
  ``torch.export`` and ``tvm.relax.frontend.torch.from_exported_program``;
- an ONNX graph (file path or bytes; parsed by ``onnx``, never unpickled) through
  ``tvm.relax.frontend.onnx.from_onnx``.

Before task extraction the module goes through the passes TVM 0.27 needs for
``relax_integration.extract_tasks`` to see the operators as TIR workloads:
``DecomposeOpsForInference``, ``CanonicalizeBindings`` and the ``zero`` pipeline
(legalise to TIR, fuse, annotate).

Errors: every import failure is a :class:`ModelImportError` naming the operator or the cause.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ModelImportError(ValueError):
    """A model could not be imported; the message names the unsupported operator(s) or cause."""


#: Small real workloads: name -> (builder, default input shape). Built on demand.
BUILTIN_MODELS: dict[str, tuple[str, tuple[int, ...]]] = {
    "mlp": ("two Linear(512, 512) layers with ReLU, batch 16", (16, 512)),
    "matmul": ("one Linear(512, 512, bias=False), batch 64", (64, 512)),
    "convnet": ("Conv2d(16, 32, 3) + ReLU + Conv2d(32, 32, 3) on 1x16x32x32", (1, 16, 32, 32)),
}


@dataclass
class ImportedModel:
    """A model in Relax with what is needed to run it and its PyTorch twin.

    ``mod``: Relax IRModule (entry ``main``), parameters bound as constants, not yet
    transformed for tuning (see :func:`prepare_for_tuning`). ``input_shapes`` / ``input_dtypes``:
    one per ``main`` argument. ``torch_module``: the eager PyTorch model (``None`` for ONNX).
    """

    name: str
    source: str
    mod: Any
    input_shapes: list[tuple[int, ...]]
    input_dtypes: list[str]
    torch_module: Any = None
    details: dict[str, Any] = field(default_factory=dict)


def _builtin(name: str):
    import torch

    if name == "mlp":
        return torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU())
    if name == "matmul":
        return torch.nn.Sequential(torch.nn.Linear(512, 512, bias=False))
    if name == "convnet":
        return torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3), torch.nn.ReLU())
    raise KeyError(name)


def _transformers_model(cls_name: str):
    import transformers

    cfg_cls = getattr(transformers, cls_name, None)
    if cfg_cls is None or not cls_name.endswith("Config"):
        raise ModelImportError(f"unknown transformers config class {cls_name!r} (e.g. transformers:BertConfig)")
    cfg = cfg_cls(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=256)
    return transformers.AutoModel.from_config(cfg).eval()


def torch_model(name: str):
    """The eager PyTorch model called ``name`` (built-in, torchvision, or ``transformers:Config``),
    in eval mode, random weights drawn from a generator seeded with 0 (PyTorch's global generator
    is left as it was), so two calls, in two processes too, build the same weights: the model
    imported in a child process (:mod:`tuning.backends.import_child`) and the caller's eager twin
    agree. Raises :class:`ModelImportError` for an unknown name."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        if name in BUILTIN_MODELS:
            return _builtin(name).eval()
        if name.startswith("transformers:"):
            return _transformers_model(name.split(":", 1)[1])
        import torchvision

        try:
            return torchvision.models.get_model(name, weights=None).eval()
        except ValueError:
            known = sorted(BUILTIN_MODELS) + ["<torchvision name, e.g. resnet18>", "transformers:<Config class>"]
            raise ModelImportError(f"unknown model {name!r}; use one of {', '.join(known)}") from None


def default_input_shape(name: str) -> tuple[int, ...]:
    """Default input shape of a model: built-ins their own, transformers ``(1, 128)`` token ids,
    torchvision ``(1, 3, 224, 224)``."""
    if name in BUILTIN_MODELS:
        return BUILTIN_MODELS[name][1]
    if name.startswith("transformers:"):
        return (1, 128)
    return (1, 3, 224, 224)


def import_torch_model(name: str, input_shape: tuple[int, ...] | list[int] | None = None) -> ImportedModel:
    """Import the PyTorch model ``name`` at ``input_shape`` (default :func:`default_input_shape`)
    through ``torch.export`` into Relax.

    Raises :class:`ModelImportError` for an unknown model, a shape the model rejects, or an
    operator the Relax frontend does not support (named in the message).
    """
    import torch

    shape = tuple(int(s) for s in (input_shape or default_input_shape(name)))
    if not shape or any(s <= 0 for s in shape):
        raise ModelImportError(f"input shape must be positive integers, not {list(shape)}")
    model = torch_model(name)
    is_tokens = name.startswith("transformers:")
    example = torch.randint(0, 100, shape) if is_tokens else torch.randn(*shape)
    try:
        with torch.no_grad():
            ep = torch.export.export(model, (example,))
    except Exception as err:  # noqa: BLE001 - torch raises many types; all are an import failure
        raise ModelImportError(f"torch.export of {name} at input {list(shape)} failed: {type(err).__name__}: {str(err)[:500]}") from err
    from tvm.relax.frontend.torch import from_exported_program

    try:
        mod = from_exported_program(ep, keep_params_as_input=False)
    except (AssertionError, NotImplementedError, ValueError, KeyError) as err:
        raise ModelImportError(f"TVM Relax cannot import {name}: {str(err)[:500]}") from err
    return ImportedModel(name=name, source="builtin" if name in BUILTIN_MODELS else ("transformers" if is_tokens else "torchvision"),
                         mod=mod, input_shapes=[shape], input_dtypes=["int64" if is_tokens else "float32"], torch_module=model)


def onnx_unsupported_ops(model: Any) -> list[str]:
    """Operator types in the ONNX graph that TVM's Relax ONNX frontend has no converter for."""
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

    known = _get_convert_map()
    return sorted({n.op_type for n in model.graph.node if n.op_type not in known})


def import_onnx(source: str | Path | bytes, name: str | None = None, shape_dict: dict[str, list[int]] | None = None) -> ImportedModel:
    """Import an ONNX graph (path or bytes) into Relax.

    Graph inputs without a static shape need ``shape_dict``. Raises :class:`ModelImportError`
    for bytes that do not parse as ONNX, unsupported operators (listed), or a frontend failure.
    """
    import onnx

    try:
        if isinstance(source, (bytes, bytearray)):
            model = onnx.load_model_from_string(bytes(source))
            name = name or "uploaded.onnx"
        else:
            model = onnx.load(str(source))
            name = name or Path(source).stem
    except Exception as err:  # noqa: BLE001 - protobuf DecodeError and friends
        raise ModelImportError(f"not a valid ONNX model: {type(err).__name__}: {str(err)[:300]}") from err
    if not model.graph.node:
        raise ModelImportError("not a valid ONNX model: the graph has no nodes")
    missing = onnx_unsupported_ops(model)
    if missing:
        raise ModelImportError(f"ONNX operator(s) not supported by TVM Relax: {', '.join(missing)}")
    from tvm.relax.frontend.onnx import from_onnx

    try:
        mod = from_onnx(model, shape_dict=shape_dict, keep_params_in_input=False)
    except Exception as err:  # noqa: BLE001 - the frontend raises many types
        raise ModelImportError(f"TVM Relax cannot import ONNX model {name}: {type(err).__name__}: {str(err)[:500]}") from err
    shapes, dtypes = [], []
    for p in mod["main"].params:
        ty = p.ty  # relax TensorType in TVM 0.27 (struct_info in older versions)
        dims = getattr(ty, "shape", None)
        shapes.append(tuple(int(d) if isinstance(d, int) or hasattr(d, "value") else -1 for d in (dims.values if hasattr(dims, "values") else dims or ())))
        dtypes.append(str(ty.dtype))
    return ImportedModel(name=name, source="onnx", mod=mod, input_shapes=shapes, input_dtypes=dtypes,
                         details={"opset": [o.version for o in model.opset_import], "nodes": len(model.graph.node)})


def prepare_for_compile(mod: Any) -> Any:
    """``DecomposeOpsForInference`` -> ``CanonicalizeBindings``: the input of ``compile_relax``,
    which legalises and fuses itself and then looks the fused functions up in the database.
    (Compiling the already-fused module instead finds no record: its PrimFuncs carry
    ``global_symbol`` attributes the extracted workloads do not.)"""
    import tvm
    from tvm import relax

    return tvm.transform.Sequential([
        relax.transform.DecomposeOpsForInference(),
        relax.transform.CanonicalizeBindings(),
    ])(mod)


def prepare_for_tuning(mod: Any, weight_prepack: bool = False) -> Any:
    """:func:`prepare_for_compile` then the ``zero`` pipeline (legalise, annotate, fold
    constants, fuse): the form ``extract_tasks`` needs to see the operators as TIR workloads.
    With ``weight_prepack`` (CPU), also ``AttachAttrLayoutFreeBuffers``: the weights become
    layout-free buffers, so MetaSchedule's ``RewriteLayout`` may choose their layout per
    candidate (weight prepacking), as TVM 0.27's ``static_shape_tuning`` pipeline does with
    ``cpu_weight_prepack=True`` before its tuning step (``tvm/relax/pipeline.py``). Tuning and
    the final build (:func:`build_with_database`) must use the same form: the tasks differ."""
    from tvm import relax

    out = relax.get_pipeline("zero")(prepare_for_compile(mod))
    return relax.transform.AttachAttrLayoutFreeBuffers()(out) if weight_prepack else out


def build_with_database(tuning_mod: Any, target: Any, database: Any, weight_prepack: bool = False) -> Any:
    """Compile ``tuning_mod`` (the output of :func:`prepare_for_tuning` with the same
    ``weight_prepack``) for ``target`` with every kernel the MetaSchedule ``database`` holds
    applied (an empty ``MemoryDatabase`` gives the untuned build: TVM's default lowering of each
    operator). The steps of TVM 0.27's ``static_shape_tuning`` pipeline after its tuning step:
    ``MetaScheduleApplyDatabase``, then with ``weight_prepack`` ``SplitLayoutRewritePreproc``,
    ``LiftTransformParams`` and ``FoldConstant`` (the weights are constants here, so their
    layout transform is folded at compile time and ``main`` keeps its signature); then
    ``tvm.compile``. Returns the Relax VM executable."""
    import tvm
    from tvm import relax

    target = tvm.target.Target(target) if not isinstance(target, tvm.target.Target) else target
    with target, database, tvm.transform.PassContext(opt_level=3):  # the passes read the current target
        passes = [relax.transform.MetaScheduleApplyDatabase(enable_warning=False)]
        if weight_prepack:
            passes += [relax.transform.SplitLayoutRewritePreproc(), relax.transform.LiftTransformParams(),
                       relax.transform.FoldConstant()]
        mod = tvm.transform.Sequential(passes)(tuning_mod)
        return tvm.compile(mod, target=target)


def extract_tuning_tasks(prepared_mod: Any, target: Any) -> list[Any]:
    """MetaSchedule tuning tasks (``ExtractedTask``: task_name, weight, dispatched mods) of a
    prepared module, in extraction order."""
    from tvm.s_tir import meta_schedule as ms

    return list(ms.relax_integration.extract_tasks(prepared_mod, target))


class OnnxExportError(RuntimeError):
    """A PyTorch model could not be exported to ONNX; the message names the model and the cause."""


def export_torch_onnx(module: Any, input_shapes: list[tuple[int, ...]], input_dtypes: list[str], path: str | Path,
                      name: str = "model") -> Path:
    """Export the eager PyTorch ``module`` to the ONNX file ``path`` (overwritten) with example
    inputs of ``input_shapes`` / ``input_dtypes`` (static shapes), for the onnxruntime peer.

    Exporter: the TorchScript-based ``torch.onnx.export(..., dynamo=False)``, opset 17. torch
    2.14's default (``dynamo=True``, the ``torch.export``-based exporter) needs the
    ``onnxscript`` package, which is not a dependency here; the TorchScript exporter's
    deprecation warnings are silenced. Raises :class:`OnnxExportError` naming the cause (an
    operator without an ONNX symbolic, an untraceable model, ...); no file is left then.
    """
    import warnings

    import torch

    if len(input_shapes) != len(input_dtypes):
        raise OnnxExportError(f"export of {name}: {len(input_shapes)} input shapes but {len(input_dtypes)} dtypes")
    path = Path(path)
    examples = []
    for shape, dtype in zip(input_shapes, input_dtypes):
        if dtype.startswith("int"):
            examples.append(torch.randint(0, 100, tuple(shape), dtype=getattr(torch, dtype)))
        else:
            examples.append(torch.randn(*shape, dtype=getattr(torch, dtype)))
    tmp = path.with_name(path.name + ".part")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, tuple(examples), str(tmp), dynamo=False, opset_version=17,
                              input_names=[f"input{i}" for i in range(len(examples))])
        tmp.replace(path)
    except Exception as err:  # noqa: BLE001 - the exporter raises many types; all are an export failure
        tmp.unlink(missing_ok=True)
        raise OnnxExportError(f"ONNX export of {name} failed: {type(err).__name__}: {str(err)[:500]}") from err
    return path
