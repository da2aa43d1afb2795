"""Shared helpers of the differential test battery: build a schedule, run it on random data, compare
with numpy.

``check(s, args, reference)`` builds ``s`` for the LLVM backend, fills every input (placeholder) with
fresh random data, fills every output with NaN (floats) or a sentinel (integers, bools), runs the
kernel, and compares each output with ``reference(*inputs)``.  Integer and bool outputs are run a
second time with a different sentinel so that an element the kernel never writes cannot pass by
equalling the sentinel.  The inputs must come back unchanged.

Set ``TILETUNE_TEST_BACKEND=interp`` to run the same tests through ``tests/ir_interp.py`` (a slow
interpreter of the lowered IR) instead of LLVM: a failure with both backends is a lowering bug, a
failure with LLVM only is a code generation bug.

The tests live in one folder per subsystem (``te/``, ``isl/``, ``topi/``, ``graph/``, ``codegen/``,
``model/``, ``autotune/``, ``tvm_ports/``); the helpers shared by them (this module, ``cuda_sim``,
``graph_models``, ``onnx_op_check``...) stay here, in ``tests/``, which pytest puts on ``sys.path``
because this conftest sits in it.  A test that needs hardware or a tool says so with a marker
(registered in setup.cfg), checked once here: ``gpu`` (pycuda and a CUDA device; ``pytest -m gpu``
runs only those), ``nvcc`` (nvcc on the PATH, no GPU needed), ``cuda_sim`` (g++, to run CUDA C on the
CPU).  Where the need is missing, the test is skipped with one reason.
"""
from __future__ import annotations

import functools
import os
import re
import shutil

import numpy as np
import pytest

import tensorir as te
from tensorir import dtype as dt
from tensorir.arith import simplify
from tensorir.expr import IntImm
from tensorir.tensor import PlaceholderOp
from tensorir.visitor import substitute

import cuda_sim
import ir_interp


@pytest.fixture(autouse=True, scope="session")
def _verify_loop_ir():
    """The loop-IR verifier runs after every lowering pass in every test (``tensorir/lower/verify.py``);
    ``TILETUNE_VERIFY_IR=0`` in the environment turns it off (to time its cost)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILETUNE_VERIFY_IR", os.environ.get("TILETUNE_VERIFY_IR", "1"))
        yield


BACKEND = os.environ.get("TILETUNE_TEST_BACKEND", "llvm")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- what a test needs (markers), the compile cache ------------------------------------------------------
def _cuda_device_missing() -> str | None:
    from codegen.cuda.module import driver
    try:
        driver()
    except Exception as e:  # noqa: BLE001 - any failure to open a device means: no GPU here
        return f"needs a CUDA device: {e}"
    return None


#: Marker -> why what its tests need is missing here (None: present).
NEEDS = {
    "gpu": _cuda_device_missing,
    "nvcc": lambda: None if shutil.which("nvcc") else "nvcc is not on the PATH",
    "cuda_sim": lambda: None if cuda_sim.available() else "g++ is needed to run CUDA C on the CPU",
}


@functools.cache
def missing(marker: str) -> str | None:
    return NEEDS[marker]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for marker in NEEDS:
        if item.get_closest_marker(marker) is not None and (why := missing(marker)):
            pytest.skip(why)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    """nvcc's and extern code's compile cache in this session's temporary directory, not ~/.cache."""
    monkeypatch.setenv("TILETUNE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


#: Default (rtol, atol) per output dtype.
TOLERANCE = {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12)}


def build(s, args, name: str = "kernel"):
    """The module for ``s``: LLVM by default, the IR interpreter with TILETUNE_TEST_BACKEND=interp."""
    if BACKEND == "interp":
        return ir_interp.Module(te.lower(s, args, name=name))
    import codegen
    if not hasattr(codegen, "build") and not os.path.exists(os.path.join(ROOT, "codegen", "__init__.py")):
        pytest.skip("codegen.build does not exist yet (run with TILETUNE_TEST_BACKEND=interp)")
    return codegen.build(s, args, target="llvm", name=name)


def lower_text(s, args, name: str = "default_function") -> str:
    return str(te.lower(s, args, name=name))


