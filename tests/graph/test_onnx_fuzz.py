"""The differential ONNX fuzzer (``tests/onnx_fuzz.py``) over a few hundred seeds: random small graphs
built by tiletune for LLVM against onnxruntime.  A refusal (a clear error, or an op left to the
reference fallback) passes; a wrong answer or a crash fails, naming the seed to reproduce with
``python tests/onnx_fuzz.py --show SEED``.  ``make fuzz`` runs 2,000 seeds."""
import pytest

pytest.importorskip("onnxruntime")
import onnx_fuzz

#: Seeds per CI batch (each test builds its seeds one after the other; about 0.5 s a seed on 2 cores).
BATCH, BATCHES = 50, 5


@pytest.mark.parametrize("batch", range(BATCHES))
def test_fuzz_batch_matches_onnxruntime(batch):
    failures = []
    for seed in range(batch * BATCH, (batch + 1) * BATCH):
        r = onnx_fuzz.run_case(seed)
        if r.kind in ("wrong", "crash"):
            failures.append(f"seed {seed}: {r.kind}: {r.detail[:300]}")
    assert not failures, "\n".join(failures)


def test_a_seed_reproduces_its_graph():
    a, fa = onnx_fuzz.generate(7)
    b, fb = onnx_fuzz.generate(7)
    assert a.SerializeToString() == b.SerializeToString()
    assert all((fa[k] == fb[k]).all() for k in fa)
    assert onnx_fuzz.generate(8)[0].SerializeToString() != a.SerializeToString()


def test_the_fuzzer_catches_a_wrong_answer(monkeypatch):
    """The comparison is live: a kernel output off by a little more than the tolerance is reported."""
    import numpy as np
    want = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    assert onnx_fuzz.compare(want.copy(), want) == ""
    assert "differ" in onnx_fuzz.compare(want + np.float32(1e-3), want)
    poisoned = want.copy()
    poisoned[1, 2] = np.nan
    assert "1 of 12 elements differ" in onnx_fuzz.compare(poisoned, want)
    assert "shape" in onnx_fuzz.compare(want[:, :3], want)
