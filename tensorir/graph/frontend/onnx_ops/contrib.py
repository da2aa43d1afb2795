"""onnxruntime's float ``com.microsoft`` contrib ops for activations and fused linear layers, as its
optimizers write them (``onnxruntime.transformers.optimizer``, ``ORT_ENABLE_EXTENDED``): Gelu, FastGelu,
BiasGelu, QuickGelu, BiasAdd, BiasSoftmax, FusedConv, NhwcConv, FusedGemm, FusedMatMul and TransposeMatMul.
Each is written with the graph ops of its unfused pattern, so fusion and scheduling treat it as they treat
the original subgraph.  Semantics follow onnxruntime's CPU kernels (``docs/onnx.md``, contrib ops)."""
from __future__ import annotations

import math

from ..registry import MAX_OPSET, converter, find_converter
from .conv import conv
from .elementwise import UNARY, gelu, scalar
from .gemm import gemm, matmul

MS = "com.microsoft"


@converter("Gelu", since=1, domain=MS)
def ms_gelu(ctx, inputs, attrs):
    """``0.5 x (1 + erf(x / sqrt 2))``."""
    return gelu(ctx, inputs[:1], {})


@converter("BiasGelu", since=1, domain=MS)
def bias_gelu(ctx, inputs, attrs):
    """Gelu of ``A + B`` (B: a bias over the last axis)."""
    return gelu(ctx, [ctx.call("add", inputs[0], inputs[1])], {})


@converter("FastGelu", since=1, domain=MS)
def fast_gelu(ctx, inputs, attrs):
    """The tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` of ``X + bias``."""
    x = inputs[0]
    if len(inputs) > 1 and inputs[1] is not None:
        x = ctx.call("add", x, inputs[1])
    inner = ctx.call("multiply", x, ctx.call("add", scalar(1, x), ctx.call(
        "multiply", scalar(0.044715, x), ctx.call("multiply", x, x))))
    t = ctx.call("tanh", ctx.call("multiply", inner, scalar(math.sqrt(2 / math.pi), x)))
    return ctx.call("multiply", ctx.call("multiply", x, scalar(0.5, x)), ctx.call("add", scalar(1, x), t))


@converter("QuickGelu", since=1, domain=MS)
def quick_gelu(ctx, inputs, attrs):
    """``x * sigmoid(alpha x)``, alpha 1.702 by default."""
    x = inputs[0]
    return ctx.call("multiply", x, ctx.call("sigmoid", ctx.call("multiply", x, scalar(attrs.get("alpha", 1.702), x))))


@converter("BiasAdd", since=1, domain=MS)
def bias_add(ctx, inputs, attrs):
    """``X + bias + skip`` (bias over the channels, the last axis)."""
    x, bias, skip = inputs
    return ctx.call("add", ctx.call("add", x, bias), skip)


