"""TVM-compatible schedule behaviour, written as a TVM user would (``import tensorir as tvm``)."""
import os
import warnings

import numpy as np
import pytest

import tensorir as te
import tensorir as tvm

from conftest import assert_raises_naming, check


def chain(n=16, m=12):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    return A, B, C


# -- containers, driver, transform, contrib ------------------------------------------------------------
def test_infer_bound_is_a_map_and_axes_an_array():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    bounds = tvm.te.schedule.InferBound(s)
    assert isinstance(bounds, tvm.container.Map) and not isinstance(bounds, tvm.container.Array)
    assert isinstance(C.op.axis, tvm.container.Array)
    assert bounds[B.op.axis[0]].extent.value == 4


def test_schedule_to_module_is_a_module_of_one_prim_func():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    mod = tvm.driver.build_module.schedule_to_module(s, [A, C])
    assert isinstance(mod["main"], tvm.tir.PrimFunc)
    loops = []
    tvm.tir.stmt_functor.post_order_visit(mod["main"].body,
                                          lambda n: loops.append(n) if isinstance(n, tvm.tir.stmt.For) else None)
    assert len(loops) == 4  # B and C, two loops each
    # it is the loop nest before lowering's passes: building it is refused, naming what to build instead
    import codegen
    with pytest.raises(TypeError, match="schedule_to_module"):
        codegen.build(mod["main"])


def test_schedule_to_module_refuses_out_of_bounds():
    A = te.placeholder((8,), name="A")
    B = te.compute((9,), lambda i: A[i], name="B")
    s = te.create_schedule(B.op)
    assert_raises_naming(te.OutOfBoundsError, lambda: tvm.driver.build_module.schedule_to_module(s, [A, B]), "A")


def test_pass_context_keeps_schedule_record():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    assert s.schedule_record == [] and s.primitive_record == []
    with tvm.transform.PassContext(opt_level=3, config={"te.keep_schedule_record": True}):
        assert tvm.transform.PassContext.current().opt_level == 3
        s = te.create_schedule(C.op)
        xo, yo, xi, yi = s[C].tile(*C.op.axis, 4, 4)
        s[B].compute_at(s[C], yo)
        s[C].vectorize(yi)
    assert s.primitive_record == ["vanilla", "split", "split", "reorder", "compute_at", "vectorize"]
    first, last = s.schedule_record[0], s.schedule_record[-1]
    assert len(first[C].leaf_iter_vars) == 2 and len(last[C].leaf_iter_vars) == 4  # copies, not views
    assert first[B].attach_stage is None and last[B].attach_stage is last[C]
    assert tvm.transform.PassContext.current().opt_level == 2
    check(s, [A, C], lambda a: a * 2.0 + 1.0)


def test_pass_context_warns_on_options_without_effect():
    with pytest.warns(UserWarning, match="tir.disable_vectorize"):
        tvm.transform.PassContext(config={"tir.disable_vectorize": True})
    with pytest.raises(TypeError, match="disabled_pass"):
        tvm.transform.PassContext(disabled_pass="AlterOpLayout")


def test_tempdir():
    temp = tvm.contrib.utils.tempdir()
    with open(temp.relpath("x.txt"), "w") as f:
        f.write("x")
    assert temp.listdir() == ["x.txt"] and temp / "x.txt" == temp.relpath("x.txt")
    path = temp.path
    temp.remove()
    assert not os.path.exists(path)


# -- InferBound over scans, scan groups -------------------------------------------------------------------
def cumsum_scan(m, n):
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, init, update, te.scan(init, update, state, inputs=[X], name="scan")


def test_infer_bound_of_a_scan():
    m, n = te.size_var("m"), te.size_var("n")
    X, init, update, res = cumsum_scan(m, n)
    s = te.create_schedule(res.op)
    bounds = tvm.te.schedule.InferBound(s)
    assert bounds[res.op.scan_axis].min.value == 1
    assert bounds[update.op.axis[0]].extent.value == 1  # one step at a time
    assert s[update].group is not None and s[update].group.attach_stage is s[res]


def test_scan_body_attaches_only_inside_its_group():
    X, init, update, res = cumsum_scan(8, 5)
    s = te.create_schedule(res.op)
    assert_raises_naming(te.ScheduleError, lambda: s[update].compute_at(s[init], init.op.axis[0]),
                         "update", "scan")
    check(s, [X, res], lambda x: np.cumsum(x, axis=0))


def test_create_group_takes_only_stages_between_inputs_and_outputs():
    A = te.placeholder((8,), name="A")
    P = te.compute((8,), lambda i: A[i] + 1.0, name="P")
    Z = te.compute((8,), lambda i: 3.0 * i, name="Z")  # does not depend on P
    Q = te.compute((8,), lambda i: P[i] * Z[i], name="Q")
    R = te.compute((8,), lambda i: Q[i] + 1.0, name="R")
    s = te.create_schedule(R.op)
    g = s.create_group(outputs=Q, inputs=P)
    assert s[Q].group is g and s[Z].group is None and s[P].group is None


