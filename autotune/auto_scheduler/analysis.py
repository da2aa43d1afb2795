"""What the sketch rules need to know about each stage of a DAG (Ansor's ``AccessAnalyzer``).

``analyze(dag)`` gives one :class:`StageInfo` per stage of the initial schedule: its loop extents,
whether it reduces, whether it has data reuse (an input it reads does not depend on every spatial
loop, so tiling keeps data in cache: GEMM, convolution), who reads it, and the plan its rule picks:

- ``inline``: a compute stage with no reduction that is not an output;
- ``tile``: a reduction with data reuse, tiled SSRSRS; ``host`` is the elementwise consumer it is
  fused into (computed at that consumer's tile loops), if it has exactly one and of its shape;
- ``rfactor``: a reduction whose spatial extent is too small to parallelize and whose reduction is long;
  its ``packs`` are the inputs whose panels it may read repacked (see :func:`packable_inputs`);
- ``simple``: everything else (injective outputs, reductions without reuse); a reduction whose every
  reader is one simple output (through inlined stages or other such reductions) may be computed at
  that output's outer loops (``attach``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tensorir.expr import IntImm, Reduce, TensorLoad
from tensorir.tensor import ComputeOp, PlaceholderOp
from tensorir.visitor import collect

RFACTOR_MAX_SPATIAL = 16      # spatial points below which a long reduction is split (rfactor)
RFACTOR_MIN_REDUCE = 64


@dataclass
class StageInfo:
    index: int
    op: object
    kind: str = "placeholder"              # placeholder, inline, tile, rfactor, simple
    spatial: list = field(default_factory=list)
    reduce: list = field(default_factory=list)
    readers: list = field(default_factory=list)      # indices of stages that read it directly
    host: int | None = None                 # tile: the consumer it is fused into
    guest: int | None = None                # the tile stage fused into this one
    attach: int | None = None               # simple reduction: the output it may be computed in
    guests: list = field(default_factory=list)       # simple reductions that may attach here
    packs: list = field(default_factory=list)        # tile: (input stage, dim of j, outer dims, reduce dims)

    @property
    def name(self) -> str:
        return self.op.name


def _extent(iv) -> int:
    e = iv.dom.extent
    if not isinstance(e, IntImm):
        raise ValueError(f"auto_scheduler: axis {iv.var.name} has a symbolic extent {e}; constant shapes only")
    return e.value


def has_reduce(op) -> bool:
    return isinstance(op, ComputeOp) and isinstance(op.bodies[0], Reduce)


def has_data_reuse(op) -> bool:
    """A reduction reading some tensor with indices that leave out a spatial loop variable (of extent > 1)."""
    if not has_reduce(op):
        return False
    spatial = {iv.var for iv in op.axis if not (isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1)}
    from tensorir.expr import Var
    for load in collect(op.bodies, TensorLoad):
        used = {v for v in collect(load.indices, Var)}
        if spatial - used:
            return True
    return False


def packable_inputs(op) -> list[tuple]:
    """The placeholder inputs of a reduction worth repacking into panels for its vectorized (last
    spatial) axis ``j``: read only at plain loop variables, one dimension exactly ``j`` and another
    a reduction variable.  Packed as ``[outer dims (j // bn for j), reduce dims, j % bn]`` the
    innermost loop streams unit-stride ``bn``-wide rows of one panel (topi's ``dense_pack``: ``W[j, k]``
    at ``[j // bn, k, j % bn]``).  Returns ``[(tensor op, dim of j, outer dims, reduce dims)]``."""
    from tensorir.expr import Var
    if not has_reduce(op) or not op.axis:
        return []
    j = op.axis[-1].var
    reduce_vars = {iv.var for iv in op.reduce_axis}
    loads: dict = {}
    for load in collect(op.bodies, TensorLoad):
        loads.setdefault(load.tensor.op, []).append(load)
    out = []
    for t_op, ls in loads.items():
        if not isinstance(t_op, PlaceholderOp) or any(ld.indices != ls[0].indices for ld in ls):
            continue
        idx = ls[0].indices
        if not all(isinstance(e, Var) for e in idx) or j not in idx or not reduce_vars & set(idx):
            continue
        dims = range(len(idx))
        out.append((t_op, list(idx).index(j), [d for d in dims if idx[d] not in reduce_vars],
                    [d for d in dims if idx[d] in reduce_vars]))
    return out


def analyze(dag, rfactor: bool = True) -> list[StageInfo]:
    """The stages' plans; ``rfactor=False`` (GPU: threads reduce across a block instead) plans small-output
    long reductions as ``simple``."""
    s = dag.create_schedule()[0]
    infos = [StageInfo(k, st.op) for k, st in enumerate(s.stages)]
    index = {st.op: k for k, st in enumerate(s.stages)}
    outputs = {t.op for t in dag.outputs}
    for k, st in enumerate(s.stages):
        op, info = st.op, infos[k]
        if isinstance(op, PlaceholderOp):
            continue
        for t in op.input_tensors:
            infos[index[t.op]].readers.append(k)
        info.spatial = [_extent(iv) for iv in op.axis]
        info.reduce = [_extent(iv) for iv in op.reduce_axis]
        if not has_reduce(op) and op not in outputs and op.num_outputs == 1:
            info.kind = "inline"
        elif has_data_reuse(op):
            info.kind = "tile"
            info.packs = [(index[t], *rest) for t, *rest in packable_inputs(op) if _extent(op.axis[-1]) % 8 == 0]
        elif rfactor and info.reduce and math.prod(info.spatial) < RFACTOR_MAX_SPATIAL and \
                math.prod(info.reduce) >= RFACTOR_MIN_REDUCE and op.num_outputs == 1:
            info.kind = "rfactor"
        else:
            info.kind = "simple"
    for info in reversed(infos):
        eff = effective_readers(infos, info.index)
        if info.kind == "tile" and info.op not in outputs and len(eff) == 1:
            host = infos[eff[0]]
            if host.kind == "simple" and not host.reduce and host.guest is None and host.spatial == info.spatial:
                info.host, host.guest = host.index, info.index
        if info.kind == "simple" and info.reduce and info.op not in outputs and eff:
            targets = {infos[r].attach if infos[r].attach is not None else r for r in eff}
            if len(targets) == 1:
                c = infos[targets.pop()]
                n = len(info.spatial)
                if c.kind == "simple" and c.op in outputs and 0 < n < len(c.spatial) and c.guest is None \
                        and c.spatial[:n] == info.spatial and \
                        all(len(infos[g].spatial) == n for g in c.guests):
                    info.attach = c.index
                    c.guests.append(info.index)
    return infos


def effective_readers(infos: list[StageInfo], k: int) -> list[int]:
    """The non-inlined stages reading stage ``k``, looking through inlined ones."""
    out: list[int] = []
    for r in infos[k].readers:
        for x in (effective_readers(infos, r) if infos[r].kind == "inline" else [r]):
            if x not in out:
                out.append(x)
    return out


__all__ = ["StageInfo", "analyze", "has_reduce", "has_data_reuse", "effective_readers", "packable_inputs"]
