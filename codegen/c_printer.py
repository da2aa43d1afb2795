"""A C-style printer of the loop IR: the shared base of C-family renderers.

Renderers differ by data, as tinygrad's ``renderer/cstyle.py``: the kernel qualifiers, the pointer
qualifier, the shared-memory prefix, the barrier, the expressions of thread indices, the type map,
the vector types and the math function names.  Vector expressions (``Ramp`` / ``Broadcast`` lanes
from vectorized loops) are printed lane by lane, except that a contiguous, aligned vector access of
2 or 4 elements (or a multiple of 4) in global or shared memory becomes one vector load or store
(``float4``).  Locals are declared once at the top of the function, shared buffers too.
"""
from __future__ import annotations

import math
import re
from math import gcd

from tensorir import dtype as dt
from tensorir.bitops import BIT_OPS
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.arith import INF, const_bounds, simplify
from tensorir.visitor import Mutator, collect, substitute

from .c_cse import share_common


class CodegenError(RuntimeError):
    pass


def known_multiple(e: E.Expr) -> int:
    """A positive integer that always divides ``e`` (1 when nothing is known; 0 for the constant 0)."""
    if isinstance(e, E.IntImm):
        return abs(e.value)
    if isinstance(e, (E.Add, E.Sub, E.Min, E.Max)):
        return gcd(known_multiple(e.a), known_multiple(e.b))
    if isinstance(e, E.Mul):
        return known_multiple(e.a) * known_multiple(e.b)
    if isinstance(e, E.FloorMod) and isinstance(e.b, E.IntImm) and e.b.value > 0:   # a - b (a // b)
        return gcd(known_multiple(e.a), e.b.value)
    if isinstance(e, E.Cast):
        return known_multiple(e.value)
    return 1


@E._node
class _Lanes(E.Expr):
    """A vector given lane by lane (printer-internal: the components of a vector temporary)."""
    dtype: str
    values: tuple


def lane(e: E.Expr, k: int) -> E.Expr:
    """The scalar expression of lane ``k`` of vector expression ``e``."""
    if dt.lanes(e.dtype) == 1:
        return e
    if isinstance(e, _Lanes):
        return e.values[k]
    el = dt.element(e.dtype)
    if isinstance(e, E.Ramp):
        return simplify(e.base + e.stride * k)
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.BinaryOp):
        return type(e)(el, lane(e.a, k), lane(e.b, k))
    if isinstance(e, E.Cast):
        return E.Cast(el, lane(e.value, k))
    if isinstance(e, E.Not):
        return E.Not(el, lane(e.a, k))
    if isinstance(e, E.Select):
        return E.Select(el, lane(e.cond, k), lane(e.true_value, k), lane(e.false_value, k))
    if isinstance(e, E.Call):
        return E.Call(el, e.name, tuple(lane(a, k) for a in e.args))
    if isinstance(e, E.BufferLoad):
        return E.BufferLoad(el, e.buffer, (lane(e.indices[0], k),))
    raise CodegenError(f"cannot take lane {k} of {type(e).__name__} {e}")


