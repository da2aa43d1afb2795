"""Tensor intrinsics the auto-scheduler tensorizes with (TVM's auto-scheduler ``AutoTensorize``, MetaSchedule's
``MultiLevelTilingWithIntrin``), registered by name: a record's ``TS`` step names one, so it replays as data.

An :class:`AutoIntrin` is a registered ``te.decl_tensor_intrin`` with the target features it needs and the
extents of its spatial and reduce axes, which are a stage's trailing ones (``dot_16x4_u8s8s32_avx512vnni``:
``c[i] += sum_r a[r] * b[i * 4 + r]``, 16 lanes x 4 bytes, ``vpdpbusd``).  :func:`match` says which one
a tiled stage fits on a target: the trailing extents divide, the input types agree, and the stage's inner
block, split to the intrinsic's shape, passes ``tensorize``'s own match (a trial lowering); a stage that
does not fit is named with the reason in the debug log and gets no tensorized sketch.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Callable

from tensorir.graph.schedules.registry import target_features
from tensorir.schedule import ScheduleError
from tensorir.topi.x86 import BF16_IR, DOT_BF16, DOT_INT8, dot_bf16, dot_int8

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AutoIntrin:
    """A tensor intrinsic the sketches may use: ``make()`` declares it; ``spatial`` / ``reduce`` are the extents
    of its axes (the stage's last ones); ``dtypes`` its inputs' types; ``ir`` LLVM IR defining the helpers its
    calls name (``pragma import_llvm`` on the stage's outer loop), if any."""
    name: str
    features: tuple
    spatial: tuple
    reduce: tuple
    dtypes: tuple
    make: Callable
    ir: str = ""

    def fits_target(self, features) -> bool:
        return all(f in features for f in self.features)


#: by preference (on a target with several, the first that fits a stage is used)
INTRINS: dict[str, AutoIntrin] = {}


def register(intrin: AutoIntrin) -> AutoIntrin:
    INTRINS[intrin.name] = intrin
    return intrin


for _isa in DOT_INT8:
    register(AutoIntrin(f"dot_{_isa.lanes}x4_u8s8s32_{_isa.feature}", (_isa.feature,), (_isa.lanes,), (4,),
                        ("uint8", "int8"), functools.partial(dot_int8, _isa)))
for _bf in DOT_BF16:
    register(AutoIntrin(f"dot_16x2_bf16f32_{_bf.feature}", (_bf.feature,), (16,), (2,), ("bfloat16", "bfloat16"),
                        functools.partial(dot_bf16, _bf), BF16_IR))


def intrin_key(intrin) -> str:
    """The name a step gives a declared intrinsic: its own, plus its buffers' scopes where one is not global (the
    tensor cores' ``mma_store_float32`` writes ``shared`` or ``global`` memory)."""
    scopes = [b.scope for b in intrin.buffers]
    return intrin.name if all(x == "global" for x in scopes) else f"{intrin.name}@{'/'.join(scopes)}"


@functools.cache
def _cuda_intrins() -> dict:
    """The tensor-core intrinsics (``mma.sync``, ``ldmatrix``, accumulator stores) by :func:`intrin_key`."""
    from tensorir.topi.cuda import intrin_ldmatrix, intrin_mma, intrin_mma_store
    out = []
    for dtype in ("float16", "bfloat16", "float32"):
        out += [intrin_mma(dtype), intrin_ldmatrix(dtype, "a"), intrin_ldmatrix(dtype, "b")]
        if dtype != "float32":
            out += [intrin_mma(dtype, b_trans=True), intrin_ldmatrix(dtype, "b_trans")]
        out += [intrin_mma_store(scope, dtype) for scope in ("shared", "global")]
    return {intrin_key(i): i for i in out}


@functools.cache
def get(name: str):
    """The declared ``TensorIntrin`` registered as ``name``; a ``ScheduleError`` naming it if none is."""
    if name in INTRINS:
        return INTRINS[name].make()
    if name in _cuda_intrins():
        return _cuda_intrins()[name]
    raise ScheduleError(f"tensorize step: no tensor intrinsic registered as {name!r} (registered: "
                        f"{', '.join([*INTRINS, *_cuda_intrins()])})")


def named(intrin) -> str:
    """The registered name of ``intrin`` (a hand schedule's, recorded as a step); a ``ScheduleError`` if it has none."""
    key = intrin_key(intrin)
    try:
        get(key)
    except ScheduleError:
        raise ScheduleError(f"tensorize with {intrin.name}: the auto-scheduler records only registered intrinsics "
                            "(autotune/auto_scheduler/tensorize.py)") from None
    return key


def _why_not(info, intrin: AutoIntrin) -> str | None:
    """Why ``info``'s stage cannot take ``intrin`` by shape and types alone (None: try it)."""
    ns, nr = len(intrin.spatial), len(intrin.reduce)
    if len(info.spatial) < ns or len(info.reduce) < nr:
        return f"{len(info.spatial)} axes and {len(info.reduce)} reduce axes, fewer than the intrinsic's"
    for what, have, want in (("axis", info.spatial[-ns:], intrin.spatial), ("reduce axis", info.reduce[-nr:],
                                                                           intrin.reduce)):
        if any(e % t for e, t in zip(have, want)):
            return f"trailing {what} extents {have} are not multiples of {list(want)}"
    types = [t.dtype for t in info.op.input_tensors]
    if sorted(types) != sorted(intrin.dtypes):   # (the types of the stage's inputs, which the block reads)
        return f"inputs of types {types}, not {list(intrin.dtypes)}"
    return None


def split_inner(state, sid: int, info, intrin: AutoIntrin) -> None:
    """The smallest tensorized form of stage ``sid``: its trailing axes split to the intrinsic's shape, those
    inner loops innermost (spatial, then reduce) and tensorized."""
    ns, nr = len(intrin.spatial), len(intrin.reduce)
    leaves = state.leaves(sid)
    n = len(info.spatial)
    outer, inner_s, inner_r = [], [], []
    for a, iv in enumerate(leaves):
        t = (intrin.spatial[a - (n - ns)] if n - ns <= a < n else
             intrin.reduce[a - n - (len(info.reduce) - nr)] if a >= n + len(info.reduce) - nr else None)
        if t is None:
            outer.append(iv)
            continue
        o, i = state.split(sid, iv, [t])
        outer.append(o)
        (inner_s if a < n else inner_r).append(i)
    state.reorder(sid, outer + inner_s + inner_r)
    state.tensorize(sid, inner_s[0], intrin.name)


@dataclass(frozen=True)
class Match:
    """A tiled stage's intrinsic and the inline stages it reads that its tensorized sketches keep at the root (a
    padded regrouping whose ``select`` would be inlined into the block, which the intrinsic does not compute)."""
    intrin: AutoIntrin
    keep: tuple = ()


def _trial(dag, infos: list, info, intrin: AutoIntrin, keep: tuple) -> None:
    """Lower the stage's smallest tensorized form, the inline stages but ``keep`` inlined (raises if refused)."""
    from .loop_state import State
    state = State(dag)
    for other in infos:
        if other.kind == "inline" and other.index not in keep:
            state.compute_inline(state.stage_id(other.op))
    split_inner(state, state.stage_id(info.op), info, intrin)
    state.lower(check=False)


def match(dag, infos: list, info, target) -> Match | None:
    """The first registered intrinsic of ``target`` that tiled stage ``info`` (of the DAG's ``infos``) fits, with
    the inline stages inlined or else those it reads kept at the root (None: none; the reasons are logged at
    debug level)."""
    features = target_features(target)
    producers = tuple(o.index for o in infos if o.kind == "inline" and info.index in o.readers)
    for intrin in INTRINS.values():
        if not intrin.fits_target(features):
            continue
        why = _why_not(info, intrin)
        for keep in ((), producers) if why is None else ():
            try:
                _trial(dag, infos, info, intrin, keep)
                return Match(intrin, keep)
            except (ScheduleError, ValueError, TypeError) as e:
                why = f"{type(e).__name__}: {e}"
            if not producers:
                break
        log.debug("auto_scheduler: stage %s is not tensorized with %s: %s", info.name, intrin.name, why)
    return None


__all__ = ["AutoIntrin", "INTRINS", "Match", "get", "intrin_key", "match", "named", "register", "split_inner"]
