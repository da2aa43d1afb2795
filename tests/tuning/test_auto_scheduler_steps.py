"""Auto-scheduler: a schedule is data (steps replay deterministically) and the workload key."""
from __future__ import annotations

import json
import random

import pytest

import tensorir as te
from tensorir.schedule import ScheduleError

from autotune.auto_scheduler import ComputeDAG, SearchTask, SketchSpace, State, register_workload
from autotune.auto_scheduler.transform_step import step_from_json, steps_from_json

import auto_scheduler_dags as dags
from conftest import check


def _lowered(state: State) -> str:
    return str(te.lower(state.schedule, state.args))


@pytest.mark.parametrize("make", [dags.gemm, dags.conv2d, dags.softmax, dags.row_sum], ids=lambda f: f.__name__)
def test_replay_is_deterministic(make):
    tensors, _ = make()
    dag = ComputeDAG(tensors)
    policy = SketchSpace(dag)
    rng = random.Random(3)
    for point in [policy.default()] + [policy.sample(rng) for _ in range(3)]:
        state = policy.build(point)
        text = json.dumps(state.to_json())
        replayed = State(dag, json.loads(text))            # from JSON, on a fresh schedule
        assert replayed.to_json() == state.to_json()
        assert _lowered(replayed) == _lowered(state)
        again = State(ComputeDAG(make()[0]), json.loads(text))   # a fresh DAG built the same way
        assert _lowered(again) == _lowered(state)


def test_state_records_each_primitive_and_replays():
    tensors, ref = dags.gemm(32, 32, 32)
    dag = ComputeDAG(tensors)
    st = State(dag)
    c = st.stage_id(tensors[-1])
    i, j, k = st.leaves(c)
    io, ii = st.split(c, i, [8])
    jo, ji = st.split(c, j, [16])
    st.reorder(c, [io, jo, k, ii, ji])
    st.parallel(c, st.fuse(c, [io, jo]))
    st.vectorize(c, ji)
    st.unroll(c, ii)
    assert [s[0] for s in st.to_json()] == ["SP", "SP", "RE", "FU", "AN", "AN", "AN"]
    check(*dag.apply_steps_from_state(st), ref)
    assert "parallel" in _lowered(State(dag, st.to_json()))


def test_cache_write_rfactor_and_inline_steps_replay():
    tensors, ref = dags.dense_bias_relu()
    dag = ComputeDAG(tensors)
    st = State(dag)
    add = st.stage_id(tensors[-1].op.input_tensors[0])
    st.compute_inline(add)
    dense = st.stage_id(dag.ops[2])
    cache = st.cache_write(dense, "local")
    assert st.stages[cache].op.name.endswith(".local") and st.stages[cache + 1].origin_op is dag.ops[2]
    check(*dag.apply_steps_from_state(st.to_json()), ref)
    tensors, ref = dags.row_sum()
    dag = ComputeDAG(tensors)
    st = State(dag)
    s = st.stage_id(tensors[-1])
    i, k = st.leaves(s)
    ko, ki = st.split(s, k, [16])
    rf = st.rfactor(s, ki)
    assert st.stages[rf].op.name.endswith(".rf")
    check(*dag.apply_steps_from_state(st.to_json()), ref)


def test_bad_steps_are_refused_by_name():
    tensors, _ = dags.gemm()
    dag = ComputeDAG(tensors)
    with pytest.raises(ScheduleError, match="stage index 9"):
        State(dag, [["SP", 9, 0, [4]]])
    with pytest.raises(ScheduleError, match=r"stage C: .*loop index 5"):
        State(dag, [["SP", 2, 5, [4]]])
    with pytest.raises(ScheduleError, match="unknown annotation"):
        State(dag, [["AN", 2, 0, "tensorize"]])
    for bad in (["XX", 1], ["SP", 2, 0], ["SP", "2", 0, [4]], ["SP", 2, 0, [4.5]], "SP"):
        with pytest.raises(ValueError):
            step_from_json(bad)
    with pytest.raises(ValueError):
        steps_from_json({"SP": 1})


def test_workload_key_ignores_names_not_structure():
    a = ComputeDAG(dags.gemm(64, 48, 32)[0])
    A = te.placeholder((64, 32), name="X")
    B = te.placeholder((32, 48), name="Y")
    r = te.reduce_axis((0, 32), name="rr")
    renamed = ComputeDAG([A, B, te.compute((64, 48), lambda p, q: te.sum(A[p, r] * B[r, q], axis=r), name="Z")])
    assert a.hash == renamed.hash and a.workload_key() == renamed.workload_key()
    assert ComputeDAG(dags.gemm(64, 48, 16)[0]).hash != a.hash
    C = te.compute((64, 48), lambda p, q: te.sum(A[p, r] * B[r, q] * 2, axis=r), name="Z")
    assert ComputeDAG([A, B, C]).hash != a.hash


@register_workload
def as_test_matmul(n):
    return dags.gemm(n, n, n)[0]


def test_search_task_from_function_and_from_dag():
    t1 = SearchTask(func=as_test_matmul, args=(32,), target="llvm")
    t2 = SearchTask(func="as_test_matmul", args=(32,), target="llvm")
    t3 = SearchTask(compute_dag=ComputeDAG(dags.gemm(32, 32, 32)[0]), target="llvm")
    assert t1.workload_key == t2.workload_key and t1.workload_key.startswith("as_test_matmul_32-")
    assert t1.compute_dag.hash == t3.compute_dag.hash and t3.workload_key.endswith(t1.compute_dag.hash)
    assert t1.flop == 2 * 32 ** 3
    with pytest.raises(KeyError, match="no_such"):
        SearchTask(func="no_such", args=(1,))
    with pytest.raises(ValueError, match="placeholder"):
        ComputeDAG([te.placeholder((4,), name="P")])
