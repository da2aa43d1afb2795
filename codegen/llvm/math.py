"""Math intrinsics for the LLVM backend, on scalars and vectors alike.

float32 ``exp exp2 log log2 log10 tanh erf sigmoid`` are inline polynomial approximations (branch free,
so loops over them vectorize; below 5e-7 relative error).  Other float functions use LLVM intrinsics
(``llvm.sqrt``, ``llvm.floor`` ... or ``llvm.sin`` which LLVM turns into libm calls per lane) and float64
``erf`` calls libm.  float16 and bfloat16 are computed in float32 and rounded.
"""
from __future__ import annotations

import math

from llvmlite import ir

from tensorir import dtype as dt

from .types import F32, I1, I32, const, is_float_type, lanes_of, ltype, round_bf16, scalar_type, splat, with_lanes

#: te name -> LLVM intrinsic (without the type suffix).
LLVM_INTRINSICS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
                   "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
                   "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "floor": "floor", "ceil": "ceil",
                   "round": "roundeven", "trunc": "trunc", "fabs": "fabs", "abs": "fabs", "pow": "pow",
                   "power": "pow"}
#: Functions without an LLVM intrinsic: libm name per element type.
LIBM = {"erf": {"float32": "erff", "float64": "erf"}}
CONTRACT = ("contract",)


class _Math:
    """Float arithmetic helpers on one (scalar or vector) float type, without reassociation."""

    def __init__(self, cg, t: ir.Type):
        self.cg, self.b, self.t = cg, cg.b, t
        self.it = with_lanes(I32, t.count if isinstance(t, ir.VectorType) else 1)

    def c(self, v: float) -> ir.Value:
        return const(self.t, v)

    def add(self, x, y): return self.b.fadd(x, y, flags=CONTRACT)
    def sub(self, x, y): return self.b.fsub(x, y, flags=CONTRACT)
    def mul(self, x, y): return self.b.fmul(x, y, flags=CONTRACT)
    def div(self, x, y): return self.b.fdiv(x, y, flags=CONTRACT)

    def fma(self, x, y, z):
        return self.cg.intrinsic("fmuladd", [x, y, z])

    def horner(self, x, coeffs):
        p = self.c(coeffs[0])
        for k in coeffs[1:]:
            p = self.fma(p, x, self.c(k))
        return p

    def where(self, cond, x, y):
        return self.b.select(cond, x, y)

    def lt(self, x, v): return self.b.fcmp_ordered("<", x, self.c(v))
    def gt(self, x, v): return self.b.fcmp_ordered(">", x, self.c(v))

    def clamp(self, x, lo: float, hi: float):
        """Clamp keeping NaN (ordered compares are false for NaN)."""
        x = self.where(self.gt(x, hi), self.c(hi), x)
        return self.where(self.lt(x, lo), self.c(lo), x)

    def ldexp(self, y, n):
        """``y * 2**n`` for integral float ``n`` in [-252, 254], in two exact power-of-two steps."""
        b, it = self.b, self.it
        ni = b.fptosi(n, it)
        h = b.ashr(ni, const(it, 1))
        lo = b.sub(ni, h)
        p1 = b.bitcast(b.shl(b.add(h, const(it, 127)), const(it, 23)), self.t)
        p2 = b.bitcast(b.shl(b.add(lo, const(it, 127)), const(it, 23)), self.t)
        return self.mul(self.mul(y, p1), p2)


_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
          -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
           1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
_TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)


def _exp_reduced(m: _Math, r, n):
    """``exp(r) * 2**n`` for ``|r| <= ln2/2`` (Cephes expf polynomial)."""
    y = m.horner(r, _EXP_P)
    y = m.add(m.fma(y, m.mul(r, r), r), m.c(1.0))
    return m.ldexp(y, n)


def exp_f32(m: _Math, x):
    x = m.clamp(x, -104.0, 88.8)
    n = m.cg.intrinsic("roundeven", [m.mul(x, m.c(1.4426950408889634))])
    r = m.fma(n, m.c(-0.693359375), x)
    r = m.fma(n, m.c(2.12194440e-4), r)
    return _exp_reduced(m, r, n)


