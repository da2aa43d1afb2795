"""An LSTM model on a GPU (``codegen.build_model(g, target="cuda")``): bidirectional, peepholes, sequence
lengths, its ``nn.rnn_scan`` kernels (one block per batch element looping over time) against onnxruntime,
workspace and outputs poisoned with NaN first.  Skipped without pycuda or a CUDA device (the same kernels
run on the CPU through the simulator in ``tests/model/test_model_cuda_rnn.py``)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
import graph_models as gm
from recurrent_models import model
from test_model_cuda_gpu import _close, _poison

import codegen
from tensorir import graph

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hidden", [48, 600])     # 600: 512 threads stride over the hidden units
def test_lstm_matches_onnxruntime(hidden):
    weights = None
    if hidden > 64:     # a contracting recurrence (a chaotic one amplifies rounding differences)
        rng = np.random.default_rng(0)
        weights = {"W": rng.standard_normal((2, 4 * hidden, 16)) * 0.25,
                   "R": rng.standard_normal((2, 4 * hidden, hidden)) / np.sqrt(hidden),
                   "B": rng.standard_normal((2, 8 * hidden)) * 0.3}
    m_onnx, feed, _ = model("LSTM", seq=20, batch=3, inp=16, hidden=hidden, direction="bidirectional",
                            init=weights is None, peep=weights is None, seq_lens=[20, 7, 1], weights=weights)
    g, params = graph.from_onnx(m_onnx)
    m = codegen.build_model(g, target="cuda", params=params)
    assert set(m.stats()["schedules"].values()) >= {"rnn_scan_cuda"}
    for _ in range(2):
        feed = {"X": np.random.default_rng().standard_normal(feed["X"].shape).astype("float32")}
        want = gm.run_onnxruntime(m_onnx, feed)
        _poison(m)
        for got, w in zip(m(**feed), want):
            _close(got, w)