@converter("BiasSoftmax", since=1, domain=MS)
def bias_softmax(ctx, inputs, attrs):
    """Softmax over axes ``axis`` and above of ``data + bias``; the bias broadcasts numpy's way: with
    ``is_inner_broadcast`` it has data's rank and ones on the inner axes it broadcasts over (another rank
    is refused: numpy would align it from the right), without it it lacks (or has ones on) leading axes."""
    data, bias = inputs
    rank, axis = data.type.ndim, attrs.get("axis", 1) % data.type.ndim
    if attrs.get("is_inner_broadcast", 1) and bias.type.ndim != rank:
        raise ctx.unsupported(f"an inner-broadcast bias of rank {bias.type.ndim} for data of rank {rank}")
    y = ctx.call("add", data, bias)
    if y.type.shape != data.type.shape:
        raise ctx.error(f"bias {bias.type} does not broadcast to data {data.type}")
    if axis == rank - 1:
        return ctx.call("nn.softmax", y, axis=axis)
    rows = int(math.prod(y.type.shape[:axis]))
    flat = ctx.call("nn.softmax", ctx.call("reshape", y, newshape=[rows, y.type.size // max(rows, 1)]), axis=1)
    return ctx.call("reshape", flat, newshape=list(y.type.shape))


def _activation(ctx, y, name: str, attrs: dict):
    """ONNX activation ``name`` with ``attrs`` applied to ``y`` through its own converter (``""``: none);
    Clip's is the one that takes ``min`` and ``max`` as attributes."""
    if name in ("", "Identity"):
        return y
    if name in ("Relu", "Tanh", "Sigmoid"):
        return ctx.call(UNARY[name], y)
    convert = find_converter(name, 1 if name == "Clip" else MAX_OPSET) if name in FUSABLE else None
    if convert is None:
        raise ctx.unsupported(f"fused activation {name!r} is not supported ({', '.join(FUSABLE)} are)")
    return convert(ctx, [y], attrs)


#: The activations onnxruntime fuses into Gemm (``FusedGemm``) and, the first six, into Conv (MLAS).
FUSABLE = ("Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid", "Elu", "Selu", "Celu", "Softplus",
           "Softsign", "ThresholdedRelu")
#: FusedConv's positional ``activation_params``: the activation's attributes in order.
CONV_PARAMS = {"LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "Clip": ("min", "max")}


@converter("FusedConv", since=1, domain=MS)
def fused_conv(ctx, inputs, attrs):
    """``activation(Conv(X, W, B) + Z)``: Conv's attributes, ``activation`` with ``activation_params``."""
    conv_attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
    y = conv(ctx, inputs[:3], conv_attrs)
    if len(inputs) > 3 and inputs[3] is not None:
        y = ctx.call("add", y, inputs[3])
    name = attrs.get("activation", "")
    act = dict(zip(CONV_PARAMS.get(name, ()), attrs.get("activation_params", [])))
    return _activation(ctx, y, name, act)


@converter("NhwcConv", since=1, domain=MS)
def nhwc_conv(ctx, inputs, attrs):
    """Conv of channels-last data ``[N, H.., C]`` with weights ``[M, kH.., C/group]``, output channels-last."""
    x, w = inputs[0], inputs[1]
    nd = x.type.ndim
    first = [0, nd - 1] + list(range(1, nd - 1))
    last = [0] + list(range(2, nd)) + [1]
    y = conv(ctx, [ctx.call("transpose", x, axes=first), ctx.call("transpose", w, axes=first)] + list(inputs[2:3]),
             attrs)
    return ctx.call("transpose", y, axes=last)


@converter("FusedGemm", since=1, domain=MS)
def fused_gemm(ctx, inputs, attrs):
    """``activation(Gemm(A, B, C))``; ``activation_alpha``/``_beta``/``_gamma`` are the activation's
    ``alpha``/``beta``/``gamma``."""
    gemm_attrs = {k: v for k, v in attrs.items() if not k.startswith("activation")}
    act = {k[len("activation_"):]: v for k, v in attrs.items() if k.startswith("activation_")}
    return _activation(ctx, gemm(ctx, inputs, gemm_attrs), attrs.get("activation", ""), act)


def _batch_perm(rank: int, trans_batch: bool, trans: bool) -> list[int] | None:
    """The transpose FusedMatMul folds into an operand of ``rank``: ``transBatch`` moves axis 0 to just
    before the matrix's last axis (``[M, B.., K]`` read as ``[B.., M, K]``), ``trans`` swaps the last two."""
    axes = list(range(rank))
    if trans_batch and rank > 2:
        axes = axes[1:-1] + [0, rank - 1]
    if trans and rank > 1:
        axes[-1], axes[-2] = axes[-2], axes[-1]
    return None if axes == list(range(rank)) else axes


@converter("FusedMatMul", "TransposeMatMul", since=1, domain=MS)
def fused_matmul(ctx, inputs, attrs):
    """``alpha * op(A) @ op(B)``, numpy's matmul after the transposes of ``transA``/``transB`` (the last two
    axes) and ``transBatchA``/``transBatchB`` (see :func:`_batch_perm`)."""
    a, b = inputs
    pa = _batch_perm(a.type.ndim, bool(attrs.get("transBatchA", 0)), bool(attrs.get("transA", 0)))
    pb = _batch_perm(b.type.ndim, bool(attrs.get("transBatchB", 0)), bool(attrs.get("transB", 0)))
    if pa:
        a = ctx.call("transpose", a, axes=pa)
    if pb:
        b = ctx.call("transpose", b, axes=pb)
    y = matmul(ctx, [a, b], {})
    alpha = float(attrs.get("alpha", 1.0))
    return y if alpha == 1.0 else ctx.call("multiply", y, scalar(alpha, y))

