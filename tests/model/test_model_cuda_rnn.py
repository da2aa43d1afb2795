"""RNN, GRU and LSTM on CUDA: the ``nn.rnn_scan`` kernel (``schedules/rnn.py``, ``rnn_scan_cuda``: one block
per batch element runs the loop over time) compiled by nvcc and run on the CPU by tests/cuda_sim.py against
onnxruntime (workspace and outputs poisoned with NaN): cells, directions, linear_before_reset, peepholes,
clip, sequence lengths, hidden sizes that the block's threads stride over.  The same on a GPU:
``tests/model/test_model_cuda_rnn_gpu.py``."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from recurrent_models import model
from test_model_cuda import _check

import codegen
from tensorir import graph
from tensorir.graph.schedules import rnn as rnn_schedules

CASES = {
    "rnn": dict(op="RNN", direction="forward"),
    "gru_reverse_init": dict(op="GRU", direction="reverse", init=True),
    "gru_linear_before_reset": dict(op="GRU", direction="bidirectional", attrs={"linear_before_reset": 1}),
    "lstm_peepholes_bidirectional_lens": dict(op="LSTM", direction="bidirectional", batch=3, init=True, peep=True,
                                              seq_lens=[5, 2, 0]),
    "lstm_clip_input_forget": dict(op="LSTM", direction="reverse", attrs={"clip": 0.8, "input_forget": 1}),
    "lstm_lens_input": dict(op="LSTM", seq_lens=[3, 5], lens_input=True),
    "gru_hidden_40": dict(op="GRU", hidden=40, batch=1, seq=3),       # 32 threads, a tail of 8 hidden units
    "lstm_hidden_70": dict(op="LSTM", hidden=70, batch=2, seq=3, direction="bidirectional"),   # 64 threads
    "lstm_one_step": dict(op="LSTM", seq=1),      # silero-vad: the scan's loop of one step stays a scan
    "gru_one_step_bidirectional": dict(op="GRU", seq=1, direction="bidirectional"),
}


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_simulated(case):
    kw = dict(CASES[case])
    m_onnx, feed, _ = model(kw.pop("op"), **kw)
    m = _check(m_onnx, {}, feed)
    assert m.stats()["schedules"]["fused_nn_rnn_scan"] == "rnn_scan_cuda"
    src = m.get_source("cuda")
    assert "for (int rnn_scan_idx" in src and "__syncthreads()" in src    # the loop over time inside the kernel


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_threads_stride_over_hidden_units(monkeypatch):
    """Fewer threads than hidden units: each thread computes several columns and hidden units."""
    monkeypatch.setattr(rnn_schedules, "CUDA_THREADS", 32)
    m_onnx, feed, _ = model("LSTM", hidden=100, batch=1, seq=3, peep=True)     # 4 per thread, a tail of 4
    m = _check(m_onnx, {}, feed)
    (scan,) = [k for s, k in m.kernels.items() if "rnn_scan" in s]
    assert scan.block == (32, 1, 1) and scan.grid == (1, 1, 1)



def test_shared_memory_holds_one_block_rows():
    """Each block's shared buffers hold its own batch row (not every block's): h, the gate sums, the cell."""
    hidden, batch = 32, 6
    m_onnx, _, _ = model("LSTM", hidden=hidden, batch=batch, seq=2)
    g, params = graph.from_onnx(m_onnx)
    m = codegen.build_model(g, target="cuda", params=params)
    (scan,) = [k for s, k in m.kernels.items() if "rnn_scan" in s]
    assert scan.grid == (batch, 1, 1) and scan.shared_bytes == 4 * (hidden + 4 * hidden + hidden)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_artifact_round_trip(tmp_path, monkeypatch):
    """The scan's state (the kernel's workspace scratch) survives export and load without nvcc."""
    import graph_models as gm
    from test_model_cuda import simulate
    m_onnx, feed, _ = model("GRU", hidden=8, batch=2, seq=3, direction="bidirectional")
    g, params = graph.from_onnx(m_onnx)
    codegen.build_model(g, target="cuda", params=params).export_library(tmp_path)
    monkeypatch.setenv("TILETUNE_NVCC", "/nonexistent/nvcc")
    loaded = codegen.load_model(tmp_path)
    assert [len(s.scratch) for s in loaded.run_list.steps if "rnn_scan" in s.kernel] == [1, 1]
    for got, want in zip(simulate(loaded, feed), gm.run_onnxruntime(m_onnx, feed)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
