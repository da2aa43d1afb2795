"""float16 and bfloat16 kernels: conversions round to nearest even (NaN stays NaN, overflow is infinity,
subnormals kept), arithmetic rounds after each operation as numpy / ml_dtypes do, reductions
accumulate in float32 when asked; on LLVM (vectorized and scalar), and as CUDA C compiled by nvcc and run
by the CPU simulator (tests/cuda_sim.py)."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te

LOW = ["float16", "bfloat16"]
BF16 = ml_dtypes.bfloat16


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, except that any NaN matches any NaN."""
    nan = np.isnan(want.astype(np.float32))
    assert np.isnan(got.astype(np.float32))[nan].all(), "a NaN was lost"
    bad = np.flatnonzero(_bits(got)[~nan] != _bits(want)[~nan])
    assert bad.size == 0, f"{bad.size} differ, e.g. {got[~nan][bad[:5]]} != {want[~nan][bad[:5]]}"


def _hard_float32(dtype: str, rng) -> np.ndarray:
    """Random values, exact ties of ``dtype`` (both parities), values a float32 ulp beside them, the
    extremes (largest finite, overflow to infinity, subnormals of ``dtype``), signed zeros, inf, NaN."""
    base = rng.standard_normal(2000).astype(np.float32).astype(dtype).astype(np.float32)
    up = np.nextafter(base.astype(dtype), np.array(np.inf, dtype)).astype(np.float32)
    ties = (base + up) / 2                                   # exactly halfway: to the even neighbour
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    with np.errstate(over="ignore"):
        extremes = np.array([float(info.max), float(info.max) * 1.001, -float(info.max) * 1.01, tiny, tiny / 2,
                             tiny * 0.75, tiny * 2.5, -tiny * 3.5, float(info.smallest_normal) * 0.999, 0.0, -0.0,
                             np.inf, -np.inf, np.nan, -np.nan, 1e30, 1e-30], np.float32)
    bad = np.frombuffer(np.array([0x7FC00001, 0xFF800001, 0x7F800001], np.uint32).tobytes(), np.float32)  # NaN payloads
    return np.concatenate([rng.standard_normal(500).astype(np.float32) * 100, ties, near, extremes, bad])


def _llvm_cast(n: int, src: str, dst: str, vector: bool):
    A = te.placeholder((n,), src, name="A")
    B = te.compute((n,), lambda i: A[i].astype(dst), name="B")
    s = te.create_schedule(B.op)
    if vector:
        _, inner = s[B].split(B.op.axis[0], factor=16)
        s[B].vectorize(inner)
    return codegen.build(s, [A, B], target="llvm")


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("dtype", LOW)
def test_float32_to_16_bits_rounds_to_nearest_even(dtype, vector):
    x = _hard_float32(dtype, np.random.default_rng(3))
    out = np.full(x.size, np.nan, dtype)
    _llvm_cast(x.size, "float32", dtype, vector)(x, out)
    with np.errstate(over="ignore", invalid="ignore"):
        _same(out, x.astype(dtype))              # numpy's float16, ml_dtypes' bfloat16: RNE


@pytest.mark.parametrize("dtype", LOW)
def test_16_bits_to_float32_is_exact(dtype):
    bits = np.arange(1 << 16, dtype=np.uint16)        # every value, NaNs and subnormals included
    x = bits.view(dtype)
    out = np.full(x.size, np.nan, np.float32)
    _llvm_cast(x.size, dtype, "float32", True)(x, out)
    want = x.astype(np.float32)
    nan = np.isnan(want)
    assert np.isnan(out[nan]).all()
    np.testing.assert_array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32))


def _nearest_bf16(v: float) -> float:
    """The bfloat16 nearest the double ``v`` (ties to even), from exact rationals: an oracle that shares
    no code with either rounding (ml_dtypes goes through float32, rounding twice)."""
    top = Fraction(float(ml_dtypes.finfo(BF16).max)) + Fraction(2) ** 119     # max + half an ulp: infinity
    if not np.isfinite(v) or abs(Fraction(v)) >= top:
        return float(np.copysign(np.inf, v))
    first = np.array([v], np.float32).astype(BF16)
    cands = [(int(first.view(np.uint16)[0]) + d) & 0xFFFF for d in (-1, 0, 1)]
    vals = [np.array([c], np.uint16).view(BF16)[0] for c in cands]
    best = min(zip(vals, cands), key=lambda p: (abs(Fraction(float(p[0])) - Fraction(v)) if np.isfinite(float(p[0]))
                                                else Fraction(10) ** 40, p[1] & 1))
    return float(best[0])


