"""Graph features of a model at a batch size (SPEC section 2), from PyTorch or ONNX.

Conventions (used everywhere in Tandem's placement engine):

* **FLOPs = 2 x multiply-adds.** ``torch.utils.flop_counter.FlopCounterMode`` counts a
  multiply-add as 2 FLOPs (e.g. ``mm`` of (m,k)x(k,n) = 2mkn). torchvision's published
  ``weights.meta["_ops"]`` is labelled "GFLOPS" but counts **giga multiply-adds** (resnet50:
  4.089), so ``forward_flops / 2 / 1e9`` is what compares with ``_ops``.
* Tracing runs on the ``meta`` device: shapes only, no arithmetic, no weights are loaded.
* ``train_flops``: forward + backward of one training step (``loss = out.sum()``; optimiser
  update not counted). Known limit: torch's counter over-counts the backward of grouped
  (depthwise) convolutions, so train FLOPs of MobileNet/ShuffleNet-style models are too high.
* Memory estimate (MiB): parameters x 4 bytes x 4 (weights, gradients, two Adam moments) plus
  activations = the sum of the output sizes of every leaf module in the forward pass x 4 bytes
  (kept for backward). An estimate from the graph, not a measurement.

Layer counts: ``conv`` (ConvNd, ConvTransposeNd), ``linear`` (Linear, Embedding, RNN/LSTM/GRU
cells and layers counted as their linear parts: one per gate matrix pair per layer),
``activation``, ``norm``, ``other`` (remaining leaf modules).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

FEATURE_NAMES = [
    "train_flops", "forward_flops", "params", "n_conv", "n_linear", "n_activation", "n_norm",
    "n_other", "input_size", "activation_mib", "param_mib", "batch_size",
]


@dataclass
class GraphFeatures:
    """Features of one (model, batch size). FLOPs are totals for the whole batch (2 x MACs);
    ``input_size`` is elements per sample; memory in MiB."""

    model: str
    batch_size: int
    source: str  # "torchvision", "transformers", "onnx", "gavel-workload"
    train_flops: float
    forward_flops: float
    params: int
    n_conv: int
    n_linear: int
    n_activation: int
    n_norm: int
    n_other: int
    input_size: int
    activation_mib: float
    param_mib: float

    @property
    def memory_mib(self) -> float:
        """Estimated training memory, MiB (activations + 4 x parameters)."""
        return self.activation_mib + self.param_mib

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory_mib"] = self.memory_mib
        return d


def _count_layers(model) -> dict[str, int]:
    import torch.nn as nn

    counts = {"n_conv": 0, "n_linear": 0, "n_activation": 0, "n_norm": 0, "n_other": 0}
    act_types = (nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Hardswish,
                 nn.Hardsigmoid, nn.LeakyReLU, nn.ELU, nn.Softmax, nn.Mish, nn.PReLU, nn.SELU)
    norm_types = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm)
    for mod in model.modules():
        if isinstance(mod, (nn.RNNBase,)):
            counts["n_linear"] += 2 * mod.num_layers * (2 if mod.bidirectional else 1)
            continue
        if isinstance(mod, (nn.RNNCellBase,)):
            counts["n_linear"] += 2
            continue
        if list(mod.children()):
            continue
        if isinstance(mod, (nn.modules.conv._ConvNd,)):
            counts["n_conv"] += 1
        elif isinstance(mod, (nn.Linear, nn.Embedding, nn.EmbeddingBag, nn.Bilinear)) or type(mod).__name__ == "Conv1D":
            counts["n_linear"] += 1
        elif isinstance(mod, act_types) or type(mod).__name__.endswith(("Activation", "GELU", "ReLU")):
            counts["n_activation"] += 1
        elif isinstance(mod, norm_types) or "Norm" in type(mod).__name__:
            counts["n_norm"] += 1
        elif isinstance(mod, (nn.Identity, nn.Dropout)):
            continue
        else:
            counts["n_other"] += 1
    return counts


def torch_features(model, example_inputs: tuple, *, name: str, batch_size: int, source: str,
                   input_size: int) -> GraphFeatures:
    """Trace ``model`` (an ``nn.Module``) on the meta device with ``example_inputs`` (meta
    tensors, batch dimension included) and return its :class:`GraphFeatures`.

    Forward FLOPs and forward+backward FLOPs come from ``FlopCounterMode`` (2 x MACs).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = model.to("meta").train()
    act_bytes = [0]

    def hook(_m, _i, out):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outs:
            if isinstance(o, torch.Tensor):
                act_bytes[0] += o.numel() * 4

    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    with FlopCounterMode(display=False) as fc:
        out = model(*example_inputs)
    fwd = fc.get_total_flops()
    for h in handles:
        h.remove()
    act = act_bytes[0]
    out_t = _first_tensor(out)
    with FlopCounterMode(display=False) as fc2:
        out = model(*example_inputs)
        _first_tensor(out).float().sum().backward()
    train = fc2.get_total_flops()
    del out_t
    params = sum(p.numel() for p in model.parameters())
    return GraphFeatures(
        model=name, batch_size=batch_size, source=source, train_flops=float(train),
        forward_flops=float(fwd), params=int(params), input_size=int(input_size),
        activation_mib=act / 2**20, param_mib=params * 4 * 4 / 2**20, **_count_layers(model))


