"""Tensor-core GEMM on CUDA (sm_80+): ``mma.sync`` fed by ``ldmatrix`` and ``cp.async`` pipelines.

TVM's ``dense_tensorcore`` shape, with the PTX intrinsics of ``tensorir/topi/cuda/tensor_intrin.py``:

- the output (with its fused epilogue: bias, activation, cast) in ``block_m x block_n`` tiles per block
  (``blockIdx.y / x``; batch axes on ``blockIdx.z``), read from a shared float32 tile of the
  accumulators by all threads, 4 consecutive columns each (``threadIdx.x`` 32 lanes, ``threadIdx.y / z``
  the warps);
- the accumulators (``warp`` scope: fragments) in ``warp_m x warp_n`` tiles per warp, ``mma.sync``
  on 16 x 8 tiles (k 16; TF32 k 8), the reduction in slices of ``chunk``;
- A and B slices in shared memory, filled by ``cp.async`` 16-byte copies from global memory with
  ``stages`` slots in flight (``double_buffer(async_copy=True, stages=...)``, commit / wait groups),
  their rows padded by 16 bytes against ``ldmatrix`` bank conflicts (``pad``), then ``ldmatrix.x4`` into
  the fragments (``.trans`` where B is stored [K, N]).

:func:`tensorcore_fits` says why a kernel cannot take it (dtypes, shapes that the tiles must divide);
:func:`schedule_tensorcore` applies a knob dict.
"""
from __future__ import annotations

import functools
import math

from ...schedule import Schedule, Stage
from ...topi.nn.conv2d_gemm import ROW_ALIGNS, gemm_rows
from ...topi.cuda.tensor_intrin import intrin_ldmatrix, intrin_mma, intrin_mma_store, mma_shape
from .helpers import bind, cooperative_fetch, kernel_stages

#: the default knobs: 128 x 128 blocks of 2 x 2 warps of 64 x 64, k slices of 32, 3 stages
DEFAULT_KNOBS = {"block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "chunk": 32, "stages": 3, "pad": 1,
                 "swizzle": 1}


def gemm_operands(anchor: Stage):
    """``(A, B, b_trans, dtype)`` of a GEMM reduction ``sum_k f(A[.., i, k]) * f(B[.., j, k])`` (``b_trans``:
    ``B[.., k, j]``), or a string saying why it is not one."""
    from ...expr import Cast, Mul, Reduce, TensorLoad
    body = anchor.op.bodies[0]
    if not isinstance(body, Reduce) or body.combiner.name != "sum" or len(anchor.op.reduce_axis) != 1:
        return "not a single sum reduction"
    src = body.source
    if not isinstance(src, Mul):
        return "the reduction is not a product of two loads"
    loads, casts = [], []
    for x in (src.a, src.b):
        x, cast = _cast_stage(x)
        inner = x.value if isinstance(x, Cast) else x
        if not isinstance(inner, TensorLoad) or (isinstance(x, Cast) and x.dtype != "float32"):
            return "the product's factors are not loads (or their casts to float32)"
        loads.append(inner)
        casts.append(cast or isinstance(x, Cast))
    dtypes = {ld.dtype for ld in loads}
    if len(dtypes) != 1:
        return f"mixed input dtypes {sorted(dtypes)}"
    (dtype,) = dtypes
    if dtype == "float32" and any(casts):
        return "float32 inputs are cast"
    if dtype in ("float16", "bfloat16") and not all(casts):
        return f"{dtype} products must accumulate in float32"
    if body.dtype != "float32":
        return f"accumulates in {body.dtype}, not float32"
    k = anchor.op.reduce_axis[0].var
    i, j = (ax.var for ax in anchor.op.axis[-2:])
    a, b = loads
    if _index_is(b.indices[-2:], (i, k)) and _index_is(a.indices[-2:], (j, k)) or \
            _index_is(b.indices[-2:], (i, k)) and _index_is(a.indices[-2:], (k, j)):
        a, b = b, a
    if not _index_is(a.indices[-2:], (i, k)):
        return "A is not indexed [.., i, k]"
    if _index_is(b.indices[-2:], (j, k)):
        return a.tensor, b.tensor, False, dtype
    if _index_is(b.indices[-2:], (k, j)):
        return a.tensor, b.tensor, True, dtype
    return "B is not indexed [.., j, k] or [.., k, j]"


