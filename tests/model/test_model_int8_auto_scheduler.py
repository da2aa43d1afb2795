"""The auto-scheduler's tensorized sketches on a quantized model's own kernels: every packed int8 conv (NCHW input
with its padded regrouping kept at the root, blocked inputs read in place, with or without a requantizing
epilogue) and the packed dense get ``vpdpbusd`` sketches, exact against the kernel's naive schedule."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import autotune
import codegen
import tensorir as te
from autotune.auto_scheduler.sketch import make_space
from tensorir.tensor import PlaceholderOp

from test_model_int8_tuning import with_dense

pytestmark = pytest.mark.skipif("avx512vnni" not in codegen.host().features, reason="the host has no AVX512-VNNI")


def _inputs(tensors, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in tensors:
        shape, dtype = [int(d) for d in t.shape], np.dtype(t.dtype)
        if dtype.kind in "iu":
            lo, hi = (0, 256) if dtype == np.uint8 else (-128, 128) if dtype == np.int8 else (-1000, 1000)
            out.append(rng.integers(lo, hi, shape).astype(dtype))
        else:
            out.append((rng.random(shape) * 0.02).astype(dtype))
    return out


def _run(s, args, inputs) -> list[np.ndarray]:
    mod = codegen.build(te.lower(s, args))
    outs = [np.full([int(d) for d in t.shape], 0x5A, np.dtype(t.dtype)) for t in args[len(inputs):]]
    mod(*inputs, *outs)
    return outs, mod.get_source("asm")


def test_int8_model_kernels_get_exact_tensorized_sketches():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks, _ = autotune.extract_tasks(with_dense(), target="llvm", include_simple_tasks=False)
    tensorized = 0
    for task in tasks:
        dag = task.compute_dag
        space = make_space(dag, "llvm")
        if not space.intrins:
            continue
        tensorized += 1
        n_in = sum(isinstance(t.op, PlaceholderOp) for t in dag.tensors)
        inputs = _inputs(dag.tensors[:n_in], tensorized)
        want, _ = _run(*dag.create_schedule(), inputs)
        rng = random.Random(tensorized)
        samples = [p for p in (space.sample(rng) for _ in range(12)) if space.sketches[p.sketch].get(
            f"TS{next(iter(space.intrins))}")]
        for p in [space.default()] + samples[:1]:
            state = space.build(p)
            got, asm = _run(state.schedule, state.args, inputs)
            assert "vpdpbusd" in asm, task.kernel_name
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w, err_msg=f"{task.kernel_name}: {state}")
    assert tensorized == 5          # four packed convs and the dense
