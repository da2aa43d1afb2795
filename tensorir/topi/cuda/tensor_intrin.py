"""Tensor-core intrinsics for ``s[T].tensorize`` (TVM's ``topi.cuda.tensor_intrin`` / the ``mma``
intrinsics of ``tir.tensor_intrin.cuda``): warp-level ``mma.sync`` on fragments in ``warp``-scope
buffers, loaded from shared memory by ``ldmatrix`` and stored from the accumulator.

Every lane of a warp runs a tensorized stage over the whole tile (its loops carry no ``threadIdx.x``):
the device functions (``codegen/cuda/mma.py``) take the tile's flat offset and row stride in the warp's
buffer and use the lane's share of it (a ``warp`` buffer's address prints as the lane's share; its
``access_ptr`` tells the analyses which tile the call reads or writes).  The compute definitions are what a stage must compute to be
tensorized: ``C[i, j] = sum_k f32(A[i, k]) * f32(B[j, k])`` (``b_trans``: ``B[k, j]``) for float16 and
bfloat16 inputs, ``sum_k A[i, k] * B[j, k]`` for TF32 (float32 data rounded to TF32 in the kernel).
"""
from __future__ import annotations

from ...buffer import decl_buffer
from ...expr import var
from ...extern import call_extern
from ...reduce import sum as te_sum
from ...stmt import Evaluate, seq
from ...tensor import compute, placeholder, reduce_axis
from ...tensor_intrin import decl_tensor_intrin

#: input dtype -> (``tt_mma`` kind, k of one instruction); fp32 inputs are the TF32 mode
_KINDS = {"float16": (0, 16), "bfloat16": (1, 16), "float32": (2, 8)}
_MODES = {"a": 0, "b": 1, "b_trans": 2}


def mma_shape(dtype: str) -> tuple[int, int, int]:
    """(m, n, k) of one ``mma.sync`` on ``dtype`` inputs: 16 x 8 x 16, TF32 16 x 8 x 8."""
    if dtype not in _KINDS:
        raise ValueError(f"tensor cores: no mma.sync on {dtype} inputs (float16, bfloat16, float32 as TF32)")
    return 16, 8, _KINDS[dtype][1]


def _buffer(t, scope: str, name: str):
    return decl_buffer(t.shape, t.dtype, name, scope=scope, strides=[var(f"{name}_ld"), 1], offset_factor=1)


def intrin_ldmatrix(dtype: str, mode: str = "a", src_scope: str = "shared"):
    """A 16 x 32-byte tile copied from shared memory into a ``warp`` fragment by ``ldmatrix.x4``:
    ``mode`` ``a`` (rows m, cols k), ``b`` (B stored [N, K]: rows n, cols k) or ``b_trans`` (B stored
    [K, N], 16 x 16 halves, ``.trans``; 16-bit types only)."""
    mma_shape(dtype)
    k = 32 // (2 if dtype != "float32" else 4)
    if mode == "b_trans" and dtype == "float32":
        raise ValueError("tensor cores: ldmatrix.trans moves 16-bit elements; TF32 needs B stored [N, K]")
    shape = (16, 16) if mode == "b_trans" else (16, k)
    src = placeholder(shape, dtype, name="src")
    dst = compute(shape, lambda i, j: src[i, j], name="frag")
    bs, bd = _buffer(src, src_scope, "ldm_src"), _buffer(dst, "warp", "ldm_dst")

    def body(ins, outs):
        (s,), (d,) = ins, outs
        return call_extern("int32", "tt_ldmatrix", d.access_ptr("w"), d.elem_offset, d.strides[0], s.access_ptr("r"),
                           s.strides[0], 2 if dtype != "float32" else 4, _MODES[mode])
    return decl_tensor_intrin(dst.op, body, name=f"ldmatrix_{mode}_{dtype}", binds={src: bs, dst: bd})


