"""CumSum, GatherND, ScatterND, ScatterElements compiled natively against onnxruntime; data-dependent
indices out of range never write or read out of bounds; constant ones are refused naming the node."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

import codegen
from tensorir import graph

rng = np.random.default_rng()


def randn(*shape):
    return rng.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (1, 1, 0), (-1, 0, 1), (1, 1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum(axis, exclusive, reverse, dtype):
    x = (randn(3, 7, 5) * 10).astype(dtype)
    model = node_model("CumSum", {"x": x}, {"exclusive": exclusive, "reverse": reverse},
                       consts={"axis": np.array(axis, "int64")})
    check(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("data_shape,idx_shape,batch_dims", [((5, 6, 7), (4, 2), 0), ((5, 6, 7), (2, 3, 1), 0),
                                                             ((5, 6, 7), (5, 2, 1), 1), ((5, 6, 7), (5, 6, 1), 2)])
def test_gather_nd(data_shape, idx_shape, batch_dims):
    data = randn(*data_shape)
    m = idx_shape[-1]
    hi = np.array(data_shape[batch_dims:batch_dims + m])
    idx = (rng.integers(-100, 100, idx_shape) % (2 * hi) - hi).astype("int64")   # negative ones too
    model = node_model("GatherND", {"d": data, "i": idx}, {"batch_dims": batch_dims})
    check(model, {"d": data, "i": idx})


REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd(reduction):
    data, upd = randn(6, 4, 3), randn(5, 3)
    flat = rng.choice(24, 5, replace=False)   # distinct targets (ONNX leaves duplicates undefined for none)
    idx = np.stack([flat // 4, flat % 4], -1).astype("int64")
    idx[0, 0] -= 6                             # a negative index
    model = node_model("ScatterND", {"d": data, "i": idx, "u": upd}, {"reduction": reduction}, opset=18)
    check(model, {"d": data, "i": idx, "u": upd})


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction, axis):
    data = randn(5, 6, 4)
    ushape = [3, 4, 2]
    ushape[axis] = 3
    upd = randn(*ushape)
    n = data.shape[axis]
    idx = np.stack([rng.permutation(n)[:3] for _ in range(int(np.prod(ushape)) // 3)])   # distinct per line
    idx = np.moveaxis(idx.reshape([s for k, s in enumerate(ushape) if k != axis % 3] + [3]), -1, axis)
    idx = np.where(rng.random(idx.shape) < 0.3, idx - n, idx).astype("int64")
    model = node_model("ScatterElements", {"d": data, "i": idx, "u": upd}, {"axis": axis, "reduction": reduction},
                       opset=18)
    check(model, {"d": data, "i": idx, "u": upd})


def test_duplicate_indices_accumulate():
    data, upd = randn(5), randn(6)
    idx = np.array([1, 1, 3, 1, 0, 3], "int64")
    for reduction in ("add", "mul", "max", "min"):
        check(node_model("ScatterElements", {"d": data, "i": idx, "u": upd}, {"reduction": reduction}, opset=18),
              {"d": data, "i": idx, "u": upd}, rtol=1e-5)


def _build(model, feed):
    g, params = graph.from_onnx(model, {k: v.shape for k, v in feed.items()})
    return codegen.build_model(g, params=params)


def test_out_of_range_runtime_indices_are_safe():
    data, upd = randn(4, 5), randn(2, 5)
    idx = np.array([[1], [2]], "int64")
    m = _build(node_model("ScatterND", {"d": data, "i": idx, "u": upd}), {"d": data, "i": idx, "u": upd})
    bad = np.array([[1], [1 << 40]], "int64")
    (out,) = m(d=data, i=bad, u=upd)
    want = data.copy()
    want[1] = upd[0]
    np.testing.assert_array_equal(out, want)   # the wild index updates nothing
    g = _build(node_model("GatherND", {"d": data, "i": idx}), {"d": data, "i": idx})
    with pytest.raises(ValueError, match=r"GatherND node .*: index -1099511627776 out of range for axis 0 of size 4"):
        g(d=data, i=np.array([[-(1 << 40)], [99]], "int64"))   # checked before the kernel (which also clamps)


@pytest.mark.parametrize("op,inputs", [
    ("ScatterND", lambda: {"i": np.array([[0], [4]], "int64"), "u": randn(2, 5)}),
    ("GatherND", lambda: {"i": np.array([[0, 5]], "int64")}),
    ("ScatterElements", lambda: {"i": np.array([[0, -5]], "int64"), "u": randn(1, 2)})])
def test_constant_indices_out_of_range_name_the_node(op, inputs):
    data = randn(4, 5)
    model = node_model(op, {"d": data}, {}, consts=inputs())
    model.graph.node[0].name = "bad_node"
    with pytest.raises(graph.GraphError, match=f"bad_node.*{op}.*out of range"):
        graph.from_onnx(model)


def test_scatter_nd_constant_indices_become_a_static_take():
    """torch's ``x[:, 2] = v`` export: constant indices, no per-element search in the kernel."""
    data, upd = randn(2, 5, 8), randn(2, 8)
    idx = np.array([[0, 2], [-1, -3]], "int64")
    model = node_model("ScatterND", {"d": data, "u": upd}, {}, consts={"i": idx})
    model.graph.node[0].input[:] = ["d", "i", "u"]
    check(model, {"d": data, "u": upd})
    g, _ = graph.from_onnx(model)
    assert "scatter_nd" not in {n.op for n in g.nodes}
