"""Features of a lowered loop nest for the tuner's cost model.

``extract(func)`` reads the loop IR of ``te.lower(s, args, expand=False)`` (vectorized and unrolled
loops still loops) and returns one fixed-length float64 vector, ``FEATURE_NAMES`` naming its entries.
Everything is computed symbolically from loop extents and the linear strides of flat indices: no
per-iteration work, a few milliseconds for a GEMM schedule.

Each ``BufferStore`` is described with its enclosing loops (as AutoTVM's itervar features and
Ansor's per-store features do):

- ``main.*``: the store that executes the most arithmetic (the hot loop), in full: trip count, flops,
  vector width, unroll product, parallel extent and load balance over the cores; the innermost
  ``LEVELS`` loops (level 0 innermost) with extent, kind and the bytes / cache lines the statement
  touches inside that loop (compare with L1 and L2); up to ``ACCESSES`` accesses (the store first,
  then loads by footprint) with the stride of the innermost and of the vectorized loop, unique bytes,
  reuse, lines; the traffic a cache of L1 / L2 size would let through, and the flops per byte of it.
- ``rest.*``: the other stores summed (trip counts, bytes, traffic, vectorized / parallel shares).
- ``g.*``: the whole function: flops, bytes, arithmetic intensity, allocations (local buffers in
  vector registers: the accumulator pressure), loop and store counts.

Magnitudes are ``log2(1 + x)``.  ``extract_config(task, index)`` instantiates a tuning task's
template and extracts, cached; a config that fails to instantiate or lower gives ``FAILED_VECTOR``
(all -1 with ``failed`` = 1) and never raises.
"""
from __future__ import annotations

import math
import os
from collections import OrderedDict

import numpy as np

from tensorir import dtype as dt
from tensorir.arith import linear
from tensorir.expr import (Add, Broadcast, Call, Cast, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul,
                           Ramp, Select, Sub, Var)
from tensorir.stmt import PARALLEL, SERIAL, UNROLLED, VECTORIZED, LoweredFunc
from tensorir.visitor import Visitor

LEVELS = 5                     # innermost loops described one by one
ACCESSES = 4                   # accesses of the main store described one by one
LINE = 64                      # cache line bytes
L1_BYTES, L2_BYTES = 32 << 10, 1 << 20
VECTOR_REG_BYTES, VECTOR_REGS = 64, 32
CORES = os.cpu_count() or 1
UNKNOWN_EXTENT = 64            # stands in for a symbolic extent
KINDS = (SERIAL, PARALLEL, VECTORIZED, UNROLLED)

_STORE = ["trips", "loops", "flops", "flop_per_iter", "int_ops", "divmod_ops", "guards", "reduction",
          "vec_width", "vec_innermost", "unroll_prod", "unroll_loops", "unroll_body", "par_extent",
          "par_depth", "par_work", "par_balance", "serial_prod", "inner_extent", "inner_serial_extent",
          "reg_reuse", "fp_bytes", "fp_lines", "traffic_l1", "traffic_l2", "ai_l1", "ai_l2", "ai_unique"]
_LEVEL = ["extent", "serial", "parallel", "vectorized", "unrolled", "fp_bytes", "fp_lines", "fits_l1",
          "fits_l2", "store_invariant"]
_ACCESS = ["present", "local", "bytes", "unique", "reuse", "lines", "line_use", "stride_inner",
           "contig_inner", "invariant_inner", "stride_vec", "vec_contig", "vec_gather", "reg_reuse"]
_REST = ["stores", "trips", "bytes", "traffic_l1", "traffic_l2", "vec_share", "par_share"]
_GLOBAL = ["flops", "bytes", "arg_bytes", "ai", "traffic_l1", "traffic_l2", "stores", "loops", "allocs",
           "local_bytes", "local_regs", "local_fits", "global_alloc_bytes", "par_flop_share",
           "vec_flop_share", "failed"]

FEATURE_NAMES: list[str] = (
    [f"main.{n}" for n in _STORE]
    + [f"main.L{k}.{n}" for k in range(LEVELS) for n in _LEVEL]
    + [f"main.acc{j}.{n}" for j in range(ACCESSES) for n in _ACCESS]
    + [f"rest.{n}" for n in _REST] + [f"g.{n}" for n in _GLOBAL])