def _first_tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if isinstance(out, dict):
        return next(v for v in out.values() if isinstance(v, torch.Tensor))
    return next(o for o in out if isinstance(o, torch.Tensor))


# ----------------------------------------------------------------------------- model zoo

TORCHVISION_ZOO = [
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg11", "vgg16", "vgg19",
    "alexnet", "mobilenet_v2", "mobilenet_v3_large", "mobilenet_v3_small", "densenet121",
    "squeezenet1_0", "shufflenet_v2_x1_0", "efficientnet_b0", "googlenet", "resnext50_32x4d",
    "wide_resnet50_2", "mnasnet1_0", "regnet_y_400mf", "convnext_tiny",
]
TRANSFORMERS_ZOO = ["bert-small", "gpt2-small", "distilbert-small"]
SEQ_LEN = 128
GAVEL_FAMILIES = ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation", "A3C", "CycleGAN")


def _transformers_model(name: str):
    """Build a transformers model from a config (no weights, no hub). Sizes: BERT-base-like
    (12 layers, hidden 768) cut to 4 layers; GPT-2 small config with 4 layers; DistilBERT default
    (6 layers). Input: ``SEQ_LEN`` token ids."""
    import transformers as tf

    if name == "bert-small":
        return tf.BertModel(tf.BertConfig(num_hidden_layers=4))
    if name == "gpt2-small":
        return tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=4))
    if name == "distilbert-small":
        return tf.DistilBertModel(tf.DistilBertConfig())
    raise KeyError(name)


