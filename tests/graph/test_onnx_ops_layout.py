"""InstanceNormalization, GroupNormalization, LRN, DepthToSpace, SpaceToDepth, Trilu, OneHot compiled
natively against onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

rng = np.random.default_rng()


def randn(*shape):
    return rng.standard_normal(shape).astype("float32")


def test_instance_norm():
    x = randn(2, 3, 5, 7)
    model = node_model("InstanceNormalization", {"x": x}, {"epsilon": 1e-3}, consts={"s": randn(3), "b": randn(3)})
    check(model, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset,groups", [(18, 2), (18, 3), (21, 2), (21, 6)])
def test_group_norm(opset, groups):
    x = randn(2, 6, 4, 5)
    n = groups if opset == 18 else 6
    model = node_model("GroupNormalization", {"x": x}, {"num_groups": groups, "epsilon": 1e-4},
                       consts={"s": randn(n), "b": randn(n)}, opset=opset)
    check(model, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size):
    x = randn(2, 7, 4, 5)
    check(node_model("LRN", {"x": x}, {"size": size, "alpha": 0.01, "beta": 0.6, "bias": 1.5}), {"x": x},
          rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_follows_the_spec(size):
    """onnxruntime refuses even sizes and onnx.reference loops over the batch, not the channels: the
    spec's window [c - floor((size-1)/2), c + ceil((size-1)/2)] written out here."""
    import codegen
    from tensorir import graph
    x = randn(2, 7, 4, 5)
    g, params = graph.from_onnx(node_model("LRN", {"x": x}, {"size": size, "alpha": 0.01, "beta": 0.6}))
    (got,) = codegen.build_model(g, params=params)(x=x)
    want = np.empty_like(x)
    for c in range(7):
        lo, hi = max(0, c - (size - 1) // 2), min(7, c + -(-(size - 1) // 2) + 1)
        want[:, c] = x[:, c] / (1.0 + 0.01 / size * (x[:, lo:hi] ** 2).sum(1)) ** 0.6
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    x = randn(2, 12, 3, 5)
    check(node_model("DepthToSpace", {"x": x}, {"blocksize": 2, "mode": mode}), {"x": x})


def test_space_to_depth():
    x = randn(2, 3, 6, 9)
    check(node_model("SpaceToDepth", {"x": x}, {"blocksize": 3}), {"x": x})


@pytest.mark.parametrize("upper,k", [(1, 0), (0, 0), (1, 2), (0, -1), (1, -7), (0, 9)])
def test_trilu(upper, k):
    x = randn(2, 4, 6)
    check(node_model("Trilu", {"x": x}, {"upper": upper}, consts={"k": np.array(k, "int64")}), {"x": x})


@pytest.mark.parametrize("axis,dtype", [(-1, "int64"), (0, "int32"), (1, "float32")])
def test_one_hot(axis, dtype):
    # indices out of range give a row of off values (the spec; onnxruntime wraps all but int64 ones)
    idx = rng.integers(-6, 8 if dtype == "int64" else 6, (3, 4)).astype(dtype)
    model = node_model("OneHot", {"i": idx}, {"axis": axis},
                       consts={"depth": np.array(6, "int64"), "v": np.array([-1.5, 2.5], "float32")})
    check(model, {"i": idx})


def test_one_hot_values_at_run_time():
    idx = rng.integers(0, 5, (7,)).astype("int64")
    v = np.array([3, 9], "int32")
    model = node_model("OneHot", {"i": idx, "v": v}, {}, consts={"depth": np.array(5, "int64")})
    # node_model orders inputs then consts: reorder to (indices, depth, values)
    model.graph.node[0].input[:] = ["i", "depth", "v"]
    check(model, {"i": idx, "v": v})
