"""Building a state from a sketch point: the CPU rules as steps on a :class:`State`.

Stages are visited consumers first (so a producer computed at a consumer finds the consumer's loops
already tiled); stage indices are looked up by operation each time, as ``cache_write`` and
``rfactor`` insert stages.
"""
from __future__ import annotations

import math

from .analysis import RFACTOR_MAX_SPATIAL
from .sketch import VECTOR_LANES
from .loop_state import State
from .tensorize import INTRINS


def build_state(policy, p) -> State:
    state = State(policy.dag)
    infos = policy.infos
    sketch = policy.sketches[p.sketch]
    h = p.holes
    kept = {i for k, ids in getattr(policy, "keep", {}).items() if sketch.get(f"TS{k}") for i in ids}
    for info in infos:
        if info.kind == "inline" and info.index not in kept:
            state.compute_inline(state.stage_id(info.op))
    for k in sorted(kept, reverse=True):
        _root(state, infos[k])
    for info in reversed(infos):
        k = info.index
        intrin = INTRINS[sketch[f"TS{k}"]] if sketch.get(f"TS{k}") else None
        if info.kind == "tile" and h.get(f"P{k}", 0) and intrin is None:
            _pack(state, info, h, infos)
        if info.kind == "tile" and info.host is None:
            if sketch.get(k, False):
                cid = state.cache_write(state.stage_id(info.op), "local")
                _tile_pair(state, state.stage_id(info.op), cid, info, h, intrin)
            else:
                _tile(state, state.stage_id(info.op), info, h, intrin)
        elif info.kind == "simple" and info.guest is not None:
            guest = infos[info.guest]
            g_intrin = INTRINS[sketch[f"TS{guest.index}"]] if sketch.get(f"TS{guest.index}") else None
            _tile_pair(state, state.stage_id(info.op), state.stage_id(guest.op), guest, h, g_intrin)
        elif info.kind == "simple":
            _simple(state, info, h, infos)
        elif info.kind == "rfactor":
            _rfactor(state, state.stage_id(info.op), info, h, depth=len(info.spatial))
    return state


def _root(state: State, info) -> None:
    """An injective stage kept at the root for a tensorized reader: its outer loops fused into a parallel one."""
    from .sketch import _parallel_depth
    sid = state.stage_id(info.op)
    _parallel(state, sid, state.leaves(sid)[:_parallel_depth(info.spatial, info.spatial)])


def _tiles(info, h, intrin=None) -> tuple[list, list]:
    """The split lengths of each spatial and reduce axis (holes ``T``); tensorized (holes ``X``, in the
    intrinsic's blocks), the intrinsic's own extent appended to its axes' (its block, the innermost loop)."""
    k, pre = info.index, "X" if intrin else "T"
    spatial = [list(h[f"{pre}{k}.s{a}"]) for a in range(len(info.spatial))]
    reduce = [list(h[f"{pre}{k}.r{a}"]) for a in range(len(info.reduce))]
    if intrin is not None:
        for lengths, t in ((spatial, intrin.spatial), (reduce, intrin.reduce)):
            for d, x in enumerate(t):
                lengths[len(lengths) - len(t) + d].append(x)
    return spatial, reduce


def _pack(state: State, info, h, infos) -> None:
    """Read each packable input through a ``global`` copy in panel layout ``[outer dims with
    j // bn, reduce dims, j % bn]`` (``bn``: the vector tile of the last spatial axis ``j``), built
    at the root with its outer dims fused into a parallel loop and ``j % bn`` vectorized."""
    bn = h[f"T{info.index}.s{len(info.spatial) - 1}"][2]
    if bn == 1:
        return
    for src, d, outer, red in info.packs:
        cid = state.cache_read(state.stage_id(infos[src].op), "global", [state.stage_id(info.op)])
        layout = [x for e in outer + red for x in (e, bn if e == d else 1, 0)] + [d, 1, bn]
        axes = state.transform_layout(cid, layout)
        state.vectorize(cid, axes[-1])
        _parallel(state, cid, axes[:len(outer)])