def intrin_mma(dtype: str, b_trans: bool = False):
    """``C[16, 8] += A[16, k] B[k, 8]`` by ``mma.sync`` (float32 accumulator), fragments in ``warp``
    buffers; ``reset`` zeroes the accumulator tile."""
    m, n, k = mma_shape(dtype)
    a = placeholder((m, k), dtype, name="a")
    b = placeholder((k, n) if b_trans else (n, k), dtype, name="b")
    r = reduce_axis((0, k), name="k")
    up = (lambda x: x) if dtype == "float32" else (lambda x: x.astype("float32"))
    c = compute((m, n), lambda i, j: te_sum(up(a[i, r]) * up(b[r, j] if b_trans else b[j, r]), axis=r), name="c")
    bufs = {a: _buffer(a, "warp", "mma_a"), b: _buffer(b, "warp", "mma_b"), c: _buffer(c, "warp", "mma_c")}

    def body(ins, outs):
        (ba, bb), (bc,) = ins, outs
        fill = call_extern("int32", "tt_mma_fill", bc.access_ptr("w"), bc.elem_offset, bc.strides[0])
        mma = call_extern("int32", "tt_mma", bc.access_ptr("rw"), bc.elem_offset, bc.strides[0], ba.access_ptr("r"),
                          ba.elem_offset, ba.strides[0], bb.access_ptr("r"), bb.elem_offset, bb.strides[0], _KINDS[dtype][0], int(b_trans))
        return seq(Evaluate(fill), Evaluate(mma)), Evaluate(fill), Evaluate(mma)
    return decl_tensor_intrin(c.op, body, name=f"mma_m{m}n{n}k{k}_{dtype}{'_btrans' if b_trans else ''}", binds=bufs)


WGMMA_BK = 64                # elements of a wgmma k slice: one 128-byte swizzle row of 16-bit values
#: the k slices a main loop takes: 64 elements (128-byte swizzle) or 32 (64-byte swizzle: twice the slots)
WGMMA_BKS = (64, 32)


def wgmma_shared_bytes(block_m: int, block_n: int, stages: int, bk: int = WGMMA_BK) -> int:
    """Dynamic shared memory of a wgmma main loop: ``stages`` slots of the A and B slabs (k slices of
    ``bk``), and 1024 bytes to align them."""
    return stages * (block_m + block_n) * bk * 2 + 1024


def wgmma_check(block_m: int, block_n: int, stages: int, b_trans: bool = False, bk: int = WGMMA_BK,
                inflight: int = 1) -> str | None:
    """Why these tiles (``b_trans``: B stored [K, N]; k slices of ``bk``; ``inflight`` wgmma groups
    unretired while the next slice is issued) have no wgmma main loop (``codegen/cuda/wgmma.py``), or None."""
    if block_m % 64 or not 64 <= block_m <= 256:
        return f"block_m {block_m}: whole warpgroups of 64 rows, at most 4"
    if block_n % 16 or not 16 <= block_n <= 256:
        return f"block_n {block_n}: wgmma takes n a multiple of 16 up to 256"
    if bk not in WGMMA_BKS:
        return f"k slices of {bk}: the main loop takes {' or '.join(map(str, WGMMA_BKS))}"
    if b_trans and bk != WGMMA_BK:
        return f"k slices of {bk}: B stored [K, N] takes slices of {WGMMA_BK} (its 64-column atoms)"
    if b_trans and block_n % 64:
        return f"block_n {block_n}: B stored [K, N] comes in 64-column swizzle atoms"
    if block_n * bk // 8 % (block_m * 2):
        return f"the B slab ({block_n} rows) is not whole 16-byte copies of the {block_m * 2} threads"
    if inflight not in (1, 2):
        return f"{inflight} wgmma groups in flight: 1 or 2"
    if stages < inflight + 2:
        return (f"at least {inflight + 2} stages ({inflight} slice(s) in the tensor cores, one being copied, "
                "one landed)")
    return None


#: the geometry of an implicit-GEMM convolution whose A a wgmma main loop gathers (``intrin_wgmma``'s ``conv``):
#: NHWC input H, W, C; output OH, OW; window KH, KW; strides SH, SW; leading pads PT, PL; images N (the GEMM's rows
#: past the N * OH * OW pixels, padding to whole row blocks, gather zeros); the GEMM's (padded) ROWS (split-K:
#: the rows of one slice of the reduction, ``im2col_split``'s [S, ROWS, K / S])
CONV_FIELDS = ("h", "w", "c", "oh", "ow", "kh", "kw", "sh", "sw", "pt", "pl", "n", "rows")


