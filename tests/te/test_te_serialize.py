"""save_json / load_json / structural_hash (tensorir/serialize.py): round trips that print, lower, build and
compute the same; Var identity; reducers as data; pickling through JSON; clear errors on bad documents."""
from __future__ import annotations

import json
import math
import pickle
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, assert_raises_naming, check, lower_text
from test_te_multi_output import argmax_reducer
from test_te_tensorize import GEMV_LL, gemm, intrin_gemv

import tensorir as te
from tensorir import reduce as red
from tensorir.expr import (
    Broadcast,
    Call,
    Cast,
    FloatImm,
    IntImm,
    Let,
    Not,
    Ramp,
    Select,
    StringImm,
    Var,
    structural_equal,
)
from tensorir.schedule import SCOPE, Schedule
from tensorir.serialize import SerializeError, load_json, save_json, structural_hash


def roundtrip(obj):
    text = save_json(obj)
    json.loads(text)  # plain JSON
    out = load_json(text)
    assert save_json(out) == text, "saving the loaded object must give the same document"
    return out


def matmul_schedule_tvm():
    """TVM's test_schedule_create."""
    m, n, l = te.size_var("m"), te.size_var("n"), te.size_var("l")
    A = te.placeholder((m, l), name="A")
    B = te.placeholder((n, l), name="B")
    AA = te.compute((m, l), lambda i, j: A[i, j])
    T = te.compute((m, n, l), lambda i, j, k: AA(i, k) * B(j, k))
    s = te.create_schedule(T.op)
    s[AA].set_scope("shared")
    xo, xi = s[T].split(T.op.axis[0], factor=10)
    xi1, xi2 = s[T].split(xi, factor=2)
    s[AA].compute_at(s[T], xi1)
    xo, xi = s[AA].split(AA.op.axis[0], factor=10)
    s[T].reorder(xi2, xi1)
    return s, [A, B, T], [m, n, l]


# -- round trips that compute the same ----------------------------------------------------------------
def test_schedule_create_tvm_json_and_pickle():
    s, args, sizes = matmul_schedule_tvm()
    for loaded in (load_json(save_json(s)), pickle.loads(pickle.dumps(s))):
        assert isinstance(loaded, Schedule)
        assert str(loaded.outputs[0].body) == str(s.outputs[0].body)
        assert [str(st.op.name) for st in loaded.stages] == [st.op.name for st in s.stages]
        assert loaded.stages[1].attach_type == SCOPE and loaded.stages[1].attach_stage is loaded.stages[3]
        assert loaded.stages[1].scope == "shared"
    s2, args2, sizes2 = roundtrip((s, args, sizes))
    assert lower_text(s2, args2) == lower_text(s, args)
    m, n, l = sizes2
    check(s2, args2, lambda a, b: a[:, None, :] * b[None, :, :], sizes={m: 23, n: 5, l: 7})


def test_tensor_reduce_tvm_prints_the_same():
    m, n, l = te.size_var("m"), te.size_var("n"), te.size_var("l")
    A = te.placeholder((m, l), name="A")
    B = te.placeholder((n, l), name="B")
    T = te.compute((m, n, l), lambda i, j, k: A[i, k] * B[j, k])
    rv = te.reduce_axis((0, A.shape[1]), "k")
    C = te.compute((m, n), lambda i, j: te.sum(T(i, j, rv + 1), axis=rv))
    C2 = roundtrip(C)
    assert isinstance(C2, te.Tensor) and str(C2) == str(C)
    assert str(C2.op.body) == str(C.op.body) and C2.op.body[0].combiner is red.sum_reducer
    assert isinstance(C2.shape[0], te.SizeVar) and C2.op.input_tensors[0].op.input_tensors[0].shape[0] is C2.shape[0]


