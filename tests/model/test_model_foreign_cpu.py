"""Code compiled for a CPU this host is not: it builds, its code can be read and exported, and running it here is
one clear error naming the features this host lacks and the kernel or model (``codegen.CPUFeatureError``), never
SIGILL.  The foreign target is this host plus a feature it lacks, picked at test time (AVX-512F on an AVX2 host,
AMX on Zen 4, ...), so every test means the same on any x86 host.  Covered: ``codegen.build`` (a call,
``time_evaluator``, ``load_module`` of its export), ``codegen.build_model`` (a call, ``profile``, one kernel, from
another thread; ``export_library``: the parity against onnxruntime not run and said so; ``load_model`` refusing it)
and ``build_model(..., precision="bfloat16")``, whose parity against the float32 build is not run either."""
import json
import platform
import threading

import numpy as np
import pytest

import codegen
from codegen import ArtifactError, CPUFeatureError
from codegen.amx import AMX_FEATURES, AMXError
from codegen.target import host, parse
from tensorir import graph, te

onnx = pytest.importorskip("onnx")
import graph_models as gm

pytestmark = [pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                 reason="x86 targets are compiled (JIT) in this process"),
              pytest.mark.filterwarnings("ignore:build_model. the target .* lacks")]   # the foreign bf16 entries
#: features LLVM compiles for, oldest first: the first this host lacks makes the foreign target
CANDIDATES = ("avx512f", "avx512bf16", "amx-tile", "avx512vp2intersect", "amx-fp16", "amx-complex")
MISSING = next((f for f in CANDIDATES if f not in host().features), None)
if MISSING is None:
    pytest.skip(f"this host has every candidate feature ({', '.join(CANDIDATES)})", allow_module_level=True)
FOREIGN = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join((*host().mattr, "+" + MISSING))
ERROR = AMXError if MISSING in AMX_FEATURES else CPUFeatureError
LACKS = rf"was built for CPU features this host lacks: [\w, .-]*\b{MISSING}\b"


def kernel(target):
    n = te.var("n")
    a = te.placeholder((n,), name="a")
    b = te.compute((n,), lambda i: a[i] * 2.0 + 1.0, name="b")
    s = te.create_schedule(b.op)
    s[b].vectorize(s[b].split(b.op.axis[0], 16)[1])
    return codegen.build(s, [a, b], target=target, name="twice")


def test_a_foreign_kernel_builds_exports_and_refuses_to_run(tmp_path):
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    here = kernel("llvm")
    assert here.host_check.runs_here and not here.host_check.needed
    here(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)
    m = kernel(FOREIGN)
    assert MISSING in m.host_check.missing and m.get_source("asm")
    with pytest.raises(ERROR, match=rf"kernel twice {LACKS}.*SIGILL"):
        m(a, b)
    with pytest.raises(ERROR, match=LACKS):
        m.time_evaluator(number=1)(a, b)
    m.export_library(str(tmp_path / "twice.so"))          # cross-compiling is legitimate
    loaded = codegen.load_module(str(tmp_path / "twice.so"))
    with pytest.raises(ERROR, match=rf"kernel twice {LACKS}"):
        loaded(a, b)
    assert isinstance(ERROR(""), CPUFeatureError)


@pytest.fixture(scope="module")
def gemm():
    model = gm.gemm_relu()
    g, params = graph.from_onnx(model)
    x = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float32)
    return model, g, params, x


def test_a_foreign_model_builds_exports_and_refuses_to_run(gemm, tmp_path):
    model, g, params, x = gemm
    want = codegen.build_model(g, params=params)(x=x)[0]
    np.testing.assert_allclose(want, gm.run_onnxruntime(model, {"x": x})[0], rtol=1e-5, atol=1e-5 * np.abs(want).max())
    m = codegen.build_model(g, params=params, target=FOREIGN)
    assert not m.host_check.runs_here and m.not_runnable() == f"this host lacks {', '.join(m.host_check.missing)}"
    name = rf"model '{g.name}' {LACKS}"
    with pytest.raises(ERROR, match=name):
        m(x=x)
    with pytest.raises(ERROR, match=name):
        m.profile(quiet=True, x=x)
    with pytest.raises(ERROR, match=name):
        m.kernel_function(0)()
    raised = []
    t = threading.Thread(target=lambda: raised.append(pytest.raises(ERROR, m.run, x=x)))
    t.start()
    t.join()
    assert raised and raised[0].match(name)
    m.export_library(str(tmp_path / "model"))              # the parity against onnxruntime is not run here
    man = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert MISSING in man["cpu_features"]
    assert man["parity"]["not_run"] == m.not_runnable() and "max_abs_error" not in man["parity"], man["parity"]
    with pytest.raises(ArtifactError, match=rf"load_model: .*{LACKS}"):
        codegen.load_model(str(tmp_path / "model"))


def test_a_foreign_mixed_precision_build_records_its_parity_as_not_run(gemm, tmp_path):
    """``precision="bfloat16"`` compares the 16-bit build with the float32 build by running both: for a target this
    host cannot run, neither runs and the record says why; on the host's own target the numbers are there."""
    _, g, params, x = gemm
    m = codegen.build_model(g, params=params, target=FOREIGN, precision="bfloat16")
    vs = m.meta["precision"]["vs_float32"]
    assert vs == {"seed": 0, "not_run": f"this host lacks {', '.join(m.host_check.missing)}"}, vs
    with pytest.raises(ERROR, match=LACKS):
        m(x=x)
    m.export_library(str(tmp_path / "model"))
    assert json.loads((tmp_path / "model" / "manifest.json").read_text())["precision"]["vs_float32"] == vs
    here = codegen.build_model(g, params=params, precision="bfloat16").meta["precision"]["vs_float32"]
    assert 0 < here["max_rel_error"] < 2.0 ** -6, here


def test_the_check_follows_the_target_features():
    """A target's features against the host's: ``-mcpu`` of this host with its own features runs; a feature the host
    lacks, an older CPU's features and the host's with one removed (``-mattr=-f``) are judged as LLVM compiles them."""
    from codegen.runnable import host_check
    assert host_check("llvm", "k").runs_here
    assert host_check("llvm -mcpu=x86-64", "k").runs_here
    assert host_check(f"llvm -mcpu={host().mcpu} -mattr=-avx2", "k").runs_here
    check = host_check(FOREIGN, "kernel k")
    assert check.missing == (MISSING,) and check.reason == f"this host lacks {MISSING}"
    assert set(host_check("llvm -mcpu=sapphirerapids", "k").missing) == set(parse("llvm -mcpu=sapphirerapids").features
                                                                             - host().features)