def gavel_workload_model(job_family: str):
    """PyTorch stand-ins for Gavel's training workloads (``simulation_throughputs.json`` job
    types), so their FLOPs per sample can be counted. Returns ``(model, make_input(batch),
    input_size)``. Approximations, documented in docs/engines/placement.md:

    * ResNet-18: CIFAR-10 ResNet-18 (3x3 stem, no max-pool, 10 classes, 32x32 input), as in
      Gavel's ``image_classification/cifar10`` workload.
    * ResNet-50: torchvision resnet50, 224x224 ImageNet input.
    * Transformer: ``nn.Transformer`` (d_model 512, 8 heads, 6+6 layers, FFN 2048) with 10k
      vocabulary embeddings and generator, 32 tokens per sentence (Multi30k sentences are short).
    * LM: 2-layer LSTM, 200 units, 33,278-word vocabulary (WikiText-2), 35-token sequences
      (PyTorch word_language_model defaults).
    * Recommendation: denoising autoencoder 20,108 items -> 600 -> 200 -> 600 -> 20,108 (ML-20M).
    """
    import torch
    import torch.nn as nn
    import torchvision

    if job_family == "ResNet-18":
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m, (lambda b: (torch.randn(b, 3, 32, 32, device="meta"),)), 3 * 32 * 32
    if job_family == "ResNet-50":
        return (torchvision.models.resnet50(),
                (lambda b: (torch.randn(b, 3, 224, 224, device="meta"),)), 3 * 224 * 224)
    if job_family == "Transformer":
        class Seq2Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.src = nn.Embedding(10000, 512)
                self.tgt = nn.Embedding(10000, 512)
                self.t = nn.Transformer(512, 8, 6, 6, 2048, batch_first=True)
                self.gen = nn.Linear(512, 10000)

            def forward(self, s, t):
                return self.gen(self.t(self.src(s), self.tgt(t)))
        mk = lambda b: (torch.zeros(b, 32, dtype=torch.long, device="meta"),  # noqa: E731
                        torch.zeros(b, 32, dtype=torch.long, device="meta"))
        return Seq2Seq(), mk, 64
    if job_family == "LM":
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(33278, 200)
                self.rnn = nn.LSTM(200, 200, 2, batch_first=True)
                self.dec = nn.Linear(200, 33278)

            def forward(self, x):
                return self.dec(self.rnn(self.emb(x))[0])
        return LM(), (lambda b: (torch.zeros(b, 35, dtype=torch.long, device="meta"),)), 35
    if job_family == "Recommendation":
        m = nn.Sequential(nn.Linear(20108, 600), nn.Tanh(), nn.Linear(600, 200), nn.Tanh(),
                          nn.Linear(200, 600), nn.Tanh(), nn.Linear(600, 20108))
        return m, (lambda b: (torch.randn(b, 20108, device="meta"),)), 20108
    if job_family == "A3C":
        # ikostrikov/pytorch-a3c ActorCritic: 4 x (conv 3x3/2, 32 ch, ELU) on 1x42x42, LSTMCell
        # 288->256, critic 256->1, actor 256->6; one Gavel "step" = a 20-step rollout (batch 20).
        class A3C(nn.Module):
            def __init__(self):
                super().__init__()
                self.convs = nn.Sequential(*[m for i in range(4) for m in (
                    nn.Conv2d(1 if i == 0 else 32, 32, 3, 2, 1), nn.ELU())])
                self.lstm = nn.LSTMCell(288, 256)
                self.critic, self.actor = nn.Linear(256, 1), nn.Linear(256, 6)

            def forward(self, x):
                h, _ = self.lstm(self.convs(x).flatten(1))
                return torch.cat([self.critic(h), self.actor(h)], 1)
        return A3C(), (lambda b: (torch.randn(20 * b, 1, 42, 42, device="meta"),)), 42 * 42
    if job_family == "CycleGAN":
        # CycleGAN (Zhu et al. 2017): two ResNet-9-block generators (ngf 64) and two 70x70
        # PatchGAN discriminators (ndf 64), 256x256 images, batch 1.
        def gen():
            layers = [nn.Conv2d(3, 64, 7, 1, 3), nn.InstanceNorm2d(64), nn.ReLU(),
                      nn.Conv2d(64, 128, 3, 2, 1), nn.InstanceNorm2d(128), nn.ReLU(),
                      nn.Conv2d(128, 256, 3, 2, 1), nn.InstanceNorm2d(256), nn.ReLU()]
            layers += [m for _ in range(9) for m in (nn.Conv2d(256, 256, 3, 1, 1), nn.InstanceNorm2d(256), nn.ReLU(),
                                                     nn.Conv2d(256, 256, 3, 1, 1), nn.InstanceNorm2d(256))]
            layers += [nn.ConvTranspose2d(256, 128, 3, 2, 1, 1), nn.InstanceNorm2d(128), nn.ReLU(),
                       nn.ConvTranspose2d(128, 64, 3, 2, 1, 1), nn.InstanceNorm2d(64), nn.ReLU(),
                       nn.Conv2d(64, 3, 7, 1, 3), nn.Tanh()]
            return nn.Sequential(*layers)

        def disc():
            return nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(64, 128, 4, 2, 1), nn.InstanceNorm2d(128), nn.LeakyReLU(0.2),
                                 nn.Conv2d(128, 256, 4, 2, 1), nn.InstanceNorm2d(256), nn.LeakyReLU(0.2),
                                 nn.Conv2d(256, 512, 4, 1, 1), nn.InstanceNorm2d(512), nn.LeakyReLU(0.2),
                                 nn.Conv2d(512, 1, 4, 1, 1))

        class CycleGAN(nn.Module):
            def __init__(self):
                super().__init__()
                self.g_ab, self.g_ba, self.d_a, self.d_b = gen(), gen(), disc(), disc()

            def forward(self, a, b):
                fb, fa = self.g_ab(a), self.g_ba(b)
                rec = self.g_ba(fb).mean() + self.g_ab(fa).mean()
                return rec + self.d_a(fa).mean() + self.d_b(fb).mean() + self.d_a(a).mean() + self.d_b(b).mean()
        mk = lambda b: (torch.randn(b, 3, 256, 256, device="meta"), torch.randn(b, 3, 256, 256, device="meta"))  # noqa: E731
        return CycleGAN(), mk, 2 * 3 * 256 * 256
    raise KeyError(f"no workload stand-in for Gavel job family {job_family!r}")


