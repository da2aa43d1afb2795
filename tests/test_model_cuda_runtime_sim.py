"""The GPU runtime of CUDA models (``codegen/model_cuda_module.py``) without a GPU: a fake pycuda driver
whose device memory is host memory and whose kernel launches run the model's CUDA C on the CPU
(``tests/cuda_sim.py``).  Covers weights uploaded once, the device workspace, numpy inputs copied in,
``__cuda_array_interface__`` inputs and outputs bound in place (no copies), launch caching per binding,
the executor interface and its errors, and the exported artifact run the same way."""
from __future__ import annotations

import ctypes

import cuda_sim
import numpy as np
import pytest

import codegen
from tensorir import graph

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm

pytestmark = [pytest.mark.skipif(not cuda_sim.available(), reason="g++ is needed to run CUDA C on the CPU")]


class FakeDriver:
    """The subset of ``pycuda.driver`` the model runtime uses, over host memory."""

    class Error(RuntimeError):
        pass

    def __init__(self):
        self.allocs: list[np.ndarray] = []
        self.launches = 0
        self.htod_bytes = 0
        self.model = None

    class Context:
        @staticmethod
        def synchronize():
            pass

    class Stream:
        handle = 0

        def synchronize(self):
            pass

    class _Alloc:
        def __init__(self, nbytes):
            self.buf = np.full(nbytes, 0xFF, np.uint8)     # garbage (NaN-like bytes) until written

        def __int__(self):
            return self.buf.ctypes.data

    def mem_alloc(self, nbytes):
        a = self._Alloc(nbytes)
        self.allocs.append(a.buf)
        return a

    def memcpy_htod(self, dst, src):
        src = np.ascontiguousarray(src)
        ctypes.memmove(int(dst), src.ctypes.data, src.nbytes)
        self.htod_bytes += src.nbytes

    def memcpy_dtoh(self, dst, src):
        ctypes.memmove(dst.ctypes.data, int(src), dst.nbytes)

    def memcpy_dtod_async(self, dst, src, nbytes, stream=None):
        ctypes.memmove(int(dst), int(src), nbytes)

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

    def prepared_async_call(self, grid, block, stream, *ptrs):
        assert tuple(grid) == self.mod._grid(()) and tuple(block) == tuple(self.mod.launch.block)
        arrays = []
        for p, a in zip(ptrs, self.mod.signature.args):
            dtype = np.dtype(a.dtype)
            n = int(np.prod(a.shape))
            raw = (ctypes.c_uint8 * (n * dtype.itemsize)).from_address(p)
            arrays.append(np.frombuffer(raw, dtype).reshape(a.shape))
        cuda_sim.run(self.mod, *arrays)
        self.drv.launches += 1


class DeviceArray:
    """A device array as torch or cupy expose it: ``__cuda_array_interface__`` over fake device memory."""

    def __init__(self, drv, array):
        self.host = np.ascontiguousarray(array)
        self.alloc = drv.mem_alloc(self.host.nbytes)
        drv.memcpy_htod(self.alloc, self.host)
        self.__cuda_array_interface__ = {"shape": self.host.shape, "typestr": self.host.dtype.str,
                                         "data": (int(self.alloc), False), "version": 3, "strides": None}

    def numpy(self):
        return self.alloc.buf.view(self.host.dtype).reshape(self.host.shape).copy()


@pytest.fixture()
def fake(monkeypatch):
    drv = FakeDriver()
    import codegen.cuda_module as cm
    monkeypatch.setattr(cm, "driver", lambda: drv)
    return drv


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
        launches = m._dev.graphs
        m.run()
        assert len(launches) == 1                                          # same binding: cached launches
    finally:
        m.set_output(0, None)
    with pytest.raises(TypeError, match="pass a device array"):
        m.set_output(0, np.zeros((2, 10), np.float32))
    with pytest.raises(ValueError, match="must have shape"):
        m.set_output(0, DeviceArray(fake, np.zeros((2, 9), np.float32)))


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
