"""``codegen.build_model(g, target="cuda")`` on a GPU: the small CNN, the transformer block and small
ResNet-18 / BERT layers against onnxruntime (outputs and workspace poisoned with NaN first), torch
tensors in and out without copies, the executor interface and its errors, CUDA graphs, the artifact
loaded without nvcc.  Skipped without pycuda or a CUDA device (the same models run on the CPU through
the simulator in ``tests/model/test_model_cuda.py``)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
import graph_models as gm

import codegen
from codegen.cuda.module import driver
from tensorir import graph
from tensorir.graph import testing

pytestmark = pytest.mark.gpu

MODELS = {
    "small_cnn": (gm.small_cnn, {"N": 2}, lambda rng: {"x": rng.standard_normal((2, 3, 32, 32)).astype("float32")}),
    "transformer_block": (gm.transformer_block, {"batch": 2, "seq": 20},
                          lambda rng: {"x": rng.standard_normal((2, 20, 32)).astype("float32")}),
    "resnet18_small": (lambda: testing.resnet18(batch=2, image=64, width=16), {},
                       lambda rng: testing.resnet18_inputs(batch=2, image=64, seed=int(rng.integers(1 << 30)))),
    "bert_small": (lambda: testing.bert_layer(seq=32, hidden=128, heads=4, ffn=256), {},
                   lambda rng: testing.bert_inputs(seq=32, hidden=128, seed=int(rng.integers(1 << 30)))),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def built(request):
    make, shapes, feeds = MODELS[request.param]
    model = make()
    g, params = graph.from_onnx(model, shapes)
    return model, codegen.build_model(g, target="cuda", params=params), feeds


def _poison(m):
    dev = m._device()
    drv = dev.drv
    if m.run_list.memory.peak >= 4:     # a one-kernel model has no workspace (a 1-byte allocation)
        drv.memset_d32(dev.workspace, 0x7FC00000, m.run_list.memory.peak // 4)   # NaN
    for buf, (_, d, s) in zip(dev.own_outputs, m.run_list.outputs):
        n = int(np.prod(s)) * np.dtype(d).itemsize // 4
        if n:
            drv.memset_d32(buf, 0x7FC00000, n)


def _close(got, want):
    assert got.shape == want.shape and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_model_matches_onnxruntime(built):
    model, m, feeds = built
    rng = np.random.default_rng()
    for _ in range(2):
        inputs = feeds(rng)
        want = gm.run_onnxruntime(model, inputs)
        _poison(m)
        got = m(**inputs)
        for g_, w in zip(got, want):
            _close(g_, w)
    assert m.stats()["launch"] in ("cuda-graph", "launch-loop")


def test_torch_tensors_in_and_out_without_copies(built):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    model, m, feeds = built
    inputs = feeds(np.random.default_rng())
    want = gm.run_onnxruntime(model, inputs)
    dev_in = {k: torch.from_numpy(v).cuda() for k, v in inputs.items()}
    dev_out = [torch.full(tuple(s), float("nan"), device="cuda") for _, _, s in m.run_list.outputs]
    for k, t in enumerate(dev_out):
        m.set_output(k, t)
    try:
        m.run(**dev_in)
        for t, w in zip(dev_out, want):
            _close(t.cpu().numpy(), w)
        ptr = dev_out[0].data_ptr()
        m.run(**dev_in)                           # again over the same binding (the cached graph)
        assert dev_out[0].data_ptr() == ptr
    finally:
        for k in range(len(dev_out)):
            m.set_output(k, None)


def test_interface_and_errors(built):
    _, m, feeds = built
    inputs = feeds(np.random.default_rng(3))
    name = m.input_names[0]
    with pytest.raises(ValueError, match=r"no input 'nope'"):
        m.set_input("nope", inputs[name])
    with pytest.raises(ValueError, match=f"'{name}' must be float32, got float64"):
        m.set_input(name, inputs[name].astype("float64"))
    with pytest.raises(ValueError, match=f"'{name}' must have shape"):
        m.set_input(name, inputs[name][..., :1])
    with pytest.raises(ValueError, match="is not one of the 1 outputs"):
        m.get_output(1)
    m.set_input(**inputs)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), m(**inputs)[0])


def test_export_load_run(built, tmp_path, monkeypatch):
    model, m, feeds = built
    m.export_library(tmp_path / "art")
    monkeypatch.setenv("TILETUNE_NVCC", "/nonexistent/nvcc")
    loaded = codegen.load_model(tmp_path / "art")
    inputs = feeds(np.random.default_rng())
    _close(loaded(**inputs)[0], gm.run_onnxruntime(model, inputs)[0])
    import json
    man = json.loads((tmp_path / "art" / "manifest.json").read_text())
    major, minor = driver().Device(0).compute_capability()
    assert man["gpu"]["compute_capability"] == f"{major}.{minor}" and man["gpu"]["name"]
