"""``s[T].transform_layout``: buffers stored in a new layout, loops over the new layout."""
import functools

import numpy as np
import pytest

import codegen
import tensorir as te

SHAPE = (4, 6, 40)
# mapping, how numpy lays out the same data
LAYOUTS = {
    "reverse": (lambda *ix: ix[::-1], lambda x: x.transpose(2, 1, 0)),
    "flatten": (lambda i, j, k: [i * 240 + j * 40 + k], lambda x: x.reshape(-1)),
    "factor_last_by_4": (lambda *ix, n: [*ix, n // 4, n % 4], lambda x: x.reshape(4, 6, 10, 4)),
    "2d_separator": (lambda i, j, k: [k, j, te.AXIS_SEPARATOR, i], lambda x: x.transpose(2, 1, 0)),
}


@pytest.mark.parametrize("layout_a", [None, *LAYOUTS])
@pytest.mark.parametrize("layout_b", list(LAYOUTS))
@pytest.mark.parametrize("after", [None, "reorder", "split", "fuse"])
def test_transformed_copy(layout_a, layout_b, after):
    A = te.placeholder(SHAPE, name="A")
    B = te.compute(SHAPE, lambda i, j, k: A[i, j, k] * 2, name="B")
    s = te.create_schedule(B.op)
    if layout_a:
        assert s[A].transform_layout(LAYOUTS[layout_a][0]) is None
    ivs = s[B].transform_layout(LAYOUTS[layout_b][0])
    assert s[B].leaf_iter_vars == ivs
    expected_extents = list(LAYOUTS[layout_b][1](np.empty(SHAPE)).shape)
    assert [int(iv.dom.extent) for iv in ivs] == expected_extents
    if after == "reorder":
        s[B].reorder(*ivs[::-1])
    elif after == "split":
        s[B].split(ivs[-1], nparts=2)
    elif after == "fuse" and len(ivs) > 1:
        s[B].fuse(*ivs[:2])
    a = np.random.uniform(-1, 1, SHAPE).astype("float32")
    a_in = np.ascontiguousarray(LAYOUTS[layout_a][1](a)) if layout_a else a
    expected = np.ascontiguousarray(LAYOUTS[layout_b][1](a * 2))
    b = np.full(expected.shape, np.nan, "float32")  # the caller passes the transformed shape
    codegen.build(s, [A, B])(a_in, b)
    np.testing.assert_array_equal(b, expected)


def test_intermediate_transformed_and_attached():
    A = te.placeholder((16, 8), name="A")
    T = te.compute((16, 8), lambda i, j: A[i, j] + 1, name="T")
    C = te.compute((16, 8), lambda i, j: T[i, j] * 2, name="C")
    s = te.create_schedule(C.op)
    s[T].transform_layout(lambda i, j: [j // 4, i, j % 4])
    s[T].compute_at(s[C], C.op.axis[0])
    assert "T[float32 * 2 * 16 * 4]" in str(te.lower(s, [A, C]))
    a = np.random.uniform(-1, 1, (16, 8)).astype("float32")
    c = np.full((16, 8), np.nan, "float32")
    codegen.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_transformed_reduction():
    A = te.placeholder((16, 32, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((16, 32), lambda i, j: te.sum(A[i, j, k], axis=[k]), name="B")
    s = te.create_schedule(B.op)
    s[B].transform_layout(lambda i, j: [j, i])
    a = np.random.uniform(-1, 1, (16, 32, 64)).astype("float32")
    b = np.full((32, 16), np.nan, "float32")
    codegen.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b, a.sum(-1).T, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, mapping", [
    ([1, 8], lambda n, i: [i, n]),
    ([1, 1, 8], lambda i, j, k: [j, te.AXIS_SEPARATOR, i, k]),
])
def test_size_one_dimensions(shape, mapping):
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda *ix: A[ix] + 1, name="B")
    s = te.create_schedule(B.op)
    s[B].transform_layout(mapping)
    a = np.random.uniform(-1, 1, shape).astype("float32")
    size = functools.reduce(lambda x, y: x * y, shape)
    ivs = s[B].leaf_iter_vars
    b = np.full([int(iv.dom.extent) for iv in ivs], np.nan, "float32")
    codegen.build(s, [A, B])(a, b)
    np.testing.assert_allclose(b.reshape(-1), a.reshape(size) + 1)


@pytest.mark.parametrize("mapping, message", [
    (lambda n, c, h, w: [n, c // 4, h, w, c % 4], "pad"),
    (lambda n, c, h, w: [n, c, h], "two elements"),
    (lambda n, c, h: [n, c, h], "dimensions"),
    (lambda n, c, h, w: [n, c * h, w], "affine"),
])
def test_refused_mappings_name_the_stage(mapping, message):
    A = te.placeholder([1, 3, 8, 8], name="A")
    B = te.compute(A.shape, lambda *ix: A[ix], name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(te.ScheduleError, match=f"stage B.*{message}"):
        s[B].transform_layout(mapping)


def test_transform_after_split_is_refused():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j], name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[1], 4)
    with pytest.raises(te.ScheduleError, match="stage B.*already split"):
        s[B].transform_layout(lambda i, j: [j, i])


@pytest.mark.parametrize("transform_a, transform_b, cache_a, cache_b",
                         [(ta, tb, ca, cb) for ta in (0, 1) for tb in (0, 1) for ca in (0, 1) for cb in (0, 1)])
def test_transform_with_caches(transform_a, transform_b, cache_a, cache_b):
    A = te.placeholder((16,), name="A")
    B = te.compute(A.shape, lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    if cache_a:
        s.cache_read(A, "shared", [B])
    if cache_b:
        s.cache_write(B, "shared")
    if transform_a:
        s[A].transform_layout(lambda i: [i // 4, i % 4])
    if transform_b:
        s[B].transform_layout(lambda i: [i // 4, i % 4])
    a = np.random.uniform(-1, 1, 16).astype("float32")
    b = np.full((4, 4) if transform_b else (16,), np.nan, "float32")
    codegen.build(s, [A, B])(a.reshape(4, 4) if transform_a else a, b)
    np.testing.assert_allclose(b.reshape(-1), a + 1, rtol=1e-6)
