"""Tensor-core GEMM on sm_90a (H100): warpgroup ``wgmma`` over shared-memory operands, fed by ``cp.async``.

The GEMM entry of :mod:`.cuda_tensorcore` takes it on sm_90 targets (the kernel builds as sm_90a):

- the output (a copy or cast of the float32 accumulator) in ``block_m x block_n`` tiles per block
  (``blockIdx.y / x``, batch axes on ``blockIdx.z``; ``swizzle`` groups of row tiles as there), the
  block's ``block_m / 16`` warps (``threadIdx.y``) each owning 16 rows;
- each warp's 16 x ``block_n`` accumulator (``warp`` scope, the ``mma.sync`` fragment layout, which is
  wgmma's) computed over the whole reduction by ``intrin_wgmma``: the block's warps together stage A and
  B through ``stages`` shared-memory slots (128-byte swizzle) and multiply them by warpgroups
  (``codegen/cuda/wgmma.py``), then each 16 x 8 tile is stored (with the epilogue) from the registers, or
  (``smem_epilogue``) into a shared float32 tile over the loop's slots that all threads store from.

The warps' loops run on whole warps with no ``threadIdx.x`` loop (pragma ``warp_lanes``): the intrinsics
share the work among the lanes.  An elementwise epilogue (bias, activation, residual) is stored from the
fragments by a fragment-epilogue intrinsic (``topi/cuda/fragment_epilogue.py``).  Shapes the tiles do not
divide and float32 inputs are refused (:func:`wgmma_fits` says why); the ``mma.sync``
schedule takes them.  :func:`schedule_wgmma_conv` is the implicit-GEMM convolution's: the loop gathers A from
the NHWC input itself (``intrin_wgmma``'s ``conv``; rows past the pixels, padding the GEMM to whole row blocks,
gather zeros and are never stored), the epilogue goes through a shared float32 tile (``shares``: over the slots);
a stride-1 convolution of ``C % 64 == 0`` takes the loop fed by bulk tensor copies (knob ``tma``:
:data:`CONV_TMA_PREFERRED`, ``codegen/cuda/wgmma.py``'s ``_tma``), one of few blocks as pairs of blocks in clusters,
each over half the reduction (knob ``pair``: :data:`CONV_PAIR`, :func:`conv_pairs`; ``_tma_p2``).
"""
from __future__ import annotations

from ...lower.gpu import WARP_LANES
from ...schedule import Schedule, Stage
from ...topi.cuda.fragment_epilogue import fragment_epilogue, intrin_fragment_epilogue
from ...topi.cuda.tensor_intrin import (CONV_FIELDS, WGMMA_BK as BK, intrin_mma_store, intrin_wgmma, wgmma_check,
                                        wgmma_conv_check, wgmma_pair_check, wgmma_shared_bytes, wgmma_tma_check)
from .cuda_tensorcore import _store_dtype, bind_blocks, first_fit, gemm_operands
from .helpers import bind

#: default knobs: 128 x 256 blocks (two warpgroups of m64n256), 4 slots of k slices of 64 (``bk``), one wgmma
#: group in flight (``inflight``), blocks in row-major order, the output stored from the fragments
#: (``smem_epilogue``: through a shared float32 tile over the slots, 16-byte reads by all threads), a barrier per
#: k slice (``mbar``: the slots handed over by mbarriers, ``codegen/cuda/wgmma.py``'s ``_mb`` loop; not yet
#: measured, so off: ``benchmarks/conv2d_cuda.py --variants`` times it beside the default; ``tma``: a
#: convolution's operands copied by the bulk tensor copy engine, ``codegen/cuda/wgmma.py``'s ``_tma`` loop)
DEFAULT_KNOBS = {"block_m": 128, "block_n": 256, "stages": 4, "swizzle": 1, "bk": BK, "inflight": 1,
                 "smem_epilogue": 0, "mbar": 0, "tma": 0}
