"""tensorir dtypes as LLVM types, constants and the small value helpers every emitter needs.

``float16`` is LLVM's ``half`` (LLVM computes it in float and rounds where the CPU has no fp16
arithmetic).  ``bfloat16`` lives in registers as a ``float`` whose value is always a bfloat16 (its low
16 bits zero) and in memory as ``i16``: loads shift the bits up, arithmetic runs in float and
:func:`round_bf16` rounds each result (round to nearest even in integer ops, NaN stays NaN: it
vectorizes everywhere and keeps subnormals, which AVX512-BF16's ``vcvtneps2bf16`` would flush)."""
from __future__ import annotations

from llvmlite import ir

from tensorir import dtype as dt

PTR = ir.PointerType()
VOID = ir.VoidType()
I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
_SCALAR = {"bool": I1, "int8": I8, "int16": I16, "int32": I32, "int64": I64, "uint8": I8,
           "float16": ir.HalfType(), "bfloat16": F32, "float32": F32, "float64": ir.DoubleType(), "handle": PTR}
_MEMORY = {"bool": I8, "bfloat16": I16}

#: Fast-math flags on float arithmetic: everything but nnan/ninf (NaN and inf keep their meaning).
FAST = ("reassoc", "contract", "nsz", "arcp", "afn")


def ltype(dtype: str) -> ir.Type:
    """Register type of a (possibly vector) dtype; bool is ``i1``."""
    base, n = dt.parse(dtype)
    t = _SCALAR[base]
    return t if n == 1 else ir.VectorType(t, n)


def mem_type(dtype: str) -> ir.Type:
    """Type of one element in memory (bool is a byte, as in numpy)."""
    base = dt.element(dtype)
    return _MEMORY.get(base) or _SCALAR[base]