def exp2_f32(m: _Math, x):
    x = m.clamp(x, -151.0, 128.1)
    n = m.cg.intrinsic("roundeven", [x])
    return _exp_reduced(m, m.mul(m.sub(x, n), m.c(math.log(2.0))), n)


def log_f32(m: _Math, x):
    b, it = m.b, m.it
    small = m.lt(x, 1.17549435e-38)
    xs = m.where(small, m.mul(x, m.c(8388608.0)), x)
    bits = b.bitcast(xs, it)
    e = b.sub(b.lshr(bits, const(it, 23)), const(it, 126))
    e = b.select(small, b.sub(e, const(it, 23)), e)
    mant = b.bitcast(b.or_(b.and_(bits, const(it, 0x807FFFFF)), const(it, 0x3F000000)), m.t)
    below = m.lt(mant, 0.707106781186547524)
    ef = m.sub(b.sitofp(e, m.t), m.where(below, m.c(1.0), m.c(0.0)))
    xm = m.sub(m.where(below, m.add(mant, mant), mant), m.c(1.0))
    z = m.mul(xm, xm)
    y = m.mul(m.mul(xm, z), m.horner(xm, _LOG_P))
    y = m.fma(ef, m.c(-2.12194440e-4), y)
    y = m.fma(z, m.c(-0.5), y)
    r = m.fma(ef, m.c(0.693359375), m.add(xm, y))
    r = m.where(b.fcmp_ordered("==", x, m.c(0.0)), m.c(-math.inf), r)
    r = m.where(m.lt(x, 0.0), m.c(math.nan), r)
    r = m.where(b.fcmp_ordered("==", x, m.c(math.inf)), x, r)
    return m.where(b.fcmp_unordered("uno", x, x), x, r)


#: the largest float32 whose tanh does not round to 1 (the rational form below stops 2 to 4 ulps short; a dynamic
#: quantizer after a saturating tanh takes its zero point from that range: docs/onnx.md, DynamicQuantizeLSTM)
TANH_BELOW_ONE = 9.010913


def tanh_f32(m: _Math, x):
    xc = m.clamp(x, -7.90531110763549805, 7.90531110763549805)
    x2 = m.mul(xc, xc)
    r = m.div(m.mul(xc, m.horner(x2, _TANH_P)), m.horner(x2, _TANH_Q))
    ax = m.cg.intrinsic("fabs", [x])
    r = m.where(m.gt(ax, TANH_BELOW_ONE), m.cg.intrinsic("copysign", [m.c(1.0), x]), r)
    return m.where(m.lt(ax, 0.0004), x, r)


def erf_f32(m: _Math, x):
    xc = m.clamp(x, -4.0, 4.0)
    x2 = m.mul(xc, xc)
    return m.div(m.mul(xc, m.horner(x2, _ERF_P)), m.horner(x2, _ERF_Q))


def sigmoid(m: _Math, x, exp):
    return m.div(m.c(1.0), m.add(m.c(1.0), exp(m, m.b.fsub(m.c(-0.0), x))))


def _llvm_exp(m: _Math, x):
    return m.cg.intrinsic("exp", [x])


_F32_APPROX = {"exp": exp_f32, "exp2": exp2_f32, "log": log_f32, "tanh": tanh_f32, "erf": erf_f32,
               "log2": lambda m, x: m.mul(log_f32(m, x), m.c(1.4426950408889634)),
               "log10": lambda m, x: m.mul(log_f32(m, x), m.c(0.4342944819032518)),
               "sigmoid": lambda m, x: sigmoid(m, x, exp_f32)}