def model_features(name: str, batch_size: int) -> GraphFeatures:
    """Features of a zoo model by name: torchvision names, :data:`TRANSFORMERS_ZOO`, Gavel
    workload families (``gavel:ResNet-18`` ...), or ONNX files (``onnx:<path>``).

    Raises ``KeyError`` for an unknown name, ``ValueError`` for batch_size < 1.
    """
    import torch
    import torchvision

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if name.startswith("onnx:"):
        return onnx_features(Path(name[5:]), batch_size=batch_size)
    if name.startswith("gavel:"):
        m, mk, insz = gavel_workload_model(name[6:])
        return torch_features(m, mk(batch_size), name=name, batch_size=batch_size,
                              source="gavel-workload", input_size=insz)
    if name in TRANSFORMERS_ZOO:
        m = _transformers_model(name)
        ids = torch.zeros(batch_size, SEQ_LEN, dtype=torch.long, device="meta")
        return torch_features(m, (ids,), name=name, batch_size=batch_size, source="transformers",
                              input_size=SEQ_LEN)
    if name not in torchvision.models.list_models():
        raise KeyError(f"unknown model {name!r}: not a torchvision model, not in {TRANSFORMERS_ZOO}")
    # weight init is irrelevant for shapes; skip scipy's slow one where torchvision has it
    kwargs = {"googlenet": {"aux_logits": False, "init_weights": False},
              "inception_v3": {"init_weights": False}}.get(name, {})
    m = torchvision.models.get_model(name, **kwargs)
    side = 299 if name.startswith("inception") else 224
    x = torch.randn(batch_size, 3, side, side, device="meta")
    return torch_features(m, (x,), name=name, batch_size=batch_size, source="torchvision",
                          input_size=3 * side * side)


# ----------------------------------------------------------------------------- ONNX