def _cast_stage(x):
    """``(load, True)`` for a load of an (inlined) stage that only casts a tensor to float32, as the graph's
    16-bit GEMMs read their inputs (``lower_te``): the load of the tensor itself, indices substituted;
    else ``(x, False)``."""
    from ...expr import Cast, TensorLoad
    from ...tensor import ComputeOp
    from ...visitor import substitute
    if not isinstance(x, TensorLoad) or not isinstance(x.tensor.op, ComputeOp) or x.tensor.op.reduce_axis:
        return x, False
    op = x.tensor.op
    body = op.bodies[0]
    if not (isinstance(body, Cast) and body.dtype == "float32" and isinstance(body.value, TensorLoad)
            and _index_is(body.value.indices, [ax.var for ax in op.axis])):
        return x, False
    return substitute(body.value, {ax.var: i for ax, i in zip(op.axis, x.indices)}), True


def _readers(cf: Stage, src) -> list:
    """The tensors whose stages read ``src`` for the accumulator ``cf``: ``cf`` itself, or the inlined
    cast stages between them."""
    if src in cf.op.input_tensors:
        return [cf.op.output(0)]
    return [t for t in cf.op.input_tensors if src in getattr(t.op, "input_tensors", ())]


def _store_dtype(out: Stage, acc: Stage) -> str | None:
    """The dtype ``out`` stores the accumulator as, where it is that alone (a copy or a cast), else None."""
    from ...expr import Cast, TensorLoad
    body = out.op.bodies[0]
    value = body.value if isinstance(body, Cast) else body
    if not isinstance(value, TensorLoad) or value.tensor.op is not acc.op or \
            not _index_is(value.indices, [ax.var for ax in out.op.axis]):
        return None
    return body.dtype if body.dtype in ("float32", "float16", "bfloat16") else None


def _warp_tiles(st: Stage, i, j, wm: int, wn: int, intrin):
    """``st``'s block tile (axes ``i``, ``j``) over the warps (``threadIdx.y / z``), each warp's tile in
    16 x 8 pieces tensorized with ``intrin``; returns the warp's column loop (where the accumulators go)."""
    wi, i = st.split(i, factor=wm)
    wj, j = st.split(j, factor=wn)
    ti, i = st.split(i, factor=16)
    tj, j = st.split(j, factor=8)
    st.reorder(wi, wj, ti, tj, i, j)
    bind(st, wi, "threadIdx.y")
    bind(st, wj, "threadIdx.z")
    st.unroll(ti)
    st.unroll(tj)
    st.tensorize(i, intrin)
    return wj


def load_fragments(af: Stage, bf: Stage, cf: Stage, ki, dtype: str, b_trans: bool) -> None:
    """The A and B fragments (``warp`` caches of shared tiles) of the accumulator ``cf`` loaded by
    ``ldmatrix`` at its k-slice loop ``ki``, in 16-row tiles (B stored [K, N]: 16 x 16 ``.trans`` tiles)."""
    for frag, mode in ((af, "a"), (bf, "b_trans" if b_trans else "b")):
        frag.compute_at(cf, ki)
        r, c = frag.op.axis[-2:]
        ro, r = frag.split(r, factor=16)
        if mode == "b_trans":
            co, c = frag.split(c, factor=16)
            frag.reorder(ro, co, r, c)
            frag.unroll(co)
        frag.unroll(ro)
        frag.tensorize(r, intrin_ldmatrix(dtype, mode))


def _index_is(idx, want) -> bool:
    from ...expr import Var
    return all(isinstance(x, Var) and x is w for x, w in zip(idx, want))