def emit_call(cg, e) -> ir.Value:
    """Emit ``Call(dtype, name, args)``."""
    name, out_t = e.name, ltype(e.dtype)
    if name == "reinterpret":          # the same bits as another type (tir.reinterpret)
        return cg.b.bitcast(cg.expr(e.args[0]), out_t)
    if name.startswith("llvm."):       # an LLVM intrinsic by name (tir.call_llvm_pure_intrin)
        args = [cg.expr(a) for a in e.args]
        return cg.b.call(cg.declare(name, out_t, [a.type for a in args]), args)
    args = [cg.expr(a) for a in e.args]
    n = max([dt.lanes(e.dtype)] + [lanes_of(a) for a in args])
    args = [splat(cg.b, a, n) for a in args]
    out_t = with_lanes(out_t, n)
    if name in ("isnan", "isinf", "isfinite"):
        return _classify(cg, name, args[0])
    if not dt.is_float(e.dtype):
        return _int_call(cg, name, args, e)
    if any(not is_float_type(a.type) for a in args):
        raise _error(e, "expects float arguments")
    if dt.element(e.dtype) == "float16":
        wide = [cg.b.fpext(a, with_lanes(F32, n)) for a in args]
        return cg.b.fptrunc(_float_call(cg, name, wide, "float32", e), out_t)
    if dt.element(e.dtype) == "bfloat16":      # registers are float32 already
        return round_bf16(cg.b, _float_call(cg, name, args, "float32", e))
    return _float_call(cg, name, args, dt.element(e.dtype), e)


def _float_call(cg, name: str, args: list, elem: str, e) -> ir.Value:
    m = _Math(cg, args[0].type)
    if elem == "float32" and name in _F32_APPROX:
        return _F32_APPROX[name](m, args[0])
    if name == "sigmoid":
        return sigmoid(m, args[0], _llvm_exp)
    if name == "rsqrt":
        return cg.b.fdiv(m.c(1.0), cg.intrinsic("sqrt", args), flags=("arcp", "afn", "contract"))
    if name in LLVM_INTRINSICS:
        return cg.intrinsic(LLVM_INTRINSICS[name], args)
    if name in LIBM:
        return _libm_per_lane(cg, LIBM[name][elem], args)
    raise _error(e, "is not a known intrinsic")


#: integer intrinsics that are one LLVM instruction (signed, unsigned)
_BIT_INSTR = {"shift_left": ("shl", "shl"), "shift_right": ("ashr", "lshr"), "bitwise_and": ("and_", "and_"),
              "bitwise_or": ("or_", "or_"), "bitwise_xor": ("xor", "xor")}


def _int_call(cg, name: str, args: list, e) -> ir.Value:
    if name in _BIT_INSTR:
        signed, unsigned = _BIT_INSTR[name]
        return getattr(cg.b, unsigned if dt.is_unsigned(e.dtype) or dt.is_bool(e.dtype) else signed)(*args)
    if name == "bitwise_not":
        return cg.b.not_(args[0])
    (x,) = args
    if name in ("abs", "fabs"):
        if dt.is_unsigned(e.dtype) or dt.is_bool(e.dtype):
            return x
        return cg.intrinsic("abs", [x, ir.Constant(I1, 0)], overload=[x.type])
    raise _error(e, f"is not defined on {e.dtype}")


def _classify(cg, name: str, x) -> ir.Value:
    b = cg.b
    if not is_float_type(x.type):
        return const(with_lanes(I1, lanes_of(x)), 1 if name == "isfinite" else 0)
    if name == "isnan":
        return b.fcmp_unordered("uno", x, x)
    inf = const(x.type, math.inf)
    ax = cg.intrinsic("fabs", [x])
    return b.fcmp_ordered("==", ax, inf) if name == "isinf" else b.fcmp_ordered("<", ax, inf)


def _libm_per_lane(cg, fname: str, args: list) -> ir.Value:
    b = cg.b
    st = scalar_type(args[0].type)
    fn = cg.declare(fname, st, [st] * len(args))
    n = lanes_of(args[0])
    if n == 1:
        return b.call(fn, args)
    out = ir.Constant(args[0].type, ir.Undefined)
    for i in range(n):
        lane = [b.extract_element(a, const(I32, i)) for a in args]
        out = b.insert_element(out, b.call(fn, lane), const(I32, i))
    return out


def _error(e, what: str):
    from . import CodegenError
    return CodegenError(f"intrinsic {e.name}({', '.join(a.dtype for a in e.args)}) {what}")