def onnx_features(path: Path, *, batch_size: int = 1) -> GraphFeatures:
    """Features of an ONNX graph, parsed with ``onnx`` (protobuf, never unpickled).

    Shapes come from ``onnx.shape_inference`` (with data propagation) at batch 1 (some exported
    graphs hard-code batch 1 in Reshape constants); FLOPs and activations are then multiplied by
    ``batch_size`` (both are linear in the batch). FLOPs are
    counted for Conv (2 x C_in/groups x kH x kW x output elements), Gemm/MatMul (2 x M x K x N)
    forward only; ``train_flops`` = 3 x forward (the usual fwd + 2 x bwd estimate, stated as
    such). Raises ``ValueError`` if the file does not parse as an ONNX model.
    """
    import numpy as np
    import onnx
    from onnx import shape_inference

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError and friends
        raise ValueError(f"{path}: not a valid ONNX model ({exc})") from exc
    graph = model.graph
    inits = {i.name: tuple(i.dims) for i in graph.initializer}
    init_values = {i.name: i for i in graph.initializer}
    const_shapes: dict[str, tuple] = {}
    for n in graph.node:  # the light models replace weights by ConstantOfShape(<shape tensor>)
        if n.op_type == "ConstantOfShape" and n.input and n.input[0] in init_values:
            const_shapes[n.output[0]] = tuple(int(v) for v in onnx.numpy_helper.to_array(init_values[n.input[0]]))
    inputs = [i for i in graph.input if i.name not in inits]
    in_elems = 1
    for inp in inputs[:1]:
        dims = inp.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = 1  # traced at batch 1 (some graphs hard-code it), then scaled
            for d in list(dims)[1:]:
                in_elems *= max(d.dim_value, 1)
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    shapes: dict[str, tuple] = dict(inits)
    shapes.update(const_shapes)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    flops = 0.0
    act_elems = 0
    shape_tensors = {n.input[0] for n in graph.node if n.op_type == "ConstantOfShape"}
    params = sum(int(np.prod(s)) for s in const_shapes.values())
    params += sum(int(np.prod(s)) for name, s in inits.items() if name not in shape_tensors)
    for inp in inputs[1:]:  # weights declared as graph inputs (some Caffe2 exports)
        params += int(np.prod(shapes.get(inp.name, (0,))))
    counts = {"n_conv": 0, "n_linear": 0, "n_activation": 0, "n_norm": 0, "n_other": 0}
    acts = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Softmax", "Clip", "HardSigmoid", "Elu"}
    norms = {"BatchNormalization", "LRN", "LayerNormalization", "InstanceNormalization"}
    skip = {"Constant", "ConstantOfShape", "Reshape", "Flatten", "Identity", "Dropout", "Shape",
            "Gather", "Unsqueeze", "Squeeze", "Cast", "Transpose"}
    for n in graph.node:
        out = shapes.get(n.output[0]) if n.output else None
        if out is not None and n.op_type not in skip:
            act_elems += int(np.prod(out))
        if n.op_type == "Conv":
            counts["n_conv"] += 1
            w = shapes.get(n.input[1])
            groups = next((a.i for a in n.attribute if a.name == "group"), 1)
            if w is None or out is None:
                raise ValueError(f"{path}: cannot infer shapes of Conv node {n.name!r}")
            flops += 2.0 * float(np.prod(out)) * w[1] * float(np.prod(w[2:]))
            del groups  # w[1] is already C_in / groups
        elif n.op_type in ("Gemm", "MatMul"):
            counts["n_linear"] += 1
            a, b = shapes.get(n.input[0]), shapes.get(n.input[1])
            if a is None or b is None or out is None:
                raise ValueError(f"{path}: cannot infer shapes of {n.op_type} node {n.name!r}")
            trans_a = next((a_.i for a_ in n.attribute if a_.name == "transA"), 0)
            k = a[-2] if trans_a else a[-1]
            flops += 2.0 * float(np.prod(out)) * k
        elif n.op_type in acts:
            counts["n_activation"] += 1
        elif n.op_type in norms:
            counts["n_norm"] += 1
        elif n.op_type not in skip:
            counts["n_other"] += 1
    return GraphFeatures(
        model=f"onnx:{Path(path).name}", batch_size=batch_size, source="onnx",
        train_flops=3.0 * flops * batch_size, forward_flops=flops * batch_size, params=int(params),
        input_size=int(in_elems), activation_mib=act_elems * batch_size * 4 / 2**20, param_mib=params * 16 / 2**20, **counts)


def zoo_entries(data_dir: Path) -> list[str]:
    """Names of every zoo model: torchvision, transformers, Gavel workloads, ONNX files."""
    onnx_files = sorted((data_dir / "onnx-light-models").glob("*.onnx"))
    gavel = [f"gavel:{f}" for f in GAVEL_FAMILIES]
    return TORCHVISION_ZOO + TRANSFORMERS_ZOO + gavel + [f"onnx:{p}" for p in onnx_files]


