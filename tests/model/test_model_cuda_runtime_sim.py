"""The GPU runtime of CUDA models (``codegen/runtime/cuda.py``) without a GPU: a fake pycuda driver
whose device memory is host memory and whose kernel launches run the model's CUDA C on the CPU
(``tests/cuda_sim.py``).  Covers weights uploaded once, the device workspace, numpy inputs copied in,
``__cuda_array_interface__`` inputs and outputs bound in place (no copies), launch caching per binding,
the executor interface and its errors, and the exported artifact run the same way."""
from __future__ import annotations

import ctypes
import threading

import cuda_sim
import numpy as np
import pytest

import codegen
from tensorir import graph

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm

pytestmark = pytest.mark.cuda_sim


class FakeDriver:
    """The subset of ``pycuda.driver`` the model runtime uses, over host memory."""

    class Error(RuntimeError):
        pass

    def __init__(self):
        self.allocs: list[np.ndarray] = []
        self.launches = 0
        self.lock = threading.Lock()
        self.htod_bytes = 0
        self.model = None

    class Context:
        """pycuda's per-thread context stack: every driver call needs a context current in its thread."""
        stacks = threading.local()

        @staticmethod
        def synchronize():
            FakeDriver.need_context()

        @classmethod
        def _stack(cls) -> list:
            if not hasattr(cls.stacks, "s"):
                cls.stacks.s = []
            return cls.stacks.s

        @classmethod
        def get_current(cls):
            return cls._stack()[-1] if cls._stack() else None

        def push(self):
            self._stack().append(self)

        @classmethod
        def pop(cls):
            assert cls._stack(), "pop with no current context"
            cls._stack().pop()

    class Device:
        def __init__(self, ordinal: int):
            self.ordinal = ordinal

        def retain_primary_context(self):
            return FakeDriver.Context()

    @staticmethod
    def need_context():
        assert FakeDriver.Context.get_current() is not None, "a driver call with no current context"

    def push_primary(self):
        """What codegen.cuda_module.driver() does: the primary context pushed in the calling thread."""
        self.Context().push()
        return self

    class Stream:
        handle = 0

        def __init__(self, flags=0):
            FakeDriver.need_context()

        def synchronize(self):
            FakeDriver.need_context()

    class _Alloc:
        def __init__(self, nbytes):
            self.buf = np.full(nbytes, 0xFF, np.uint8)     # garbage (NaN-like bytes) until written

        def __int__(self):
            return self.buf.ctypes.data

    def mem_alloc(self, nbytes):
        self.need_context()
        a = self._Alloc(nbytes)
        self.allocs.append(a.buf)
        return a

    def memcpy_htod(self, dst, src):
        self.need_context()
        src = np.ascontiguousarray(src)
        ctypes.memmove(int(dst), src.ctypes.data, src.nbytes)
        self.htod_bytes += src.nbytes

    def memcpy_dtoh(self, dst, src):
        self.need_context()
        ctypes.memmove(dst.ctypes.data, int(src), dst.nbytes)

    def memcpy_htod_async(self, dst, src, stream=None):
        self.memcpy_htod(dst, src)

    def memcpy_dtoh_async(self, dst, src, stream=None):
        self.memcpy_dtoh(dst, src)

    def memcpy_dtod_async(self, dst, src, nbytes, stream=None):
        self.need_context()
        ctypes.memmove(int(dst), int(src), nbytes)

    def memset_d8_async(self, dst, value, count, stream=None):
        self.need_context()
        ctypes.memset(int(dst), value, count)

    def memset_d32_async(self, dst, value, count, stream=None):
        self.need_context()
        np.frombuffer((ctypes.c_uint32 * count).from_address(int(dst)), np.uint32)[...] = value

    class function_attribute:       # pycuda's name
        MAX_DYNAMIC_SHARED_SIZE_BYTES = "max_dynamic_shared_size_bytes"

    def module_from_buffer(self, cubin):
        drv = self

        class Module:
            def get_function(self, symbol):
                return Function(drv, drv.model.kernel_module(symbol))
        return Module()


class Function:
    def __init__(self, drv, mod):
        self.drv, self.mod = drv, mod

    def prepare(self, types):
        assert types == "P" * len(self.mod.signature.args)
        return self

    def set_attribute(self, attribute, value):     # the dynamic shared memory a kernel past 48 KiB launches with
        assert attribute == FakeDriver.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
        self.dynamic_shared = value

    def prepared_async_call(self, grid, block, stream, *ptrs, shared_size=0):
        assert shared_size == getattr(self, "dynamic_shared", 0)
        FakeDriver.need_context()
        assert tuple(grid) == self.mod._grid(()) and tuple(block) == tuple(self.mod.launch.block)
        arrays = []
        for p, a in zip(ptrs, self.mod.signature.args):
            dtype = np.dtype(a.dtype)
            n = int(np.prod(a.shape))
            raw = (ctypes.c_uint8 * (n * dtype.itemsize)).from_address(p)
            arrays.append(np.frombuffer(raw, dtype).reshape(a.shape))
        with self.drv.lock:             # the simulator keeps its fibers in globals: one launch at a time
            cuda_sim.run(self.mod, *arrays)
            self.drv.launches += 1


