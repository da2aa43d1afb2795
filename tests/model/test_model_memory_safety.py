"""Generated code never touches memory outside its buffers.

Root cause of the YOLOv8n segfault (issue #24): in a vector ``select`` nested in the arm of another, the
inner arm's loads were masked by the inner condition only, so lanes the outer condition excludes read
far outside their buffer (a concatenate of slices: rows of another input).  isl proves each access in
bounds only where its conditions hold.  These tests put every buffer right before an unreadable page
(``fenced``) and run in a subprocess, so an out-of-bounds read is a SIGSEGV the test reports.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import ROOT

HERE = os.path.dirname(os.path.abspath(__file__))
_KEEP: list = []   # the mappings behind fenced arrays live as long as the process


def fenced(nbytes: int) -> np.ndarray:
    """``nbytes`` bytes (uint8) whose end touches a page that faults on any access."""
    page = mmap.PAGESIZE
    size = -(-max(nbytes, 1) // page) * page + page
    m = mmap.mmap(-1, size, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + size - page, page, 0) == 0, ctypes.get_errno()
    _KEEP.append(m)
    return np.frombuffer(m, np.uint8)[size - page - nbytes:size - page]


def fenced_array(shape, dtype="float32", rng=None) -> np.ndarray:
    a = fenced(int(np.prod(shape)) * np.dtype(dtype).itemsize).view(dtype).reshape(shape)
    a[...] = (rng or np.random.default_rng()).standard_normal(shape).astype(dtype)
    return a


def run_isolated(body: str) -> subprocess.CompletedProcess:
    """Run ``body`` (Python, this module imported as ``t``) in a fresh interpreter."""
    path = [os.path.dirname(HERE), HERE]                  # tests/ (conftest) and this module's folder
    code = f"import sys; sys.path[:0] = {path!r}; import test_model_memory_safety as t\n" + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def assert_clean(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode} (-11: SIGSEGV)\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "MATCH" in proc.stdout, proc.stdout + proc.stderr[-3000:]


# -- nested vector selects ------------------------------------------------------------------------------
def nested_select_kernel(parallel: bool):
    """``T = concat(A, 2 * A2, B + 1)`` over rows, written as nested ``if_then_else`` (what topi's
    concatenate of concatenates becomes), the row loop outside a vector loop of 4."""
    import codegen
    import tensorir as te
    R, N = 10, 1024
    A, A2, B = (te.placeholder((R, N), name=n) for n in ("A", "A2", "B"))
    T = te.compute((3 * R, N), lambda i, j: te.if_then_else(
        i < 2 * R, te.if_then_else(i < R, A[i, j], A2[i - R, j] * 2.0), B[i - 2 * R, j] + 1.0), name="T")
    s = te.create_schedule(T.op)
    _, ji = s[T].split(T.op.axis[1], 4)
    s[T].vectorize(ji)
    if parallel:
        s[T].parallel(T.op.axis[0])
    return codegen.build(s, [A, A2, B, T]), (R, N)


def run_nested_select(parallel: bool) -> None:
    f, (R, N) = nested_select_kernel(parallel)
    a, a2, b = (fenced_array((R, N)) for _ in range(3))
    out = np.full((3 * R, N), np.nan, np.float32)
    f(a, a2, b, out)
    np.testing.assert_array_equal(out, np.concatenate([a, a2 * 2, b + 1]))
    print("MATCH")


@pytest.mark.parametrize("parallel", [False, True])
def test_nested_vector_select_reads_only_where_every_condition_holds(parallel):
    assert_clean(run_isolated(f"t.run_nested_select({parallel})"))


# -- a pad whose last vector is all padding -------------------------------------------------------------
def pad_kernel(target: str = "llvm"):
    """``nn.pad`` of (1, 32, 128, 128) by 6 before and 10 after H and W (the SAME padding of a strided conv in a
    tf2onnx model, afis-leader): rows of 144 in vectors of 16, the last of them all padding."""
    import codegen
    import tensorir as te
    from tensorir import topi
    from tensorir.topi.generic.injective import schedule_injective
    A = te.placeholder((1, 32, 128, 128), name="A")
    B = topi.nn.pad(A, (0, 0, 6, 6), (0, 0, 10, 10), name="B")
    return codegen.build(schedule_injective(B), [A, B], target=target)


def run_pad() -> None:
    f = pad_kernel()
    a = fenced_array((1, 32, 128, 128))
    out = np.full((1, 32, 144, 144), np.nan, np.float32)
    f(a, out)
    np.testing.assert_array_equal(out, np.pad(a, [(0, 0), (0, 0), (6, 10), (6, 10)]))
    print("MATCH")


def test_pad_with_a_vector_of_padding_only_reads_its_input_and_writes_every_element():
    """On an AVX2 host (no AVX-512) LLVM 22 lowered the 16-lane masked load of the pad's select with a wrong
    mask for lanes 8-15: the pad read past its input (SIGSEGV) or left elements unwritten (afis-leader: 2.0 scaled
    error)."""
    assert_clean(run_isolated("t.run_pad()"))


@pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"), reason="x86 targets")
def test_masked_loads_are_one_ymm_each_without_avx512():
    """For x86 without AVX-512 a masked vector load wider than 256 bits is emitted as 256-bit pieces (LLVM lowers
    those correctly); with AVX-512 it stays one 16-lane load (a zmm under a k mask)."""
    avx2 = pad_kernel("llvm -mcpu=x86-64-v3").get_source("ll")
    assert "masked.load.v8f32" in avx2 and "masked.load.v16f32" not in avx2
    zmm = pad_kernel("llvm -mcpu=x86-64-v4").get_source("ll")
    assert "masked.load.v16f32" in zmm


# -- a whole model: YOLOv8's box decode -----------------------------------------------------------------
def box_decode_model(n: int = 512, classes: int = 16):
    """YOLOv8's head in small: ``softmax(distances)`` (1, 4, n) and ``scores`` (1, 4 + classes, n) -> boxes
    ``concat((x1y1 + x2y2) / 2, x2y2 - x1y1) * stride`` and ``sigmoid`` class scores, (1, 4 + classes, n);
    anchors and strides are constants (the weights blob)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    anchors = rng.uniform(0, 40, (1, 2, n)).astype(np.float32)
    strides = rng.choice([8.0, 16.0, 32.0], (1, n)).astype(np.float32)
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    inits = [numpy_helper.from_array(anchors, "anchors"), numpy_helper.from_array(strides, "strides"),
             i64("s0", [0]), i64("s2", [2]), i64("s4", [4]), i64("sc", [4 + classes]), i64("ax", [1]),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    mk = helper.make_node
    nodes = [mk("Softmax", ["dist"], ["sd"], axis=1),     # a kernel of its own: its result is in the workspace
             mk("Slice", ["sd", "s0", "s2", "ax"], ["lt"]), mk("Slice", ["sd", "s2", "s4", "ax"], ["rb"]),
             mk("Sub", ["anchors", "lt"], ["x1y1"]), mk("Add", ["anchors", "rb"], ["x2y2"]),
             mk("Add", ["x1y1", "x2y2"], ["sum"]), mk("Div", ["sum", "two"], ["c"]),
             mk("Sub", ["x2y2", "x1y1"], ["wh"]), mk("Concat", ["c", "wh"], ["box"], axis=1),
             mk("Mul", ["box", "strides"], ["sbox"]), mk("Slice", ["scores", "s4", "sc", "ax"], ["cls"]),
             mk("Sigmoid", ["cls"], ["p"]), mk("Concat", ["sbox", "p"], ["out"], axis=1)]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "box_decode", [vi("dist", TensorProto.FLOAT, [1, 4, n]),
                                                vi("scores", TensorProto.FLOAT, [1, 4 + classes, n])],
                          [vi("out", TensorProto.FLOAT, [1, 4 + classes, n])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def fence_model_buffers() -> None:
    """Every buffer a ModelModule allocates (weights, workspace, inputs, outputs) ends at a guard page."""
    from codegen.runtime import cpu as model_module
    assert hasattr(model_module, "aligned_empty"), "codegen.runtime.cpu no longer allocates through aligned_empty"
    model_module.aligned_empty = fenced


def run_box_decode(threads: int) -> None:
    import onnxruntime as ort

    import codegen
    from codegen.llvm import parallel
    from tensorir import graph
    fence_model_buffers()
    m = box_decode_model()
    g, params = graph.from_onnx(m)
    parallel.WORK_PER_THREAD = 16           # this process only: its small loops go through the pool's chunks
    mod = codegen.build_model(g, params=params)
    assert threads == 1 or any(s.parallel for s in mod.run_list.steps)
    mod.num_threads = threads
    rng = np.random.default_rng(1)
    feed = {"dist": rng.uniform(0, 5, (1, 4, 512)).astype(np.float32),
            "scores": rng.standard_normal((1, 20, 512)).astype(np.float32)}
    got = mod(**feed)[0]
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))
    print("MATCH")