#: the default's knobs by size, the first that fits the GEMM wins (``large``: at least :data:`LARGE_BLOCKS`
#: blocks of 128 x 256).  Measured on an H100 (benchmarks/gemm_cuda.py --dtype float16 / bfloat16, n = 4096 /
#: 8192, one run): 128 x 256 with the output through shared memory and blocks in groups of 8 row tiles
#: fastest (fp16 677 / 707 TFLOP/s against 621 / 639 for the fragment stores in row-major order; k slices of
#: 32, two groups in flight, 256 x 128 and 128 x 128 all slower); earlier: 64 x 128 at n = 1024 (209 against
#: 191 for 128 x 128)
PREFERRED = (
    ("large", {"smem_epilogue": 1, "swizzle": 8}),
    ("any", {"block_m": 64, "block_n": 128, "stages": 6}),
    ("any", {"block_m": 64, "block_n": 64, "stages": 6}),
)
LARGE_BLOCKS = 128


def is_sm90(arch: str) -> bool:
    """Whether ``arch`` (``sm_90`` / ``sm_90a``) takes the wgmma GEMM."""
    return arch.rstrip("a") == "sm_90"


def wgmma_fits(out_shape, k: int, dtype: str, b_trans: bool, knobs: dict, shared_limit: int = 227 * 1024) -> str | None:
    """Why ``knobs`` cannot schedule a GEMM of output ``out_shape``, reduction ``k``, with wgmma, or None."""
    m, n = out_shape[-2:]
    bm, bn, stages = knobs["block_m"], knobs["block_n"], knobs["stages"]
    bk, inflight = knobs.get("bk", BK), knobs.get("inflight", 1)
    if dtype not in ("float16", "bfloat16"):
        return f"wgmma takes float16 / bfloat16 inputs, not {dtype}"
    why = wgmma_check(bm, bn, stages, b_trans, bk, inflight)
    if why is not None:
        return why
    if m % bm or n % bn or k % bk:
        return f"the tiles ({bm} x {bn}, k {bk}) do not divide the GEMM ({m} x {n}, k {k})"
    nbytes = max(wgmma_shared_bytes(bm, bn, stages, bk), conv_tile_bytes(knobs) if knobs.get("smem_epilogue") else 0)
    if nbytes > shared_limit:
        return f"{nbytes} bytes of shared memory per block (> {shared_limit})"
    return None