def wgmma_conv_check(conv: dict) -> str | None:
    """Why a convolution's geometry (:data:`CONV_FIELDS`) has no gathered-A main loop, or None: its 16-byte
    copies each lie in one tap's channels (``C % 8 == 0``), its k slices of :data:`WGMMA_BK` are whole taps
    (``KH * KW * C % 64 == 0``; one tap's channels where ``C % 64 == 0``, else several)."""
    if conv["c"] % 8 or conv["kh"] * conv["kw"] * conv["c"] % WGMMA_BK:
        return (f"{conv['c']} input channels, {conv['kh']} x {conv['kw']} taps (the loop gathers 16-byte copies of "
                f"one tap, k slices of {WGMMA_BK}: C % 8 == 0, KH * KW * C % {WGMMA_BK} == 0)")
    return None


def wgmma_tma_check(block_m: int, conv: dict | None, b_trans: bool, mbar: bool) -> str | None:
    """Why a main loop cannot copy its operands by the bulk tensor copy engine (``tma``), or None: so far the
    implicit-GEMM convolution (A by im2col copies of one tap's 64 channels: ``C % 64 == 0``; stride 1, the
    im2col box's pixels running on as the GEMM's rows), B stored [K, N], its own mbarriers (not ``mbar``)."""
    if conv is None:
        return "tma: a convolution's gathering loop (the GEMM's is not written yet)"
    if conv["c"] % WGMMA_BK or (conv["sh"], conv["sw"]) != (1, 1) or not b_trans or mbar:
        return (f"tma: {conv['c']} channels, stride {conv['sh']} x {conv['sw']} (im2col copies of one tap's "
                f"{WGMMA_BK} channels, stride 1, B stored [K, N], not with mbar)")
    if block_m > 256:
        return f"tma: block_m {block_m} (an im2col copy moves at most 256 pixels)"
    return None


def wgmma_pair_check(block_m: int, block_n: int, k: int, tma: bool) -> str | None:
    """Why a main loop cannot run as a ``pair`` (two blocks of a cluster, consecutive row blocks, each the pair's
    ``2 block_m`` rows over half the reduction, each block's rows summed from both halves: ``codegen/cuda/wgmma.py``'s
    ``_p2``), or None: the tma loop, one warpgroup (``block_m`` 64) of at most 128 columns (both halves'
    accumulators in its registers), whole k slices of :data:`WGMMA_BK` in each half."""
    if not tma:
        return "pair: the tma loop's (its im2col box the pair's rows)"
    if block_m != 64 or block_n > 128:
        return f"pair: {block_m} x {block_n} blocks (one warpgroup of at most 128 columns: 64 x 64 or 64 x 128)"
    if k % (2 * WGMMA_BK):
        return f"pair: k {k} is not two halves of whole k slices of {WGMMA_BK}"
    return None