def tensorcore_fits(out_shape, k: int, dtype: str, b_trans: bool, knobs: dict, pixels: int | None = None) -> str | None:
    """Why ``knobs`` cannot schedule a GEMM of output ``out_shape`` and reduction ``k``, or None.  ``pixels``: the
    rows that are a convolution's output pixels, where its GEMM's rows are padded past them (:func:`gemm_pixels`):
    row blocks no taller than the pixels (a single block clipped to them would leave its threads' loops tails)."""
    m, n = out_shape[-2:]
    _, _, kk = mma_shape(dtype)
    bm, bn, wm, wn, chunk = (knobs[x] for x in ("block_m", "block_n", "warp_m", "warp_n", "chunk"))
    if b_trans and dtype == "float32":
        return "TF32 needs B stored [N, K]"
    if m % bm or n % bn or k % chunk:
        return f"the tiles ({bm} x {bn}, k {chunk}) do not divide the GEMM ({m} x {n}, k {k})"
    if pixels is not None and pixels < m and bm > pixels:
        return f"{bm}-row blocks over {pixels} pixels (the GEMM's {m} rows padded past them)"
    group, blocks = knobs.get("swizzle", 1), -(-(pixels or m) // bm)
    if group > 1 and blocks % group:
        return f"swizzle {group} over {blocks} row blocks (not whole groups: the same kernel as swizzle 1)"
    if bm % wm or bn % wn or wm % 16 or wn % 16 or chunk % kk or (b_trans and chunk % 16):
        return "the warp tiles do not divide the block tiles into 16 x 16 pieces"
    warps = (bm // wm) * (bn // wn)
    if warps > 32:
        return f"{warps} warps per block"
    esz = 4 if dtype == "float32" else 2
    fetch = 16 // esz * 32 * warps
    if bm * chunk % fetch or bn * chunk % fetch:
        return "the A / B slices are not whole 16-byte copies of every thread"
    return None


def gemm_pixels(a, m: int) -> int:
    """The rows of a GEMM of ``m`` rows whose A operand is ``a`` that are output pixels: a convolution's ``im2col``
    records them (``attrs["conv"]["pixels"]``: the rows past them are padding), else all ``m``."""
    return a.op.attrs["conv"].get("pixels", m) if "conv" in getattr(a.op, "attrs", {}) else m


def shared_bytes(dtype: str, knobs: dict) -> int:
    """Shared memory the knobs take: the pipelined A and B slices and the float32 output tile."""
    esz = 4 if dtype == "float32" else 2
    row = knobs["chunk"] + (16 // esz if knobs["pad"] else 0)
    return knobs["stages"] * (knobs["block_m"] + knobs["block_n"]) * row * esz + \
        knobs["block_m"] * (knobs["block_n"] + (4 if knobs["pad"] else 0)) * 4


def bind_blocks(out: Stage, bm: int, bn: int, group: int, gemm_axes: int | None = None, pairs: bool = False):
    """``out``'s last two axes in ``bm x bn`` tiles over the blocks (batch axes on ``blockIdx.z``); with
    ``group`` > 1 consecutive blocks take ``group`` row tiles of one column tile, then the next column (a
    wave of blocks covers a squarer region of C, its A and B panels read from L2 more often than DRAM).
    An output with more axes than its GEMM's ``gemm_axes`` (a convolution's pixels) fuses all but the
    last and the GEMM's batch axes into the GEMM's rows; ``pairs``: the row blocks in whole pairs (a pair loop's
    clusters, ``group`` 1), a last block past the rows storing nothing.  Returns (the block loop, the tile's row and
    column axes)."""
    axes = list(out.op.axis)
    lead = (gemm_axes or 2) - 2                          # batch axes (a split-K conv's slices)
    if gemm_axes is not None and len(axes) > gemm_axes:   # conv2d_gemm: output pixels are the GEMM's rows
        axes = axes[:lead] + [out.fuse(*axes[lead:-1]), axes[-1]]
    rows = math.prod(int(ax.dom.extent) for ax in out.op.axis[lead:-1]) if len(axes) < len(out.op.axis) \
        else int(axes[-2].dom.extent)
    bi, ii = out.split(axes[-2], factor=bm * (2 if pairs else 1))
    if pairs:
        bp, ii = out.split(ii, factor=bm)
    bj, jj = out.split(axes[-1], factor=bn)
    out.reorder(*axes[:-2], bi, *([bp] if pairs else []), bj, ii, jj)
    if pairs:
        bi = out.fuse(bi, bp)
    if len(axes) > 2:
        bind(out, out.fuse(*axes[:-2]) if len(axes) > 3 else axes[0], "blockIdx.z")
    if group > 1 and -(-rows // bm) % group == 0:       # whole groups of the (last clipped) row blocks
        bio, bii = out.split(bi, factor=group)
        out.reorder(bio, bj, bii)
        bj = out.fuse(bio, bj, bii)
        bind(out, bj, "blockIdx.x")
    else:
        bind(out, bi, "blockIdx.y")
        bind(out, bj, "blockIdx.x")
    return bj, ii, jj


def schedule_tensorcore(s: Schedule, out: Stage, anchor: Stage, knobs: dict) -> None:
    """Schedule the GEMM ``anchor`` (``sum_k A[i, k] B[j, k]``, or ``B[k, j]``) under the output stage
    ``out`` (the anchor itself, or its elementwise epilogue) with tensor cores (see the module); knobs
    with ``wgmma`` set: the sm_90a schedule (:mod:`.cuda_wgmma`; with ``conv``, its gathering convolution's)."""
    if knobs.get("wgmma"):
        from .cuda_wgmma import schedule_wgmma, schedule_wgmma_conv
        return (schedule_wgmma_conv if knobs.get("conv") else schedule_wgmma)(s, out, anchor, knobs)
    got = gemm_operands(anchor)
    if isinstance(got, str):
        raise ValueError(f"tensor-core GEMM of {anchor.op.name}: {got}")
    a, b, b_trans, dtype = got
    bm, bn, wm, wn, chunk = (knobs[x] for x in ("block_m", "block_n", "warp_m", "warp_n", "chunk"))
    stages, pad = knobs["stages"], knobs["pad"]
    _, _, kk = mma_shape(dtype)
    esz = 4 if dtype == "float32" else 2
    wy, wz = bm // wm, bn // wn
    if anchor is out:
        cf = s[s.cache_write(out.op.output(0), "warp")]
    else:
        cf = anchor
        cf.set_scope("warp")
    direct = _store_dtype(out, cf)
    if direct is None:
        readers = [st for st in s.stages if cf.op.output(0) in st.op.input_tensors]
        cs = s[s.cache_read(cf.op.output(0), "shared", [r.op.output(0) for r in readers])]
    readers = {t: _readers(cf, t) for t in (a, b)}
    as_ = s[s.cache_read(a, "shared", readers[a])]
    bs = s[s.cache_read(b, "shared", readers[b])]
    af = s[s.cache_read(as_.op.output(0), "warp", readers[a])]
    bf = s[s.cache_read(bs.op.output(0), "warp", readers[b])]
    bj, ii, jj = bind_blocks(out, bm, bn, knobs.get("swizzle", 1), gemm_axes=len(anchor.op.axis))
    if direct is not None:     # the output (a cast at most) stored from the fragments
        wj = _warp_tiles(out, ii, jj, wm, wn, intrin_mma_store("global", direct))
        attach = out
    else:                      # through a shared float32 tile, read by all threads, 4 columns each
        t = out.fuse(ii, jj)
        t, vec = out.split(t, factor=4)
        t, tx = out.split(t, factor=32)
        t, ty = out.split(t, factor=wy)
        t, tz = out.split(t, factor=wz)
        bind(out, tz, "threadIdx.z")
        bind(out, ty, "threadIdx.y")
        bind(out, tx, "threadIdx.x")
        out.vectorize(vec)
        cs.compute_at(out, bj)
        if pad:
            cs.storage_align(cs.op.axis[-2], bn, 4)
        wj = _warp_tiles(cs, *cs.op.axis[-2:], wm, wn, intrin_mma_store())
        attach = cs

    # mma.sync over the warp's tile
    cf.compute_at(attach, wj)
    fi, fj = cf.op.axis[-2:]
    fio, fi = cf.split(fi, factor=16)
    fjo, fj = cf.split(fj, factor=8)
    (k,) = cf.op.reduce_axis
    ko, k = cf.split(k, factor=chunk)
    ki, k = cf.split(k, factor=16 if b_trans else kk)
    if b_trans:
        kj, k = cf.split(k, factor=kk)
        cf.reorder(ko, ki, kj, fio, fjo, fi, fj, k)
        cf.unroll(kj)
    else:
        cf.reorder(ko, ki, fio, fjo, fi, fj, k)
    cf.unroll(ki)
    cf.unroll(fio)
    cf.unroll(fjo)
    cf.tensorize(fi, intrin_mma(dtype, b_trans))

    load_fragments(af, bf, cf, ki, dtype, b_trans)

    # A and B slices: cp.async pipelines
    threads = (("threadIdx.x", 32), ("threadIdx.y", wy), ("threadIdx.z", wz))
    for sh in (as_, bs):
        sh.compute_at(cf, ko)
        if pad:
            sh.storage_align(sh.op.axis[-2], chunk, 16 // esz)   # rows 16 bytes longer than the slice
        cooperative_fetch(sh, threads, 16 // esz)
        sh.double_buffer(async_copy=True, stages=stages)




#: the default's knobs by size, the first that fits the kernel and the target wins (measured on an H100,
#: benchmarks/gemm_tensorcore.py, among 9 configs without swizzle: 128 x 128 blocks of 2 x 2 warps, k
#: slices of 64, 3 stages fastest from n = 2048, 64 x 128 at n = 1024, where larger blocks leave SMs idle)
PREFERRED = (
    ("large", {"chunk": 64}),
    ("any", {"block_m": 64, "warp_m": 32, "stages": 4}),
    ("any", {"block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32, "stages": 4}),
)
LARGE_BLOCKS = 256           # "large": the 128 x 128 grid has at least this many blocks
TEMPLATE = "gemm_tensorcore_cuda"
#: knob -> choices of the config space
SPACE_KNOBS = {"block_m": [64, 128, 256], "block_n": [64, 128, 256], "warp_m": [32, 64], "warp_n": [32, 64],
               "chunk": [32, 64], "stages": [2, 3, 4], "swizzle": [1, 4, 8], "pad": [1, 0]}


def for_dtype(dtype: str, knobs: dict) -> dict:
    """TF32 slices hold half the elements of 16-bit ones in the same bytes."""
    return dict(knobs, chunk=knobs["chunk"] // 2) if dtype == "float32" else dict(knobs)


def kernel_gemm(kt, anchor: Stage, out: Stage):
    """``(A, B, b_trans, dtype, batch, m, n, k)`` of a kernel's GEMM anchor, or why it is none."""
    got = gemm_operands(anchor)
    if isinstance(got, str):
        return got
    a, b, b_trans, dtype = got
    shape = [int(d) for d in out.op.output(0).shape]
    gemm = [int(d) for d in anchor.op.output(0).shape]
    lead = len(gemm) - 2
    rows = len(shape) > len(gemm) and shape[:lead] == gemm[:lead] and shape[-1] == gemm[-1] and \
        gemm[-2] in (gemm_rows(math.prod(shape[lead:-1]), a) for a in ROW_ALIGNS)
    if len(shape) < 2 or gemm != shape and not rows:    # rows: a convolution's pixels, its GEMM's (padded) rows
        return "the epilogue changes the GEMM's shape"
    return a, b, b_trans, dtype, math.prod(gemm[:-2]), gemm[-2], gemm[-1], int(anchor.op.reduce_axis[0].dom.extent)


def arch_refusal(info: dict) -> str | None:
    """Why the target ``info`` (``registry.target_info``) has no ``mma.sync`` / ``cp.async`` (before sm_80), or None."""
    arch = info.get("arch") or ""
    digits = "".join(c for c in arch.split("_")[-1] if c.isdigit())
    if not digits or int(digits) < 80:
        return f"tensor cores need sm_80 or newer (the target is {arch or 'unknown'})"
    return None


def default_knobs(kt, anchor: Stage, out: Stage, info: dict, preferred=PREFERRED):
    """The tensor-core knobs for the kernel on the target ``info`` (``registry.target_info``), or why it
    does not take tensor cores: float16 / bfloat16 inputs (float32 with ``allow_tf32``) on sm_80 and newer,
    tiles that divide the GEMM."""
    got = kernel_gemm(kt, anchor, out)
    if isinstance(got, str):
        return got
    a, _, b_trans, dtype, batch, m, n, k = got
    why = arch_refusal(info)
    if why is not None:
        return why
    if dtype == "float32" and not info.get("allow_tf32"):
        return "float32 GEMMs use tensor cores (TF32) only with the target option -allow_tf32"
    from .cuda_wgmma import is_sm90, preferred_wgmma, store_intrin
    if is_sm90(info.get("arch") or ""):
        knobs = preferred_wgmma(batch, m, n, k, dtype, b_trans, info.get("shared_limit", 48 * 1024))
        if isinstance(knobs, dict) and (anchor is out or not isinstance(
                store_intrin(out.schedule, out, anchor.op.output(0)), str)):
            return dict(knobs, wgmma=1)  # else (shapes, layouts, dtypes, epilogues it refuses) mma.sync below
    return preferred_knobs(batch, m, n, k, dtype, b_trans, info.get("shared_limit", 48 * 1024), preferred,
                           gemm_pixels(a, m))


def preferred_knobs(batch: int, m: int, n: int, k: int, dtype: str, b_trans: bool, shared_limit: int,
                    preferred=PREFERRED, pixels: int | None = None):
    """The first of ``preferred`` (:data:`PREFERRED`) that fits the GEMM (of ``pixels`` rows that are output pixels:
    :func:`tensorcore_fits`) and ``shared_limit``, or why none does."""
    def why_not(knobs):
        why = tensorcore_fits((m, n), k, dtype, b_trans, knobs, pixels)
        return why if why is not None or shared_bytes(dtype, knobs) <= shared_limit else \
            "the smallest tiles exceed the shared memory"
    return first_fit(preferred, batch * (m // 128) * (n // 128) >= LARGE_BLOCKS,
                     lambda knobs: for_dtype(dtype, dict(DEFAULT_KNOBS, **knobs)), why_not)


def first_fit(preferred, large: bool, make, why_not):
    """The knobs ``make(knobs)`` of the first ``(size, knobs)`` of ``preferred`` (``size`` "large" only where
    ``large``) for which ``why_not`` says None, or the last reason."""
    why = None
    for size, knobs in preferred:
        if size == "large" and not large:
            continue
        knobs = make(knobs)
        why = why_not(knobs)
        if why is None:
            return knobs
    return why


#: the smallest tiles of :data:`SPACE_KNOBS` (64 x 64 blocks of 32 x 32 warps, k slices of 32)
SMALLEST = dict(DEFAULT_KNOBS, block_m=64, block_n=64, warp_m=32, warp_n=32)


def fits(kt, smallest: dict = SMALLEST) -> str | None:
    """Why the config space does not fit the kernel (None: it does): a 16-bit GEMM (with its epilogue)
    whose output and reduction the ``smallest`` tiles divide."""
    s, outputs, computes = kernel_stages(kt.args)
    reductions = [st for st in computes if st.op.reduce_axis]
    if len(outputs) != 1:
        return f"{len(outputs)} outputs (the template writes one)"
    if len(reductions) != 1:
        return f"{len(reductions)} reduction stages (the template tiles one GEMM)"
    got = kernel_gemm(kt, reductions[0], s[outputs[0]])
    if isinstance(got, str):
        return got
    _, _, b_trans, dtype, _, m, n, k = got
    if dtype not in ("float16", "bfloat16"):
        return f"{dtype} inputs (the space tunes float16 / bfloat16 GEMMs)"
    return tensorcore_fits((m, n), k, dtype, b_trans, smallest)


def schedule_space(cfg, kt, shared_limit: int | None = None, space_knobs: dict = SPACE_KNOBS,
                   preferred=PREFERRED, wgmma_knobs: dict | None = None, default=None) -> Schedule:
    """The tensor-core schedule of kernel ``kt`` under ``cfg`` (knobs ``space_knobs``; the fallback: the knobs
    ``default(kt, anchor, out, info)`` gives, the kernel's deployed default: :func:`default_knobs` from
    ``preferred``).  The space holds only the configs that schedule the kernel (``cfg.multi_filter`` with
    :func:`space_refusal`: tiles that divide the GEMM and its pixels, warps within the blocks, at most
    ``shared_limit`` bytes of shared memory).  ``wgmma_knobs``, where the target being scheduled is sm_90: also
    those knobs (``cuda_wgmma.WGMMA_SPACE_KNOBS``; their fallback: the wgmma default where it fits); ``wgmma``
    alone: the space's wgmma config is the default's own wgmma kernel where it has one (a convolution's
    gathering loop), so that the tuner measures the default the model deploys."""
    from .cuda_wgmma import is_sm90, store_intrin
    from .registry import target_info
    info = target_info()
    if wgmma_knobs and is_sm90(info.get("arch") or ""):
        space_knobs = {**space_knobs, **wgmma_knobs}
    else:
        info, wgmma_knobs = {"arch": "sm_80"}, None
    s, outputs, computes = kernel_stages(kt.args)
    out = s[outputs[0]]
    anchor = next(st for st in computes if st.op.reduce_axis)
    for st in computes:
        if not st.op.reduce_axis and st is not out:
            st.compute_inline()
    got = kernel_gemm(kt, anchor, out)
    if isinstance(got, str):
        raise ValueError(f"tensor-core GEMM space: cannot schedule this kernel: {got}")
    a, _, b_trans, dtype, batch, m, n, k = got
    cfg.add_flop(2.0 * batch * m * n * k)
    for name, choices in space_knobs.items():
        cfg.define_knob(name, choices)
    deployed = (default or functools.partial(default_knobs, preferred=preferred))(
        kt, anchor, out, dict(info, shared_limit=shared_limit or 48 * 1024))
    own = None                      # the default's own wgmma kernel (or why it has none), the space's wgmma config
    if wgmma_knobs is not None and set(wgmma_knobs) == {"wgmma"}:
        own = deployed if isinstance(deployed, dict) and deployed.get("wgmma") else "the default is not a wgmma kernel"
    gemm = {"shape": (m, n), "k": k, "dtype": dtype, "b_trans": b_trans, "pixels": gemm_pixels(a, m),
            "shared_limit": shared_limit, "own": own, "store": None if anchor is out or not wgmma_knobs or own else
            store_intrin(s, out, anchor.op.output(0))}
    cfg.multi_filter(lambda e: space_refusal({name: e[name].val for name in space_knobs}, space_knobs,
                                             wgmma_knobs, **gemm) is None)
    if cfg.is_fallback:
        for name, v in ((("wgmma", 1),) if isinstance(own, dict) else
                        deployed.items() if isinstance(deployed, dict) else ()):
            if name in space_knobs:
                cfg[name] = next(e for e in cfg.space_map[name] if e.val == v)
    knobs = {name: cfg[name].val for name in space_knobs}
    why = space_refusal(knobs, space_knobs, wgmma_knobs, **gemm)
    if why is not None:
        cfg.raise_error(why)
    schedule_tensorcore(s, out, anchor, own if knobs.get("wgmma") and isinstance(own, dict) else knobs)
    return s


def space_refusal(knobs: dict, space_knobs: dict, wgmma_knobs: dict | None, shape, k: int, dtype: str, b_trans: bool,
                  pixels: int, shared_limit: int | None, store, own=None) -> str | None:
    """Why the config ``knobs`` of a GEMM space (:func:`schedule_space`) cannot schedule its GEMM (output ``shape``,
    reduction ``k``, ``pixels`` rows of output pixels), or None; a wgmma config (``wgmma`` set): the default's own
    wgmma kernel ``own`` (or why it has none) with every other knob at its first choice, else
    :func:`.cuda_wgmma.wgmma_refusal` (``store``: its epilogue's store).  A config with a knob its kernel does not
    read off its first choice is the same kernel as that config: refused (measured once)."""
    from .cuda_wgmma import wgmma_refusal
    if knobs.get("wgmma") and own is not None:
        if isinstance(own, str):
            return f"wgmma: {own}"
        off = next((name for name in space_knobs if name != "wgmma" and knobs[name] != space_knobs[name][0]), None)
        return None if off is None else \
            f"{off} {knobs[off]}: the wgmma kernel is the default's (the same kernel as {space_knobs[off][0]})"
    if knobs.get("wgmma"):
        return wgmma_refusal(knobs, space_knobs, shape, k, dtype, b_trans, shared_limit, store)
    for name in set(wgmma_knobs or ()) & set(space_knobs):
        if name != "stages" and knobs[name] != space_knobs[name][0]:
            return f"{name} {knobs[name]} is a wgmma knob (mma.sync takes the first choice only: the same kernel)"
    why = tensorcore_fits(shape, k, dtype, b_trans, knobs, pixels)
    if why is None and shared_limit is not None and shared_bytes(dtype, knobs) > shared_limit:
        why = f"{shared_bytes(dtype, knobs)} bytes of shared memory per block (> {shared_limit})"
    return why


def schedule_gemm_space(cfg, kt, shared_limit: int | None = None) -> Schedule:
    """The GEMM entry's config space: :func:`schedule_space` with the wgmma knobs on sm_90."""
    from .cuda_wgmma import WGMMA_SPACE_KNOBS
    return schedule_space(cfg, kt, shared_limit, wgmma_knobs=WGMMA_SPACE_KNOBS)


#: :func:`~.registry.register_schedule`'s arguments for the GEMM entry this space serves
SPACE = {"template": TEMPLATE, "fits": fits, "space": schedule_gemm_space}


def tensorcore_gemm(m: int, n: int, k: int, dtype: str = "float16", knobs: dict | None = None, *,
                    b_trans: bool = False, out_dtype: str | None = None, bias: bool = False,
                    relu: bool = False):
    """``(schedule, [A, B, (bias,) C])`` of ``C = A B^T`` (``b_trans``: ``A B``; ``A`` [m, k], ``B`` [n, k]
    or [k, n]) accumulated in float32 with tensor cores, stored as ``out_dtype`` (default: ``dtype``;
    float32 for TF32), optionally ``+ bias[n]`` (float32) and ``relu``: the epilogue in the kernel.
    ``knobs`` with ``wgmma`` set: :mod:`.cuda_wgmma`'s (over its defaults), else :data:`DEFAULT_KNOBS`'s."""
    from ...expr import Max, binary, const
    from ...reduce import sum as te_sum
    from ...schedule import create_schedule
    from ...tensor import ComputeOp, compute, placeholder, reduce_axis
    from .cuda_wgmma import DEFAULT_KNOBS as WGMMA_KNOBS
    knobs = dict(WGMMA_KNOBS if (knobs or {}).get("wgmma") else DEFAULT_KNOBS, **(knobs or {}))
    out_dtype = out_dtype or dtype
    a = placeholder((m, k), dtype, name="A")
    b = placeholder((k, n) if b_trans else (n, k), dtype, name="B")
    r = reduce_axis((0, k), name="k")
    up = (lambda x: x) if dtype == "float32" else (lambda x: x.astype("float32"))
    value = acc = compute((m, n), lambda i, j: te_sum(up(a[i, r]) * up(b[r, j] if b_trans else b[j, r]), axis=r),
                          name="acc")
    args = [a, b]
    steps = []
    if bias:
        bb = placeholder((n,), "float32", name="bias")
        args.append(bb)
        steps.append(("bias_add", lambda v, i, j: v[i, j] + bb[j]))
    if relu:
        steps.append(("relu", lambda v, i, j: binary(Max, v[i, j], const(0.0, "float32"))))
    if out_dtype != "float32":
        steps.append(("out", lambda v, i, j: v[i, j].astype(out_dtype)))
    for name, f in steps:
        value = compute((m, n), functools.partial(_apply, f, value), name=name)
    s = create_schedule(value.op)
    for st in s.stages:
        if isinstance(st.op, ComputeOp) and st.op not in (value.op, acc.op):
            st.compute_inline()
    schedule_tensorcore(s, s[value], s[acc], knobs)
    return s, args + [value]


def _apply(f, v, i, j):
    return f(v, i, j)


__all__ = ["DEFAULT_KNOBS", "PREFERRED", "SMALLEST", "SPACE", "SPACE_KNOBS", "TEMPLATE", "arch_refusal", "bind_blocks",
           "default_knobs", "first_fit", "fits", "for_dtype", "gemm_operands", "gemm_pixels", "load_fragments", "preferred_knobs",
           "kernel_gemm", "schedule_gemm_space",
           "schedule_space", "schedule_tensorcore", "shared_bytes", "space_refusal",
           "tensorcore_fits", "tensorcore_gemm"]