def _float64_near_bf16_ties() -> np.ndarray:
    """Doubles a hair above, below and at bfloat16 ties (where rounding through float32 errs)."""
    rng = np.random.default_rng(5)
    b = rng.standard_normal(300).astype(BF16).astype(np.float64)
    half_ulp = np.abs(b) * 2.0 ** -9
    return np.concatenate([b + half_ulp * (1 + 2.0 ** -30), b + half_ulp * (1 - 2.0 ** -30), b + half_ulp,
                           [0.0, -0.0, 1e-300, 3e38, -1e39]])


def test_float64_to_bfloat16_rounds_once():
    x = _float64_near_bf16_ties()
    out = np.full(x.size, np.nan, BF16)
    _llvm_cast(x.size, "float64", "bfloat16", True)(x, out)
    _same(out, np.array([_nearest_bf16(v) for v in x], BF16))


def _elementwise(dtype: str, n: int, factor: int):
    """``(a * b + c) / d - exp(a)``, each step rounded to ``dtype``."""
    A, B, C, D = (te.placeholder((n,), dtype, name=x) for x in "ABCD")
    E = te.compute((n,), lambda i: (A[i] * B[i] + C[i]) / D[i] - te.exp(A[i]), name="E")
    s = te.create_schedule(E.op)
    return s, [A, B, C, D, E]


def _elementwise_inputs(dtype: str, n: int):
    rng = np.random.default_rng(7)
    a, b, c = (rng.uniform(-4, 4, n).astype(dtype) for _ in range(3))
    d = rng.uniform(0.5, 3, n).astype(dtype)
    a[:4] = [np.nan, np.inf, -np.inf, 0.0]
    b[4:8] = [3e4 if dtype == "float16" else 3e38, 0.0, -0.0, np.nan]
    return a, b, c, d


def _elementwise_reference(dtype: str, a, b, c, d):
    """numpy (float16) / ml_dtypes (bfloat16) arithmetic, rounding after each operation; exp in
    float32, rounded once."""
    with np.errstate(all="ignore"):
        return (a * b + c) / d - np.exp(a.astype(np.float32)).astype(dtype)


def _check_elementwise(dtype, run):
    n = 1000
    ins = _elementwise_inputs(dtype, n)
    out = np.full(n, np.nan, dtype)
    run(*ins, out)
    want = _elementwise_reference(dtype, *ins)
    # the only difference allowed: exp's float32 polynomial (5e-7) landing beside a rounding boundary
    with np.errstate(invalid="ignore"):
        diff = np.abs(out.astype(np.float64) - want.astype(np.float64))
    ulp = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64) * (2 ** 13 if dtype == "float16" else 2 ** 16)
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(out.astype(np.float32)), nan)
    fin = ~nan & np.isfinite(want.astype(np.float32))
    assert (out.astype(np.float32)[~fin & ~nan] == want.astype(np.float32)[~fin & ~nan]).all()
    assert (diff[fin] <= ulp[fin]).all() and np.mean(diff[fin] == 0) > 0.99


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("dtype", LOW)
def test_llvm_arithmetic_rounds_each_operation(dtype, vector):
    s, args = _elementwise(dtype, 1000, 16)
    E = args[-1]
    if vector:
        _, inner = s[E].split(E.op.axis[0], factor=16)
        s[E].vectorize(inner)
    _check_elementwise(dtype, codegen.build(s, args, target="llvm"))


