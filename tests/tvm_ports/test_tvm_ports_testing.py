"""``tvm.testing``, ``tvm.contrib.{cc,clang,nvcc}``, ``Module.save`` / ``tvm.runtime.load_module`` and
TVM's device kinds, used as TVM v0.18 test files and tutorials use them (``import tensorir as tvm``)."""
from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorir as tvm
from tensorir import te
from tensorir.contrib import cc, clang, nvcc, utils

TEST_MODULE = '''
import pytest
import tensorir as tvm

size = tvm.testing.parameter(1, 10)
dtype = tvm.testing.parameter(by_dict={"f": "float32", "i": "int32"})
lo, hi = tvm.testing.parameters((1, 2), (3, 4), (5, 6))
calls = []

@tvm.testing.fixture
def doubled(size):
    return 2 * size

@tvm.testing.fixture(cache_return_value=True)
def cached(size):
    calls.append(size)
    return [size]

def test_combinations(size, dtype, doubled):
    assert doubled == 2 * size and dtype in ("float32", "int32")

def test_sets_vary_together(lo, hi):
    assert hi == lo + 1

def test_cached_copies(cached, size):
    cached.append(0)
    assert cached == [size, 0] and calls.count(size) == 1

def test_target_and_dev(target, dev):
    assert (target, dev.device_type) in {("llvm", "cpu"), ("cuda", "cuda")}

@tvm.testing.parametrize_targets("llvm", "opencl")
def test_targets(target, dev):
    assert target == "llvm"

@tvm.testing.requires_cuda
def test_cuda():
    assert tvm.cuda(0).exist

@tvm.testing.requires_gpu
def test_gpu():
    assert tvm.cuda(0).exist

@tvm.testing.requires_tensorcore
def test_tensorcore():
    assert tvm.contrib.nvcc.have_tensorcore()

@tvm.testing.uses_gpu
def test_uses_gpu_runs_anyway():
    pass
'''


def test_testing_helpers_define_pytest_parameters_fixtures_and_markers(tmp_path):
    path = tmp_path / "test_ported_module.py"
    path.write_text(textwrap.dedent(TEST_MODULE))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(path)],
                         capture_output=True, text=True, cwd=tmp_path)
    gpu = tvm.cuda(0).exist
    # 2 sizes x 2 dtypes, 3 sets, 2 cached, 1 target/dev, 1 llvm target (opencl skipped), 1 uses_gpu
    passed = 4 + 3 + 2 + 1 + 1 + 1 + (4 if gpu else 0)     # with a GPU: cuda's target/dev, and 3 markers
    assert f"{passed} passed" in out.stdout, out.stdout + out.stderr
    assert "failed" not in out.stdout and "error" not in out.stdout.lower(), out.stdout
    if not gpu:
        assert "needs cuda" in out.stdout and "needs tensorcore" in out.stdout


def test_assertions():
    tvm.testing.assert_allclose(np.float32(1.0), 1.0)
    x = te.var("x")
    tvm.testing.assert_prim_expr_equal(x * 2 - x, x)
    with pytest.raises(ValueError, match="not equal"):
        tvm.testing.assert_prim_expr_equal(x + 1, x)


def test_device_kinds_of_tvm_exist_or_not():
    assert tvm.device("llvm").exist and tvm.device("cpu", 0).device_type == "cpu"
    assert not tvm.device("opencl").exist and not tvm.device("vulkan", 1).exist
    assert not tvm.testing.device_enabled("opencl") and tvm.testing.device_enabled("llvm")
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        tvm.device("tpu")


def test_cc_create_shared_links_a_library(tmp_path):
    src = tmp_path / "twice.c"
    src.write_text('#ifdef __cplusplus\nextern "C"\n#endif\nint twice(int x) { return 2 * x; }\n')
    cc.create_shared(str(tmp_path / "libtwice.so"), [str(src)])
    assert ctypes.CDLL(str(tmp_path / "libtwice.so")).twice(21) == 42
    with pytest.raises(RuntimeError, match="Compilation error"):
        cc.create_shared(str(tmp_path / "bad.so"), [str(tmp_path / "missing.c")])


def test_module_save_create_shared_and_load_module(tmp_path):
    """The getting-started tutorial: save the object, link it, load it back, run it."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(outer)
    fadd = tvm.build(s, [A, B, C], "llvm", name="myadd")
    temp = utils.tempdir(str(tmp_path / "t"))
    fadd.save(temp.relpath("myadd.o"))
    fadd.save(temp.relpath("myadd.ll"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    loaded = tvm.runtime.load_module(temp.relpath("myadd.so"))
    rng = np.random.default_rng(4)
    a, b = (tvm.nd.array(rng.standard_normal(1000).astype("float32")) for _ in range(2))
    c = tvm.nd.empty((1000,))
    loaded(a, b, c)
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())
    assert "define" in open(temp.relpath("myadd.ll")).read()
    with pytest.raises(ValueError, match="format 'ptx' is not supported"):
        fadd.save(temp.relpath("myadd.ptx"))


def test_clang_without_clang_names_the_supported_way(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")      # no clang, whatever this machine has
    monkeypatch.delenv("CLANG", raising=False)
    with pytest.raises(RuntimeError, match="clang was not found.*import_c"):
        clang.create_llvm("int f(void) { return 1; }")


def test_nvcc_helpers():
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert nvcc.have_tensorcore("7.0") and not nvcc.have_tensorcore("6.1")
    assert nvcc.have_fp16("6.0") and nvcc.have_int8("6.1") and not nvcc.have_int8("6.0")
    with pytest.raises(RuntimeError, match="compute version"):
        nvcc.parse_compute_version("eight")
    with pytest.raises(ValueError, match="fatbin"):
        nvcc.compile_cuda("", target_format="fatbin")


@pytest.mark.nvcc
def test_nvcc_compile_cuda_gives_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("TILETUNE_CACHE_DIR", str(tmp_path / "cache"))
    code = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }'
    ptx = nvcc.compile_cuda(code, target_format="ptx", arch="sm_80", path_target=str(tmp_path / "k.ptx"))
    assert isinstance(ptx, bytes) and b".entry k" in ptx
    assert (tmp_path / "k.ptx").read_bytes() == ptx