class _HoistLoads(Mutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_BufferLoad(self, ld: E.BufferLoad):
        if id(ld) in self.mapping:
            return _Lanes(ld.dtype, tuple(self.mapping[id(ld)]))
        return self.generic_visit(ld)


_C_WORDS = set("auto break case char const continue default do double else enum extern float for goto if int "
               "long register return short signed sizeof static struct switch typedef union unsigned void "
               "volatile while bool true false half min max".split())


class CPrinter:
    # -- data: what C-family renderers change --------------------------------------------------------------
    kernel_prefix = ""                  # before the return type of the kernel
    pointer_qualifier = ""              # after '*' of buffer arguments (restrict)
    smem_prefix = ""                    # declaration prefix of shared buffers
    barrier = ""                        # statement that synchronizes a block
    thread_index: dict = {}             # thread tag -> C expression
    includes: tuple = ()
    type_map = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
                "uint8": "unsigned char", "float16": "half", "bfloat16": "__nv_bfloat16", "float32": "float",
                "float64": "double"}
    vector_types: dict = {}             # (element dtype, lanes) -> type name
    vector_scopes = ("global", "shared")
    float_funcs = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
                   "rsqrt": "rsqrt", "tanh": "tanh", "erf": "erf", "sin": "sin", "cos": "cos", "floor": "floor",
                   "ceil": "ceil", "round": "rint", "trunc": "trunc", "fabs": "fabs", "pow": "pow"}
    float_suffix = {"float32": "f", "float64": ""}   # math function suffix per dtype
    #: 16-bit float types: (to float, from float, from double), rounding to nearest even; their math
    #: runs in float, and bfloat16 arithmetic too (float16 uses cuda_fp16.h's operators)
    low_precision = {"float16": ("__half2float", "__float2half_rn", "__double2half"),
                     "bfloat16": ("__bfloat162float", "__float2bfloat16_rn", "__double2bfloat16")}
    infinity = {"float32": "__int_as_float(0x7f800000)", "float64": "__longlong_as_double(0x7ff0000000000000LL)"}
    nan = {"float32": "__int_as_float(0x7fc00000)", "float64": "__longlong_as_double(0x7ff8000000000000LL)"}
    helpers = {
        "floordiv": "template <typename T> __device__ __forceinline__ T tt_floordiv(T a, T b) "
                    "{ T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }",
        "floormod": "template <typename T> __device__ __forceinline__ T tt_floormod(T a, T b) "
                    "{ T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }",
        "fmax": "template <typename T> __device__ __forceinline__ T tt_fmax(T a, T b) "
                "{ return (a > b || a != a) ? a : (b > a || b != b) ? b : (signbit(a) ? b : a); }",
        "fmin": "template <typename T> __device__ __forceinline__ T tt_fmin(T a, T b) "
                "{ return (a < b || a != a) ? a : (b < a || b != b) ? b : (signbit(a) ? a : b); }",
    }

    def __init__(self):
        self.names: dict = {}           # Var / Buffer -> C name
        self.used: set = set()
        self.lines: list[str] = []
        self.nonneg: set = set()        # vars known >= 0 (loops, sizes, thread indices)
        self.need: set = set()          # helper names used
        self.tmp = 0
        self.vector_access: dict = {}   # buffer -> widest vector access in bytes

    # -- whole function -----------------------------------------------------------------------------------
    def function_parts(self, func: S.LoweredFunc, attributes: str = "") -> tuple[list[str], list[str]]:
        """(the entries before the kernel: includes, helpers, device functions; the kernel's lines)."""
        from tensorir.buffer import AccessPtr
        written = {st.buffer for st in collect(func.body, S.BufferStore)}
        written |= {p.buffer for p in collect(func.body, AccessPtr) if "w" in p.mask}  # extern code writes
        params = []
        for b in func.buffers:
            const = "" if b in written else "const "
            params.append(f"{const}{self.ctype(b.dtype)}* {self.pointer_qualifier}{self.name(b, b.name)}")
        for v in func.size_vars:
            params.append(f"{self.ctype(v.dtype)} {self.name(v, v.name)}")
            self.nonneg.add(v)
        decls = []
        for a in collect(func.body, S.Allocate):
            b = a.buffer
            if b in self.names:
                continue
            size = 1
            for x in b.shape:
                x = simplify(x)
                if not isinstance(x, E.IntImm):
                    raise CodegenError(f"buffer {b.name} has the symbolic size {b.shape}")
                size *= x.value
            if b.scope == "shared":
                decls += self.declare_shared(self.ctype(b.dtype), self.name(b, b.name), max(size, 1),
                                             dt.itemsize(b.dtype))
            else:
                decls += self.declare_local(b, max(size, 1))
        self.stmt(func.body, 1)
        sig = (f"{self.kernel_prefix}void {attributes}{self.kernel_attributes()}{func.name}"
               f"({', '.join(params + self.extra_params())}) {{")
        body = [sig] + decls + self.lines + ["}", ""]
        head = [f"#include <{inc}>" for inc in self.includes if self.include_needed(inc, "\n".join(body))]
        head += [self.helpers[h] for h in sorted(self.need)]
        head += device_code(func)
        return head, body

    def extra_params(self) -> list[str]:
        """Parameters the kernel takes after its buffers and size vars (rendered with its body): none here."""
        return []

    def kernel_attributes(self) -> str:
        """Attributes of the kernel its body asks for (rendered with it), after ``attributes``: none here."""
        return ""

    def declare_local(self, b, size: int) -> list[str]:
        """The declaration of a per-thread buffer of ``size`` elements."""
        return [f"  {self.ctype(b.dtype)} {self.name(b, b.name)}[{size}];"]

    def function(self, func: S.LoweredFunc, attributes: str = "") -> str:
        """C source of ``func``: includes, helpers, the kernel with its arguments (pointers, then the
        size vars), the declarations of its buffers and the body."""
        head, body = self.function_parts(func, attributes)
        return "\n".join(head + ([""] if head else []) + body)

    def include_needed(self, include: str, text: str) -> bool:
        return True

    def declare_shared(self, ctype: str, name: str, size: int, itemsize: int) -> list[str]:
        """The declaration lines of a shared buffer of ``size`` elements."""
        return [f"  {self.smem_prefix}{ctype} {name}[{size}];"]

    # -- names ------------------------------------------------------------------------------------------
    def name(self, node, hint: str) -> str:
        if node in self.names:
            return self.names[node]
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint) or "v"
        if base[0].isdigit() or base in _C_WORDS:
            base = "v_" + base
        cand, k = base, 1
        while cand in self.used:
            cand, k = f"{base}_{k}", k + 1
        self.used.add(cand)
        self.names[node] = cand
        return cand

    def ctype(self, dtype: str) -> str:
        return self.type_map[dt.element(dtype)]

    def fresh(self, hint: str = "v") -> str:
        self.tmp += 1
        return self.name(object(), f"_{hint}{self.tmp}")

    # -- expressions ------------------------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> str:
        if dt.lanes(e.dtype) != 1:
            raise CodegenError(f"vector expression {e} outside a store")
        m = self.e_BinaryOp if isinstance(e, E.BinaryOp) else getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise CodegenError(f"the {type(self).__name__} renderer cannot print {type(e).__name__}: {e}")
        return m(e)

    def e_Var(self, e: E.Var) -> str:
        if e not in self.names:
            raise CodegenError(f"variable {e.name} is used but not defined")
        return self.names[e]

    e_SizeVar = e_Var

    def e_IntImm(self, e: E.IntImm) -> str:
        if e.dtype == "bool":
            return "true" if e.value else "false"
        if e.dtype == "int64":
            return f"{e.value}LL" if e.value != -2 ** 63 else "(-9223372036854775807LL - 1)"
        if e.dtype == "int32":
            return str(e.value) if e.value != -2 ** 31 else "(-2147483647 - 1)"
        return f"(({self.ctype(e.dtype)}){e.value})"

    def e_FloatImm(self, e: E.FloatImm) -> str:
        v, d = e.value, e.dtype
        if d in self.low_precision:
            return f"{self.low_precision[d][1]}({self.e_FloatImm(E.FloatImm('float32', v))})"
        if math.isnan(v):
            return self.nan[d]
        if math.isinf(v):
            return ("-" if v < 0 else "") + self.infinity[d]
        text = repr(float(v))
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("f" if d == "float32" else "")

    def e_StringImm(self, e: E.StringImm) -> str:
        return '"' + e.value.replace('"', '\\"') + '"'

    def e_Cast(self, e: E.Cast) -> str:
        src, to = dt.element(e.value.dtype), dt.element(e.dtype)
        v = self.expr(e.value)
        if src == to:
            return v
        if src in self.low_precision:
            v, src = f"{self.low_precision[src][0]}({v})", "float32"
            if to == "float32":
                return v
        if to in self.low_precision:   # rounded once, from float or double (other types through float)
            return (f"{self.low_precision[to][2]}({v})" if src == "float64" else
                    f"{self.low_precision[to][1]}({v if src == 'float32' else f'(float)({v})'})")
        return f"(({self.ctype(to)})({v}))"

    def e_BinaryOp(self, e) -> str:
        if dt.element(e.a.dtype) == "bfloat16":    # in float, rounded back
            a, b = (E.Cast(dt.with_lanes("float32", dt.lanes(x.dtype)), x) for x in (e.a, e.b))
            wide = type(e)(dt.with_lanes("float32", dt.lanes(e.dtype)) if dt.is_float(e.dtype) else e.dtype, a, b)
            return self.expr(E.Cast(e.dtype, wide) if dt.is_float(e.dtype) else wide)
        a, b, t = self.expr(e.a), self.expr(e.b), type(e)
        is_int = dt.is_int(e.a.dtype) or dt.is_bool(e.a.dtype)
        if t in (E.Min, E.Max):
            return self.min_max(t, a, b, dt.element(e.dtype), is_int)
        if t in (E.FloorDiv, E.FloorMod):
            if self.provably_nonneg(e.a) and isinstance(e.b, E.IntImm) and e.b.value > 0:
                return f"({a} {'/' if t is E.FloorDiv else '%'} {b})"
            key = "floordiv" if t is E.FloorDiv else "floormod"
            self.need.add(key)
            return f"tt_{key}({a}, {b})"
        sym = {E.Mod: "%", E.Div: "/"}.get(t, e.symbol)
        return f"({a} {sym} {b})"

    def min_max(self, t: type, a: str, b: str, elem: str, is_int: bool) -> str:
        """``min`` / ``max`` of integers; of floats IEEE 754-2019 ``minimum`` / ``maximum`` (``tt_fmin`` /
        ``tt_fmax``: NaN propagates, -0.0 < +0.0; not ``fminf`` / ``fmaxf``, which drop a NaN), half in float."""
        if is_int:
            return f"{'min' if t is E.Min else 'max'}({a}, {b})"
        key = "fmin" if t is E.Min else "fmax"
        self.need.add(key)
        if elem in self.low_precision:
            to, back = self.low_precision[elem][:2]
            return f"{back}(tt_{key}({to}({a}), {to}({b})))"
        return f"tt_{key}({a}, {b})"

    def provably_nonneg(self, e: E.Expr) -> bool:
        return const_bounds(e, {v: (0, INF) for v in self.nonneg})[0] >= 0

    def e_Not(self, e: E.Not) -> str:
        return f"(!{self.expr(e.a)})"

    def e_Select(self, e: E.Select) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    def e_Call(self, e: E.Call) -> str:
        d = dt.element(e.dtype)
        args = [self.expr(a) for a in e.args]
        if e.name in ("isnan", "isinf", "isfinite"):    # C's classification of the float (16-bit: converted)
            a = e.args[0] if e.args[0].dtype in ("float32", "float64") else E.Cast("float32", e.args[0])
            return f"{e.name}({self.expr(a)})"
        if d in self.low_precision:   # 16-bit float math runs in float
            inner = E.Call("float32", e.name, tuple(E.Cast("float32", a) for a in e.args))
            return f"{self.low_precision[d][1]}({self.e_Call(inner)})"
        if e.name == "sigmoid":
            one = "1.0f" if d == "float32" else "1.0"
            exp = self.float_funcs["exp"] + self.float_suffix.get(d, "")
            return f"({one} / ({one} + {exp}(-({args[0]}))))"
        if e.name in BIT_OPS and not dt.is_float(d):  # C's operators, on the operands' integer type
            op, ctype = BIT_OPS[e.name][0], self.ctype(d)
            return f"(({ctype})({op}{args[0]}))" if len(args) == 1 else f"(({ctype})({args[0]} {op} {args[1]}))"
        if e.name == "abs" and not dt.is_float(d):
            return f"{'llabs' if d == 'int64' else 'abs'}({args[0]})"
        if e.name in self.float_funcs and d in self.float_suffix:
            return f"{self.float_funcs[e.name]}{self.float_suffix[d]}({', '.join(args)})"
        raise CodegenError(f"the {type(self).__name__} renderer has no function {e.name} for {e.dtype}")

    def e_BufferLoad(self, e: E.BufferLoad) -> str:
        return f"{self.names[e.buffer]}[{self.expr(e.indices[0])}]"

    def e_CallExtern(self, e) -> str:
        """A call of a device function (a tensor intrinsic's code on the GPU, from ``pragma(axis,
        "import_cuda", source)``); Python callbacks (``call_packed``) run on the CPU only."""
        if e.kind != "extern":
            raise CodegenError(f"call_packed({e.name}) calls a Python function: it runs on the CPU only")
        return f"{e.name}({', '.join(self.expr(a) for a in e.call_args)})"

    def e_AccessPtr(self, e) -> str:
        return f"(&{self.names[e.buffer]}[{self.expr(e.offset)}])"

    def e_Let(self, e: E.Let) -> str:
        return self.expr(substitute(e.body, {e.var: e.value}))

    # -- vector memory accesses --------------------------------------------------------------------------
    def vector_chunks(self, buf, index: E.Expr) -> int:
        """Lanes per vector access of ``buf[index]`` (0: access lane by lane)."""
        if not isinstance(index, E.Ramp) or not (isinstance(index.stride, E.IntImm) and index.stride.value == 1):
            return 0
        if buf.scope not in self.vector_scopes:
            return 0
        n = index.lanes
        for width in (4, 2):
            if n % width == 0 and (dt.element(buf.dtype), width) in self.vector_types:
                m = known_multiple(index.base)
                return width if m == 0 or m % width == 0 else 0
        return 0

    def vector_ptr(self, buf, base: E.Expr, width: int, const: bool = False) -> str:
        vt = self.vector_types[(dt.element(buf.dtype), width)]
        nbytes = width * dt.itemsize(buf.dtype)
        self.vector_access[buf] = max(self.vector_access.get(buf, 0), nbytes)
        return f"*({'const ' if const else ''}{vt}*)({self.names[buf]} + {self.expr(base)})"

    # -- statements ----------------------------------------------------------------------------------------
    def emit(self, line: str, ind: int) -> None:
        self.lines.append("  " * ind + line)

    def stmt(self, s, ind: int) -> None:
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None:
            raise CodegenError(f"the {type(self).__name__} renderer cannot print {type(s).__name__}")
        m(s, ind)

    def s_Seq(self, s: S.Seq, ind: int) -> None:
        for x in s.stmts:
            self.stmt(x, ind)

    def s_Allocate(self, s: S.Allocate, ind: int) -> None:
        self.stmt(s.body, ind)   # declared at the top of the function

    def s_LetStmt(self, s: S.LetStmt, ind: int) -> None:
        self.emit("{", ind)
        self.emit(f"{self.ctype(s.var.dtype)} {self.name(s.var, s.var.name)} = {self.expr(s.value)};", ind + 1)
        self.stmt(s.body, ind + 1)
        self.emit("}", ind)

    def s_Attr(self, s: S.Attr, ind: int) -> None:
        self.stmt(s.body, ind)

    def s_IfThenElse(self, s: S.IfThenElse, ind: int) -> None:
        self.emit(f"if ({self.expr(s.condition)}) {{", ind)
        self.stmt(s.then_case, ind + 1)
        if s.else_case is not None:
            self.emit("} else {", ind)
            self.stmt(s.else_case, ind + 1)
        self.emit("}", ind)

    def s_Evaluate(self, s: S.Evaluate, ind: int) -> None:
        v = s.value
        if isinstance(v, E.Call) and v.name == "tvm_storage_sync":
            self.emit(self.barrier, ind)
        elif not isinstance(v, (E.IntImm, E.FloatImm)):
            self.emit(f"(void)({self.expr(v)});", ind)

    def s_For(self, s: S.For, ind: int) -> None:
        if s.kind == "thread":
            if s.thread_tag not in self.thread_index:
                raise CodegenError(f"loop {s.loop_var.name} is bound to {s.thread_tag!r}, which the "
                                   f"{type(self).__name__} renderer does not know")
            self.names[s.loop_var] = self.thread_index[s.thread_tag]
            self.nonneg.add(s.loop_var)
            self.stmt(s.body, ind)
            return
        v = self.name(s.loop_var, s.loop_var.name)
        self.nonneg.add(s.loop_var)
        if s.kind == "unrolled":
            self.emit("#pragma unroll", ind)
        ty = self.ctype(s.loop_var.dtype)
        lo, ext = self.expr(s.min), self.expr(simplify(s.min + s.extent))
        self.emit(f"for ({ty} {v} = {lo}; {v} < {ext}; ++{v}) {{", ind)
        self.stmt(s.body, ind + 1)
        self.emit("}", ind)

    def s_BufferStore(self, s: S.BufferStore, ind: int) -> None:
        idx, buf = s.indices[0], s.buffer
        n = dt.lanes(idx.dtype)
        if n == 1:
            self.emit(f"{self.names[buf]}[{self.expr(idx)}] = {self.value(s.value, ind)};", ind)
            return
        value = self.hoist_vector_loads(s.value, ind)
        width = self.vector_chunks(buf, idx)
        if width:
            vt = self.vector_types[(dt.element(buf.dtype), width)]
            for c in range(0, n, width):
                parts = ", ".join(self.value(lane(value, c + k), ind) for k in range(width))
                self.emit(f"{self.vector_ptr(buf, lane(idx, c), width)} = make_{vt}({parts});", ind)
            return
        for k in range(n):
            self.emit(f"{self.names[buf]}[{self.expr(lane(idx, k))}] = {self.value(lane(value, k), ind)};", ind)

    def value(self, e: E.Expr, ind: int) -> str:
        """A stored value, its repeated subexpressions printed once before the store (:mod:`.c_cse`)."""
        return self.expr(share_common(self, e, ind))

    def hoist_vector_loads(self, value: E.Expr, ind: int) -> E.Expr:
        """Aligned contiguous vector loads in ``value`` become vector temporaries whose components
        replace their lanes (``_v1.x``...)."""
        mapping = {}
        for ld in collect(value, E.BufferLoad):
            width = self.vector_chunks(ld.buffer, ld.indices[0]) if dt.lanes(ld.dtype) > 1 else 0
            if not width or id(ld) in mapping:
                continue
            lanes, vt = [], self.vector_types[(dt.element(ld.dtype), width)]
            for c in range(0, dt.lanes(ld.dtype), width):
                t = self.fresh("v")
                self.emit(f"{vt} {t} = {self.vector_ptr(ld.buffer, lane(ld.indices[0], c), width, True)};", ind)
                for k in range(width):
                    comp = E.Var(f"{t}.{'xyzw'[k]}", dt.element(ld.dtype))
                    self.names[comp] = comp.name
                    lanes.append(comp)
            mapping[id(ld)] = lanes
        if not mapping:
            return value
        return _HoistLoads(mapping).visit(value)


__all__ = ["CPrinter", "CodegenError", "known_multiple", "lane"]


IMPORT_CUDA = "import_cuda"


def device_code(func: S.LoweredFunc) -> list[str]:
    """Device functions given with ``s[T].pragma(axis, "import_cuda", source)`` (or an extern body's
    ``ib.scope_attr(None, "pragma_import_cuda", source)``), once each, before the kernel."""
    from .extern_code import pragmas
    return list(dict.fromkeys(str(v) for k, v in pragmas(func) if k == IMPORT_CUDA))
