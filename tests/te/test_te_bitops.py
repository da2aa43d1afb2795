"""``<<``, ``>>``, ``&``, ``|``, ``^``, ``~`` on integer expressions (TVM's shift_left ... bitwise_not):
built, printed, run on the CPU and in CUDA C, understood by isl; refused on floats."""
import importlib

import numpy as np
import pytest

import tensorir as te
from tensorir import tir
from tensorir.expr import And, Call, Not, Or

from conftest import assert_raises_naming, check

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8"]


def _ints(dtype):
    info = np.iinfo(dtype)
    return lambda r, sh, d: r.integers(info.min, int(info.max) + 1, sh, dtype=d)


def _shifts(dtype):
    return lambda r, sh, d: r.integers(0, np.iinfo(dtype).bits, sh).astype(d)


def test_operators_build_tvm_intrinsics():
    x, y = te.var("x"), te.var("y")
    for e, name in ((x << y, "shift_left"), (x >> 2, "shift_right"), (x & y, "bitwise_and"),
                    (3 | x, "bitwise_or"), (x ^ y, "bitwise_xor"), (~x, "bitwise_not")):
        assert isinstance(e, Call) and e.name == name and e.dtype == "int32"
    assert str((x << 2) ^ ~y) == "((x << 2) ^ ~y)"
    assert te.structural_equal(tir.shift_left(x, y), x << y)
    assert te.structural_equal(tir.bitwise_not(x), ~x)
    assert (x << 0) is x


def test_bools_stay_logical():
    x = te.var("x")
    assert isinstance((x < 1) & (x > 0), And) and isinstance((x < 1) | (x > 0), Or)
    assert isinstance(~(x < 1), Not)


def test_constants_fold_with_the_dtype_s_semantics():
    assert (te.const(5) << 2).value == 20 and (te.const(-8) >> 1).value == -4
    assert (te.const(6) & 3).value == 2 and (~te.const(0)).value == -1
    assert (te.const(200, "uint8") >> 3).value == 25 and (~te.const(0, "uint8")).value == 255


def test_operands_promote_to_the_common_dtype():
    a, b = te.var("a", "int8"), te.var("b", "int64")
    assert (a << b).dtype == "int64" and (a & 1).dtype == "int8"


@pytest.mark.parametrize("make", [lambda f: f << 1, lambda f: 1 >> f, lambda f: f & 3, lambda f: f | 1,
                                  lambda f: f ^ f, lambda f: ~f])
def test_floats_refused_naming_the_operator(make):
    f = te.var("f", "float32")
    with pytest.raises(TypeError, match=r"(<<|>>|&|\||\^|~) operator .* needs integer operands.*float32"):
        make(f)


def test_constant_shift_out_of_range_refused():
    x = te.var("x")
    assert_raises_naming(ValueError, lambda: x << 32, "int32")
    with pytest.raises(ValueError, match="shift amount -1"):
        x >> -1


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_every_operator_against_numpy(dtype):
    n = 67
    A, B, S = (te.placeholder((n,), dtype, name=nm) for nm in ("A", "B", "S"))
    outs = [te.compute((n,), f, name=nm) for nm, f in (
        ("shl", lambda i: A[i] << S[i]), ("shr", lambda i: A[i] >> S[i]), ("band", lambda i: A[i] & B[i]),
        ("bor", lambda i: A[i] | B[i]), ("bxor", lambda i: A[i] ^ B[i]), ("bnot", lambda i: ~A[i]),
        ("mix", lambda i: ((A[i] >> 1) ^ (B[i] << 2)) & ~(A[i] | 3)))]
    s = te.create_schedule([o.op for o in outs])
    s[outs[0]].vectorize(outs[0].op.axis[0])
    s[outs[1]].parallel(outs[1].op.axis[0])

    def ref(a, b, sh):
        with np.errstate(over="ignore"):
            return (a << sh, a >> sh, a & b, a | b, a ^ b, ~a,
                    ((a >> 1) ^ (b << 2).astype(dtype)) & ~(a | np.array(3, dtype)))
    check(s, [A, B, S, *outs], ref, inputs={"A": _ints(dtype), "B": _ints(dtype), "S": _shifts(dtype)})


def test_isl_reads_shift_and_mask_indices_exactly():
    """``A[i >> 1]`` over ``2n`` outputs and ``T[i & 7]`` are proven in bounds; ``A[i << 1]`` is not."""
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    T = te.placeholder((8,), name="T")
    C = te.compute((2 * n,), lambda i: A[i >> 1] + T[i & 7], name="C")
    check(te.create_schedule(C.op), [A, T, C], lambda a, t: np.repeat(a, 2) + t[np.arange(a.size * 2) & 7],
          sizes={n: 9})
    D = te.compute((n,), lambda i: A[i << 1], name="D")
    assert_raises_naming(te.OutOfBoundsError, lambda: te.lower(te.create_schedule(D.op), [A, D]), "A")


cuda_sim = importlib.import_module("cuda_sim")


def test_cuda_printer_prints_c_operators_in_the_dtype():
    import codegen
    n = 64
    A, S = te.placeholder((n,), "uint8", name="A"), te.placeholder((n,), "uint8", name="S")
    C = te.compute((n,), lambda i: (~A[i] >> S[i]) ^ (A[i] << 1), name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=32)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    mod = codegen.build(s, [A, S, C], target="cuda")
    src = mod.get_source("cuda")
    assert "((unsigned char)(~" in src and " >> " in src and " << " in src and " ^ " in src
    if not cuda_sim.available():
        pytest.skip("g++ is needed to run CUDA C on the CPU")
    a = np.random.default_rng(1).integers(0, 256, n).astype("uint8")
    sh = np.random.default_rng(2).integers(0, 8, n).astype("uint8")
    c = np.zeros(n, "uint8")
    cuda_sim.run(mod, a, sh, c)
    np.testing.assert_array_equal(c, (~a >> sh) ^ (a << 1).astype("uint8"))
