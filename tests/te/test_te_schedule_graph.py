"""Graph helpers of te.schedule: read graph, post-DFS order, attach paths and automatic inlining."""
import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
import tensorir as te
from tensorir import schedule as sched


def test_read_graph_and_post_dfs_order():
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    A1 = te.compute((m, n), lambda i, j: A[i, j], name="A1")
    A2 = te.compute((m, n), lambda i, j: A1[i, j] + 3, name="A2")
    g = sched.CreateReadGraph([A2.op])
    assert g[A2.op][0] == A1 and g[A1.op][0] == A and g[A.op] == []
    order = sched.PostDFSOrder([A2.op], g)
    assert order == [A.op, A1.op, A2.op]


def test_attach_path_innermost_first():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 4)
    s[B].compute_at(s[C], xi)
    path = sched.CreateAttachPath(s)
    assert path[B.op] == [xi, xo] and path[C.op] == []


def _chain(tag=""):
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m,), name="A")
    B = te.placeholder((m, n), name="B")
    C = te.placeholder((m, n), name="C")
    ew = te.compute((m, n), lambda i, j: B[i, j] * C[i, j], name="EW")
    bc = te.compute((m, n), lambda i, j: A[i] * B[i, j], name="BC", tag="broadcast")
    out = te.compute((m, n), lambda i, j: ew[i, j] + bc[i, j] + C[i, j], name="out")
    return (A, B, C, out), ew, bc


@pytest.mark.parametrize("pass_, inlined", [("AutoInlineElemWise", {"EW"}), ("AutoInlineBroadcast", {"BC"}),
                                             ("AutoInlineInjective", {"EW", "BC"})])
def test_auto_inline_kinds(pass_, inlined):
    (A, B, C, out), ew, bc = _chain()
    s = te.create_schedule(out.op)
    getattr(sched, pass_)(s)
    assert {st.op.name for st in s.stages if st.attach_type == sched.INLINE} == inlined
    assert s[out].attach_type == sched.ROOT == 1
    f = codegen.build(s, [A, B, C, out])
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(sh).astype("float32") for sh in [(5,), (5, 7), (5, 7)])
    o = np.full((5, 7), np.nan, "float32")
    f(a, b, c, o)
    assert_close_scaled(o, b * c + a[:, None] * b + c, np.abs(b * c) + np.abs(a[:, None] * b) + np.abs(c))


def test_auto_inline_leaves_scheduled_stages():
    (A, B, C, out), ew, bc = _chain()
    s = te.create_schedule(out.op)
    s[ew].split(ew.op.axis[1], 4)
    sched.AutoInlineInjective(s)
    assert s[ew].attach_type == 1 and s[bc].attach_type == 2  # TVM's kGroupRoot, kInline
