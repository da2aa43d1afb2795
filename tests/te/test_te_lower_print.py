"""``print(te.lower(...))`` is how users learn the IR: the text shows each scheduling decision."""
import re

import pytest

import tensorir as te

from conftest import lower_text


def scale(rows=16, cols=8):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B, te.create_schedule(B.op)


def loop_names(text: str) -> list[str]:
    return re.findall(r"for \(([\w.]+),", text)


def test_golden_split():
    A, B, s = scale()
    s[B].split(B.op.axis[0], factor=4)
    assert lower_text(s, [A, B], name="scale") == """\
def scale(A: float32[16, 8], B: float32[16, 8]) {
  for (i.outer, 4) {
    for (i.inner, 4) {
      for (j, 8) {
        B[j + i.outer * 32 + i.inner * 8] = A[j + i.outer * 32 + i.inner * 8] * 2.0f
      }
    }
  }
}"""


def test_default_schedule_is_one_loop_per_axis():
    A, B, s = scale()
    text = lower_text(s, [A, B])
    assert loop_names(text) == ["i", "j"]
    assert "if (" not in text and "parallel" not in text and "ramp(" not in text


def test_divisible_split_has_no_guard_and_tail_split_has_one():
    A, B, s = scale()
    s[B].split(B.op.axis[0], factor=4)
    assert "if (" not in lower_text(s, [A, B])
    A, B, s = scale()
    s[B].split(B.op.axis[0], factor=5)
    text = lower_text(s, [A, B])
    assert "for (i.outer, 4)" in text and "for (i.inner, 5)" in text
    assert re.search(r"if \(i\.outer \* 5 \+ i\.inner < 16\)", text), text


def test_split_by_nparts_extents():
    A, B, s = scale()
    s[B].split(B.op.axis[0], nparts=3)
    text = lower_text(s, [A, B])
    assert "for (i.outer, 3)" in text and "for (i.inner, 6)" in text and "if (" in text


def test_reorder_changes_loop_order():
    A, B, s = scale()
    i, j = B.op.axis
    io, ii = s[B].split(i, factor=4)
    s[B].reorder(j, ii, io)
    assert loop_names(lower_text(s, [A, B])) == ["j", "i.inner", "i.outer"]


def test_tile_loop_order():
    A, B, s = scale()
    s[B].tile(*B.op.axis, 4, 4)
    assert loop_names(lower_text(s, [A, B])) == ["i.outer", "j.outer", "i.inner", "j.inner"]


def test_fuse_makes_one_loop():
    A, B, s = scale()
    s[B].fuse(*B.op.axis)
    text = lower_text(s, [A, B])
    assert loop_names(text) == ["i.j.fused"] and "for (i.j.fused, 128)" in text


def test_parallel_annotation_printed():
    A, B, s = scale()
    io, ii = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(io)
    text = lower_text(s, [A, B])
    assert re.search(r"^\s*parallel for \(i\.outer, 4\)", text, re.M), text
    assert not re.search(r"parallel for \((i\.inner|j)", text)


def test_vectorize_becomes_ramp():
    A, B, s = scale()
    s[B].vectorize(B.op.axis[1])
    text = lower_text(s, [A, B])
    assert "ramp(i * 8, 1, 8)" in text and "x8(2.0f)" in text
    assert "for (j" not in text


def test_vectorize_with_tail_keeps_a_marked_loop():
    A, B, s = scale(16, 10)
    _, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].vectorize(ji)
    text = lower_text(s, [A, B])
    assert "vectorized for (j.inner, 4)" in text and "if (" in text


def test_unroll_expands_constant_loop():
    A, B, s = scale()
    io, ii = s[B].split(B.op.axis[0], factor=4)
    s[B].unroll(ii)
    text = lower_text(s, [A, B])
    assert "i.inner" not in text
    assert loop_names(text) == ["i.outer"] + ["j"] * 4


def test_pragma_annotation_printed():
    A, B, s = scale()
    s[B].pragma(B.op.axis[0], "auto_unroll_max_step", 16)
    assert "#auto_unroll_max_step=16" in lower_text(s, [A, B])