def test_tag_and_attrs_survive():
    n, m, l = te.size_var("n"), te.size_var("m"), te.size_var("l")
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    with te.tag_scope(tag="gemm"):
        k = te.reduce_axis((0, l), name="k")
        C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k),
                       attrs={"hello": 1, "arr": [10, 12], "x": 0.5, "e": te.const(2.5)})
    CC = roundtrip(C)
    assert CC.op.tag == "gemm" and CC.op.attrs["hello"] == 1
    assert len(CC.op.attrs["arr"]) == 2 and CC.op.attrs["arr"][0] == 10 and CC.op.attrs["arr"][1] == 12
    assert CC.op.attrs["x"] == 0.5 and str(CC.op.attrs["e"]) == "2.5f"


def test_scan_multi_out_and_cumsum_compute():
    m, n = te.size_var("m"), te.size_var("n")
    x1, s1, x2, s2 = (te.placeholder((m, n), name=nm) for nm in ("x1", "s1", "x2", "s2"))
    s1_init = te.compute((1, n), lambda _, i: x1[0, i])
    s2_init = te.compute((1, n), lambda _, i: x2[0, i])
    s1_update = te.compute((m, n), lambda t, i: s1[t - 1, i] + s2[t - 1, i] + x1[t, i])
    s2_update = te.compute((m, n), lambda t, i: x2[t, i] + s2[t - 1, i])
    r0, r1 = te.scan([s1_init, s2_init], [s1_update, s2_update], [s1, s2])
    zz = roundtrip(r0.op)
    assert isinstance(zz, te.ScanOp) and zz.num_outputs == 2 and str(zz.scan_axis.dom) == str(r0.op.scan_axis.dom)

    s = te.create_schedule(r0.op)
    s[s1_update].split(s1_update.op.axis[1], factor=4)
    s_, args, (m_, n_) = roundtrip((s, [x1, x2, r0, r1], [m, n]))

    def ref(a, b):
        out1, out2 = np.zeros_like(a), np.cumsum(b, axis=0)
        out1[0] = a[0]
        for t in range(1, len(a)):
            out1[t] = out1[t - 1] + out2[t - 1] + a[t]
        return out1, out2
    assert lower_text(s_, args) == lower_text(s, [x1, x2, r0, r1])
    check(s_, args, ref, sizes={m_: 9, n_: 6})


def test_rfactor_cache_write_and_annotations_compute_the_same():
    n = 128
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.max(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: te.exp(C[i, j]) - 1.0, name="D")
    s = te.create_schedule(D.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=8)
    s[C].parallel(io)
    s[CL].compute_at(s[C], io)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[CL].unroll(ki)
    s[CL].vectorize(s[CL].op.axis[1])
    s[D].pragma(s[D].fuse(*D.op.axis), "auto_unroll_max_step", 16)
    s2, args = roundtrip((s, [A, B, D]))
    assert lower_text(s2, args) == lower_text(s, [A, B, D])
    d2 = s2[s2.outputs[0]]
    assert [str(a) for a in d2.iter_var_attrs.values()] == [str(a) for a in s[D].iter_var_attrs.values()]
    assert all(a.stage is d2 for a in d2.iter_var_attrs.values())
    assert [v for p in d2.pragmas.values() for _, v in p] == [16]
    check(s2, args, lambda a, b: np.exp((a[:, :, None] * b[None, :, :]).max(axis=1)) - 1.0, rtol=1e-4)

    E = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="E")
    s = te.create_schedule(E.op)
    ko, ki = s[E].split(k, factor=16)
    EF = s.rfactor(E, ki)
    s[EF].parallel(EF.op.axis[0])
    s2, args = roundtrip((s, [A, E]))
    assert lower_text(s2, args) == lower_text(s, [A, E])
    check(s2, args, lambda a: a.sum(axis=1), rtol=1e-4)