def _dot(dtype: str, n: int, acc: str):
    A, B = te.placeholder((4, n), dtype, name="A"), te.placeholder((n,), dtype, name="B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((4,), lambda i: te.sum(A[i, k].astype(acc) * B[k].astype(acc), axis=k), name="C")
    return te.create_schedule(C.op), [A, B, C]


@pytest.mark.parametrize("dtype", LOW)
def test_llvm_reduction_accumulates_in_float32(dtype):
    n = 4096
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((4, n)).astype(dtype), rng.standard_normal(n).astype(dtype)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    out = np.full(4, np.nan, np.float32)
    codegen.build(*_dot(dtype, n, "float32"), target="llvm")(a, b, out)
    assert (np.abs(out - exact) <= 4 * n * np.finfo(np.float32).eps * scale).all()
    low = np.full(4, np.nan, dtype)          # the same sum in 16 bits: far less accurate (the contrast)
    codegen.build(*_dot(dtype, n, dtype), target="llvm")(a, b, low)
    assert np.abs(low.astype(np.float64) - exact).max() > 10 * np.abs(out - exact).max()


# -- CUDA C: nvcc and the simulator --------------------------------------------------------------------------
def _cuda_elementwise(dtype: str):
    s, args = _elementwise(dtype, 1000, 64)
    E = args[-1]
    bx, tx = s[E].split(E.op.axis[0], factor=128)
    s[E].bind(bx, te.thread_axis("blockIdx.x"))
    s[E].bind(tx, te.thread_axis("threadIdx.x"))
    return codegen.build(s, args, target="cuda -arch=sm_90")


@pytest.mark.parametrize("dtype", LOW)
def test_cuda_source_uses_the_cuda_types(dtype):
    src = _cuda_elementwise(dtype).get_source("cuda")
    header, ctype, to_float = {"float16": ("cuda_fp16.h", "half", "__half2float"),
                               "bfloat16": ("cuda_bf16.h", "__nv_bfloat16", "__bfloat162float")}[dtype]
    assert f"#include <{header}>" in src and f"const {ctype}* __restrict__ A" in src and to_float in src
    assert ("cuda_bf16.h" in src) == (dtype == "bfloat16")


@pytest.mark.nvcc
@pytest.mark.parametrize("dtype", LOW)
def test_cuda_low_precision_compiles(dtype):
    mod = _cuda_elementwise(dtype)
    ptx = mod.get_source("ptx")
    assert ".target sm_90" in ptx and "cvt.rn" in ptx        # conversions to 16 bits round to nearest even
    assert (".b16" in ptx) or (".f16" in ptx) or (".bf16" in ptx)
    assert mod.cubin[:4] == b"\x7fELF" and mod.resource_usage["spill_stores"] == 0    # through ptxas


@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype", LOW)
def test_cuda_arithmetic_rounds_each_operation(dtype):
    mod = _cuda_elementwise(dtype)
    _check_elementwise(dtype, lambda *arrays: cuda_sim.run(mod, *arrays))


@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype", LOW)
def test_cuda_reduction_accumulates_in_float32(dtype):
    n = 1024
    s, (A, B, C) = _dot(dtype, n, "float32")
    s[C].bind(C.op.axis[0], te.thread_axis("threadIdx.x"))
    mod = codegen.build(s, [A, B, C], target="cuda -arch=sm_90")
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((4, n)).astype(dtype), rng.standard_normal(n).astype(dtype)
    out = np.full(4, np.nan, np.float32)
    cuda_sim.run(mod, a, b, out)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert (np.abs(out - exact) <= 4 * n * np.finfo(np.float32).eps * scale).all()


@pytest.mark.cuda_sim
def test_cuda_conversions_round_to_nearest_even():
    """float32 -> bfloat16 / float16 in the simulator's cuda_bf16.h / cuda_fp16.h stand-ins, as numpy."""
    for dtype in LOW:
        x = _hard_float32(dtype, np.random.default_rng(13))
        n = x.size
        A = te.placeholder((n,), "float32", name="A")
        B = te.compute((n,), lambda i: A[i].astype(dtype), name="B")
        s = te.create_schedule(B.op)
        bx, tx = s[B].split(B.op.axis[0], factor=256)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
        out = np.full(n, np.nan, dtype)
        cuda_sim.run(codegen.build(s, [A, B], target="cuda -arch=sm_90"), x, out)
        with np.errstate(over="ignore", invalid="ignore"):
            _same(out, x.astype(dtype))


@pytest.mark.cuda_sim
def test_cuda_float64_to_16_bits_rounds_once():
    """``__double2bfloat16`` / ``__double2half``, not a double rounding through float."""
    x = _float64_near_bf16_ties()
    for dtype, want in (("bfloat16", np.array([_nearest_bf16(v) for v in x], BF16)),
                        ("float16", x.astype(np.float16))):     # numpy rounds double -> half once
        A = te.placeholder((x.size,), "float64", name="A")
        B = te.compute(A.shape, lambda i: A[i].astype(dtype), name="B")
        s = te.create_schedule(B.op)
        bx, tx = s[B].split(B.op.axis[0], factor=128)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
        mod = codegen.build(s, [A, B], target="cuda -arch=sm_90")
        assert "__double2" in mod.get_source("cuda")
        out = np.full(x.size, np.nan, dtype)
        cuda_sim.run(mod, x, out)
        _same(out, want)