def test_symbolic_sizes_in_signature_and_extent():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=8)
    text = lower_text(s, [A, B], name="addone")
    assert text.startswith("def addone(A: float32[n, 4], B: float32[n, 4], n: int32) {")
    assert "for (i.outer, (n + 7) // 8)" in text and "< n)" in text


def test_compute_inline_removes_the_stage():
    A = te.placeholder((8,), name="A")
    T = te.compute((8,), lambda i: A[i] * 2.0, name="T")
    B = te.compute((8,), lambda i: T[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    assert "allocate T[" in lower_text(s, [A, B])
    s[T].compute_inline()
    text = lower_text(s, [A, B])
    assert "T" not in text and "A[i] * 2.0f + 1.0f" in text


def test_cache_write_compute_at_allocates_local_tile():
    A = te.placeholder((16, 16), name="A")
    Bm = te.placeholder((16, 16), name="Bm")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * Bm[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 8)
    s[CC].compute_at(s[C], jo)
    text = lower_text(s, [A, Bm, C])
    assert "allocate C.local[float32 * 4 * 8] local" in text
    lines = text.splitlines()
    alloc = next(k for k, l in enumerate(lines) if "allocate C.local" in l)
    jo_line = next(k for k, l in enumerate(lines) if "for (j.outer" in l)
    assert jo_line < alloc, "the local tile must be allocated inside the j.outer loop"
    assert "C.local[" in lines[alloc + 1] or "for (" in lines[alloc + 1]
    assert "if (" not in text  # 16 is divisible by 4 and 8


def test_reduction_init_before_update():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    text = lower_text(s, [A, R])
    pattern = r"R\[i\] = 0\.0f\n\s*for \(k, 6\) \{\n\s*R\[i\] = R\[i\] \+ A\[(k \+ i \* 6|i \* 6 \+ k)\]"
    assert re.search(pattern, text), text


@pytest.mark.parametrize("make, text", [
    (lambda i, j: (i + j) * 2, "(i + j) * 2"),
    (lambda i, j: i * 2 + j, "i * 2 + j"),
    (lambda i, j: i - (j + 1), "i - (j + 1)"),
    (lambda i, j: te.max(i, j) // 3, "max(i, j) // 3"),
    (lambda i, j: (i < j) & (j < 4), "i < j && j < 4"),
    (lambda i, j: (i < j) | (j < 4) & (i > 1), "i < j || j < 4 && i > 1"),
    (lambda i, j: ((i < j) | (j < 4)) & (i > 1), "(i < j || j < 4) && i > 1"),
    (lambda i, j: i.astype("float32") * 0.5, "float32(i) * 0.5f"),
    (lambda i, j: i.astype("int64") + 1, "int64(i) + int64(1)"),
])
def test_expression_printing(make, text):
    i, j = te.var("i"), te.var("j")
    assert str(make(i, j)) == text


def test_inlined_reshape_chain_reads_its_source_directly():
    """A reshape reads its input at a div/mod of a flattened index; inlined through a chain of them, the
    indices are simplified within the loop ranges as they compose, not nested once per reshape (afis
    LEADER's tf2onnx atan2 head, 30 elementwise nodes among 12 reshapes, took 40 s to lower; this chain's
    inlined body was 219,516 characters)."""
    from tensorir import topi
    from tensorir.lower.inline import inlined_bodies
    A = te.placeholder((1, 1, 64, 64), name="A")
    x = A
    for _ in range(3):
        x = topi.reshape(topi.reshape(x, (1, 64, 64, 1)), (1, 1, 64, 64))
    B = te.compute(x.shape, lambda *i: x(*i) * 2.0, name="B")
    s = te.create_schedule(B.op)
    for st in s.stages:
        if st.op not in (A.op, B.op):
            st.compute_inline()
    assert str(inlined_bodies(s)[s[B]][0]) == "A[0, 0, i2, i3] * 2.0f"
    assert "B[i2 * 64 + i3] = A[i2 * 64 + i3] * 2.0f" in lower_text(s, [A, B])