def concrete_shape(t: te.Tensor, sizes: dict | None = None) -> tuple[int, ...]:
    """``t.shape`` with the symbolic sizes in ``sizes`` ({te.var: int}) substituted."""
    out = []
    for d in t.shape:
        v = simplify(substitute(d, {k: te.const(n, k.dtype) for k, n in (sizes or {}).items()}))
        if not isinstance(v, IntImm):
            raise ValueError(f"shape {d} of {t.name} is not fixed by sizes={sizes}")
        out.append(v.value)
    return tuple(out)


_INT_RANGE = {"int8": (-128, 128), "uint8": (0, 256), "int16": (-1000, 1000), "int32": (-1000, 1000),
              "int64": (-1000, 1000)}


def random_array(rng: np.random.Generator, shape, dtype: str, low=None, high=None) -> np.ndarray:
    """Random data of ``dtype``: uniform floats in [low, high) (default [-2, 2)), integers in a range
    that suits the type, bools half true."""
    dtype = dt.element(dtype)
    if dt.is_float(dtype):
        lo, hi = (-2.0 if low is None else low), (2.0 if high is None else high)
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    lo, hi = _INT_RANGE[dtype]
    lo, hi = (lo if low is None else low), (hi if high is None else high)
    return rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dtype)


def sentinels(dtype: str) -> list:
    """Values an output is filled with before a run (two for non-floats)."""
    dtype = dt.element(dtype)
    if dt.is_float(dtype):
        return [np.nan]
    if dtype == "bool":
        return [True, False]
    info = np.iinfo(dtype)
    return [info.min + 3, info.max - 5]


def _is_input(t: te.Tensor) -> bool:
    return isinstance(t.op, PlaceholderOp)


def make_inputs(args, sizes=None, seed=0, low=None, high=None, inputs=None) -> list[np.ndarray]:
    """Random arrays for the placeholders among ``args`` (``inputs`` maps a tensor or its name to a
    given array, or to a function ``(rng, shape, dtype) -> array``)."""
    rng = np.random.default_rng(seed)
    given = {(k if isinstance(k, str) else k.name): v for k, v in (inputs or {}).items()}
    out = []
    for t in args:
        if not isinstance(t, te.Tensor) or not _is_input(t):
            continue
        shape = concrete_shape(t, sizes)
        v = given.get(t.name)
        if callable(v):
            v = v(rng, shape, t.dtype)
        if v is None:
            v = random_array(rng, shape, t.dtype, low, high)
        v = np.ascontiguousarray(np.asarray(v, dtype=t.dtype))
        assert v.shape == shape, f"test bug: input {t.name} has shape {v.shape}, expected {shape}"
        out.append(v)
    return out


def run_check(mod, args, reference, *, sizes=None, seed=0, low=None, high=None, inputs=None,
              rtol=None, atol=None, wrap=None):
    """Run a built module on random inputs and compare its outputs with ``reference(*inputs)``.

    ``args`` is the argument list the module was built with; tensors computed by the schedule are
    outputs.  ``wrap`` (e.g. :func:`guarded_array`) may
    replace every array by an equal one placed elsewhere in memory.  Returns the outputs."""
    wrap = wrap or (lambda a: a)
    tensors = [a for a in args if isinstance(a, te.Tensor)]
    ins = make_inputs(tensors, sizes, seed, low, high, inputs)
    outs_t = [t for t in tensors if not _is_input(t)]
    expected = reference(*[x.copy() for x in ins])
    if not isinstance(expected, (tuple, list)):
        expected = (expected,)
    assert len(expected) == len(outs_t), "test bug: reference returns a different number of outputs"
    expected = [np.asarray(e) for e in expected]
    for t, e in zip(outs_t, expected):
        assert e.shape == concrete_shape(t, sizes), \
            f"test bug: reference for {t.name} has shape {e.shape}, expected {concrete_shape(t, sizes)}"
    nruns = max(len(sentinels(t.dtype)) for t in outs_t)
    results = None
    for run in range(nruns):
        arrays, it_in = [], iter(ins)
        results = []
        for t in tensors:
            if _is_input(t):
                arrays.append(wrap(next(it_in).copy()))
            else:
                fill = sentinels(t.dtype)[min(run, len(sentinels(t.dtype)) - 1)]
                arr = wrap(np.full(concrete_shape(t, sizes), fill, dtype=t.dtype))
                arrays.append(arr)
                results.append(arr)
        mod(*arrays)
        for t, arr, orig in zip([t for t in tensors if _is_input(t)], [a for a, t in zip(arrays, tensors)
                                                                        if _is_input(t)], ins):
            np.testing.assert_array_equal(arr, orig, err_msg=f"the kernel modified its input {t.name}")
        for t, got, want in zip(outs_t, results, expected):
            assert_close(got, want.astype(t.dtype) if not dt.is_float(t.dtype) else want, t.dtype,
                         rtol, atol, what=f"output {t.name} (run {run + 1}, sizes={_sizes_str(sizes)})")
    return results