_INDEX = {n: i for i, n in enumerate(FEATURE_NAMES)}
FAILED_VECTOR = np.full(len(FEATURE_NAMES), -1.0)
FAILED_VECTOR[_INDEX["g.failed"]] = 1.0
FAILED_VECTOR.setflags(write=False)


def _log(x: float) -> float:
    return math.log2(1.0 + max(float(x), 0.0))


def _nbytes(dtype: str) -> int:
    return max(dt.bits(dtype) // 8, 1)


# -- integer evaluation and strides ------------------------------------------------------------------------
_ARITH = {Add: lambda a, b: a + b, Sub: lambda a, b: a - b, Mul: lambda a, b: a * b, Min: min, Max: max,
          FloorDiv: lambda a, b: a // b if b else 0, FloorMod: lambda a, b: a % b if b else 0,
          Div: lambda a, b: int(a / b) if b else 0, Mod: lambda a, b: int(math.fmod(a, b)) if b else 0}


def _eval(e, env: dict) -> int:
    """Integer value of an index expression; unbound variables are 0."""
    t = type(e)
    if t is IntImm:
        return e.value
    if t is Var:
        return env.get(e, 0)
    f = _ARITH.get(t)
    if f is not None:
        return f(_eval(e.a, env), _eval(e.b, env))
    if t is Cast:
        return _eval(e.value, env)
    if t is Ramp:
        return _eval(e.base, env)
    if t is Broadcast:
        return _eval(e.value, env)
    if t is Select:
        return _eval(e.true_value, env)
    return 0


def _strides(index, loops) -> list[float]:
    """Average stride (elements per iteration) of ``index`` along each loop's variable."""
    lin = linear(index) if dt.lanes(index.dtype) == 1 else None
    if lin is not None and all(type(term) is Var for term, _ in lin[0].values()):
        coeff = {term: c for term, c in lin[0].values()}
        return [float(coeff.get(lp[0], 0)) for lp in loops]
    base = _eval(index, {})
    return [(_eval(index, {v: ext - 1}) - base) / (ext - 1) if ext > 1 else 0.0 for v, ext, _ in loops]


def _footprint(strides, extents, eb: int, numel: int) -> tuple[float, float]:
    """(distinct elements, cache lines) touched by an access over loops with these strides."""
    pairs = sorted((abs(s), e) for s, e in zip(strides, extents) if s != 0 and e > 1)
    run, count, span = 1.0, 1.0, 1.0
    run_b, count_b = float(eb), 1.0
    for s, e in pairs:
        span += s * (e - 1)
        if s <= run:
            run += s * (e - 1)
        else:
            count *= e
        if s * eb <= max(run_b, LINE):
            run_b += s * eb * (e - 1)
        else:
            count_b *= e
    elems = min(run * count, span, numel)
    lines = min(count_b * math.ceil(run_b / LINE), span * eb / LINE + 1, numel * eb / LINE + 1)
    return elems, max(lines, 1.0)


# -- collection ---------------------------------------------------------------------------------------------
_FLOAT_OPS = (Add, Sub, Mul, Div, Min, Max, Call, Select)


class _ExprStats(Visitor):
    """Loads and operation counts of a stored value."""

    def __init__(self):
        self.loads, self.flops, self.int_ops, self.divmod = [], 0, 0, 0

    def visit(self, node):
        t = type(node)
        if t in _FLOAT_OPS or t is FloorDiv or t is FloorMod or t is Mod:
            if dt.is_float(node.dtype):
                self.flops += 1
            else:
                self.int_ops += 1
                self.divmod += t in (FloorDiv, FloorMod, Div, Mod)
        super().visit(node)

    def visit_BufferLoad(self, node):
        self.loads.append((node.buffer, node.indices[0] if node.indices else IntImm("int32", 0)))
        self.visit(node.indices)


class _Access:
    __slots__ = ("buffer", "is_store", "strides", "eb", "numel", "key")

    def __init__(self, buffer, index, loops, is_store):
        self.buffer, self.is_store = buffer, is_store
        self.strides = _strides(index, loops)
        self.eb = _nbytes(buffer.dtype)
        self.numel = max(math.prod(_extent(d) for d in buffer.shape), 1)
        self.key = (buffer.uid, tuple(self.strides), _eval(index, {}))


def _extent(e) -> int:
    if type(e) is IntImm:
        return e.value
    if isinstance(e, int):
        return e
    return UNKNOWN_EXTENT


class _Store:
    """One BufferStore with its loops (outer to inner), accesses and operation counts."""

    def __init__(self, node, loops, guards):
        self.loops, self.guards = loops, guards
        stats = _ExprStats()
        stats.visit(node.value)
        index = node.indices[0] if node.indices else IntImm("int32", 0)
        stats.visit(index)
        self.trips = float(math.prod(ext for _, ext, _ in loops))
        self.flop_per_iter = stats.flops * dt.lanes(node.value.dtype)
        self.int_ops, self.divmod = stats.int_ops, stats.divmod
        store = _Access(node.buffer, index, loops, True)
        accs, seen = [store], {store.key}
        for buf, idx in stats.loads:
            a = _Access(buf, idx, loops, False)
            if a.key not in seen:
                seen.add(a.key)
                accs.append(a)
        self.reduction = any(buf is node.buffer for buf, _ in stats.loads)
        self.accesses = accs


class _Walker(Visitor):
    def __init__(self):
        self.loops, self.guards, self.stores, self.allocs, self.nloops = [], 0, [], [], 0

    def visit_For(self, s):
        self.nloops += 1
        self.loops.append((s.loop_var, max(_extent(s.extent), 1), s.kind if s.kind in KINDS else PARALLEL))
        self.visit(s.body)
        self.loops.pop()

    def visit_IfThenElse(self, s):
        self.guards += 1
        self.visit(s.then_case)
        if s.else_case is not None:
            self.visit(s.else_case)
        self.guards -= 1

    def visit_Allocate(self, s):
        self.allocs.append(s.buffer)
        self.visit(s.body)

    def visit_BufferStore(self, s):
        self.stores.append(_Store(s, list(self.loops), self.guards))


# -- per store features -------------------------------------------------------------------------------------
def _level_footprints(st: _Store):
    """For levels 0..n (level l = inside loop l, n = one iteration): (bytes, lines) of all accesses."""
    n, ext = len(st.loops), [e for _, e, _ in st.loops]
    out = []
    for level in range(n + 1):
        b = ln = 0.0
        for a in st.accesses:
            el, li = _footprint(a.strides[level:], ext[level:], a.eb, a.numel)
            b += el * a.eb
            ln += li
        out.append((b, ln))
    return out


def _traffic(st: _Store, fps, cap: float) -> float:
    """Bytes brought in by a cache of ``cap`` bytes: footprint of the outermost loop that fits, times
    the iterations of the loops outside it."""
    outer = 1.0
    for level, (_, ext, _) in enumerate(st.loops):
        if fps[level][0] <= cap:
            return fps[level][1] * LINE * outer
        outer *= ext
    return fps[-1][1] * LINE * outer


def _store_features(st: _Store, f: dict, p: str) -> None:
    loops, n = st.loops, len(st.loops)
    kinds = [k for _, _, k in loops]
    ext = [e for _, e, _ in loops]
    vec = math.prod(e for e, k in zip(ext, kinds) if k == VECTORIZED)
    unroll = math.prod(e for e, k in zip(ext, kinds) if k == UNROLLED)
    par = [i for i, k in enumerate(kinds) if k == PARALLEL]
    par_ext = math.prod(ext[i] for i in par) if par else 1
    store = st.accesses[0]
    flops = st.trips * st.flop_per_iter
    fps = _level_footprints(st)
    t1, t2 = _traffic(st, fps, L1_BYTES), _traffic(st, fps, L2_BYTES)
    unique = sum(_footprint(a.strides, ext, a.eb, a.numel)[0] * a.eb for a in st.accesses)
    inv = [s == 0 for s in store.strides]
    serial_inner = next((e for e, k in zip(reversed(ext), reversed(kinds)) if k != VECTORIZED), 1)
    f.update({
        p + "trips": _log(st.trips), p + "loops": n, p + "flops": _log(flops),
        p + "flop_per_iter": _log(st.flop_per_iter), p + "int_ops": _log(st.int_ops),
        p + "divmod_ops": st.divmod, p + "guards": st.guards, p + "reduction": float(st.reduction),
        p + "vec_width": _log(vec * dt.lanes(store.buffer.dtype)),
        p + "vec_innermost": float(bool(kinds) and kinds[-1] == VECTORIZED),
        p + "unroll_prod": _log(unroll), p + "unroll_loops": kinds.count(UNROLLED),
        p + "unroll_body": _log(unroll * vec), p + "par_extent": _log(par_ext),
        p + "par_depth": par[0] if par else -1, p + "par_work": _log(st.trips / par_ext),
        p + "par_balance": (par_ext / (math.ceil(par_ext / CORES) * CORES)) if par else 1.0 / CORES,
        p + "serial_prod": _log(math.prod(e for e, k in zip(ext, kinds) if k == SERIAL)),
        p + "inner_extent": _log(ext[-1] if ext else 1), p + "inner_serial_extent": _log(serial_inner),
        p + "reg_reuse": _log(_reg_reuse(store, ext)), p + "fp_bytes": _log(fps[0][0]), p + "fp_lines": _log(fps[0][1]),
        p + "traffic_l1": _log(t1), p + "traffic_l2": _log(t2), p + "ai_l1": _log(flops / max(t1, 1)),
        p + "ai_l2": _log(flops / max(t2, 1)), p + "ai_unique": _log(flops / max(unique, 1)),
    })
    for k in range(min(LEVELS, n)):
        i = n - 1 - k
        q = f"{p}L{k}."
        b, ln = fps[i]
        f.update({q + "extent": _log(ext[i]), q + kinds[i]: 1.0, q + "fp_bytes": _log(b),
                  q + "fp_lines": _log(ln), q + "fits_l1": float(b <= L1_BYTES),
                  q + "fits_l2": float(b <= L2_BYTES), q + "store_invariant": float(inv[i])})
    loads = sorted(st.accesses[1:], key=lambda a: -_footprint(a.strides, ext, a.eb, a.numel)[0] * a.eb)
    for j, a in enumerate([store] + loads[:ACCESSES - 1]):
        _access_features(a, st, ext, kinds, f, f"{p}acc{j}.")


def _reg_reuse(a: _Access, ext) -> float:
    """Uses per element inside the outermost loop whose footprint of ``a`` fits in vector registers."""
    inner = math.prod(ext)
    for level in range(len(ext) + 1):
        elems, _ = _footprint(a.strides[level:], ext[level:], a.eb, a.numel)
        if elems * a.eb <= VECTOR_REGS * VECTOR_REG_BYTES:
            return inner / elems
        inner /= ext[level] if level < len(ext) else 1
    return 1.0


def _access_features(a: _Access, st: _Store, ext, kinds, f: dict, q: str) -> None:
    elems, lines = _footprint(a.strides, ext, a.eb, a.numel)
    inner = a.strides[-1] if ext else 0.0
    vec_i = [i for i, k in enumerate(kinds) if k == VECTORIZED]
    sv = a.strides[vec_i[-1]] if vec_i else None
    f.update({q + "present": 1.0, q + "local": float(a.buffer.scope != "global"),
              q + "bytes": _log(st.trips * a.eb), q + "unique": _log(elems * a.eb),
              q + "reuse": _log(st.trips / max(elems, 1)), q + "lines": _log(lines),
              q + "line_use": elems * a.eb / (lines * LINE), q + "stride_inner": _log(abs(inner)),
              q + "contig_inner": float(abs(inner) == 1), q + "invariant_inner": float(inner == 0),
              q + "stride_vec": _log(abs(sv)) if sv is not None else -1.0,
              q + "vec_contig": float(sv is not None and abs(sv) == 1),
              q + "vec_gather": float(sv is not None and abs(sv) > 1), q + "reg_reuse": _log(_reg_reuse(a, ext))})


# -- whole function -----------------------------------------------------------------------------------------
def extract(func: LoweredFunc) -> np.ndarray:
    """The feature vector (``len(FEATURE_NAMES)`` float64) of a lowered function."""
    w = _Walker()
    w.visit(func.body)
    f: dict = {}
    stores = w.stores
    if stores:
        main = max(range(len(stores)), key=lambda i: (stores[i].trips * stores[i].flop_per_iter,
                                                      stores[i].trips, -i))
        _store_features(stores[main], f, "main.")
    else:
        main = -1
    flops = nbytes = t1 = t2 = par_flops = vec_flops = 0.0
    rest = {"trips": 0.0, "bytes": 0.0, "t1": 0.0, "t2": 0.0, "vec": 0.0, "par": 0.0}
    for i, st in enumerate(stores):
        fps = _level_footprints(st)
        a1, a2 = _traffic(st, fps, L1_BYTES), _traffic(st, fps, L2_BYTES)
        b = st.trips * sum(a.eb for a in st.accesses)
        fl = st.trips * st.flop_per_iter
        kinds = [k for _, _, k in st.loops]
        flops, nbytes, t1, t2 = flops + fl, nbytes + b, t1 + a1, t2 + a2
        par_flops += fl * (PARALLEL in kinds)
        vec_flops += fl * (VECTORIZED in kinds)
        if i != main:
            rest["trips"] += st.trips
            rest["bytes"] += b
            rest["t1"] += a1
            rest["t2"] += a2
            rest["vec"] += st.trips * (VECTORIZED in kinds)
            rest["par"] += st.trips * (PARALLEL in kinds)
    local = [b for b in w.allocs if b.scope != "global"]
    local_bytes = sum(math.prod(_extent(d) for d in b.shape) * _nbytes(b.dtype) for b in local)
    max_local = max((math.prod(_extent(d) for d in b.shape) * _nbytes(b.dtype) for b in local), default=0)
    arg_bytes = sum(math.prod(_extent(d) for d in b.shape) * _nbytes(b.dtype) for b in func.buffers)
    galloc = sum(math.prod(_extent(d) for d in b.shape) * _nbytes(b.dtype) for b in w.allocs
                 if b.scope == "global")
    f.update({
        "rest.stores": max(len(stores) - 1, 0), "rest.trips": _log(rest["trips"]),
        "rest.bytes": _log(rest["bytes"]), "rest.traffic_l1": _log(rest["t1"]),
        "rest.traffic_l2": _log(rest["t2"]), "rest.vec_share": rest["vec"] / max(rest["trips"], 1),
        "rest.par_share": rest["par"] / max(rest["trips"], 1),
        "g.flops": _log(flops), "g.bytes": _log(nbytes), "g.arg_bytes": _log(arg_bytes),
        "g.ai": _log(flops / max(arg_bytes, 1)), "g.traffic_l1": _log(t1), "g.traffic_l2": _log(t2),
        "g.stores": len(stores), "g.loops": w.nloops, "g.allocs": len(w.allocs),
        "g.local_bytes": _log(local_bytes), "g.local_regs": _log(max_local / VECTOR_REG_BYTES),
        "g.local_fits": float(max_local <= VECTOR_REGS * VECTOR_REG_BYTES),
        "g.global_alloc_bytes": _log(galloc), "g.par_flop_share": par_flops / max(flops, 1),
        "g.vec_flop_share": vec_flops / max(flops, 1), "g.failed": 0.0,
    })
    out = np.zeros(len(FEATURE_NAMES))
    for name, v in f.items():
        out[_INDEX[name]] = v
    return out


# -- tasks --------------------------------------------------------------------------------------------------
_CACHE: OrderedDict = OrderedDict()
CACHE_SIZE = 100_000


def extract_config(task, config_index) -> np.ndarray:
    """Features of one config of a tuning task (cached by workload and index); ``FAILED_VECTOR``
    when the config cannot be instantiated or lowered."""
    key = (_workload_key(task), int(config_index) if not hasattr(config_index, "index")
           else int(config_index.index))
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    try:
        from tensorir import lower
        s, args = task.instantiate(config_index)
        vec = extract(lower(s, args, expand=False))
        if not np.all(np.isfinite(vec)):
            vec = FAILED_VECTOR.copy()
    except Exception:  # noqa: BLE001 - a config that cannot be built scores as failed, never raises
        vec = FAILED_VECTOR.copy()
    vec.setflags(write=False)
    _CACHE[key] = vec
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return vec


def _workload_key(task):
    for attr in ("workload_key", "workload"):
        v = getattr(task, attr, None)
        if v is not None:
            return v if isinstance(v, (str, int, tuple)) else repr(v)
    return (getattr(task, "name", None), repr(getattr(task, "args", None)), id(task))


__all__ = ["FEATURE_NAMES", "FAILED_VECTOR", "extract", "extract_config"]
