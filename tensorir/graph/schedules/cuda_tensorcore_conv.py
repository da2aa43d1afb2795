"""Implicit-GEMM convolution on tensor cores (sm_80+): the CUDA entry of
``nn.contrib_conv2d_gemm_without_weight_transform`` (TVM's ``conv2d_nhwc_tensorcore``, as one GEMM).

The layout pass (``passes/layout.py``, :func:`~..passes.layout.alter_op_layout_cuda`) turns a 16-bit
one-group ``nn.conv2d`` into that op where :func:`conv_refusal` finds nothing against it: NHWC data
(``NCHW[C]c``), the ``[KH * KW * C, O]`` weight matrix packed once.  Its DAG (``topi.nn.conv2d_gemm_nhwc``)
is the GEMM ``[N * OH * OW, KH * KW * C] x [KH * KW * C, O]`` whose A operand is the ``im2col`` gather,
so :func:`.cuda_tensorcore.schedule_tensorcore` schedules it as any GEMM: ``im2col`` inlines into the
A slices' ``cp.async`` fetch, whose padding select becomes a zero-filling copy (16 bytes: 8 channels of
one pixel, hence ``C % 8 == 0``), B (the weights, stored [K, N]) goes through ``ldmatrix.trans``, the
output pixels are the GEMM's rows and the epilogue (bias, relu, residual add, the cast) reads the shared
float32 tile of the accumulators.  Tiles must divide the GEMM (:data:`CONV_PREFERRED`: 32-row blocks serve
7 x 7 maps at batch 32, ``M = 32 * 49``), so edge tiles never exist: the op pads its rows to a multiple of 32
(``topi.nn.conv2d_gemm.gemm_rows``; 7 x 7 at batch 1: 49 -> 64), the gather zero-fills the rows past the
pixels and the epilogue's tail guard never stores them.  The config space
(:data:`SPACE_KNOBS`) is tuned as ``conv2d_gemm_tensorcore_cuda``.  A GEMM of few blocks and a long
reduction is split (:func:`split_k`; the layout pass adds the float32 partial sums up in the epilogue's kernel).  On sm_90 :func:`conv_knobs` gives the
gathering wgmma main loop where it fits (:func:`.cuda_wgmma.schedule_wgmma_conv`; the config space stays
``mma.sync``).
"""
from __future__ import annotations

from ...schedule import Schedule, Stage
from ...topi.nn.conv2d_gemm import gemm_rows
from ..ir import GraphError
from ..lower_te import KernelTE
from . import cuda_tensorcore
from .cuda import register_cuda_rule
from .cuda_wgmma import conv_geometry, is_sm90, wgmma_conv_knobs
from .helpers import single_reduction
from .registry import target_info

#: the tile choices for convolutions, first that fits: :data:`.cuda_tensorcore.PREFERRED`, then 32-row blocks
#: (then 32 x 32 with k slices of 16: small layers, ``K = 16 x odd``)
CONV_PREFERRED = cuda_tensorcore.PREFERRED + (
    ("any", {"block_m": 32, "block_n": 64, "warp_m": 32, "warp_n": 32, "stages": 4}),
    ("any", {"block_m": 32, "block_n": 32, "warp_m": 32, "warp_n": 32, "chunk": 16, "stages": 4}),
)
ANCHOR = "nn.contrib_conv2d_gemm_without_weight_transform"
TEMPLATE = "conv2d_gemm_tensorcore_cuda"
#: knob -> choices of the config space: the GEMM's (:data:`.cuda_tensorcore.SPACE_KNOBS`) and 32-row / 32-column
#: blocks, k slices of 16
SPACE_KNOBS = dict(cuda_tensorcore.SPACE_KNOBS, block_m=[32, 64, 128, 256], block_n=[32, 64, 128, 256],
                   chunk=[16, 32, 64])
SMALLEST = dict(cuda_tensorcore.DEFAULT_KNOBS, block_m=32, block_n=32, warp_m=32, warp_n=32, chunk=16)