def lanes_of(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 1


def scalar_type(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def with_lanes(t: ir.Type, n: int) -> ir.Type:
    t = scalar_type(t)
    return t if n == 1 else ir.VectorType(t, n)


def const(t: ir.Type, value) -> ir.Constant:
    """A constant of type ``t`` (splat when ``t`` is a vector)."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def is_float_type(t: ir.Type) -> bool:
    return isinstance(scalar_type(t), (ir.HalfType, ir.FloatType, ir.DoubleType))


def mangle(t: ir.Type) -> str:
    """LLVM's intrinsic type suffix: ``f32``, ``v16f32``, ``i64``, ``v8p0``."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.PointerType):
        return "p0"
    return f"i{t.width}"


def splat(b: ir.IRBuilder, v: ir.Value, n: int) -> ir.Value:
    """Broadcast a scalar to ``n`` lanes (a constant vector when ``v`` is a constant)."""
    if n == 1 or isinstance(v.type, ir.VectorType):
        return v
    vt = ir.VectorType(v.type, n)
    if isinstance(v, ir.Constant):
        return ir.Constant(vt, [v] * n)
    one = b.insert_element(ir.Constant(ir.VectorType(v.type, 1), ir.Undefined), v, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(ir.VectorType(v.type, 1), ir.Undefined),
                            ir.Constant(ir.VectorType(I32, n), [0] * n))


def unify(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Splat the scalar side when one operand is a vector."""
    nx, ny = lanes_of(x), lanes_of(y)
    if nx == ny:
        return x, y
    n = max(nx, ny)
    return splat(b, x, n), splat(b, y, n)


def convert(b: ir.IRBuilder, v: ir.Value, src: str, dst: str) -> ir.Value:
    """Convert ``v`` of dtype ``src`` to dtype ``dst`` (lanes follow ``dst``; scalars are splatted)."""
    s, d = dt.element(src), dt.element(dst)
    n = max(dt.lanes(dst), lanes_of(v))
    if lanes_of(v) != n:
        v = splat(b, v, n)
    to = with_lanes(_SCALAR[d], n)
    if s == d:
        return v
    if d == "bfloat16":     # to float32 (float64: rounded to odd, so the second rounding is exact), then RNE
        v = _double_to_f32_odd(b, v) if s == "float64" else convert(b, v, src, "float32")
        return round_bf16(b, v)
    if s == "bfloat16":
        return convert(b, v, "float32", dst)
    if v.type == to:
        return v
    if d == "bool":
        if dt.is_float(s):
            return b.fcmp_unordered("!=", v, const(v.type, 0.0))
        return b.icmp_unsigned("!=", v, const(v.type, 0))
    if s == "bool":
        return b.uitofp(v, to) if dt.is_float(d) else b.zext(v, to)
    if s == "float64" and d == "float16":
        return _double_to_half(b, v, to)
    if dt.is_float(s) and dt.is_float(d):
        return b.fpext(v, to) if dt.bits(d) > dt.bits(s) else b.fptrunc(v, to)
    if dt.is_float(d):
        return b.uitofp(v, to) if dt.is_unsigned(s) else b.sitofp(v, to)
    if dt.is_float(s):
        return b.fptoui(v, to) if dt.is_unsigned(d) else b.fptosi(v, to)
    if dt.bits(d) > dt.bits(s):
        return b.zext(v, to) if dt.is_unsigned(s) else b.sext(v, to)
    if dt.bits(d) < dt.bits(s):
        return b.trunc(v, to)
    return v


def _double_to_half(b: ir.IRBuilder, v: ir.Value, to: ir.Type) -> ir.Value:
    """float64 -> float16 correctly rounded without ``__truncdfhf2`` (absent from the JIT's process)."""
    return b.fptrunc(_double_to_f32_odd(b, v), to)


def _double_to_f32_odd(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """float64 -> float32 rounded *to odd* (truncate, then set the last bit when inexact): a second
    rounding to a narrower type is then correct, the odd bit keeping it from creating a false tie."""
    n = lanes_of(v)
    f32, i32 = with_lanes(F32, n), with_lanes(I32, n)
    t = b.fptrunc(v, f32)
    back = b.fpext(t, v.type)
    bits = b.bitcast(t, i32)
    away = b.fcmp_ordered(">", b.call(_fabs(b, v.type), [back]), b.call(_fabs(b, v.type), [v]))
    toward_zero = b.select(away, b.sub(bits, const(i32, 1)), bits)
    odd = b.bitcast(b.or_(toward_zero, const(i32, 1)), f32)
    exact = b.fcmp_unordered("==", back, v)
    return b.select(exact, t, odd)


def round_bf16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """A float32 (vector) rounded to the nearest bfloat16, ties to even, still as float32; NaN stays a
    (quiet) NaN and overflow gives infinity, as ``ml_dtypes``."""
    i32 = with_lanes(I32, lanes_of(v))
    bits = b.bitcast(v, i32)
    odd = b.and_(b.lshr(bits, const(i32, 16)), const(i32, 1))
    rounded = b.add(b.add(bits, const(i32, 0x7FFF)), odd)
    quiet = b.or_(bits, const(i32, 0x00400000))
    out = b.select(b.fcmp_unordered("uno", v, v), quiet, rounded)
    return b.bitcast(b.and_(out, const(i32, -65536)), v.type)


def bf16_from_mem(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """``i16`` bits of bfloat16 (vector) as float32."""
    i32 = with_lanes(I32, lanes_of(v))
    return b.bitcast(b.shl(b.zext(v, i32), const(i32, 16)), with_lanes(F32, lanes_of(v)))


def bf16_to_mem(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """A float32 holding a bfloat16 as its ``i16`` bits."""
    i32 = with_lanes(I32, lanes_of(v))
    return b.trunc(b.lshr(b.bitcast(v, i32), const(i32, 16)), with_lanes(I16, lanes_of(v)))


def _fabs(b: ir.IRBuilder, t: ir.Type):
    m = b.module
    name = f"llvm.fabs.{mangle(t)}"
    fn = m.globals.get(name)
    return fn if fn is not None else ir.Function(m, ir.FunctionType(t, [t]), name=name)


def to_i64(b: ir.IRBuilder, v: ir.Value, src: str) -> ir.Value:
    """An index value as i64 (or <n x i64>) for address arithmetic."""
    if scalar_type(v.type) == I64:
        return v
    return convert(b, v, src, dt.with_lanes("int64", lanes_of(v)))