def _annotate_inner(state: State, sid: int, inner: list, extents: dict, max_step: int, vector: bool = True) -> None:
    """Vectorize the innermost loop (if longer than 1 and ``vector``: not above a tensorized block), then
    unroll the loops just outside it while the unrolled nest stays within ``max_step`` steps, a step
    being one vector register's worth of the vector loop (a 56-lane loop is 4 steps of 16 lanes) or
    one tensorized block: unrolled code beyond that compiles slowly and spills."""
    loops = list(inner)
    prod = 1
    if vector and loops and extents[loops[-1]] > 1:
        prod = -(-extents[loops[-1]] // VECTOR_LANES)
        state.vectorize(sid, loops.pop())
    for iv in reversed(loops):
        prod *= extents[iv]
        if prod > max_step:
            break
        if extents[iv] > 1:
            state.unroll(sid, iv)


def _parallel(state: State, sid: int, loops: list) -> None:
    loops = [iv for iv in loops]
    if loops:
        state.parallel(sid, state.fuse(sid, loops))


def _tile(state: State, sid: int, info, h, intrin=None) -> None:
    """SSRSRS on a root stage: S0 S1 R0 S2 R1 S3; parallel fused S0, vectorized S3, unrolled inner; tensorized
    (``intrin``), S0 S1 R0 S2 R1 S3 St Rt with the intrinsic's block St Rt tensorized and S3 unrolled."""
    spatial, reduce = _tiles(info, h, intrin)
    pre = "X" if intrin else "T"
    leaves = state.leaves(sid)
    n = len(info.spatial)
    S, R, ext = [[], [], [], [], []], [[], [], []], {}
    for a, iv in enumerate(leaves[:n]):
        parts = state.split(sid, iv, spatial[a])
        for lvl, (x, e) in enumerate(zip(parts, [info.spatial[a] // math.prod(spatial[a])] + spatial[a])):
            S[lvl].append(x)
            ext[x] = e
    for a, iv in enumerate(leaves[n:]):
        parts = state.split(sid, iv, reduce[a])
        for lvl, (x, e) in enumerate(zip(parts, [info.reduce[a] // math.prod(reduce[a])] + reduce[a])):
            R[lvl].append(x)
            ext[x] = e
    order = S[0] + S[1] + R[0] + S[2] + R[1] + S[3] + S[4] + R[2]
    state.reorder(sid, order)
    _annotate_inner(state, sid, S[2] + R[1] + S[3], ext, h[f"{pre}{info.index}.u"], vector=intrin is None)
    _parallel(state, sid, S[0][:h[f"{pre}{info.index}.p"]])
    if intrin is not None:          # last: the step's import pragma is on the outer loop, which fusing would drop
        state.tensorize(sid, S[4][0], intrin.name)


def _tile_pair(state: State, oid: int, tid: int, info, h, intrin=None) -> None:
    """Tile ``info``'s stage ``tid`` (S2 R... S3 levels, R0 S2 R1 S3; tensorized, R0 S2 R1 S3 St Rt) computed at
    the S1 loops of the elementwise stage ``oid`` (its consumer, or the stage copying its local cache), which is
    tiled S0 S1 and then the rest, vectorized."""
    spatial, reduce = _tiles(info, h, intrin)
    pre = "X" if intrin else "T"
    n = len(info.spatial)
    O0, O1, Oin, ext = [], [], [], {}
    for a, iv in enumerate(state.leaves(oid)[:n]):
        parts = state.split(oid, iv, [spatial[a][0], math.prod(spatial[a][1:])])
        O0.append(parts[0])
        O1.append(parts[1])
        Oin.append(parts[2])
    state.reorder(oid, O0 + O1 + Oin)
    vec = math.prod(spatial[-1][2:])
    if vec > 1 and spatial[-1][1] > 1:
        Oin[-1:] = state.split(oid, Oin[-1], [vec])
    if vec > 1:
        state.vectorize(oid, Oin[-1])
    _parallel(state, oid, O0[:h[f"{pre}{info.index}.p"]])
    O1 = [iv for iv in state.leaves(oid) if iv in O1]
    state.compute_at(tid, oid, O1[-1])
    leaves = state.leaves(tid)
    S2, S3, St, R0, R1, Rt = [], [], [], [], [], []
    for a, iv in enumerate(leaves[:n]):
        parts = state.split(tid, iv, spatial[a][2:])
        for lvl, x, e in zip((S2, S3, St), parts, spatial[a][1:]):
            lvl.append(x)
            ext[x] = e
    for a, iv in enumerate(leaves[n:]):
        parts = state.split(tid, iv, reduce[a])
        for lvl, x, e in zip((R0, R1, Rt), parts, [info.reduce[a] // math.prod(reduce[a])] + reduce[a]):
            lvl.append(x)
            ext[x] = e
    state.reorder(tid, R0 + S2 + R1 + S3 + St + Rt)
    _annotate_inner(state, tid, S2 + R1 + S3, ext, h[f"{pre}{info.index}.u"], vector=intrin is None)
    if intrin is not None:
        state.tensorize(tid, St[0], intrin.name)


def _simple(state: State, info, h, infos) -> None:
    """A root stage: parallel outer loops, the last loop split and its inner part vectorized and the
    loop outside it unrolled (``S.u``); a reduction's innermost loop split and unrolled (``S.ru``) or
    factored into vectorized partial results (``F``, at the root only); the reductions attached
    here are computed at its outer fused loop."""
    k = info.index
    sid = state.stage_id(info.op)
    attached = info.attach is not None and h.get(f"A{info.attach}", 0)
    if info.reduce and not attached and h.get(f"F{k}", 0):
        _rfactor(state, sid, info, h, h[f"F{k}"], h.get(f"S{k}.p", 1))
        return
    if info.reduce and h.get(f"S{k}.ru", 1) > 1:
        ri = state.split(sid, state.leaves(sid)[-1], [h[f"S{k}.ru"]])
        state.unroll(sid, ri[1])
    if attached:
        return                                   # computed at its consumer (done when the consumer was built)
    guests = [infos[g] for g in info.guests] if h.get(f"A{k}", 0) else []
    leaves = state.leaves(sid)[:len(info.spatial)]
    if not leaves:
        return
    v, u = h.get(f"S{k}.v", 1), h.get(f"S{k}.u", 1)
    depth = len(guests[0].spatial) if guests else h[f"S{k}.p"]
    if v > 1 and not info.reduce and depth < len(leaves):
        parts = state.split(sid, leaves[-1], [u, v] if u > 1 else [v])
        state.vectorize(sid, parts[-1])
        if u > 1:
            state.unroll(sid, parts[1])
        leaves = leaves[:-1] + [parts[0]]
    if depth:
        fused = state.fuse(sid, leaves[:depth])
        state.parallel(sid, fused)
        for g in sorted(guests, key=lambda g: g.index):
            state.compute_at(state.stage_id(g.op), sid, fused)


def _rfactor(state: State, sid: int, info, h, length: int | None = None, depth: int = 1) -> None:
    """Split the innermost reduction loop, factor out its inner part: partial results computed with
    the factored loop innermost and vectorized, then reduced (its first ``depth`` spatial loops
    fused and parallel in both stages, if the stage has enough points)."""
    n = len(info.spatial)
    k = state.leaves(sid)[-1]
    ko, ki = state.split(sid, k, [length or h[f"F{info.index}"]])
    rf = state.rfactor(sid, ki, 0)
    rl = state.leaves(rf)           # [k.v, spatial..., other reduction loops]
    state.reorder(rf, rl[1:] + rl[:1])
    state.vectorize(rf, rl[0])
    if n and depth and math.prod(info.spatial) > 1:
        rl = state.leaves(rf)
        state.parallel(rf, state.fuse(rf, rl[:min(depth, n)]))
        if math.prod(info.spatial) >= RFACTOR_MAX_SPATIAL:
            _parallel(state, rf + 1, state.leaves(rf + 1)[:min(depth, n)])


__all__ = ["build_state"]