def conv_knobs(m: int, n: int, k: int, dtype: str, info: dict, a=None, pixels: int | None = None):
    """The tensor-core knobs of a convolution's GEMM (``m`` rows: the ``pixels``, default ``a``'s or ``m``, padded
    by ``gemm_rows``; ``n`` output channels, ``k`` taps; ``a`` its ``im2col``) on the target ``info``, or why it
    has none: on sm_90 the gathering wgmma main loop where it fits (:func:`.cuda_wgmma.wgmma_conv_knobs` says why
    not), else ``mma.sync``; padded rows take row blocks no taller than the pixels (a whole block first: a
    single block clipped to the pixels would leave its threads' loops tails)."""
    why = cuda_tensorcore.arch_refusal(info)
    if why is not None:
        return why
    if pixels is None:
        pixels = cuda_tensorcore.gemm_pixels(a, m) if a is not None else m
    if a is not None and is_sm90(info.get("arch") or ""):
        wg = wgmma_conv_knobs(a, m, n, k, dtype, info.get("shared_limit", 48 * 1024))
        if isinstance(wg, dict):
            return dict(wg, wgmma=1)
    return cuda_tensorcore.preferred_knobs(1, m, n, k, dtype, True, info.get("shared_limit", 48 * 1024), CONV_PREFERRED,
                                           pixels)


def row_align(pixels: int, pairs: bool = False) -> int:
    """The row alignment (``topi.nn.conv2d_gemm.ROW_ALIGNS``) of a convolution of ``pixels`` output pixels: 64
    from :data:`ROW_ALIGN_64_FROM` pixels (64-row blocks: ResNet-18's 7 x 7 layers at batch 32, 1568 -> 1600
    rows, 51 against 67 us in 32-row blocks on an H100; on sm_90 the gathering wgmma loop's 64-row blocks), else 32;
    ``pairs`` (:func:`.cuda_wgmma.conv_pairs`: the pair loop's pairs of 64-row blocks): 128 (1568 -> 1664)."""
    if pairs and pixels % 128:
        return 128
    return 64 if pixels >= ROW_ALIGN_64_FROM and pixels % 64 else 32


def conv_refusal(dtype: str, groups: int, channels: int, m: int, n: int, k: int, info: dict) -> str | None:
    """Why a convolution (``groups``, ``channels`` in, GEMM ``m x n x k``) does not take tensor cores, or None."""
    if dtype not in ("float16", "bfloat16"):
        return f"{dtype} data (tensor-core convolutions take float16 / bfloat16)"
    if groups != 1:
        return f"{groups} groups"
    if channels % 8:
        return f"{channels} input channels (the im2col gather copies 8 channels of a pixel at a time: C % 8 == 0)"
    knobs = conv_knobs(gemm_rows(m, row_align(m)), n, k, dtype, info, pixels=m)   # the op pads its pixels
    return knobs if isinstance(knobs, str) else None


#: split-K (:func:`split_k`): a convolution whose GEMM has a reduction of at least :data:`SPLIT_MIN_K` has it
#: cut into slices (powers of two, at least :data:`SPLIT_MIN_SLICE` taps each) while the blocks of all the
#: slices stay within this: ResNet-18's 3x3 7 x 7 and 14 x 14 layers at batch 1 (16 and 28 blocks of 32 x 64,
#: 72 to 144 k-steps each, on an H100's 132 multiprocessors)
SPLIT_BLOCKS = 132
#: :func:`row_align`'s threshold
ROW_ALIGN_64_FROM = 1024
SPLIT_MIN_K = 2048
SPLIT_MIN_SLICE = 256


