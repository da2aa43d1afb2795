"""Control flow from C: an exported If / Loop model run by a C program through ``model.h`` alone (the run
entry branches and loops natively; no Python), from 4 POSIX threads at once, each with its own
NaN-poisoned workspace and outputs, against onnxruntime; a refused branch's return code."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import codegen
from tensorir import graph

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import control_flow_models as cf

C_PROGRAM = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

#define THREADS 4
#define NI (TILETUNE_MODEL_NUM_INPUTS)
#define NO (TILETUNE_MODEL_NUM_OUTPUTS)

static void* aligned(size_t n) {
    void* p = NULL;
    if (posix_memalign(&p, TILETUNE_MODEL_ALIGN, n ? n : 1)) exit(90);
    return p;
}

static void read_file(const char* path, void* dst, size_t n, long skip_npy_header) {
    unsigned char h[12];
    FILE* f = fopen(path, "rb");
    if (!f) exit(91);
    if (skip_npy_header) {      /* weights.npy: magic, version, header length (2 or 4 bytes), header */
        if (fread(h, 1, 12, f) != 12) exit(92);
        long start = h[6] >= 2 ? 12 + (long)(h[8] | h[9] << 8 | h[10] << 16 | (long)h[11] << 24)
                               : 10 + (long)(h[8] | h[9] << 8);
        if (fseek(f, start, SEEK_SET)) exit(93);
    }
    if (fread(dst, 1, n, f) != n) exit(94);
    fclose(f);
}

typedef struct {
    void* const* inputs;
    const uint8_t* weights;
    uint8_t* workspace;
    void* outputs[NO > 0 ? NO : 1];
    int32_t rc;
} job_t;

static void* work(void* arg) {
    job_t* j = arg;
    for (int rep = 0; rep < 3 && j->rc == 0; ++rep) {
        memset(j->workspace, 0xFF, TILETUNE_MODEL_WORKSPACE_BYTES);      /* NaN in every float lane */
        for (int k = 0; k < NO; ++k) memset(j->outputs[k], 0xFF, (size_t)tiletune_model_output_bytes[k]);
        j->rc = tiletune_model_run(j->inputs, j->outputs, j->workspace, j->weights);
    }
    return NULL;
}

/* main weights.npy in_0 ... in_{NI-1} out_0 ... out_{NO-1} */
int main(int argc, char** argv) {
    if (argc != 2 + NI + NO) return 95;
    uint8_t* weights = aligned(TILETUNE_MODEL_WEIGHTS_BYTES);
    read_file(argv[1], weights, TILETUNE_MODEL_WEIGHTS_BYTES, 1);
    void* inputs[NI > 0 ? NI : 1];
    for (int k = 0; k < NI; ++k) {
        inputs[k] = aligned((size_t)tiletune_model_input_bytes[k]);
        read_file(argv[2 + k], inputs[k], (size_t)tiletune_model_input_bytes[k], 0);
    }
    job_t jobs[THREADS];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; ++t) {
        jobs[t].inputs = inputs;
        jobs[t].weights = weights;
        jobs[t].workspace = aligned(TILETUNE_MODEL_WORKSPACE_BYTES);
        for (int k = 0; k < NO; ++k) jobs[t].outputs[k] = aligned((size_t)tiletune_model_output_bytes[k]);
        jobs[t].rc = 0;
        if (pthread_create(&threads[t], NULL, work, &jobs[t])) return 96;
    }
    int same = 1;
    for (int t = 0; t < THREADS; ++t) {
        pthread_join(threads[t], NULL);
        if (jobs[t].rc != jobs[0].rc) same = 0;
        for (int k = 0; k < NO && jobs[0].rc == 0; ++k)
            same &= !memcmp(jobs[t].outputs[k], jobs[0].outputs[k], (size_t)tiletune_model_output_bytes[k]);
    }
    for (int k = 0; k < NO; ++k) {
        FILE* f = fopen(argv[2 + NI + k], "wb");
        if (!f || fwrite(jobs[0].outputs[k], 1, (size_t)tiletune_model_output_bytes[k], f) !=
                      (size_t)tiletune_model_output_bytes[k]) return 97;
        fclose(f);
    }
    printf("rc=%d same=%d\n", jobs[0].rc, same);
    return 0;
}
"""