@pytest.mark.parametrize("threads", [1, 2])
def test_box_decode_model_stays_inside_its_buffers(threads):
    assert_clean(run_isolated(f"t.run_box_decode({threads})"))


WHEEL_MODEL = os.environ.get("TILETUNE_YOLO_ONNX", "/tmp/nn/wheel/nudenet/320n.onnx")


def run_yolo(threads: int) -> None:
    import onnx
    import onnxruntime as ort

    import codegen
    from tensorir import graph
    fence_model_buffers()
    m = onnx.load(WHEEL_MODEL)
    g, params = graph.from_onnx(m, {"images": (1, 3, 320, 320)})
    mod = codegen.build_model(g, params=params)
    mod.num_threads = threads
    x = np.random.default_rng(2).random((1, 3, 320, 320), np.float32)
    got = mod(images=x)[0]
    ref = ort.InferenceSession(WHEEL_MODEL, providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
    print("MATCH")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(WHEEL_MODEL), reason="nudenet's 320n.onnx not present "
                    "(pip download nudenet --no-deps; unzip; set TILETUNE_YOLO_ONNX)")
@pytest.mark.parametrize("threads", [1, 2])
def test_yolov8n_320_runs_and_matches_onnxruntime(threads):
    assert_clean(run_isolated(f"t.run_yolo({threads})"))


