"""Tensor-core GEMM on sm_90a (H100): warpgroup ``wgmma`` over shared-memory operands, fed by ``cp.async``.

The GEMM entry of :mod:`.cuda_tensorcore` takes it on sm_90 targets (the kernel builds as sm_90a):

- the output (a copy or cast of the float32 accumulator) in ``block_m x block_n`` tiles per block
  (``blockIdx.y / x``, batch axes on ``blockIdx.z``; ``swizzle`` groups of row tiles as there), the
  block's ``block_m / 16`` warps (``threadIdx.y``) each owning 16 rows;
- each warp's 16 x ``block_n`` accumulator (``warp`` scope, the ``mma.sync`` fragment layout, which is
  wgmma's) computed over the whole reduction by ``intrin_wgmma``: the block's warps together stage A and
  B through ``stages`` shared-memory slots (128-byte swizzle) and multiply them by warpgroups
  (``codegen/cuda/wgmma.py``), then each 16 x 8 tile is stored (with the epilogue) from the registers.

The warps' loops run on whole warps with no ``threadIdx.x`` loop (pragma ``warp_lanes``): the intrinsics
share the work among the lanes.  An elementwise epilogue (bias, activation, residual) is stored from the
fragments by a fragment-epilogue intrinsic (``topi/cuda/fragment_epilogue.py``).  Shapes the tiles do not
divide and float32 inputs are refused (:func:`wgmma_fits` says why); the ``mma.sync``
schedule takes them.
"""
from __future__ import annotations

from ...lower.gpu import WARP_LANES
from ...schedule import Schedule, Stage
from ...topi.cuda.fragment_epilogue import fragment_epilogue, intrin_fragment_epilogue
from ...topi.cuda.tensor_intrin import WGMMA_BK as BK, intrin_mma_store, intrin_wgmma, wgmma_check, wgmma_shared_bytes
from .cuda_tensorcore import _store_dtype, bind_blocks, first_fit, gemm_operands
from .helpers import bind

#: default knobs: 128 x 256 blocks (two warpgroups of m64n256), 4 slots of k 64, blocks in row-major order
DEFAULT_KNOBS = {"block_m": 128, "block_n": 256, "stages": 4, "swizzle": 1}
#: the default's knobs by size, the first that fits the GEMM wins (``large``: at least :data:`LARGE_BLOCKS`
#: blocks of 128 x 256).  Measured on an H100 (benchmarks/gemm_cuda.py --dtype float16, n = 1024 to 8192):
#: 128 x 256 fastest from n = 2048 (swizzle groups of 8 were slower there, 400 / 535 against 525 / 624
#: TFLOP/s at n = 2048 / 4096), 64 x 128 at n = 1024 (209 against 191 for 128 x 128)
PREFERRED = (
    ("large", {}),
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
    if dtype not in ("float16", "bfloat16"):
        return f"wgmma takes float16 / bfloat16 inputs, not {dtype}"
    why = wgmma_check(bm, bn, stages, b_trans)
    if why is not None:
        return why
    if m % bm or n % bn or k % BK:
        return f"the tiles ({bm} x {bn}, k {BK}) do not divide the GEMM ({m} x {n}, k {k})"
    if wgmma_shared_bytes(bm, bn, stages) > shared_limit:
        return f"{wgmma_shared_bytes(bm, bn, stages)} bytes of shared memory per block (> {shared_limit})"
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
    cf.tensorize(fi, intrin_wgmma(dtype, bm, bn, k, stages, b_trans))


__all__ = ["DEFAULT_KNOBS", "PREFERRED", "is_sm90", "preferred_wgmma", "schedule_wgmma", "wgmma_fits"]
