"""``alter_op_layout_cuda``: 16-bit convolutions in NHWC on CUDA tensor cores (the CUDA side of
:mod:`.layout`).

The blocked layout with one block of all the channels, ``NCHW[C]c``, is NHWC.  A 16-bit one-group
``nn.conv2d`` (constant weights) becomes ``nn.contrib_conv2d_gemm_without_weight_transform``, an implicit GEMM
over the ``[KH * KW * C, O]`` weight matrix (packed once, here), where
``schedules.cuda_tensorcore_conv.conv_refusal`` finds nothing against it.  One whose input channels are not
whole 16-byte gathers (``C % 8``: an image's 3) takes its input as ``topi.nn.conv2d_gemm.space_to_depth_plan``
says (MLPerf's ResNet stem): zero-padded, each ``s x s`` patch one pixel of ``s * s * C'`` channels (a pad, a
reshape, a transpose and a reshape, fused into the kernel that writes the input), then a stride-1 convolution
with rearranged weights.  A GEMM of few blocks and a long reduction (``cuda_tensorcore_conv.split_k``: ResNet's
7 x 7 layers at batch 1) computes float32 partial sums of slices of the reduction, added up (slices and adds)
in the kernel of its epilogue.  Any other refused convolution stays NCHW with a warning naming why.  A 16-bit
dense whose GEMM no tile divides (ResNet's 1000 classes) is padded to whole tiles and sliced back.  Bias, max /
average pooling, global pooling, concatenation and elementwise ops follow the layout, as on the CPU
(:data:`CUDA_RULES`), so activations stay NHWC between the convolutions.
"""
from __future__ import annotations

import warnings

import numpy as np

from ...topi.nn.conv2d_gemm import gemm_kernel_numpy, space_to_depth_kernel_numpy, space_to_depth_plan
from ..ir import Const, Graph, Node
from ..op.registry import call
from .layout import RULES, Rule, _Layouts, alter_op_layout


def _conv2d_gemm(st: _Layouts, n: Node, info: dict):
    """A 16-bit one-group convolution on tensor cores (see the module), or None (a warning naming why)."""
    from ..schedules.cuda_tensorcore_conv import conv_refusal, row_align, split_k
    from ..schedules.cuda_wgmma import conv_pairs
    x, w = n.inputs
    if not isinstance(w, Const) or x.type.ndim != 4 or w.type.dtype != x.type.dtype:
        return None
    o, c, kh, kw = w.type.shape
    a = n.attrs
    m = n.type.shape[0] * n.type.shape[2] * n.type.shape[3]
    why = conv_refusal(x.type.dtype, a["groups"], c, m, o, kh * kw * c, info)
    if why is None:
        splits = split_k(m, o, kh * kw * c, x.type.dtype, info)
        y = call("nn.contrib_conv2d_gemm_without_weight_transform", st.get_blocked(x, c),
                 st.pack(w, "HWIO", gemm_kernel_numpy), strides=a["strides"], padding=a["padding"],
                 dilation=a["dilation"], kernel_size=(kh, kw), data_layout=f"NCHW{c}c", kernel_layout="HWIO",
                 out_layout=f"NCHW{o}c", splits=splits,
                 row_align=row_align(m, splits == 1 and conv_pairs(info.get("arch") or "", m, c, kh * kw,
                                                                    a["strides"], a["dilation"], o)))
        return _sum_splits(y, x.type.dtype), o
    if c % 8 and a["groups"] == 1:
        plan = space_to_depth_plan(c, *x.type.shape[2:], kh, kw, a["strides"], a["padding"], a["dilation"])
        if isinstance(plan, dict):
            why = conv_refusal(x.type.dtype, 1, plan["c"], m, o, plan["kh"] * plan["kw"] * plan["c"], info)
            if why is None:
                return _space_to_depth_conv(st, x, w, o, plan, row_align(m)), o
        why = f"{why}; as space-to-depth patches: {plan}"
    if x.type.dtype in ("float16", "bfloat16"):
        warnings.warn(f"nn.conv2d {x.type} * {w.type} stays on CUDA cores (NCHW): {why}", stacklevel=2)
    return None


