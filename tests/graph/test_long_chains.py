"""Long chains build natively and match onnxruntime (issue #24): a chain of 200 and 1000 elementwise
nodes, a chain of ops that read their input twice (its fused body would grow as 3^n), a concatenate
of 250 inputs and a GRU over 250 frames.  Before fusion capped a kernel's size (``fuse_cost``) and
concatenate became a balanced tree of selects, these raised RecursionError inside the build (reported
as "no native kernel") or took minutes."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import graph_models as gm
import onnx_op_check
from onnx import TensorProto, helper

import codegen
from tensorir import graph
from tensorir.graph.passes.fuse_cost import MAX_FUSED_DEPTH, MAX_FUSED_NODES, MAX_FUSED_OPS, group_cost

rng = np.random.default_rng()


def chain_model(n: int, ops: list[str], shape=(4, 16)):
    nodes, prev = [], "x"
    for i in range(n):
        nodes.append(helper.make_node(ops[i % len(ops)], [prev], [f"t{i}"]))
        prev = f"t{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def check_fused_sizes(m) -> None:
    """Every kernel of the built model is within fusion's caps."""
    for n in m.graph.nodes:
        body = n.op.body
        cost = group_cost(list(body.nodes), list(range(len(body.nodes))))
        assert cost.fits(), (n.op.name, cost, MAX_FUSED_NODES, MAX_FUSED_DEPTH, MAX_FUSED_OPS)


@pytest.mark.parametrize("n", [200, 1000])
def test_elementwise_chain(n):
    m = chain_model(n, ["Relu", "Neg", "Sigmoid", "Abs", "Tanh", "Softplus"])
    x = rng.standard_normal((4, 16)).astype(np.float32)
    built = onnx_op_check.check(m, {"x": x}, rtol=1e-5, atol=1e-6)
    assert 1 < len(built.steps) < n      # fused, but not into one kernel
    check_fused_sizes(built)


def test_chain_of_ops_reading_their_input_twice_builds_quickly():
    """softsign, hard_swish and elu read x twice: 40 of them inlined into one body are ~3^40 nodes."""
    m = chain_model(40, ["HardSwish", "Softsign", "Elu"])
    x = rng.standard_normal((4, 16)).astype(np.float32)
    check_fused_sizes(onnx_op_check.check(m, {"x": x}, rtol=1e-5, atol=1e-6))


def test_concatenate_of_250_inputs():
    shape = (2, 3)
    names = [f"x{i}" for i in range(250)]
    node = helper.make_node("Concat", names, ["y"], axis=0)
    g = helper.make_graph([node], "cat", [helper.make_tensor_value_info(k, TensorProto.FLOAT, shape) for k in names],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (500, 3))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx_op_check.check(m, {k: rng.standard_normal(shape).astype(np.float32) for k in names})


def test_gru_over_250_frames():
    from test_onnx_ops_recurrent import model
    m, feed, _ = model("GRU", seq=250, batch=1, inp=4, hidden=8)
    m.ir_version = 8
    onnx_op_check.check(m, feed, rtol=1e-4, atol=1e-5)


def test_group_cost_counts_inputs_read_twice():
    """The cost model itself: a chain of k softsigns is ~2^k nodes; a chain of k relus ~k deep."""
    from tensorir.graph import TensorType, Var, call
    x = Var("x", TensorType((4,), "float32"))
    v = x
    for _ in range(8):
        v = call("divide", v, call("add", call("abs", v), graph.Const(np.ones((4,), np.float32))))
    nodes = graph.topological_order([v])
    ops = [n for n in nodes if isinstance(n, graph.Node)]
    cost = group_cost(ops, list(range(len(ops))))
    assert cost.nodes >= 2 ** 8 and cost.depth >= 8 * 2