# -- the run list against the kernels ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def box_model():
    import codegen
    from tensorir import graph
    g, params = graph.from_onnx(box_decode_model(n=64, classes=4))
    return codegen.build_model(g, params=params)


def _copy(run):
    from codegen.model.plan import RunList
    return RunList.from_json(run.to_json())


def _mutated(run, step: int, arg: int | None = None, **changes):
    """A copy of ``run`` with ``changes`` to one place of step ``step`` (``arg`` None: its output)."""
    from dataclasses import replace
    run = _copy(run)
    s = run.steps[step]
    if arg is None:
        s.out = replace(s.out, **changes)
    else:
        s.args[arg] = replace(s.args[arg], **changes)
    return run


def test_built_run_list_records_and_passes_its_kernel_signatures(box_model):
    from codegen.model.plan_check import check_run_list
    run = box_model.run_list
    assert all(s.signature == [(a.dtype, a.shape) for a in s.args + [s.out]] for s in run.steps)
    check_run_list(run)


def _first_workspace_arg(run):
    from codegen.model.plan import WORKSPACE
    return next((i, k) for i, s in enumerate(run.steps) for k, a in enumerate(s.args) if a.kind == WORKSPACE)


@pytest.mark.parametrize("case, pattern", [
    ("shape", r"step \d+ \(kernel \w+\): argument \d+ is \w+ float32\[.*\], the kernel was lowered for float32"),
    ("dtype", r"argument \d+ is \w+ int32.*lowered for float32"),
    ("offset", r"argument \d+: float32\[.*\] at workspace offset \d+ ends at byte \d+, past the workspace"),
    ("unaligned", r"argument \d+: workspace offset \d+ is not a non-negative multiple of 64"),
    ("input", r"output: output 7 does not exist"),
    ("arity", r"\d+ buffers passed, the kernel was lowered for \d+"),
    ("workspace", r"past the workspace of 1 bytes"),
])
def test_run_list_mismatch_is_refused_naming_kernel_and_argument(box_model, case, pattern):
    from dataclasses import replace

    from codegen.model.plan_check import check_run_list
    from tensorir.graph import GraphError
    run = box_model.run_list
    i, k = _first_workspace_arg(run)
    loc = run.steps[i].args[k]
    if case == "shape":
        bad = _mutated(run, i, k, shape=(1,) + tuple(loc.shape))
        bad.steps[i].args[k] = replace(bad.steps[i].args[k], shape=tuple(loc.shape[:-1]) + (loc.shape[-1] // 2,))
    elif case == "dtype":
        bad = _mutated(run, i, k, dtype="int32")
    elif case == "offset":
        bad = _mutated(run, i, k, offset=run.memory.peak // 64 * 64)
    elif case == "unaligned":
        bad = _mutated(run, i, k, offset=loc.offset + 4)
    elif case == "input":
        bad = _mutated(run, len(run.steps) - 1, None, index=7)
    elif case == "arity":
        bad = _copy(run)
        bad.steps[i].args.append(loc)
    else:
        bad = _copy(run)
        bad.memory = replace(bad.memory, peak=1)
    with pytest.raises(GraphError, match=pattern):
        check_run_list(bad)


def test_artifact_with_a_one_byte_workspace_is_refused_at_load(box_model, tmp_path):
    """graph.json's memory plan shrunk to 1 byte (manifest digest updated): refused before any run,
    instead of the kernels writing kilobytes past it."""
    import hashlib
    import json

    import codegen
    from codegen import ArtifactError
    out = tmp_path / "m"
    box_model.export_library(str(out))
    gj = json.loads((out / "graph.json").read_text())
    assert gj["memory_plan"]["workspace_bytes"] > 1000
    gj["memory_plan"]["workspace_bytes"] = 1
    (out / "graph.json").write_text(json.dumps(gj))
    man = json.loads((out / "manifest.json").read_text())
    man["files"]["graph.json"] = hashlib.sha256((out / "graph.json").read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match=r"graph.json: step \d+ \(kernel \w+\): .* past the workspace of 1 bytes"):
        codegen.load_model(str(out))


def test_artifact_round_trip_keeps_signatures(box_model, tmp_path):
    import codegen
    out = tmp_path / "m"
    box_model.export_library(str(out))
    m = codegen.load_model(str(out))
    assert [s.signature for s in m.run_list.steps] == [s.signature for s in box_model.run_list.steps]
    rng = np.random.default_rng(3)
    feed = {"dist": rng.uniform(0, 5, (1, 4, 64)).astype(np.float32),
            "scores": rng.standard_normal((1, 8, 64)).astype(np.float32)}
    np.testing.assert_array_equal(m(**feed)[0], box_model(**feed)[0])


def test_artifact_graph_json_must_be_the_one_model_so_was_built_for(box_model, tmp_path):
    """The run entries have the places compiled in: a graph.json edited consistently (here a larger
    workspace and one buffer moved into it, digests updated) passes every place check, but is refused."""
    import hashlib
    import json

    import codegen
    from codegen import ArtifactError
    out = tmp_path / "m"
    box_model.export_library(str(out))
    gj = json.loads((out / "graph.json").read_text())
    producer = next(s for s in gj["steps"] if s["out"]["kind"] == "workspace")
    old = producer["out"]["offset"]
    new = -(-gj["memory_plan"]["workspace_bytes"] // 64) * 64      # a fresh place after every other buffer
    gj["memory_plan"]["workspace_bytes"] = new + (1 << 20)
    for s in gj["steps"]:
        for loc in s["args"] + [s["out"]]:
            if loc["kind"] == "workspace" and loc["offset"] == old:
                loc["offset"] = new
    (out / "graph.json").write_text(json.dumps(gj))
    man = json.loads((out / "manifest.json").read_text())
    man["files"]["graph.json"] = hashlib.sha256((out / "graph.json").read_bytes()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="graph.json: the run list differs from the one the model's native "
                                            "code was generated for"):
        codegen.load_model(str(out))
