"""Templates for the autotuner tests (imported by the tests and, by module name, by worker processes).

``faulty(n)`` has a ``mode`` knob whose configs compile to honest kernels that misbehave: ``crash``
reads through a data-dependent index gigabytes past its input (SIGSEGV), ``hang`` reduces over 2^60
iterations, ``wrong`` computes ``2a + 1`` instead of ``2a``, ``invalid`` is rejected by the template.
``scale`` only multiplies the number of (valid) configs.
"""
from __future__ import annotations

import tensorir as te

import autotune

MODES = ["ok", "crash", "hang", "wrong", "invalid"]


def _twice(a, idx):
    return a * 2


@autotune.template("test_faulty", reference=_twice)
def faulty(n: int):
    cfg = autotune.get_config()
    cfg.define_knob("mode", MODES)
    cfg.define_knob("scale", [1, 2, 3, 4])
    mode = cfg["mode"].val
    A = te.placeholder((n,), name="A")
    idx = te.placeholder((n,), name="I", dtype="int32")
    if mode == "invalid":
        cfg.raise_error("this config is invalid on purpose")
    if mode == "crash":
        C = te.compute((n,), lambda i: A[idx[i] * 50000000 + 1000000000] * 2, name="C")
    elif mode == "hang":
        k1, k2 = te.reduce_axis((0, 1 << 30), name="k1"), te.reduce_axis((0, 1 << 30), name="k2")
        C = te.compute((n,), lambda i: te.sum(A[(i + k1 + k2) % n] * A[(k1 * 7 + k2 + idx[i]) % n],
                                              axis=[k1, k2]), name="C")
    elif mode == "wrong":
        C = te.compute((n,), lambda i: A[i] * 2 + 1 + idx[i] * 0, name="C")
    else:
        C = te.compute((n,), lambda i: A[i] * 2 + idx[i] * 0, name="C")
    s = te.create_schedule(C.op)
    if cfg["scale"].val > 1 and n % cfg["scale"].val == 0:
        s[C].split(C.op.axis[0], factor=cfg["scale"].val)
    return s, [A, idx, C]


@autotune.template("test_vecadd")
def vecadd(n: int, dtype: str = "float32"):
    """No reference function: candidates are checked against the fallback config's output."""
    cfg = autotune.get_config()
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    cfg.define_split("split", C.op.axis[0], num_outputs=2, policy="power2")
    cfg.define_knob("vec", [False, True])
    _, inner = cfg["split"].apply(s, C, C.op.axis[0])
    if cfg["vec"].val:
        s[C].vectorize(inner)
    return s, [A, B, C]