# -- compute_at: relational misuse refused when lowered; attachments follow splits and fuses --------------
def test_compute_at_misuse_is_refused_when_lowered():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[C].compute_at(s[C], C.op.axis[0])  # accepted here, as in TVM
    assert_raises_naming(RuntimeError, lambda: te.lower(s, [A, C]), "C", "itself")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].compute_at(s[B], B.op.axis[0])  # a cycle, and C is an output
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, C]), "C", "B")


@pytest.mark.parametrize("how", ["split", "split_twice", "fuse_inner"])
def test_attachment_follows_split_and_fuse(how):
    A, B, C = chain(16, 12)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[B].compute_at(s[C], j)
    if how == "split":
        jo, ji = s[C].split(j, factor=5)
        assert s[B].attach_ivar is ji
    elif how == "split_twice":
        jo, ji = s[C].split(j, factor=6)
        jio, jii = s[C].split(ji, factor=4)
        assert s[B].attach_ivar is jii
    else:
        f = s[C].fuse(i, j)
        assert s[B].attach_ivar is f
    check(s, [A, C], lambda a: a * 2.0 + 1.0)


def test_vectorize_reduction_axis_refused_at_the_call():
    V = te.placeholder((128,), name="V")
    ax = te.reduce_axis((0, 128), name="ax")
    O = te.compute((1,), lambda _: te.sum(V[ax], axis=[ax]), name="O")
    s = te.create_schedule(O.op)
    assert_raises_naming(RuntimeError, lambda: s[O].vectorize(ax), "O", "ax")
    assert_raises_naming(te.ScheduleError, lambda: s[O].pragma(ax, "vectorize"), "O", "ax")


# -- rfactor, fused reductions --------------------------------------------------------------------------
def test_rfactor_keeps_untouched_axes_and_data_splits():
    n = 20
    A = te.placeholder((n, n, n), name="A")
    k1, k2 = te.reduce_axis((0, n), name="k1"), te.reduce_axis((0, n), name="k2")
    B = te.compute((n,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k1, factor=4)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    BF = s.rfactor(B, ki)
    assert BF.op.body[0].axis[0] is k2 and BF.op.body[0].axis[1].var is ko.var
    assert len(s[BF].leaf_iter_vars) == 5  # ki, i.outer, i.inner (the split replayed), k2, k1.outer
    check(s, [A, B], lambda a: a.astype("float64").sum(axis=(1, 2)), atol=1e-3)


@pytest.mark.parametrize("split", [None, 5])
def test_fuse_data_and_reduction_axes(split):
    X = te.placeholder((6, 7), name="X")
    k = te.reduce_axis((0, 7), name="k")
    Y = te.compute((6,), lambda i: te.sum(X[i, k], axis=k), name="Y")
    s = te.create_schedule(Y.op)
    f = s[Y].fuse(Y.op.axis[0], k)
    if split:
        s[Y].split(f, factor=split)
    assert_raises_naming(te.ScheduleError, lambda: s[Y].vectorize(f if not split else s[Y].leaf_iter_vars[-1]),
                         "Y")
    check(s, [X, Y], lambda x: x.astype("float64").sum(axis=1), atol=1e-4)


def test_comm_reducer_on_values_combines_them():
    mysum = te.comm_reducer(lambda x, y: x + y, lambda t: tvm.tir.const(0, dtype=t))
    m, n = te.size_var("m"), te.size_var("n")
    assert te.structural_equal(mysum(m, n), m + n)
    A = te.placeholder((8, 3), name="A")
    B = te.compute((8,), lambda i: mysum(A[i, 0], A[i, 1], A[i, 2]), name="B")
    check(te.create_schedule(B.op), [A, B], lambda a: a.sum(axis=1), atol=1e-5)


def test_reduction_inside_an_expression_is_its_own_stage():
    """TVM refuses this body (a TVMError); tiletune computes the reduction in a stage B.red0."""
    n = te.size_var("n")
    A = te.placeholder((n, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k) + 1, name="B")
    assert [t.name for t in B.op.input_tensors] == ["B.red0"]


def test_multi_output_schedule_ops_and_op_classes():
    A = te.placeholder((8, 4), name="A")
    C1, C2 = te.compute(A.shape, lambda i, j: (A[i, j] + 1, A[i, j] * 2), name="C")
    s = te.create_schedule([C1.op, C2.op])
    s.cache_write([C1, C2], "local")
    stmt = tvm.te.schedule.ScheduleOps(s, tvm.te.schedule.InferBound(s))
    assert "C.v1" in str(stmt)
    assert isinstance(A.op, te.PlaceholderOp) and isinstance(C1.op, te.ComputeOp)
    assert isinstance(C1.op, te.Operation)


def test_allocate_extents_and_var_equal():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    allocs = []
    tvm.tir.stmt_functor.post_order_visit(te.lower(s, [A, C]).body,
                                          lambda n: allocs.append(n) if isinstance(n, tvm.tir.Allocate) else None)
    assert [tuple(int(e) for e in a.extents) for a in allocs] == [(1, 12)]
    i = te.var("i")
    assert isinstance(i.equal(0), tvm.tir.EQ)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(s, [A, C], lambda a: a * 2.0 + 1.0)