class DeviceArray:
    """A device array as torch or cupy expose it: ``__cuda_array_interface__`` over fake device memory."""

    def __init__(self, drv, array):
        self.host = np.ascontiguousarray(array)
        self.alloc = drv._Alloc(self.host.nbytes)       # torch's or cupy's own memory: no pycuda context
        self.alloc.buf[...] = self.host.reshape(-1).view(np.uint8)
        self.__cuda_array_interface__ = {"shape": self.host.shape, "typestr": self.host.dtype.str,
                                         "data": (int(self.alloc), False), "version": 3, "strides": None}

    def numpy(self):
        return self.alloc.buf.view(self.host.dtype).reshape(self.host.shape).copy()


@pytest.fixture()
def fake(monkeypatch):
    drv = FakeDriver()
    import codegen.cuda.module as cm
    monkeypatch.setattr(cm, "driver", drv.push_primary)
    yield drv
    while drv.Context.get_current() is not None:     # as the atexit hook of driver() does
        drv.Context.pop()


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    model = gm.small_cnn()
    g, params = graph.from_onnx(model, {"N": 2})
    return model, codegen.build_model(g, target="cuda", params=params)


def _close(got, want):
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_numpy_inputs_weights_once_and_interface(fake, cnn):
    model, m = cnn
    fake.model = m
    m._dev = None
    rng = np.random.default_rng()
    for _ in range(2):
        x = rng.standard_normal((2, 3, 32, 32)).astype("float32")
        (got,) = m(x=x)
        _close(got, gm.run_onnxruntime(model, {"x": x})[0])
    assert fake.launches == 2 * len(m.steps)
    assert fake.htod_bytes == m.run_list.weights_bytes + 2 * x.nbytes       # weights uploaded once
    assert m.stats()["launch"] == "launch-loop"                               # no libcuda here
    with pytest.raises(ValueError, match="no input 'y'"):
        m.set_input("y", x)
    with pytest.raises(ValueError, match="'x' must be float32, got float64"):
        m.set_input("x", x.astype("float64"))
    with pytest.raises(ValueError, match="missing input 'x'"):
        m()
    with pytest.raises(ValueError, match="index 1 is not one of the 1 outputs"):
        m.get_output(1)


def test_device_arrays_bound_in_place(fake, cnn):
    model, m = cnn
    fake.model = m
    m._dev = None
    x = np.random.default_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    dx = DeviceArray(fake, x)
    dy = DeviceArray(fake, np.full((2, 10), np.nan, np.float32))
    copied = fake.htod_bytes
    m.set_output(0, dy)
    try:
        m.set_input("x", dx)
        m.run()
        assert fake.htod_bytes == copied + m.run_list.weights_bytes        # no input copy, only the weights
        _close(dy.numpy(), gm.run_onnxruntime(model, {"x": x})[0])
        launches = m._device().graphs
        m.run()
        assert len(launches) == 1                                          # same binding: cached launches
    finally:
        m.set_output(0, None)
    with pytest.raises(TypeError, match="pass a device array"):
        m.set_output(0, np.zeros((2, 10), np.float32))
    with pytest.raises(ValueError, match="must have shape"):
        m.set_output(0, DeviceArray(fake, np.zeros((2, 9), np.float32)))


def test_profile_times_every_kernel(fake, cnn):
    """``profile`` (the model modules' shared one) on the GPU runtime: the run, then each step through
    ``kernel_function`` (warm-up and ``repeat``), then the whole call (warm-up and ``repeat``); the outputs
    stay those of the inputs given."""
    model, m = cnn
    fake.model = m
    m._dev = None
    x = np.random.default_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    before, n = fake.launches, len(m.steps)
    report = m.profile(repeat=2, quiet=True, x=x)
    assert [(k, native) for k, native, _ in report.kernels] == [(s.kernel, True) for s in m.steps]
    assert all(t > 0 for _, _, t in report.kernels) and report.total > 0 and m.last_profile is report
    assert fake.launches - before == n + 3 * n + 3 * n
    _close(m.get_output(0), gm.run_onnxruntime(model, {"x": x})[0])