def _sizes_str(sizes) -> str:
    return "{" + ", ".join(f"{k.name}: {v}" for k, v in (sizes or {}).items()) + "}"


def assert_close(got: np.ndarray, want: np.ndarray, dtype: str, rtol=None, atol=None, what: str = "output"):
    if dt.is_float(dtype):
        r, a = TOLERANCE[dt.element(dtype)]
        np.testing.assert_allclose(got.astype("float64"), np.asarray(want, dtype="float64"),
                                   rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_close_scaled(got, want, scale, dtype: str = "float32", ulps: float = 16, what: str = "output"):
    """``|got - want| <= ulps * eps(dtype) * scale`` elementwise, NaN where ``want`` is NaN.

    ``scale`` (broadcast against ``want``) is the magnitude of the terms that produced ``want``, e.g.
    ``np.abs(a).sum(axis=1)`` for a row sum: a rounding error is bounded by the terms, not by the result,
    which can cancel to near zero (where any bare ``rtol`` fails on some CPU)."""
    got64, want64 = np.asarray(got, "float64"), np.asarray(want, "float64")
    assert got64.shape == want64.shape, f"{what}: shape {got64.shape} != {want64.shape}"
    np.testing.assert_array_equal(np.isnan(got64), np.isnan(want64), err_msg=f"{what}: NaN positions differ")
    bound = ulps * np.finfo(dtype).eps * np.broadcast_to(np.abs(np.asarray(scale, "float64")), want64.shape)
    err = np.abs(np.nan_to_num(got64 - want64))
    bad = err > bound
    if bad.any():
        k = np.unravel_index(int(np.argmax(np.where(bad, err / np.maximum(bound, 1e-300), 0))), err.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} of {err.size} elements differ by more than {ulps} ulps "
                             f"of their terms' scale; worst at {k}: got {got64[k]}, want {want64[k]}, "
                             f"allowed {bound[k]:.3g}")


def check(s, args, reference, *, sizes=None, seed=0, low=None, high=None, inputs=None,
          rtol=None, atol=None, name="kernel"):
    """Build ``s`` with ``args`` and compare with ``reference`` on random data (see module doc)."""
    mod = build(s, args, name=name)
    return run_check(mod, args, reference, sizes=sizes, seed=seed, low=low, high=high,
                     inputs=inputs, rtol=rtol, atol=atol)


def assert_raises_naming(exc, fn, *names):
    """``fn()`` raises ``exc`` and the message names every one of ``names`` (as whole words)."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for n in names:
        assert re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", msg), f"message {msg!r} does not name {n!r}"
    return msg


# -- arrays next to a guard page -------------------------------------------------------------------------
_PROT_NONE, _PAGE = 0, None


def guarded_array(values: np.ndarray, at_end: bool = True) -> np.ndarray:
    """A C-contiguous copy of ``values`` whose memory ends (``at_end``) or starts right at an
    inaccessible page, so that one element too far faults instead of reading a neighbour.  Keep the
    result alive as long as it is used (its memory is an anonymous mapping referenced by the array)."""
    import ctypes
    import mmap
    global _PAGE
    _PAGE = _PAGE or mmap.PAGESIZE
    nbytes = max(values.nbytes, 1)
    data_pages = -(-nbytes // _PAGE)
    mm = mmap.mmap(-1, (data_pages + 2) * _PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for page in (0, data_pages + 1):
        if libc.mprotect(base + page * _PAGE, _PAGE, _PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed")
    start = (data_pages + 1) * _PAGE - values.nbytes if at_end else _PAGE
    arr = np.frombuffer(mm, dtype=values.dtype, count=values.size, offset=start).reshape(values.shape)
    arr[...] = values
    return arr