def test_custom_and_tuple_reducers_travel_as_data():
    m, n = 6, 11
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    P = te.compute((m,), lambda i: prod(A[i, k], axis=k), name="P")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    T0, T1 = te.compute((m,), lambda i: argmax_reducer()((idx[i, k], A[i, k]), axis=k), name="T")
    s = te.create_schedule([P.op, T0.op])
    text = save_json((s, [A, idx, P, T0, T1]))
    assert "lambda" not in text and "<function" not in text
    s2, args = load_json(text)
    assert lower_text(s2, args) == lower_text(s, [A, idx, P, T0, T1])
    P2, T02 = args[2], args[3]
    assert P2.op.body[0].combiner.name == "prod" and T02.op.body[0].combiner.name == "argmax"

    def ref(a, ix):
        j = a.argmax(axis=1)
        return a.prod(axis=1), ix[np.arange(m), j], a.max(axis=1)
    check(s2, args, ref, low=0.5, high=1.5, rtol=1e-4)
    assert_raises_naming(TypeError, lambda: P2.op.body[0].combiner.combine(te.const(1), te.const(2)),
                         "prod", "float32", "int32")


def test_builtin_reducers_load_as_themselves():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")

    def reduction(f):
        return te.compute((4,), lambda i: f(A[i, k], axis=k))
    outs = [reduction(f) for f in (te.sum, te.max, te.min)]
    loaded = roundtrip(outs)
    for t, r in zip(loaded, (red.sum_reducer, red.max_reducer, red.min_reducer)):
        assert t.op.body[0].combiner is r


def test_extern_group_inline_layout_and_tensorize():
    n = 37
    A = te.placeholder((n,), name="A")

    def body(ins, outs):
        ib = te.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            with ib.if_scope(a[i] > 0):
                c[i] = a[i] * 2.0
            with ib.else_scope():
                c[i] = -a[i]
        return ib.get()
    E = te.extern((n,), [A], body, name="E")
    F = te.compute((n,), lambda i: E[i] + 1.0, name="F")
    G = te.compute((n,), lambda i: F[i] * 3.0, name="G")
    s = te.create_schedule(G.op)
    s[F].compute_inline()
    s2, args = roundtrip((s, [A, G]))
    assert isinstance(s2.stages[1].op, te.ExternOp) and lower_text(s2, args) == lower_text(s, [A, G])
    check(s2, args, lambda a: (np.where(a > 0, 2 * a, -a) + 1) * 3)

    P = te.placeholder((5, 7), name="P")
    x = te.compute((5, 7), lambda i, j: P[i, j] * 2, name="x")
    x1 = te.compute(x.shape, lambda i, j: x[i, j] + 1, name="x1")
    x2 = te.compute(x.shape, lambda i, j: x1[i, j] + 2, name="x2")
    s = te.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    g.compute_at(s[x2], x2.op.axis[0])
    s2, args = roundtrip((s, [P, x2]))
    assert all(st in s2.stages for st in s2.groups[0].members)
    assert s2[s2.stages[1].op].group is s2.groups[0] and s2.groups[0].attach_stage is s2.stages[-1]
    assert lower_text(s2, args) == lower_text(s, [P, x2])
    check(s2, args, lambda p: p * 2 + 3)

    s = te.create_schedule(x2.op)
    s[x1].transform_layout(lambda i, j: [j, i])
    s2, args = roundtrip((s, [P, x2]))
    assert lower_text(s2, args) == lower_text(s, [P, x2])
    check(s2, args, lambda p: p * 2 + 3)

    A, B, C = gemm(64, 48, 32)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin_gemv(16, 32, reset_update=False))
    s[C].pragma(x, "import_llvm", GEMV_LL)
    s2, args = roundtrip((s, [A, B, C]))
    assert lower_text(s2, args) == lower_text(s, [A, B, C])
    check(s2, args, lambda a, b: a @ b.T, rtol=1e-4, atol=1e-4)