def test_loaded_artifact_runs(fake, cnn, tmp_path):
    model, m = cnn
    m.export_library(tmp_path / "art")
    loaded = codegen.load_model(tmp_path / "art")
    fake.model = loaded
    x = np.random.default_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    _close(loaded(x=x)[0], gm.run_onnxruntime(model, {"x": x})[0])


def test_gather_indices_checked_on_the_host(fake):
    """Data-dependent Gather indices: copied back and checked before their step (no CUDA graph)."""
    from test_model_runtime import _embedding
    g, table = _embedding()
    m = codegen.build_model(g, target="cuda")
    fake.model = m
    ids = np.random.default_rng().integers(-51, 49, (2, 5)).astype("int64")
    (got,) = m(ids=ids)
    np.testing.assert_allclose(got, np.tanh(table[np.where(ids + 1 < 0, ids + 51, ids + 1)]), rtol=1e-6)
    assert m.stats()["launch"] == "launch-loop (index checks)"
    bad = ids.copy()
    bad[1, 3] = 56
    with pytest.raises(ValueError, match="Gather node embed: index 57 out of range for axis 0 of size 50"):
        m(ids=bad)


def test_threads_get_their_own_buffers(fake, cnn):
    """4 threads call one model at once (m(**x) and set_input/run/get_output, outputs poisoned first):
    each gets its own input's outputs; a worker thread's driver calls run with the context pushed and
    leave its context stack empty (pycuda aborts a thread that exits with a context pushed)."""
    model, m = cnn
    fake.model = m
    m._dev = None
    rng = np.random.default_rng()
    refs = []
    for _ in range(4):
        x = rng.standard_normal((2, 3, 32, 32)).astype("float32")
        want = m(x=x)[0]
        _close(want, gm.run_onnxruntime(model, {"x": x})[0])
        refs.append((x, want))
    wrong, errors = [], []
    start = threading.Barrier(len(refs))

    def work(t: int) -> None:
        try:
            start.wait()
            x, want = refs[t]
            for k in range(4):
                with m._current():                 # the calling thread's output buffer
                    m._device().own_outputs[0].buf[...] = 0xFF
                if k % 2:
                    got = m(x=x)[0]
                else:
                    m.set_input("x", x)
                    m.run()
                    got = m.get_output(0)
                if not np.array_equal(got, want):
                    wrong.append((t, k))
            assert fake.Context.get_current() is None, "the thread's context stack is not empty"
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {t}: {type(e).__name__}: {e}")
    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(refs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and not wrong, (len(errors), errors[:3], wrong[:5])
    assert len(m._dev.slots) <= len(refs) + 1
    seen = {}

    def other():
        try:
            m.run()
        except ValueError as e:
            seen["error"] = str(e)
    m.set_input("x", refs[0][0])
    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert "was never set" in seen["error"]         # this thread's set_input is not the other's


def test_first_use_in_a_worker_thread(monkeypatch, cnn):
    """``driver()`` is cached: only the thread that called it first (here main) has the primary context
    pushed.  A worker thread that uses the model first still loads it (the context pushed around the
    load) and leaves its context stack empty."""
    import codegen.cuda.module as cm
    drv, first = FakeDriver(), []

    def cached_driver():
        if not first:
            drv.Context().push()
            first.append(threading.current_thread())
        return drv
    monkeypatch.setattr(cm, "driver", cached_driver)
    cached_driver()
    model, m = cnn
    drv.model = m
    m._dev = None
    x = np.random.default_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    got, errors = {}, []

    def work():
        try:
            got["out"] = m(x=x)[0]
            assert drv.Context.get_current() is None, "the worker's context stack is not empty"
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}")
    th = threading.Thread(target=work)
    th.start()
    th.join()
    try:
        assert not errors, errors
        _close(got["out"], gm.run_onnxruntime(model, {"x": x})[0])
        np.testing.assert_array_equal(got["out"], m(x=x)[0])
    finally:
        while drv.Context.get_current() is not None:
            drv.Context.pop()


@pytest.mark.slow      # about a minute each: two CUDA builds (16 bits and float32 parity) simulated
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("make,shapes", [(gm.transformer_block, {"batch": 2, "seq": 5}), (gm.small_cnn, {"N": 2})])
def test_mixed_precision_model_on_the_simulated_gpu(fake, dtype, make, shapes):
    """``precision=`` on CUDA: the 16-bit kernels' CUDA C (``__half`` / ``__nv_bfloat16``, float32
    accumulation) run by the simulator, within 8 epsilons of ``dtype`` of onnxruntime's float32 output."""
    import ml_dtypes
    model = make()
    g, params = graph.from_onnx(model, shapes)
    m = codegen.build_model(g, target="cuda", params=params, precision=dtype)
    fake.model = m
    assert "__nv_bfloat16" in m.get_source() if dtype == "bfloat16" else "half" in m.get_source()
    x = np.random.default_rng(3).standard_normal(g.inputs[0].type.shape).astype("float32")
    (got,) = m(x=x)
    want = gm.run_onnxruntime(model, {"x": x})[0]
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() <= 8 * float(ml_dtypes.finfo(dtype).eps) * np.abs(want).max()