def _export_and_compile(model, tmp_path, program=C_PROGRAM, **build):
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc})")
    g, params = graph.from_onnx(model) if not isinstance(model, graph.Graph) else (model, {})
    m = codegen.build_model(g, params=params, **build)
    art = tmp_path / "art"
    m.export_library(str(art))
    (tmp_path / "main.c").write_text(program)
    exe, so = tmp_path / "main", os.path.abspath(art / "model.so")
    r = subprocess.run([cc, "-std=c99", "-D_POSIX_C_SOURCE=200112L", "-Wall", "-Werror", "-pthread", "-o", str(exe),
                        str(tmp_path / "main.c"), f"-I{art}", so, f"-Wl,-rpath,{art}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return m, art, exe


def _run_c(m, art, exe, tmp_path, feed):
    ins = []
    for k, (name, dtype, shape) in enumerate(m.run_list.inputs):
        ins.append(tmp_path / f"in{k}.bin")
        ins[-1].write_bytes(np.ascontiguousarray(feed[name], dtype).tobytes())
    outs = [tmp_path / f"out{k}.bin" for k in range(len(m.run_list.outputs))]
    r = subprocess.run([str(exe), str(art / "weights.npy"), *map(str, ins), *map(str, outs)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [np.frombuffer(f.read_bytes(), dtype).reshape(shape) for f, (_, dtype, shape) in zip(outs, m.run_list.outputs)]
    return r.stdout, got


FALLBACK_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

static int32_t calls = 0;

static int32_t fallback(int32_t step, void* const* inputs, void* const* outputs, uint8_t* workspace,
                        const uint8_t* weights) {
    (void)inputs; (void)outputs; (void)workspace; (void)weights;
    ++calls;
    return 1000 + step;         /* "cannot compute it": the entry stops and returns this */
}

int main(void) {
    void* p[5];
    for (int k = 0; k < 5; ++k)
        if (posix_memalign(&p[k], TILETUNE_MODEL_ALIGN, 1 << 16)) return 90;
    void* inputs[1] = {p[0]};
    void* outputs[2] = {p[1], p[2]};
    int32_t rc = tiletune_model_run(inputs, outputs, p[3], p[4], fallback);
    printf("rc=%d calls=%d\n", rc, calls);
    return 0;
}
"""


def test_c_program_supplies_the_fallback_callback(tmp_path):
    """A model with a reference-fallback step: model.h says so by name, and the entry calls the C
    program's own ``fallback`` for it, returning what that returns."""
    from tensorir.graph import TensorType, Var, call
    x = Var("x", TensorType((2, 5), "float32"))
    p = call("nn.pad", call("nn.softmax", x), pad_width=((1, 1), (0, 2)), pad_mode="edge")
    g = graph.Graph((x,), (call("nn.softmax", call("tanh", p)), p), output_names=("y", "p"))
    with pytest.warns(RuntimeWarning, match="reference fallback"):
        m, art, exe = _export_and_compile(g, tmp_path, FALLBACK_PROGRAM, fallback="reference")
    assert "cannot run from C unless `fallback` computes those steps" in (art / "model.h").read_text()
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and f"rc={1000 + m.run_list.fallback_steps[0]} calls=1" in r.stdout, r.stdout + r.stderr


def _close(got, want):
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * (1 + float(np.abs(b).max())))


@pytest.mark.parametrize("make", [cf.if_nested, lambda: cf.loop(trip_input=True), lambda: cf.loop(early=False),
                                  cf.loop_with_if, cf.loop_counter, cf.scan],
                         ids=["if_nested", "loop_trip_input", "loop_scan", "if_in_loop", "while", "scan"])
def test_c_program_runs_control_flow_from_four_threads(make, tmp_path):
    model = make()
    m, art, exe = _export_and_compile(model, tmp_path)
    header = (art / "model.h").read_text()
    assert "tiletune_model_run(void* const* inputs, void* const* outputs, uint8_t* workspace, const uint8_t* " \
           "weights);" in header and "cannot run from C" not in header
    rng = np.random.default_rng(23)
    for trips in (0, 2, 7):
        feed = cf.feeds(model, rng, ints=trips)
        if "y" in feed:     # if_nested: outer then with inner then, outer then with inner else, outer else
            feed = {"x": np.abs(feed["x"]) * (-1 if trips == 7 else 1), "y": np.abs(feed["y"]) * (-1 if trips else 1)}
        out, got = _run_c(m, art, exe, tmp_path, feed)
        assert "rc=0 same=1" in out, out
        _close(got, cf.onnxruntime_outputs(model, feed))


def test_c_program_gets_the_refused_branch_code(tmp_path):
    model = cf.if_one_branch_invalid()
    with pytest.warns(RuntimeWarning, match="cannot run with the bound input shapes"):
        m, art, exe = _export_and_compile(model, tmp_path)
    header = (art / "model.h").read_text()
    assert "   1: If node 'pick': its else_branch cannot run" in header
    x = np.random.default_rng(29).standard_normal(6).astype(np.float32)
    out, got = _run_c(m, art, exe, tmp_path, {"x": x, "k": np.array(1, np.int64)})
    assert "rc=0 same=1" in out
    _close(got, cf.onnxruntime_outputs(model, {"x": x, "k": np.array(1, np.int64)}))
    out, _ = _run_c(m, art, exe, tmp_path, {"x": x, "k": np.array(2, np.int64)})
    assert "rc=1 same=1" in out, out
