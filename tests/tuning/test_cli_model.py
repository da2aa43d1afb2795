"""``tiletune compile / run / inspect``: an ONNX model to an artifact, run from .npy files, its manifest
printed; bad command lines are one error line and exit status 2."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from autotune.cli import main
from graph_models import small_cnn


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    model = d / "cnn.onnx"
    onnx.save(small_cnn(seed=3), str(model))
    out = d / "out"
    assert main(["compile", str(model), "--shape", "x=2,3,32,32", "-o", str(out)]) == 0
    return d, model, out


def test_compile_writes_an_artifact_with_a_manifest(compiled, capsys):
    d, model, out = compiled
    for name in ("model.so", "graph.json", "weights.npy", "model.h", "manifest.json"):
        assert (out / name).exists(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shape_bindings"]["x"] == [2, 3, 32, 32]
    assert manifest["source"]["path"].endswith("cnn.onnx")
    assert all(k["native"] for k in manifest["kernels"])
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kernels" in text and "conv2d" in text and "parity" in text
    assert main(["inspect", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == manifest["format"]


def test_compile_with_precision_records_it(compiled, tmp_path, capsys):
    d, model, _ = compiled
    out = tmp_path / "fp16"
    assert main(["compile", str(model), "--shape", "x=2,3,32,32", "--precision", "float16", "-o", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    vs = manifest["precision"]["vs_float32"]
    assert manifest["precision"]["dtype"] == "float16" and 0 < vs["max_rel_error"] < 8 * 2.0 ** -10
    assert {"compute": "float16", "accumulate": "float32"} in [k["precision"] for k in manifest["kernels"]]
    assert "precision float16" in capsys.readouterr().out
    assert main(["inspect", str(out)]) == 0
    assert "float16/float32 acc" in capsys.readouterr().out


def test_bfloat16_model_runs_from_npy_files(tmp_path, capsys):
    """numpy saves ml_dtypes.bfloat16 arrays as 2-byte void: ``run`` reads them as the model's bfloat16."""
    import ml_dtypes
    from graph_models import in_low_precision, transformer_block
    model, out = tmp_path / "block.onnx", tmp_path / "out"
    onnx.save(in_low_precision(transformer_block(), "bfloat16"), str(model))
    assert main(["compile", str(model), "--shape", "x=2,5,32", "-o", str(out)]) == 0
    assert "not run (" in capsys.readouterr().out      # onnxruntime has no bfloat16 MatMul: said, not fatal
    x = np.random.default_rng(0).standard_normal((2, 5, 32)).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "y.npz")]) == 0
    assert "bfloat16[2, 5, 32]  min" in capsys.readouterr().out
    import codegen
    want = codegen.load_model(str(out))(x=x)[0]
    got = np.load(tmp_path / "y.npz")["y"]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_run_matches_the_reference_evaluator(compiled, tmp_path, capsys):
    from onnx.reference import ReferenceEvaluator
    d, model, out = compiled
    x = np.random.default_rng(7).standard_normal((2, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = tmp_path / "y.npz"
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(result), "--bench",
                 "--repeat", "3"]) == 0
    assert "median" in capsys.readouterr().out
    got = np.load(result)["y"]
    want = ReferenceEvaluator(str(model)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("argv, culprit", [
    (["compile", "{d}/missing.onnx", "-o", "{d}/o"], "missing.onnx"),
    (["compile", "{model}", "--shape", "x=2,three", "-o", "{d}/o"], "x=2,three"),
    (["compile", "{model}", "--shape", "x=2,3,32,32", "--shape", "y=1,2", "-o", "{d}/o"], "'y'"),
    (["compile", "{model}", "-o", "{d}/o"], "'x'"),                   # the batch is unbound
    (["run", "{out}", "--input", "z={d}/x.npy"], "'x'"),             # an input the model lacks
    (["run", "{out}", "--input", "x={d}/none.npy"], "none.npy"),
    (["run", "{out}", "--input", "x={d}/bad.npy"], "bad.npy"),
    (["run", "{out}", "--input", "x={d}/small.npy"], "'x'"),         # a wrong shape
    (["inspect", "{d}"], "manifest.json"),
])
def test_bad_command_lines_name_the_culprit(compiled, argv, culprit, capsys):
    d, model, out = compiled
    np.save(d / "x.npy", np.ones((2, 3, 32, 32), np.float32))
    np.save(d / "small.npy", np.ones((1, 3, 32, 32), np.float32))
    (d / "bad.npy").write_bytes(b"not an array")
    args = [a.format(d=d, model=model, out=out) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tiletune {args[0]}: error:") and culprit in err, err
    assert "Traceback" not in err