def _sum_splits(y, dtype: str):
    """A split-K convolution's float32 partial sums (leading axis) added up and cast to ``dtype``: slices and
    adds (injective), so one kernel computes them with the epilogue that follows; ``y`` itself if unsplit."""
    if y.type.dtype == dtype:
        return y
    shape = y.type.shape
    parts = [call("strided_slice", y, begin=(s,) + (0,) * (len(shape) - 1), end=(s + 1,) + shape[1:],
                  strides=(1,) * len(shape)) for s in range(shape[0])]
    while len(parts) > 1:
        parts = [call("add", *parts[i:i + 2]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return call("cast", call("reshape", parts[0], newshape=shape[1:]), dtype=dtype)


def _space_to_depth_conv(st: _Layouts, x, w: Const, o: int, plan: dict, align: int):
    """The convolution of ``x`` (NCHW) by ``w`` as :func:`~...topi.nn.conv2d_gemm.space_to_depth_plan`'s ``plan``."""
    s, (pt, pb, pl, pr) = plan["s"], plan["pads"]
    n, c = x.type.shape[:2]
    p = call("nn.pad", st.get_plain(x), pad_width=((0, 0), (0, plan["cp"] - c), (pt, pb), (pl, pr)))
    p = call("reshape", p, newshape=(n, plan["cp"], plan["hs"], s, plan["ws"], s))
    p = call("transpose", p, axes=(0, 2, 4, 3, 5, 1))
    p = call("reshape", p, newshape=(n, 1, plan["hs"], plan["ws"], plan["c"]))
    how = f"HWIO space-to-depth {s} {plan['cp']}"
    return call("nn.contrib_conv2d_gemm_without_weight_transform", p,
                st.pack(w, how, lambda v: space_to_depth_kernel_numpy(v, plan)), strides=(1, 1),
                padding=(0, 0, 0, 0), dilation=(1, 1), kernel_size=(plan["kh"], plan["kw"]),
                data_layout=f"NCHW{plan['c']}c", kernel_layout="HWIO", out_layout=f"NCHW{o}c", row_align=align)


#: a 16-bit dense of at least this many rows whose GEMM no tensor-core tile divides is padded to whole tiles
DENSE_PAD_MIN_ROWS = 16
#: the tile its padded rows and columns are multiples of (the smallest GEMM block)
DENSE_PAD = 64


def _dense_tensorcore(st: _Layouts, n: Node, info: dict):
    """CUDA: a 16-bit ``nn.dense`` (constant weights, 2-d data of at least :data:`DENSE_PAD_MIN_ROWS` rows) whose
    GEMM the tensor-core tiles do not divide (ResNet's classifier: 1000 columns, 32 rows at batch 32) on tensor
    cores: its data's rows zero-padded (``nn.pad``, fused into the kernel writing them), its weights' rows padded
    with zeros here, the padded product sliced back (one small kernel with the epilogue).  None: as it is."""
    from ..schedules.cuda_tensorcore import arch_refusal, preferred_knobs
    x, w = n.inputs
    if not isinstance(w, Const) or x.type.ndim != 2 or x.type.dtype not in ("float16", "bfloat16") or \
            x.type.shape[0] < DENSE_PAD_MIN_ROWS or arch_refusal(info) is not None:
        return None
    (m, k), units = x.type.shape, w.type.shape[0]
    limit = info.get("shared_limit", 48 * 1024)
    mp, up = (-(-d // DENSE_PAD) * DENSE_PAD for d in (m, units))
    if isinstance(preferred_knobs(1, m, units, k, x.type.dtype, False, limit), dict) or \
            isinstance(preferred_knobs(1, mp, up, k, x.type.dtype, False, limit), str):
        return None
    xp = call("nn.pad", st.get_plain(x), pad_width=((0, mp - m), (0, 0)))
    wp = st.pack(w, f"rows padded to {up}", lambda v: np.pad(v, ((0, up - units), (0, 0))))
    return call("strided_slice", call("nn.dense", xp, wp, **dict(n.attrs)), begin=(0, 0), end=(m, units),
                strides=(1, 1))


#: CUDA's rules besides the convolutions': the ops that follow a layout (bias, pooling, global pooling,
#: concatenation, elementwise) as on the CPU
CUDA_RULES: dict[str, Rule] = {k: RULES[k] for k in ("nn.bias_add", "nn.max_pool2d", "nn.avg_pool2d",
                                                     "nn.global_avg_pool2d", "nn.global_max_pool2d", "concatenate")}


def alter_op_layout_cuda(g: Graph, target=None) -> Graph:
    """``g`` for CUDA ``target``: 16-bit convolutions in NHWC on tensor cores (see the module), activations
    kept NHWC between them (transforms at the boundaries only)."""
    from ..schedules.registry import target_info
    info = target_info(target) if target is not None else {}
    return alter_op_layout(g, dict(CUDA_RULES, **{"nn.conv2d": lambda st, n: _conv2d_gemm(st, n, info),
                                                  "nn.dense": lambda st, n: _dense_tensorcore(st, n, info)}))


__all__ = ["CUDA_RULES", "DENSE_PAD", "DENSE_PAD_MIN_ROWS", "alter_op_layout_cuda"]
