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

from ...schedule import Schedule, Stage
from ...topi.cuda.tensor_intrin import intrin_ldmatrix, intrin_mma, intrin_mma_store, mma_shape
from .helpers import bind, cooperative_fetch

#: the default knobs: 128 x 128 blocks of 2 x 2 warps of 64 x 64, k slices of 32, 3 stages
DEFAULT_KNOBS = {"block_m": 128, "block_n": 128, "warp_m": 64, "warp_n": 64, "chunk": 32, "stages": 3, "pad": 1}


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
    loads = []
    for x in (src.a, src.b):
        inner = x.value if isinstance(x, Cast) else x
        if not isinstance(inner, TensorLoad) or (isinstance(x, Cast) and x.dtype != "float32"):
            return "the product's factors are not loads (or their casts to float32)"
        loads.append(inner)
    dtypes = {ld.dtype for ld in loads}
    if len(dtypes) != 1:
        return f"mixed input dtypes {sorted(dtypes)}"
    (dtype,) = dtypes
    if dtype == "float32" and any(isinstance(x, Cast) for x in (src.a, src.b)):
        return "float32 inputs are cast"
    if dtype in ("float16", "bfloat16") and not all(isinstance(x, Cast) for x in (src.a, src.b)):
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


def _index_is(idx, want) -> bool:
    from ...expr import Var
    return all(isinstance(x, Var) and x is w for x, w in zip(idx, want))


def tensorcore_fits(out_shape, k: int, dtype: str, b_trans: bool, knobs: dict) -> str | None:
    """Why ``knobs`` cannot schedule a GEMM of output ``out_shape`` and reduction ``k``, or None."""
    m, n = out_shape[-2:]
    _, _, kk = mma_shape(dtype)
    bm, bn, wm, wn, chunk = (knobs[x] for x in ("block_m", "block_n", "warp_m", "warp_n", "chunk"))
    if b_trans and dtype == "float32":
        return "TF32 needs B stored [N, K]"
    if m % bm or n % bn or k % chunk:
        return f"the tiles ({bm} x {bn}, k {chunk}) do not divide the GEMM ({m} x {n}, k {k})"
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


def shared_bytes(dtype: str, knobs: dict) -> int:
    """Shared memory the knobs take: the pipelined A and B slices and the float32 output tile."""
    esz = 4 if dtype == "float32" else 2
    row = knobs["chunk"] + (16 // esz if knobs["pad"] else 0)
    return knobs["stages"] * (knobs["block_m"] + knobs["block_n"]) * row * esz + \
        knobs["block_m"] * (knobs["block_n"] + (4 if knobs["pad"] else 0)) * 4


def schedule_tensorcore(s: Schedule, out: Stage, anchor: Stage, knobs: dict) -> None:
    """Schedule the GEMM ``anchor`` (``sum_k A[i, k] B[j, k]``, or ``B[k, j]``) under the output stage
    ``out`` (the anchor itself, or its elementwise epilogue) with tensor cores (see the module)."""
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
    as_ = s[s.cache_read(a, "shared", [cf.op.output(0)])]
    bs = s[s.cache_read(b, "shared", [cf.op.output(0)])]
    af = s[s.cache_read(as_.op.output(0), "warp", [cf.op.output(0)])]
    bf = s[s.cache_read(bs.op.output(0), "warp", [cf.op.output(0)])]
    axes = list(out.op.axis)
    bi, ii = out.split(axes[-2], factor=bm)
    bj, jj = out.split(axes[-1], factor=bn)
    out.reorder(*axes[:-2], bi, bj, ii, jj)
    if len(axes) > 2:
        bind(out, out.fuse(*axes[:-2]) if len(axes) > 3 else axes[0], "blockIdx.z")
    bind(out, bi, "blockIdx.y")
    bind(out, bj, "blockIdx.x")
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

    # fragments from shared memory
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

    # A and B slices: cp.async pipelines
    threads = (("threadIdx.x", 32), ("threadIdx.y", wy), ("threadIdx.z", wz))
    for sh in (as_, bs):
        sh.compute_at(cf, ko)
        if pad:
            sh.storage_align(sh.op.axis[-2], chunk, 16 // esz)   # rows 16 bytes longer than the slice
        cooperative_fetch(sh, threads, 16 // esz)
        sh.double_buffer(async_copy=True, stages=stages)




def tensorcore_gemm(m: int, n: int, k: int, dtype: str = "float16", knobs: dict | None = None, *,
                    b_trans: bool = False, out_dtype: str | None = None, bias: bool = False,
                    relu: bool = False):
    """``(schedule, [A, B, (bias,) C])`` of ``C = A B^T`` (``b_trans``: ``A B``; ``A`` [m, k], ``B`` [n, k]
    or [k, n]) accumulated in float32 with tensor cores, stored as ``out_dtype`` (default: ``dtype``;
    float32 for TF32), optionally ``+ bias[n]`` (float32) and ``relu``: the epilogue in the kernel."""
    from ...expr import Max, binary, const
    from ...reduce import sum as te_sum
    from ...schedule import create_schedule
    from ...tensor import ComputeOp, compute, placeholder, reduce_axis
    knobs = dict(DEFAULT_KNOBS, **(knobs or {}))
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


__all__ = ["DEFAULT_KNOBS", "gemm_operands", "schedule_tensorcore", "shared_bytes", "tensorcore_fits",
           "tensorcore_gemm"]