def intrin_wgmma(dtype: str, block_m: int, block_n: int, k: int, stages: int, b_trans: bool = False,
                 conv: dict | None = None, bk: int = WGMMA_BK, inflight: int = 1, shares: bool = False,
                 mbar: bool = False, tma: bool = False, pair: bool = False):
    """A warp's 16 x ``block_n`` rows of a block's GEMM over the whole reduction ``k`` (``C[i, j] = sum_k
    f32(A[i, k]) f32(B[j, k])``, ``b_trans``: ``B[k, j]``; A and B in global memory) by the sm_90a main loop of
    ``codegen/cuda/wgmma.py``: the block's ``block_m / 16`` warps call it together (each with its rows),
    staging A and B through ``stages`` shared-memory slots (k slices of ``bk``) for warpgroup ``wgmma``
    (``inflight`` groups unretired while the next is issued; ``shares``: the loop ends with a barrier, so the
    kernel's own shared memory may overlap its slots; ``mbar``: each slot's handoff by mbarriers, not a barrier
    per k slice; ``tma``: the operands copied by the bulk tensor copy engine, issued by one thread, completing on
    mbarriers: :func:`wgmma_tma_check`; ``pair``: two blocks of a cluster share the work of their rows,
    :func:`wgmma_pair_check`); the float32 accumulator is a ``warp`` fragment as :func:`intrin_mma`'s (``intrin_mma_store``
    writes it).

    ``conv`` (:data:`CONV_FIELDS`): A is a convolution's ``im2col`` (an inlined gather of the NHWC input, tag
    ``im2col``; ``conv["gathers"]`` another tag: ``im2col_split``, split-K's), which the loop gathers itself: the
    intrinsic ``gathers`` it (tensorize binds A to a view of the input) and the call passes the input's address
    and the warp's first row times ``k`` (split-K: plus the slice times ROWS times ``k``)."""
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"wgmma: float16 / bfloat16 inputs, not {dtype}")
    why = wgmma_check(block_m, block_n, stages, b_trans, bk, inflight) or \
        (f"k {k} is not a multiple of the k slice {bk}" if k % bk else None)
    if why is not None:
        raise ValueError(f"wgmma: {why}")
    a = placeholder((16, k), dtype, name="a")
    b = placeholder((k, block_n) if b_trans else (block_n, k), dtype, name="b")
    r = reduce_axis((0, k), name="k")
    c = compute((16, block_n), lambda i, j: te_sum(a[i, r].astype("float32") *
                                                   (b[r, j] if b_trans else b[j, r]).astype("float32"), axis=r), name="c")
    bufs = {a: _buffer(a, "global", "wg_a"), b: _buffer(b, "global", "wg_b"), c: _buffer(c, "warp", "wg_c")}
    pipe = (f"k{bk}" if bk != WGMMA_BK else "") + (f"g{inflight}" if inflight != 1 else "")
    func = (f"tt_wgmma_m{block_m}n{block_n}s{stages}{pipe}_{'f16' if dtype == 'float16' else 'bf16'}"
            f"{'_bt' if b_trans else ''}{'_x' if shares else ''}")
    if conv is not None:
        why = wgmma_conv_check(conv) or (f"k slices of {bk} (a convolution gathers slices of {WGMMA_BK})"
                                         if bk != WGMMA_BK else None)
        if why is not None:
            raise ValueError(f"wgmma: {why}")
        func += "_cv" + "_".join(str(int(conv[f])) for f in CONV_FIELDS)
    func += "_mb" if mbar else ""
    if tma:
        why = wgmma_tma_check(block_m, conv, b_trans, mbar)
        if why is not None:
            raise ValueError(f"wgmma: {why}")
        func += "_tma"
    if pair:
        why = wgmma_pair_check(block_m, block_n, k, tma)
        if why is not None:
            raise ValueError(f"wgmma: {why}")
        func += "_p2"

    def body(ins, outs):
        (ba, bb), (bc,) = ins, outs
        a = (ba.data, ba.elem_offset) if conv else (ba.access_ptr("r"), ba.strides[0])
        return Evaluate(call_extern("int32", func, bc.access_ptr("w"), *a, bb.access_ptr("r"), bb.strides[0], k))
    intrin = decl_tensor_intrin(c.op, body, name=func[3:] + f"_k{k}", binds=bufs)
    intrin.gathers = conv.get("gathers", "im2col") if conv else None
    return intrin


def intrin_mma_store(dst_scope: str = "shared", out_dtype: str = "float32"):
    """The float32 accumulator tile (16 x 8) written to ``dst_scope`` memory as ``out_dtype`` (float32,
    or float16 / bfloat16 rounded to nearest even), each lane its values."""
    c = placeholder((16, 8), "float32", name="acc")
    d = compute((16, 8), lambda i, j: c[i, j] if out_dtype == "float32" else c[i, j].astype(out_dtype),
                name="store")
    bc, bd = _buffer(c, "warp", "st_src"), _buffer(d, dst_scope, "st_dst")

    def body(ins, outs):
        (s,), (o,) = ins, outs
        return call_extern("int32", "tt_mma_store", o.access_ptr("w"), o.strides[0], s.access_ptr("r"),
                           s.elem_offset, s.strides[0])
    return decl_tensor_intrin(d.op, body, name=f"mma_store_{out_dtype}", binds={c: bc, d: bd})


__all__ = ["CONV_FIELDS", "WGMMA_BK", "WGMMA_BKS", "wgmma_conv_check", "intrin_ldmatrix", "intrin_mma", "intrin_mma_store", "intrin_wgmma", "mma_shape",
           "wgmma_check", "wgmma_pair_check", "wgmma_shared_bytes", "wgmma_tma_check"]