def test_mixed_precision_dense_takes_tensor_cores(fake):
    """A float16 build of MatMul + Add + Relu (graph.to_mixed_precision) on sm_80: the fused dense kernel
    runs mma.sync (tensor cores) with its epilogue, and the model's output stays within float16 rounding
    of the float32 product (sm_90 takes wgmma: test_mixed_precision_gemm_takes_wgmma_on_sm90)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(4)
    w, b = rng.standard_normal((256, 128)).astype("float32"), rng.standard_normal(128).astype("float32")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
             helper.make_node("Relu", ["z"], ["out"])]
    body = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 256])],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, [128, 128])],
                             [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    g, params = graph.from_onnx(helper.make_model(body, opset_imports=[helper.make_opsetid("", 17)]))
    m = codegen.build_model(graph.to_mixed_precision(g, "float16"), target="cuda -arch=sm_80", params=params)
    assert "tt_mma(" in m.get_source("cuda")
    fake.model = m
    m._dev = None
    x = rng.standard_normal((128, 256)).astype("float32")
    (got,) = m(x=x)
    x16, w16 = x.astype("float16").astype("float64"), w.astype("float16").astype("float64")
    want = np.maximum(x16 @ w16 + b.astype("float16"), 0)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * 2.0 ** -11 * (np.abs(x16) @ np.abs(w16)).max())


def test_mixed_precision_gemm_takes_wgmma_on_sm90(fake):
    """A float16 Gemm (transB: weights [N, K]) + Relu on sm_90: the fused dense kernel takes wgmma (its main
    loop's scalar model here), the model builds as sm_90a, its relu stored from the fragments."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((128, 256)).astype("float32"), rng.standard_normal(128).astype("float32")
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1), helper.make_node("Relu", ["y"], ["out"])]
    body = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 256])],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, [128, 128])],
                             [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    g, params = graph.from_onnx(helper.make_model(body, opset_imports=[helper.make_opsetid("", 17)]))
    m = codegen.build_model(graph.to_mixed_precision(g, "float16"), target="cuda -arch=sm_90", params=params)
    src = m.get_source("cuda")
    assert "tt_wgmma_m" in src and "tt_epilogue_" in src and m.arch == "sm_90a"
    fake.model = m
    m._dev = None
    x = rng.standard_normal((128, 256)).astype("float32")
    (got,) = m(x=x)
    x16, w16 = x.astype("float16").astype("float64"), w.astype("float16").astype("float64")
    want = np.maximum(x16 @ w16.T + b.astype("float16"), 0)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * 2.0 ** -11 * (np.abs(x16) @ np.abs(w16.T)).max())


@pytest.mark.slow      # about 25 s: a small ResNet-18 built and simulated
def test_mixed_precision_resnet_on_the_simulated_gpu(fake):
    """A float16 ResNet-18 (residual adds, batch norm, max and global average pools; 32x32, width 8):
    its convolutions take the non-tensor-core 16-bit path on sm_90, and the model stays within 8 float16
    epsilons of onnxruntime's float32 output (what ``benchmarks/models_cuda.py --precision`` builds)."""
    from tensorir.graph import testing
    model = testing.resnet18(batch=1, image=32, width=8, classes=10)
    g, params = graph.from_onnx(model)
    m = codegen.build_model(graph.to_mixed_precision(g, "float16"), target="cuda -arch=sm_90", params=params)
    fake.model = m
    x = testing.resnet18_inputs(batch=1, image=32)["data"]
    (got,) = m(data=x)
    want = gm.run_onnxruntime(model, {"data": x})[0]
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() <= 8 * 2.0 ** -10 * np.abs(want).max()


def test_diamond_chain_on_the_simulated_gpu(fake):
    """A chain whose links read their input three times, fused: its CUDA C prints each repeated
    subexpression once as a temporary (``codegen/c_cse.py``) and matches onnxruntime, NaN and
    infinities included."""
    model = gm.diamond_chain(12)
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, target="cuda", params=params)
    fake.model = m
    assert "const float _c" in m.get_source()
    x = gm.diamond_input(np.random.default_rng(5))
    (got,) = m(x=x)
    want = gm.run_onnxruntime(model, {"x": x})[0]
    assert np.isnan(want).any() and (np.isnan(got) == np.isnan(want)).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