#: ``torchvision.models.list_models()`` of the pinned torchvision (0.29.1, requirements.txt), so a
#: model name is checked without importing torch (seconds) before a request is refused;
#: tests/unit/placement/test_model_names.py compares it with the installed torchvision.
TORCHVISION_MODELS = frozenset({
    "alexnet", "convnext_base", "convnext_large", "convnext_small", "convnext_tiny",
    "deeplabv3_mobilenet_v3_large", "deeplabv3_resnet101", "deeplabv3_resnet50", "densenet121",
    "densenet161", "densenet169", "densenet201", "efficientnet_b0", "efficientnet_b1",
    "efficientnet_b2", "efficientnet_b3", "efficientnet_b4", "efficientnet_b5", "efficientnet_b6",
    "efficientnet_b7", "efficientnet_v2_l", "efficientnet_v2_m", "efficientnet_v2_s",
    "fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_mobilenet_v3_large_fpn",
    "fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2", "fcn_resnet101", "fcn_resnet50",
    "fcos_resnet50_fpn", "googlenet", "inception_v3", "keypointrcnn_resnet50_fpn",
    "lraspp_mobilenet_v3_large", "maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2", "maxvit_t",
    "mc3_18", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3", "mobilenet_v2",
    "mobilenet_v3_large", "mobilenet_v3_small", "mvit_v1_b", "mvit_v2_s", "quantized_googlenet",
    "quantized_inception_v3", "quantized_mobilenet_v2", "quantized_mobilenet_v3_large",
    "quantized_resnet18", "quantized_resnet50", "quantized_resnext101_32x8d",
    "quantized_resnext101_64x4d", "quantized_shufflenet_v2_x0_5", "quantized_shufflenet_v2_x1_0",
    "quantized_shufflenet_v2_x1_5", "quantized_shufflenet_v2_x2_0", "r2plus1d_18", "r3d_18",
    "raft_large", "raft_small", "regnet_x_16gf", "regnet_x_1_6gf", "regnet_x_32gf",
    "regnet_x_3_2gf", "regnet_x_400mf", "regnet_x_800mf", "regnet_x_8gf", "regnet_y_128gf",
    "regnet_y_16gf", "regnet_y_1_6gf", "regnet_y_32gf", "regnet_y_3_2gf", "regnet_y_400mf",
    "regnet_y_800mf", "regnet_y_8gf", "resnet101", "resnet152", "resnet18", "resnet34", "resnet50",
    "resnext101_32x8d", "resnext101_64x4d", "resnext50_32x4d", "retinanet_resnet50_fpn",
    "retinanet_resnet50_fpn_v2", "s3d", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
    "shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "squeezenet1_0", "squeezenet1_1", "ssd300_vgg16",
    "ssdlite320_mobilenet_v3_large", "swin3d_b", "swin3d_s", "swin3d_t", "swin_b", "swin_s",
    "swin_t", "swin_v2_b", "swin_v2_s", "swin_v2_t", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn",
    "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "vit_b_16", "vit_b_32", "vit_h_14", "vit_l_16",
    "vit_l_32", "wide_resnet101_2", "wide_resnet50_2",
})


def check_model_name(name: str, *, known: set[str] | frozenset[str] = frozenset(),
                     data_dir: Path | None = None) -> None:
    """Raise ``KeyError`` (message fit for a user) unless :func:`model_features` can build
    ``name``, before any tracing: ``known`` names (e.g. the shipped features table),
    :data:`TRANSFORMERS_ZOO`, ``gavel:<family>`` of :data:`GAVEL_FAMILIES`, ``onnx:<path>``
    only for a file of ``data_dir``'s ONNX zoo (no other path is opened), else a torchvision
    model name (:data:`TORCHVISION_MODELS`). Imports neither torch nor torchvision."""
    if name in known or name in TRANSFORMERS_ZOO:
        return
    if name.startswith("gavel:"):
        if name[6:] in GAVEL_FAMILIES:
            return
        raise KeyError(f"unknown Gavel family {name[6:]!r}; known: {', '.join(GAVEL_FAMILIES)}")
    if name.startswith("onnx:"):
        allowed = set(zoo_entries(data_dir)) if data_dir is not None else set()
        if name in allowed:
            return
        raise KeyError(f"onnx model {name[5:]!r} is not in the ONNX zoo")
    if name not in TORCHVISION_MODELS:
        raise KeyError(f"unknown model {name!r}: not a torchvision model, not in {TRANSFORMERS_ZOO}")


FeatureFn = Callable[[str, int], GraphFeatures]
