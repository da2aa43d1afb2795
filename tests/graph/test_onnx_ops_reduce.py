"""ArgMax/ArgMin, TopK, ReduceL1/L2/LogSum/LogSumExp/SumSquare, Hardmax, LpNormalization and
MeanVarianceNormalization compiled natively against onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

import codegen
from tensorir import graph

rng = np.random.default_rng()


def ties(shape, levels=4, dtype="float32"):
    """Data with many equal values (ties must resolve as ONNX says)."""
    return rng.integers(0, levels, shape).astype(dtype)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 1), (-1, 1, 1), (2, 0, 0)])
def test_arg_reduce(op, axis, keepdims, last):
    x = ties((3, 5, 7))
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    check(node_model(op, {"x": x}, attrs), {"x": ties((3, 5, 7))})


@pytest.mark.parametrize("axis,k,largest,dtype", [(-1, 3, 1, "float32"), (1, 5, 0, "float32"), (0, 2, 1, "int64"),
                                                  (2, 1, 1, "float32"), (-1, 9, 1, "int32")])
def test_topk(axis, k, largest, dtype):
    x = ties((4, 6, 9), levels=5, dtype=dtype)
    model = node_model("TopK", {"x": x}, {"axis": axis, "largest": largest}, consts={"k": np.array([k], "int64")},
                       n_out=2)
    check(model, {"x": ties((4, 6, 9), levels=5, dtype=dtype)})


def test_topk_distinct_values_of_a_long_row():
    x = rng.standard_normal((2, 300)).astype("float32")
    check(node_model("TopK", {"x": x}, {}, consts={"k": np.array([17], "int64")}, n_out=2), {"x": x})


def test_topk_k_out_of_range_names_the_node():
    x = rng.standard_normal((2, 5)).astype("float32")
    with pytest.raises(graph.GraphError, match="TopK.*K=6"):
        graph.from_onnx(node_model("TopK", {"x": x}, {}, consts={"k": np.array([6], "int64")}, n_out=2))


REDUCE = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, 2], 0), (None, 0), ([-1], 1)])
def test_reduce(op, axes, keepdims):
    x = rng.uniform(0.1, 3, (3, 4, 5)).astype("float32")
    consts = {} if axes is None else {"axes": np.array(axes, "int64")}
    check(node_model(op, {"x": x}, {"keepdims": keepdims}, consts=consts), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_axes_attribute_and_noop(op):
    x = rng.uniform(0.1, 3, (3, 4, 5)).astype("float32")
    check(node_model(op, {"x": x}, {"axes": [0, 2]}, opset=13), {"x": x}, rtol=1e-5, atol=1e-5)
    check(node_model(op, {"x": x}, {"noop_with_empty_axes": 1}), {"x": x}, rtol=1e-5, atol=1e-5)


def test_reduce_log_sum_exp_large_values():
    x = rng.uniform(200, 300, (3, 8)).astype("float32")
    check(node_model("ReduceLogSumExp", {"x": x}, {}, consts={"axes": np.array([1], "int64")}), {"x": x},
          rtol=1e-6)


@pytest.mark.parametrize("axis,opset", [(-1, 13), (1, 13), (1, 11), (0, 11)])
def test_hardmax(axis, opset):
    x = ties((3, 4, 5))
    check(node_model("Hardmax", {"x": x}, {"axis": axis}, opset=opset), {"x": x})


@pytest.mark.parametrize("p,axis", [(1, 1), (2, -1), (2, 0)])
def test_lp_normalization(p, axis):
    x = rng.standard_normal((3, 4, 5)).astype("float32")
    check(node_model("LpNormalization", {"x": x}, {"p": p, "axis": axis}), {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes", [[0, 2, 3], [1], [2, 3]])
def test_mean_variance_normalization(axes):
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    check(node_model("MeanVarianceNormalization", {"x": x}, {"axes": axes}), {"x": x}, rtol=1e-4, atol=1e-5)


def test_topk_kernel_passes_isl_checks_under_default_schedule():
    x = rng.standard_normal((3, 40)).astype("float32")
    g, params = graph.from_onnx(node_model("TopK", {"x": x}, {}, consts={"k": np.array([4], "int64")}, n_out=2))
    m = codegen.build_model(g, params=params)
    assert all(compiled for _, compiled in m.kernels)