def test_gpu_and_storage_annotations_and_lowered_functions():
    n = 64
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((n, n), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s.cache_read(A, "shared", [B])
    xo, xi = s[C].split(C.op.axis[0], factor=16)
    s[B].compute_at(s[C], xo)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    s[B].set_store_predicate(B.op.axis[0] < 100)
    s[B].storage_align(B.op.axis[0], 8, 1)
    s[B].double_buffer()
    s[C].prefetch(B, C.op.axis[1], 1)
    s2, (A2, C2) = roundtrip((s, [A, C]))
    st = s2[C2]
    assert [t.thread_tag for t in st.bindings.values()] == ["blockIdx.x", "threadIdx.x"]
    assert s2[s2.stages[2].op].storage_aligns == s[B].storage_aligns == {0: (8, 1)}
    assert s2.stages[2].double_buffered and str(s2.stages[2].store_predicate) == str(s[B].store_predicate)
    assert s2[st.prefetches[0][0]] is s2.stages[2] and structural_hash(s2) == structural_hash(s)

    f = te.lower(te.create_schedule(C.op), [A, C])
    f2 = roundtrip(f)
    assert str(f2) == str(f) and structural_hash(f2) == structural_hash(f)


# -- expressions ---------------------------------------------------------------------------------------
def test_every_expression_node_and_var_identity():
    x, y = te.var("x"), te.size_var("y", "int64")
    f = te.var("f", "float32")
    v = Var("v")
    exprs = (x * 2 + x // 3 - x % 5, te.min(x, 7), te.max(x, 1), (x < 3) & (x >= 1) | (x != 2), ~(x == 4),
             Cast("float64", f), Select("float32", x > 0, f, FloatImm("float32", math.inf)),
             FloatImm("float32", math.nan), FloatImm("float64", -0.0), IntImm("int64", 2**40 + 1),
             StringImm("handle", "s\"q"), Call("float32", "exp", (f,)), Not("bool", x > 2),
             Ramp("int32x4", x, te.const(1), 4), Broadcast("float32x8", f, 8), Let("int32", v, x + 1, v * v),
             te.truncdiv(x, 3), te.truncmod(x, 3), y * 2, f / 2.0)
    loaded = roundtrip(exprs)
    assert [str(e) for e in loaded] == [str(e) for e in exprs]
    assert [type(e) for e in loaded] == [type(e) for e in exprs]
    xs = {id(u) for e in loaded for u in _vars(e) if u.name == "x"}
    assert len(xs) == 1 and type(loaded[-2].a) is te.SizeVar and loaded[-2].a.dtype == "int64"
    assert math.isnan(loaded[7].value) and math.copysign(1, loaded[8].value) == -1
    assert loaded[9].value == 2**40 + 1 and loaded[10].value == "s\"q"
    assert loaded[0].dtype == "int32" and not structural_equal(loaded[0], exprs[0])  # new Vars


def _vars(e):
    from tensorir.visitor import collect
    return collect(e, Var)


def test_shared_subexpressions_stay_shared():
    """A tuple reduction's outputs share source, condition and init: so do the loaded ones."""
    idx = te.placeholder((3, 4), name="idx", dtype="int32")
    val = te.placeholder((3, 4), name="val")
    k = te.reduce_axis((0, 4), "k")
    T0, _ = te.compute((3,), lambda i: argmax_reducer()((idx[i, k], val[i, k]), axis=k,
                                                       init=(te.const(0), te.const(0.0))), name="T")
    b0, b1 = roundtrip(T0).op.body
    assert b0.source is b1.source and b0.condition is b1.condition and b0.init is b1.init
    assert b0.combiner is b1.combiner and b0.axis[0] is b1.axis[0]


# -- pickle ---------------------------------------------------------------------------------------------
def test_pickle_is_json_underneath():
    s, args, _ = matmul_schedule_tvm()
    blob = pickle.dumps((s, args))
    assert b"tiletune.te" in blob
    s2, args2 = pickle.loads(blob)
    assert isinstance(s2, Schedule) and isinstance(args2[2], te.Tensor)
    assert isinstance(pickle.loads(pickle.dumps(args[2].op)), te.ComputeOp)


# -- structural hash ---------------------------------------------------------------------------------
HASH_SCRIPT = """
import tensorir as te
from tensorir.serialize import structural_hash
n = te.size_var("{n}")
A = te.placeholder((n, 64), name="{a}")
k = te.reduce_axis((0, 64), name="{k}")
B = te.compute((n,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="{b}")
print(structural_hash(B))
"""


def _hash_in_process(**names) -> str:
    out = subprocess.run([sys.executable, "-c", HASH_SCRIPT.format(**names)], check=True, capture_output=True,
                         text=True, env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"})
    return out.stdout.strip()


def test_structural_hash_ignores_names_and_processes():
    h1 = _hash_in_process(n="n", a="A", k="k", b="B")
    h2 = _hash_in_process(n="rows", a="X", k="red", b="out")
    assert h1 == h2 and len(h1) == 64

    def dag(c=2.0, cols=64, op=te.sum, dtype="float32", name="A"):
        n = te.size_var("n")
        A = te.placeholder((n, cols), name=name, dtype=dtype)
        k = te.reduce_axis((0, cols), name="k")
        return te.compute((n,), lambda i: op(A[i, k] * te.const(c, dtype), axis=k), name="B")
    assert structural_hash(dag()) == h1 == structural_hash(dag(name="Other"))
    others = [dag(c=3.0), dag(cols=32), dag(op=te.max), dag(dtype="float64")]
    assert len({h1, *map(structural_hash, others)}) == 5

    x, y = te.var("x"), te.var("y")
    assert structural_hash(x + y) != structural_hash(x + x)
    A = te.placeholder((4,), name="A")
    a = A[0]
    assert structural_hash(a + a) == structural_hash(A[0] + A[0])


# -- errors --------------------------------------------------------------------------------------------
def test_bad_documents_name_the_culprit():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    doc = json.loads(save_json(B))
    assert_raises_naming(SerializeError, lambda: load_json("{not json"), "not a JSON document")
    assert_raises_naming(SerializeError, lambda: load_json("[1, 2]"), "tiletune.te")
    assert_raises_naming(SerializeError, lambda: load_json(json.dumps({**doc, "version": 99})), "99")

    def broken(change):
        d = json.loads(json.dumps(doc))
        k = next(i for i, e in enumerate(d["nodes"]) if e["type"] == "Add")
        change(d["nodes"][k])
        return lambda: load_json(json.dumps(d)), f"node {k}"
    fn, where = broken(lambda e: e.update(type="os.system"))
    assert_raises_naming(SerializeError, fn, where, "unknown node type 'os.system'")
    for change, words in ((lambda e: e.pop("b"), ["missing b"]),
                          (lambda e: e.update(c=1), ["unknown c"]),
                          (lambda e: e.update(b={"ref": 999}), ["reference 999"]),
                          (lambda e: e.update(b={"eval": "1+1"}), ["bad value"]),
                          (lambda e: e.update(b=3), ["field 'b' must be Expr"]),
                          (lambda e: e.update(dtype="floaty"), ["floaty"])):
        fn, where = broken(change)
        assert_raises_naming(SerializeError, fn, where, "(Add)", *words)

    assert_raises_naming(SerializeError, lambda: load_json(json.dumps({"format": "tiletune.te", "version": 1})),
                         "no 'root'")
    cyc = {**doc, "nodes": [{"type": "Cast", "dtype": "float32", "value": {"ref": 0}}], "root": {"ref": 0}}
    assert_raises_naming(SerializeError, lambda: load_json(json.dumps(cyc)), "refers to itself")

    s = te.create_schedule(B.op)
    sd = json.loads(save_json(s))
    sd["nodes"][-1]["stages"][1]["__class__"] = 1
    assert_raises_naming(SerializeError, lambda: load_json(json.dumps(sd)), "stage B", "unknown attribute '__class__'")


def test_non_data_is_refused_when_saving():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B", attrs={"callback": print})
    assert_raises_naming(SerializeError, lambda: save_json(B), "ComputeOp B", "attrs", "builtin_function_or_method")
    with pytest.raises(SerializeError, match="ComputeOp B"):
        pickle.dumps(B)