def preferred_wgmma(batch: int, m: int, n: int, k: int, dtype: str, b_trans: bool, shared_limit: int):
    """The first of :data:`PREFERRED` that fits the GEMM, or why none does."""
    return first_fit(PREFERRED, batch * (m // 128) * (n // 256) >= LARGE_BLOCKS, lambda kn: dict(DEFAULT_KNOBS, **kn),
                     lambda kn: wgmma_fits((m, n), k, dtype, b_trans, kn, shared_limit))


def store_intrin(s: Schedule, out: Stage, acc):
    """The intrinsic that stores ``out`` (a function of the accumulator tensor ``acc``, its inlined stages
    substituted) from the fragments: ``mma_store`` for a copy or cast, else a fragment epilogue (bias,
    activation, residual ...); or why there is none."""
    from ...lower.inline import inlined_bodies
    direct = _store_dtype(out, acc) if out.op is not acc.op else None
    if direct is not None:
        return intrin_mma_store("global", direct)
    got = fragment_epilogue(inlined_bodies(s)[out][0], list(out.op.axis), acc)
    if isinstance(got, str):
        return f"the epilogue: {got}"
    return intrin_fragment_epilogue(got[0], out.op.output(0).dtype)


def schedule_wgmma(s: Schedule, out: Stage, anchor: Stage, knobs: dict) -> None:
    """Schedule the GEMM ``anchor`` (``sum_k A[i, k] B[j, k]``, or ``B[k, j]``) under ``out`` (the anchor,
    or an elementwise epilogue of it) with wgmma (see the module)."""
    got = gemm_operands(anchor)
    if isinstance(got, str):
        raise ValueError(f"wgmma GEMM of {anchor.op.name}: {got}")
    _, _, b_trans, dtype = got
    bm, bn, stages = knobs["block_m"], knobs["block_n"], knobs["stages"]
    k = int(anchor.op.reduce_axis[0].dom.extent)
    why = wgmma_fits([int(d) for d in out.op.output(0).shape], k, dtype, b_trans, knobs)
    if why is not None:
        raise ValueError(f"wgmma GEMM of {anchor.op.name}: {why}")
    if anchor is out:
        cf = s[s.cache_write(out.op.output(0), "warp")]
    else:
        cf = anchor
        cf.set_scope("warp")
    intrin = intrin_wgmma(dtype, bm, bn, k, stages, b_trans, bk=knobs.get("bk", BK), inflight=knobs.get("inflight", 1),
                          shares=bool(knobs.get("smem_epilogue")), mbar=bool(knobs.get("mbar")))
    if knobs.get("smem_epilogue"):
        return store_through_shared(s, out, cf, bm, bn, knobs.get("swizzle", 1), None, intrin)
    store = store_intrin(s, out, cf.op.output(0))
    if isinstance(store, str):
        raise ValueError(f"wgmma GEMM of {anchor.op.name}: {store}")
    bj, ii, jj = bind_blocks(out, bm, bn, knobs.get("swizzle", 1))
    wi, ii = out.split(ii, factor=16)            # the warps' rows; constant fragment offsets below
    tj, jj = out.split(jj, factor=8)
    out.reorder(wi, tj, ii, jj)
    bind(out, wi, "threadIdx.y")
    out.unroll(tj)
    out.tensorize(ii, store)
    out.pragma(bj, WARP_LANES)
    cf.compute_at(out, wi)
    fi, _ = cf.op.axis[-2:]
    cf.tensorize(fi, intrin)


def store_through_shared(s: Schedule, out: Stage, cf: Stage, bm: int, bn: int, swizzle: int, gemm_axes: int | None,
                         intrin, pairs: bool = False) -> None:
    """``out`` in ``bm x bn`` blocks stored from a shared float32 tile (rows padded 16 bytes): each warp's 16
    rows of the accumulator ``cf`` (``warp`` scope, computed by the main loop ``intrin``) written there by
    ``mma_store``, then all threads read it, 4 columns each, through the epilogue: 16-byte reads, stores of
    4 consecutive columns (the ``mma.sync`` conv's store); ``pairs``: the row blocks in whole pairs (``pair``)."""
    readers = [st for st in s.stages if cf.op.output(0) in st.op.input_tensors]
    cs = s[s.cache_read(cf.op.output(0), "shared", [r.op.output(0) for r in readers])]
    bj, ii, jj = bind_blocks(out, bm, bn, swizzle, gemm_axes=gemm_axes, pairs=pairs)
    t, vec = out.split(out.fuse(ii, jj), factor=4)
    t, tx = out.split(t, factor=32)
    t, ty = out.split(t, factor=bm // 16)
    bind(out, tx, "threadIdx.x")
    bind(out, ty, "threadIdx.y")
    out.vectorize(vec)
    cs.compute_at(out, bj)
    cs.storage_align(cs.op.axis[-2], bn, 4)
    wi, ci = cs.split(cs.op.axis[-2], factor=16)      # the warps' rows; constant fragment offsets below
    tj, cj = cs.split(cs.op.axis[-1], factor=8)
    cs.reorder(wi, tj, ci, cj)
    bind(cs, wi, "threadIdx.y")
    cs.unroll(tj)
    cs.tensorize(ci, intrin_mma_store())
    cf.compute_at(cs, wi)
    cf.tensorize(cf.op.axis[-2], intrin)


#: the knobs the GEMM space adds on sm_90: wgmma or mma.sync, k slices, wgmma groups in flight, the output
#: through shared memory, and more slots (k slices of 32 take twice as many)
WGMMA_SPACE_KNOBS = {"wgmma": [0, 1], "bk": [64, 32], "inflight": [1, 2], "smem_epilogue": [0, 1],
                     "stages": [2, 3, 4, 6, 8]}
#: knobs of ``cuda_tensorcore.SPACE_KNOBS`` that wgmma kernels do not read (their warps each own 16 full rows)
MMA_ONLY = ("warp_m", "warp_n", "chunk", "pad")


def wgmma_refusal(knobs: dict, space_knobs: dict, shape, k: int, dtype: str, b_trans: bool, shared_limit: int | None,
                  store=None) -> str | None:
    """Why the wgmma config ``knobs`` of the GEMM space cannot be scheduled (``store``: :func:`store_intrin`'s
    answer for an epilogue), or None: wgmma does not fit, or a knob it does not read is off its first choice
    (the same kernel as that config: measured once)."""
    for name in MMA_ONLY:
        if name in space_knobs and knobs[name] != space_knobs[name][0]:
            return f"{name} {knobs[name]}: wgmma does not read it (the same kernel as {space_knobs[name][0]})"
    why = wgmma_fits(shape, k, dtype, b_trans, knobs, shared_limit or 227 * 1024)
    if why is None and isinstance(store, str):
        why = store
    return None if why is None else f"wgmma: {why}"


#: the implicit-GEMM convolution's tiles, the first that fits.  Measured on an H100 (ResNet-18's 3x3 layers at
#: batch 32, fp16, interleaved with cuDNN; the epilogue's shared float32 tile beside the slots): 64 x 128 with 4
#: slots fastest where O % 128 == 0 (27.7 / 34.0 us at 28 x 28 / 14 x 14, against 32.2 / 36.3 for 128 x 64; 64 x
#: 256 level), 128 x 64 with 3 slots for 64 channels out (35.3 us, 4 slots 39.8, 64 x 64 36.7).  ``shares``
#: (:data:`CONV_DEFAULT`): the epilogue's tile over the slots, so that two 64 x 128 blocks of 4 slots (97 KiB)
#: share a multiprocessor (133 KiB each beside them: one)
CONV_PREFERRED = ({"block_m": 64, "block_n": 128, "stages": 4}, {"block_m": 128, "block_n": 64, "stages": 3},
                  {"block_m": 64, "block_n": 64, "stages": 4})
#: the knobs a convolution's tiles (:data:`CONV_PREFERRED`) take beside :data:`DEFAULT_KNOBS`
CONV_DEFAULT = {"shares": 1}
#: a convolution of fewer blocks than an H100's multiprocessors (ResNet-18's 7 x 7 layers at batch 32: 100 of
#: 64 x 128) runs one block per multiprocessor: its loop takes this many slots where they fit (4 slices in
#: flight, not 2: the copies' latency, not the tensor cores, bounds a lone block; the GEMM's 64 x 128 tiles take 6)
CONV_FEW_BLOCKS, CONV_FEW_STAGES = 132, 6


#: the tiles of a convolution the bulk-tensor-copy loop takes (``tma``: stride 1, ``C % 64 == 0``), the first that
#: fits, before :data:`CONV_PREFERRED`.  Measured on an H100 (benchmarks/conv2d_cuda.py --precision float16
#: --variants, ResNet-18's stride-1 3x3 layers at batch 32, one run each; against the cp.async loop's defaults):
#: 56 x 56 (64 channels) 128 x 64 28.6 us (32.8), 28 x 28 128 x 128 22.2 / 128 x 64 21.7 (24.6), 14 x 14
#: 128 x 128 19.3 (27.5), 7 x 7 (1600 rows) 64 x 128 with two wgmma groups in flight 28.8 (31.8); 6 slots slower
#: everywhere (32.8 against 21.3 at 14 x 14 in 64 x 128 blocks), two groups level or faster
CONV_TMA_PREFERRED = ({"block_m": 128, "block_n": 128, "stages": 4, "inflight": 2, "tma": 1},
                      {"block_m": 128, "block_n": 64, "stages": 4, "inflight": 2, "tma": 1},
                      {"block_m": 64, "block_n": 128, "stages": 4, "inflight": 2, "tma": 1},
                      {"block_m": 64, "block_n": 64, "stages": 4, "inflight": 2, "tma": 1})


#: the pair loop (``pair``: two blocks of a cluster, consecutive row blocks, each the pair's 128 rows over half the
#: reduction, ``codegen/cuda/wgmma.py``'s ``_p2``), taken before :data:`CONV_TMA_PREFERRED` by a tma convolution whose
#: pairs of 64 x 128 blocks fit one wave (:func:`conv_pairs`; its rows padded to whole pairs: ``row_align`` 128).
#: Measured on an H100 (ResNet-18's 3x3 layers at batch 32, fp16, one run, interleaved): 7 x 7 (104 blocks) 21.5 us
#: against the default's 29.5 (s4 g2 22.8, s3 22.2, s6 g2 22.1, 64 x 64 32.7); 14 x 14 (196 blocks) 21.1 at best
#: against 19.5, 28 x 28 24.2 against 22.0: slower past one wave
CONV_PAIR = {"block_m": 64, "block_n": 128, "stages": 4, "inflight": 1, "tma": 1, "pair": 1}
#: the pair loop's knobs where :func:`conv_pairs` holds, the first that fits (empty: none taken)
CONV_PAIR_PREFERRED = (CONV_PAIR,)


def conv_pairs(arch: str, pixels: int, c: int, taps: int, stride: tuple, dilation: tuple, n: int) -> bool:
    """Whether a convolution (``pixels`` output pixels, ``c`` channels in, ``taps`` = KH * KW, ``n`` out) takes
    :data:`CONV_PAIR` on ``arch``: the tma loop's (stride 1, ``C % 64 == 0``), halves of whole k slices, at most
    :data:`CONV_FEW_BLOCKS` blocks in pairs."""
    bm, bn = CONV_PAIR["block_m"], CONV_PAIR["block_n"]
    return bool(CONV_PAIR_PREFERRED) and is_sm90(arch) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and c % BK == 0 and \
        taps * c % (2 * BK) == 0 and n % bn == 0 and pixels >= 2 * bm and \
        2 * -(-pixels // (2 * bm)) * (n // bn) <= CONV_FEW_BLOCKS


def conv_geometry(a) -> dict | str:
    """The geometry (:data:`CONV_FIELDS`) of the convolution whose ``im2col`` is ``a``, or why it has none
    a gathering main loop takes."""
    tags = set(getattr(a.op, "tag", "").split(",")) & {"im2col", "im2col_split"}
    geo = getattr(a.op, "attrs", {}).get("conv") if tags else None
    if geo is None:
        return f"A ({a.name}) is not a convolution's im2col"
    if (geo["dh"], geo["dw"]) != (1, 1):
        return f"dilation {geo['dh']} x {geo['dw']}"
    return wgmma_conv_check(geo) or dict({f: geo[f] for f in CONV_FIELDS}, gathers=tags.pop())


def conv_tile_bytes(knobs: dict) -> int:
    """Shared memory of an epilogue tile (float32, rows padded 16 bytes): a convolution's beside the main
    loop's slots (``shares``: over them), a GEMM's (``smem_epilogue``) over them."""
    return knobs["block_m"] * (knobs["block_n"] + 4) * 4


def conv_shared_bytes(knobs: dict) -> int:
    """Shared memory of a block of the gathering convolution under ``knobs``: the slots and the epilogue's tile,
    beside each other or (``shares``) the larger."""
    rows = knobs["block_m"] * (2 if knobs.get("pair") else 1)          # ``pair``: the A slab the pair's rows
    slots, tile = wgmma_shared_bytes(rows, knobs["block_n"], knobs["stages"]), conv_tile_bytes(knobs)
    return max(slots, tile) if knobs.get("shares") else slots + tile


def wgmma_conv_knobs(a, m: int, n: int, k: int, dtype: str, shared_limit: int) -> dict | str:
    """The wgmma knobs of a convolution's GEMM (``m`` rows: its pixels, padded to whole row blocks; ``n`` output
    channels, ``k`` taps, A the ``im2col`` ``a``), or why none fits (then the ``mma.sync`` schedule takes it)."""
    geo = conv_geometry(a)
    if isinstance(geo, str):
        return geo
    pixels, splits = a.op.attrs["conv"].get("pixels", m), a.op.attrs["conv"].get("splits", 1)
    if m * k * splits >= 2 ** 31:
        return f"the im2col matrix ({m} x {k * splits}) has 2^31 elements or more (the loop takes its row offset as int)"
    why = f"{pixels} pixels (fewer than a block's {min(kn['block_m'] for kn in CONV_PREFERRED)} rows)"
    pairs = m % (2 * CONV_PAIR["block_m"]) == 0 and splits == 1 and \
        conv_pairs("sm_90", pixels, geo["c"], geo["kh"] * geo["kw"], (geo["sh"], geo["sw"]), (1, 1), n)
    for kn in (CONV_PAIR_PREFERRED if pairs else ()) + CONV_TMA_PREFERRED + CONV_PREFERRED:
        knobs = dict(DEFAULT_KNOBS, **CONV_DEFAULT, **kn)
        if knobs["block_m"] > pixels:      # padded rows: blocks no taller than the pixels (no clipped block)
            continue
        if knobs["tma"]:
            if wgmma_tma_check(knobs["block_m"], geo, True, False) is None and \
                    wgmma_conv_fits(m, n, k, dtype, knobs, shared_limit) is None:
                return dict(knobs, conv=geo)
            continue
        why = wgmma_conv_fits(m, n, k, dtype, knobs, shared_limit)
        if why is None:
            deeper = dict(knobs, stages=CONV_FEW_STAGES)
            if m // knobs["block_m"] * (n // knobs["block_n"]) < CONV_FEW_BLOCKS and knobs["stages"] < CONV_FEW_STAGES \
                    and wgmma_conv_fits(m, n, k, dtype, deeper, shared_limit) is None:
                knobs = deeper
            return dict(knobs, conv=geo)
    return why


def wgmma_conv_fits(m: int, n: int, k: int, dtype: str, knobs: dict, shared_limit: int) -> str | None:
    """Why ``knobs`` cannot schedule the gathering convolution's GEMM (``m`` rows, ``n`` output channels, ``k``
    taps), or None."""
    why = wgmma_fits((m, n), k, dtype, True, knobs, shared_limit)
    if why is None and knobs.get("pair"):
        why = wgmma_pair_check(knobs["block_m"], knobs["block_n"], k, bool(knobs.get("tma"))) or \
            (f"pair: {m // knobs['block_m']} row blocks (pairs of them)" if m // knobs["block_m"] % 2 else None) or \
            ("pair: blocks in groups of row tiles (swizzle)" if knobs.get("swizzle", 1) != 1 else None)
    nbytes = conv_shared_bytes(knobs)
    return why or (f"{nbytes} bytes of shared memory per block (> {shared_limit})" if nbytes > shared_limit else None)


def schedule_wgmma_conv(s: Schedule, out: Stage, anchor: Stage, knobs: dict) -> None:
    """Schedule the implicit GEMM ``anchor`` (A a convolution's inlined ``im2col``, B the [K, O] weights) under
    ``out`` (the NHWC output, its epilogue inlined) with the gathering wgmma main loop: each warp's 16 rows
    stored by ``mma_store`` into a shared float32 tile (beside the loop's slots; ``shares``: over them, the loop
    ending with a barrier), which all threads read,
    4 columns each, through the epilogue (the ``mma.sync`` conv's store)."""
    got = gemm_operands(anchor)
    if isinstance(got, str):
        raise ValueError(f"wgmma conv of {anchor.op.name}: {got}")
    a, _, b_trans, dtype = got
    bm, bn, stages = knobs["block_m"], knobs["block_n"], knobs["stages"]
    (m, n), k = (int(ax.dom.extent) for ax in anchor.op.axis[-2:]), int(anchor.op.reduce_axis[0].dom.extent)
    why = wgmma_conv_fits(m, n, k, dtype, knobs, 227 * 1024) or ("B is not stored [K, N]" if not b_trans else None) or \
        (wgmma_tma_check(bm, knobs["conv"], b_trans, bool(knobs.get("mbar"))) if knobs.get("tma") else None) or \
        ("pair: split-K's slices (the pair's halves are its own split of the reduction)"
         if knobs.get("pair") and a.op.attrs.get("conv", {}).get("splits", 1) > 1 else None)
    if why is not None:
        raise ValueError(f"wgmma conv of {anchor.op.name}: {why}")
    cf = anchor
    cf.set_scope("warp")
    store_through_shared(s, out, cf, bm, bn, knobs.get("swizzle", 1), len(anchor.op.axis),   # split-K: slices on z
                         intrin_wgmma(dtype, bm, bn, k, stages, True, knobs["conv"], shares=bool(knobs.get("shares")),
                                      mbar=bool(knobs.get("mbar")), tma=bool(knobs.get("tma")),
                                      inflight=knobs.get("inflight", 1), pair=bool(knobs.get("pair"))),
                         pairs=bool(knobs.get("pair")))


__all__ = ["CONV_PAIR", "CONV_PAIR_PREFERRED", "conv_pairs", "CONV_TMA_PREFERRED", "CONV_DEFAULT", "CONV_FEW_BLOCKS", "CONV_FEW_STAGES", "CONV_PREFERRED", "DEFAULT_KNOBS", "conv_shared_bytes", "wgmma_conv_fits", "MMA_ONLY", "PREFERRED", "WGMMA_SPACE_KNOBS", "conv_geometry", "is_sm90",
           "preferred_wgmma", "schedule_wgmma", "schedule_wgmma_conv", "store_through_shared", "wgmma_conv_knobs", "wgmma_fits",
           "wgmma_refusal"]