def split_k(m: int, n: int, k: int, dtype: str, info: dict) -> int:
    """How many slices of the reduction a convolution's GEMM (``m`` pixels, ``n`` output channels, ``k`` taps)
    takes on the target ``info`` (1: none): see :data:`SPLIT_BLOCKS`; each slice a whole number of the knobs'
    k slices (the knobs of a slice's GEMM)."""
    rows = gemm_rows(m, row_align(m))
    knobs = conv_knobs(rows, n, k, dtype, info, pixels=m)
    if isinstance(knobs, str) or k < SPLIT_MIN_K:
        return 1
    blocks = rows // knobs["block_m"] * (n // knobs["block_n"])
    splits = 1
    while blocks * splits * 2 <= SPLIT_BLOCKS and k % (2 * splits) == 0 and k // (2 * splits) >= SPLIT_MIN_SLICE:
        part = conv_knobs(rows, n, k // (2 * splits), dtype, info, pixels=m)
        if isinstance(part, str):
            break
        splits *= 2
    return splits


def fits(kt) -> str | None:
    """Why the config space does not fit the kernel (None: it does): tiles of at least :data:`SMALLEST`."""
    return cuda_tensorcore.fits(kt, SMALLEST)


def schedule_space(cfg, kt, shared_limit: int | None = None):
    """The kernel under ``cfg`` (knobs :data:`SPACE_KNOBS`; on sm_90 ``wgmma``: the default's gathering wgmma loop,
    where :func:`conv_knobs` takes it); the fallback: :func:`conv_knobs`'s choice, as the model deploys it."""
    return cuda_tensorcore.schedule_space(cfg, kt, shared_limit, SPACE_KNOBS, CONV_PREFERRED, WGMMA_KNOBS, _default)


#: the sm_90 knob of the space: ``mma.sync`` (its tiles the space's) or the default's gathering wgmma loop
WGMMA_KNOBS = {"wgmma": [0, 1]}


def _default(kt, anchor: Stage, out: Stage, info: dict):
    """:func:`conv_knobs` of the kernel's GEMM: the knobs :func:`schedule_conv2d_gemm` deploys it with."""
    m, n = (int(ax.dom.extent) for ax in anchor.op.axis[-2:])
    got = cuda_tensorcore.gemm_operands(anchor)
    return got if isinstance(got, str) else conv_knobs(m, n, int(anchor.op.reduce_axis[0].dom.extent), got[3], info, got[0])


@register_cuda_rule(ANCHOR, template=TEMPLATE, fits=fits, space=schedule_space)
def schedule_conv2d_gemm(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """The implicit GEMM (see the module) with :func:`conv_knobs`."""
    anchor = single_reduction(s, out)
    if anchor is None:
        raise GraphError(f"kernel {kt.kernel.name if kt.kernel else out.op.name}: {ANCHOR} without its GEMM")
    m, n = (int(ax.dom.extent) for ax in anchor.op.axis[-2:])     # split-K: slices of the reduction lead
    k = int(anchor.op.reduce_axis[0].dom.extent)
    got = cuda_tensorcore.gemm_operands(anchor)
    knobs = conv_knobs(m, n, k, got[3], target_info(), got[0]) if not isinstance(got, str) else got
    if isinstance(knobs, str):
        raise GraphError(f"kernel {kt.kernel.name if kt.kernel else out.op.name}: {ANCHOR} on tensor cores: {knobs}")
    cuda_tensorcore.schedule_tensorcore(s, out, anchor, knobs)


def tensorcore_conv2d(n: int, c: int, hw: tuple, o: int, kernel: int, stride: int = 1, pad: int = 0,
                      dtype: str = "float16", knobs: dict | None = None, *, bias: bool = False, relu: bool = False,
                      residual: bool = False, info: dict | None = None, splits: int = 1, row_align: int = 32):
    """``(schedule, [x, w, (bias,) (residual,) y])`` of :func:`conv2d_gemm_dag` on tensor cores; ``knobs``
    (``wgmma`` set: the sm_90a main loop) default to :func:`conv_knobs` for the target ``info`` (default sm_80
    with 48 KiB of shared memory; ``ValueError`` saying why none fit)."""
    from ...schedule import create_schedule
    from ...tensor import ComputeOp
    args = conv2d_gemm_dag(n, c, hw, o, kernel, stride, pad, dtype, bias=bias, relu=relu, residual=residual,
                           splits=splits, row_align=row_align)
    out = args[-1]
    s = create_schedule(out.op)
    anchor = next(st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis)
    for st in s.stages:
        if isinstance(st.op, ComputeOp) and st.op not in (out.op, anchor.op):
            st.compute_inline()
    m, kk = int(anchor.op.axis[-2].dom.extent), int(anchor.op.reduce_axis[0].dom.extent)
    a = cuda_tensorcore.gemm_operands(anchor)[0]
    got = knobs or conv_knobs(m, o, kk, dtype, info or {"arch": "sm_80", "shared_limit": 48 * 1024}, a)
    if isinstance(got, str):
        raise ValueError(f"tensorcore_conv2d: {got}")
    if got.get("wgmma") and "conv" not in got:
        geo = conv_geometry(a)
        if isinstance(geo, str):
            raise ValueError(f"tensorcore_conv2d: {geo}")
        got = dict(got, conv=geo)
    cuda_tensorcore.schedule_tensorcore(s, s[out], anchor, dict(cuda_tensorcore.DEFAULT_KNOBS, **got))
    return s, args


def conv2d_gemm_dag(n: int, c: int, hw: tuple, o: int, kernel: int, stride: int = 1, pad: int = 0,
                    dtype: str = "float16", *, bias: bool = False, relu: bool = False, residual: bool = False,
                    splits: int = 1, row_align: int = 32):
    """``[x, w, (bias,) (residual,) y]``: an NHWC convolution (``x`` [n, 1, H, W, c] as the layout pass gives
    it, ``w`` the [kernel * kernel * c, o] matrix), ``y`` stored as ``dtype`` after the epilogue ``+ bias[o]``
    (float32), ``+ residual`` (``dtype``, ``y``'s shape), ``relu``: a model kernel's DAG, unscheduled.
    ``splits`` > 1: ``y`` the float32 partial sums [splits, n, 1, OH, OW, o] (no epilogue); the GEMM's rows
    padded to a multiple of ``row_align``."""
    from ...expr import Max, binary, const
    from ...tensor import compute, placeholder
    from ...topi.nn.conv2d_gemm import conv2d_gemm_nhwc
    x = placeholder((n, 1, *hw, c), dtype, name="x")
    w = placeholder((kernel * kernel * c, o), dtype, name="w")
    y = conv2d_gemm_nhwc(x, w, (kernel, kernel), stride, pad, 1, splits=splits, row_align=row_align)
    if splits > 1:
        return [x, w, compute(y.shape, lambda *i: y(*i), name="y")]
    args = [x, w]
    if bias:
        b = placeholder((o,), "float32", name="bias")
        args.append(b)
        y = compute(y.shape, lambda *i, y=y: y(*i) + b[i[-1]], name="bias_add")
    if residual:
        r = placeholder(tuple(int(d) for d in y.shape), dtype, name="residual")
        args.append(r)
        y = compute(y.shape, lambda *i, y=y: y(*i) + r(*i).astype("float32"), name="residual_add")
    if relu:
        y = compute(y.shape, lambda *i, y=y: binary(Max, y(*i), const(0.0, "float32")), name="relu")
    return args + [compute(y.shape, lambda *i: y(*i).astype(dtype), name="y")]


__all__ = ["ANCHOR", "CONV_PREFERRED", "ROW_ALIGN_64_FROM", "SMALLEST", "SPACE_KNOBS", "SPLIT_BLOCKS", "SPLIT_MIN_K",
           "SPLIT_MIN_SLICE", "TEMPLATE", "conv2d_gemm_dag", "conv_knobs", "conv_refusal", "fits", "row_align", "schedule_conv2d_gemm",
           "schedule_space", "split_k", "tensorcore_conv2d", "WGMMA_KNOBS"]