def test_kernel_too_deep_for_the_compiler_is_named(monkeypatch):
    """A kernel fused past the caps by hand: a GraphError naming the kernel and the reason, not "no
    native kernel" for ops that have kernels."""
    from tensorir.graph import optimize
    from tensorir.graph.passes import fuse_cost
    g, params = graph.from_onnx(chain_model(600, ["Relu", "Neg"]))
    monkeypatch.setattr(fuse_cost, "MAX_FUSED_DEPTH", 10 ** 6)
    monkeypatch.setattr(fuse_cost, "MAX_FUSED_OPS", 10 ** 6)
    fused = optimize(g, params)
    assert len(fused.nodes) == 1
    with pytest.raises(graph.GraphError, match=r"kernel fused_\w+: its expressions nest too deep to compile"):
        codegen.build_model(fused)


def _deep_compute(levels: int):
    import tensorir as te
    A = te.placeholder((4,), name="A")

    def body(i):
        e = A[i]
        for _ in range(levels):
            e = e * 0.5 + 1.0
        return e
    return A, te.compute((4,), body, name="B")


def test_a_deep_te_expression_builds():
    """800 nested multiply-adds (1,600 levels) lower and compile (the entry points make room for them)."""
    import tensorir as te
    A, B = _deep_compute(800)
    m = codegen.build(te.create_schedule(B.op), [A, B])
    a, b = np.array([0.0, 1.0, 2.0, -2.0], np.float32), np.full(4, np.nan, np.float32)
    m(a, b)
    want = a.astype(np.float64)
    for _ in range(800):
        want = want * 0.5 + 1.0
    np.testing.assert_allclose(b, want, rtol=1e-5)


def test_a_too_deep_te_expression_is_one_clear_error():
    from tensorir.error import NestingError
    with pytest.raises(NestingError, match="compute 'B': an expression nests too deep.*split it"):
        _deep_compute(4000)


def test_diamond_chain_30_deep_matches_onnxruntime():
    """30 links reading their input three times build (fusion splits the chain at its size caps) and
    match onnxruntime, NaN and infinities included, on NaN-poisoned buffers."""
    import time
    t = time.perf_counter()
    built = onnx_op_check.check(gm.diamond_chain(30), {"x": gm.diamond_input(rng)}, rtol=1e-5, atol=1e-6)
    assert time.perf_counter() - t < 60
    check_fused_sizes(built)


def _kernel_ir_sizes(monkeypatch, build) -> list[int]:
    """The LLVM IR length of each kernel ``build()`` emits (before LLVM's optimizer)."""
    from codegen.model import llvm
    sizes, emit = [], llvm.kernel_ir

    def spy(func, target):
        out = emit(func, target)
        sizes.append(len(out[0]))
        return out
    monkeypatch.setattr(llvm, "kernel_ir", spy)
    build()
    return sizes


def _swish_chain(n: int):
    nodes, x = [], "x"
    for i in range(n):
        nodes += [helper.make_node("Sigmoid", [x], [f"s{i}"]), helper.make_node("Mul", [x, f"s{i}"], [f"y{i}"])]
        x = f"y{i}"
    g = helper.make_graph(nodes, "swish", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 16])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 16, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_fused_kernel_ir_grows_linearly_with_reads(monkeypatch):
    """``x * sigmoid(x)`` chained 4 and 8 times fuses into one kernel whose inlined body doubles with
    every link; the LLVM backend emits each distinct load, call and float operation of a stored value
    once (``codegen/llvm/cse.py``), so the IR grows with the links, not with the tree (it was 17x)."""
    sizes = {}
    for n in (4, 8):
        g, params = graph.from_onnx(_swish_chain(n))
        sizes[n] = _kernel_ir_sizes(monkeypatch, lambda: codegen.build_model(g, "llvm", params))
        assert len(sizes[n]) == 1, sizes
    assert sizes[8][0] < 2.5 * sizes[4][0], sizes


def test_fused_kernel_cuda_source_grows_linearly_with_reads():
    """The CUDA C of the same chains: each repeated subexpression of a stored value is one temporary
    (``codegen/c_cse.py``), so the source grows with the links (it was 14x from 4 to 8)."""
    src = {}
    for n in (4, 8):
        g, params = graph.from_onnx(_swish_chain(n))
        src[n] = codegen.build_model(g, "cuda", params).get_source()
    assert len(src[8]) < 2 * len(src[4]), (len(src[4]), len(src[8]))
    assert src[8].count("const float _c") >= 8
