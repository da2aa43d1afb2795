"""No raw isl error escapes: an isl failure (injected here) is a ScheduleError naming the stage and
the check, with no isl traceback chained; where isl only sharpens an answer (redundant guards, exact
regions), its failure falls back to the answer without isl and the code stays correct."""
from __future__ import annotations

import pathlib
import re

import islpy as isl
import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir import poly
from tensorir.poly import analysis


def failing(*_args, **_kwargs):
    raise isl.Error("injected isl failure")


def two_stages(n=37, parallel=False):
    """P[i] = A[i] * 2 computed at C's loop; C[i] = P[i] + 1 (split by 8: a guarded tail)."""
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[P].compute_at(s[C], xo)
    if parallel:
        s[C].parallel(xo)
    return s, [A, C]


def refusal(fn) -> te.ScheduleError:
    with pytest.raises(te.ScheduleError) as info:
        fn()
    err = info.value
    assert type(err) is te.ScheduleError, "a plain ScheduleError: tuners count it as a refusal"
    assert err.__cause__ is None and err.__suppress_context__, "the isl traceback must not be chained"
    assert err.isl_message == "injected isl failure"
    assert "injected isl failure" in str(err)
    return err


def run(s, args, n=37):
    f = codegen.build(s, args)
    a = np.random.default_rng(0).standard_normal(n).astype("float32")
    c = np.full(n, np.nan, "float32")
    f(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_in_bounds_proof_failure_names_stage_and_check(monkeypatch):
    monkeypatch.setattr(isl.Map, "subtract_range", failing)
    msg = str(refusal(lambda: te.lower(*two_stages())))
    assert re.match(r"stage (P|C): the isl analysis failed while proving its reads and writes inside", msg), msg


def test_flow_analysis_failure_names_stages_and_check(monkeypatch):
    monkeypatch.setattr(isl.UnionAccessInfo, "compute_flow", failing)
    msg = str(refusal(lambda: codegen.build(*two_stages())))
    assert msg.startswith("stages P, C: the isl analysis failed while computing the flow of values"), msg


def test_parallel_loop_check_failure_names_stage_and_axis(monkeypatch):
    monkeypatch.setattr(analysis, "_carried", failing)
    msg = str(refusal(lambda: te.lower(*two_stages(parallel=True))))
    assert msg.startswith("stage C:") and "axis i.outer carries no dependence" in msg, msg


def test_building_the_model_failure_names_the_stage(monkeypatch):
    monkeypatch.setattr(poly._Builder, "new_statement", failing)
    msg = str(refusal(lambda: te.analyze(*two_stages())))
    assert re.match(r"stage P: the isl analysis failed while building the isl model of its accesses", msg), msg


def test_printing_dependences_failure_is_wrapped(monkeypatch):
    a = te.analyze(*two_stages())
    monkeypatch.setattr(isl.UnionFlow, "get_may_dependence", failing)
    msg = str(refusal(lambda: a.dependences()))
    assert "computing the write-after-read dependences" in msg, msg


def test_transform_layout_failure_names_the_stage(monkeypatch):
    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    monkeypatch.setattr(isl.Map, "is_injective", failing)
    msg = str(refusal(lambda: s[B].transform_layout(lambda i, j: [j, i])))
    assert msg.startswith("stage B: the isl analysis failed while inverting the index map of transform_layout"), msg


def test_guard_removal_falls_back_when_isl_fails(monkeypatch):
    """LoopContext.decide cannot tell: the guard stays, the code is still right."""
    monkeypatch.setattr(poly.LoopContext, "_set", failing)
    s, args = two_stages()
    assert "if (" in str(te.lower(s, args))
    run(s, args)


def test_exact_regions_fall_back_when_isl_fails(monkeypatch):
    """needed_region cannot tell: bound inference uses its interval hull, the code is still right."""
    monkeypatch.setattr(poly, "pw_to_expr", failing)
    run(*two_stages())


def test_real_unbounded_domain_is_wrapped_with_isl_words():
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((m,), lambda i: B[i] * 2.0, name="C")      # B is read: the flow of B is asked about
    s = te.create_schedule(C.op)
    s[B].fuse(B.op.axis[0], k)
    with pytest.raises(te.ScheduleError) as info:
        codegen.build(s, [A, C])
    assert "unbounded optimum" in info.value.isl_message
    assert "stage B: loop i.k.fused" in str(info.value) and info.value.__cause__ is None


def test_only_guarded_modules_speak_isl():
    """Every module that imports islpy is one whose isl calls sit behind a boundary."""
    root = pathlib.Path(te.__file__).parent
    speakers = {p.relative_to(root).as_posix() for p in root.rglob("*.py")
                if re.search(r"^\s*(import islpy|from islpy)", p.read_text(), re.M)}
    assert speakers <= {"poly/__init__.py", "poly/split.py", "poly/analysis.py", "poly/threads.py",
                        "schedule/layout.py", "poly/errors.py"}, speakers
