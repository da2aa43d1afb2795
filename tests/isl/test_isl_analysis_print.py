"""The isl analysis shown to the user: ``str(te.analyze(s, args))`` and ``te.lower(...,
show_analysis=True)`` print domains, schedules, accesses and dependences in isl syntax; indices isl
cannot represent are listed as unverified.  The analysis of the packed GEMM runs quickly."""
import re
import time

import islpy as isl
import pytest

import tensorir as te
from tensorir.poly.analysis import Analysis
from tensorir.lower import loop_nest


def stencil_two_stages():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n - 1,), lambda i: P[i] + P[i + 1], name="C")
    return n, A, P, C, te.create_schedule(C.op)


def test_analysis_text_is_isl_syntax_with_the_size_parameter():
    n, A, P, C, s = stencil_two_stages()
    text = str(te.analyze(s, [A, C]))
    assert "->" in text
    # the size parameter appears as an isl parameter and in the domain constraints
    assert re.search(r"\[n\w*\]\s*->\s*\{", text), text
    domains = re.findall(r"domain (\[n\w*\] -> \{ S\d+\[[^\]]*\] : [^}]*\})", text)
    assert len(domains) == 2 and all(re.search(r"\bn\w*", d.split(":", 1)[1]) for d in domains), text
    for kind in ("read-after-write", "write-after-read", "write-after-write"):
        assert kind in text, f"{kind} missing from\n{text}"
    assert re.search(r"\bP\b", text) and re.search(r"\bC\b", text), text


def test_analysis_text_parses_back_as_isl():
    """Every domain, schedule, access and dependence printed is a valid isl object."""
    n, A, P, C, s = stencil_two_stages()
    text = str(te.analyze(s, [A, C]))
    parsed = 0
    for line in text.splitlines():
        m = re.search(r"(\[[^\]]*\]\s*->\s*\{.*\}|\{.*\})\s*$", line)
        if not m:
            continue
        obj = m.group(1)
        try:
            isl.UnionMap(obj)
        except isl.Error:
            isl.UnionSet(obj)
        parsed += 1
    assert parsed >= 6, text


def test_read_after_write_dependence_from_producer_to_consumer():
    n, A, P, C, s = stencil_two_stages()
    a = te.analyze(s, [A, C])
    deps = a.dependences()
    raw = deps["read-after-write"]
    assert not raw.is_empty()
    # C[i] reads P[i] and P[i + 1]: every instance of C depends on two instances of P
    names = {st.store.buffer.name: st.name for st in a.program.statements}
    text = str(raw)
    assert names["P"] in text and names["C"] in text, text
    assert deps["write-after-write"].is_empty()


def test_dependences_of_a_reduction_are_carried_by_its_axis():
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    R = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    a = te.analyze(s, [A, R])
    deps = a.dependences()
    assert not deps["read-after-write"].is_empty()
    assert not deps["write-after-write"].is_empty()
    text = str(a)
    assert re.search(r"\bk\w*", text) and "R" in text


def test_show_analysis_prints_it_before_the_function():
    n, A, P, C, s = stencil_two_stages()
    text = str(te.lower(s, [A, C], show_analysis=True))
    at_def = text.index("def ")
    analysis = text[:at_def]
    assert "read-after-write" in analysis and "->" in analysis, text
    assert re.search(r"\[n\w*\]", analysis), text
    assert "read-after-write" not in text[at_def:]
    # the function is the same as without the analysis
    assert text[at_def:].strip() == str(te.lower(s, [A, C])).strip()


def test_no_analysis_unless_asked():
    n, A, P, C, s = stencil_two_stages()
    text = str(te.lower(s, [A, C]))
    assert text.startswith("def ") and "read-after-write" not in text


def test_show_analysis_still_refuses_an_illegal_program():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(te.OutOfBoundsError):
        te.lower(s, [A, B], show_analysis=True)


def test_show_analysis_lists_unverified_indices():
    A = te.placeholder((16,), name="A")
    Idx = te.placeholder((16,), name="Idx", dtype="int32")
    B = te.compute((16,), lambda i: A[Idx[i]], name="B")
    s = te.create_schedule(B.op)
    text = str(te.lower(s, [A, Idx, B], show_analysis=True))
    assert "unverified" in text and "A[Idx[i]]" in text, text
    assert text.count("unverified") == 1, text


def test_analyze_lists_unverified_indices():
    """``str(te.analyze(...))`` is the analysis a user prints: it must list what it could not prove,
    as te.lower(show_analysis=True) does."""
    A = te.placeholder((16,), name="A")
    Idx = te.placeholder((16,), name="Idx", dtype="int32")
    B = te.compute((16,), lambda i: A[Idx[i]], name="B")
    s = te.create_schedule(B.op)
    text = str(te.analyze(s, [A, Idx, B]))
    assert "unverified" in text and "A[Idx[i]]" in text, text


def test_show_analysis_without_check_lists_unverified_indices():
    A = te.placeholder((16,), name="A")
    Idx = te.placeholder((16,), name="Idx", dtype="int32")
    B = te.compute((16,), lambda i: A[Idx[i]], name="B")
    s = te.create_schedule(B.op)
    text = str(te.lower(s, [A, Idx, B], show_analysis=True, check=False))
    assert "unverified" in text, text


def test_verify_twice_does_not_duplicate_unverified():
    A = te.placeholder((16,), name="A")
    Idx = te.placeholder((16,), name="Idx", dtype="int32")
    B = te.compute((16,), lambda i: A[Idx[i]], name="B")
    a = te.analyze(te.create_schedule(B.op), [A, Idx, B])
    a.verify()
    a.verify()
    assert str(a).count("unverified") == 1, str(a)


def test_product_of_sizes_is_listed_unverified():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n * m,), name="A")
    B = te.compute((n, m), lambda i, j: A[i * m + j], name="B")
    s = te.create_schedule(B.op)
    text = str(te.lower(s, [A, B], show_analysis=True))
    assert "unverified" in text, text


def test_analysis_of_packed_gemm_verifies_quickly():
    """The tuner runs this on every config: it must be cheap (the share of build time is measured in
    benchmarks/gemm_cpu.py; here only a generous absolute bound)."""
    from autotune.templates.gemm_cpu import packed_schedule
    s, args = packed_schedule(1024, 1024, 1024)
    t0 = time.perf_counter()
    a = Analysis(loop_nest(s, args))
    a.verify()
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"analysis of the packed GEMM took {elapsed:.2f} s"
    assert a.unverified == []
    text = str(a)
    assert "packedB" in text and "C.local" in text
