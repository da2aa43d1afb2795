"""Control flow run natively: If / Loop / Scan as branches and loops of the run list, compiled into the
one run entry around the kernels (codegen/model/plan_control.py, codegen/model/entries.py), one workspace
planned over them, several threads at once, and an artifact with control flow exported and loaded.
Fresh random inputs against onnxruntime; every planned buffer and output poisoned with NaN before each
run.  From C: test_model_control_flow_c.py."""
import statistics
import time

import numpy as np
import pytest

import codegen
from tensorir import graph

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import control_flow_models as cf


def _poison(m):
    m.workspace.view(np.uint8)[...] = 0xFF            # NaN in every float32 lane
    for o in m._outputs:
        o.reshape(-1).view(np.uint8)[...] = 0xFF


def _run(m, feed) -> list:
    m.set_input(**feed)
    _poison(m)
    m.run()
    return [m.get_output(k) for k in range(m.get_num_outputs())]


def _close(got, want):
    cf.close(got, want)


def _build(model):
    g, params = graph.from_onnx(model)
    return codegen.build_model(g, params=params)


@pytest.fixture(scope="module")
def if_model():
    model = cf.if_nested()
    return model, _build(model)


def test_if_nested_on_data_runs_natively(if_model):
    model, m = if_model
    kinds = [next(iter(item.to_json())) for item in m.run_list.program]
    assert kinds == ["steps", "if", "steps"] and all(s.native for s in m.run_list.steps)
    for feed in cf.if_feeds(np.random.default_rng(3)):
        _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))


@pytest.mark.parametrize("make", [cf.loop, lambda: cf.loop(early=False), cf.scan, cf.loop_with_if, cf.loop_counter,
                                  lambda: cf.loop_counter(cond_from_initializer=True), cf.loop_exchange, cf.loop_invariant,
                                  cf.loop_slice_at_counter, cf.loop_slice_at_carried_counter],
                         ids=["early", "scan_outputs", "scan", "if_in_loop", "counter", "counter_float_cond", "exchange",
                              "invariant", "slice_at_counter", "slice_at_carried_counter"])
def test_loop_and_scan_run_natively(make):
    model = make()
    m = _build(model)
    assert any("loop" in item.to_json() for item in m.run_list.program)
    rng = np.random.default_rng(5)
    for _ in range(3):
        feed = cf.feeds(model, rng)
        _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))


def test_loop_stops_early_and_takes_a_trip_count_input():
    model = cf.loop(trip_input=True)
    m = _build(model)
    for feed in cf.trip_feeds(np.random.default_rng(11)):     # trip counts 0, 1, 3, 9; some stop early
        _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))


def _in_threads(m, jobs, repeat: int) -> None:
    """Each ``(feed, want)`` in a thread of its own, ``repeat`` times over its own poisoned buffers."""
    cf.in_threads(lambda feed, want: _close(_run(m, feed), want), jobs, repeat)


def test_if_from_several_threads(if_model):
    model, m = if_model
    rng = np.random.default_rng(13)
    _in_threads(m, [(f, cf.onnxruntime_outputs(model, f)) for f in cf.if_feeds(rng) * 3], 20)


def test_loop_from_four_threads_with_their_own_trip_counts():
    model = cf.loop(trip_input=True)
    m = _build(model)
    rng = np.random.default_rng(31)
    jobs = []
    for trips in (0, 1, 4, 9):
        feed = cf.feeds(model, rng, ints=trips)
        feed["x"] = np.abs(feed["x"]) * 0.3          # the condition stops some of them early
        jobs.append((feed, cf.onnxruntime_outputs(model, feed)))
    _in_threads(m, jobs, 30)


def test_loop_passing_carried_values_on_swapped():
    from codegen.model.plan_control import LoopItem, walk
    model = cf.loop_swap()
    m = _build(model)
    (loop,) = [x for x in walk(m.run_list.block) if isinstance(x, LoopItem)]
    assert loop.swapped() and loop.swap is not None and loop.swap.kind == "workspace"
    rng = np.random.default_rng(37)
    for _ in range(3):
        feed = cf.feeds(model, rng)
        _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))


def test_loop_running_other_than_its_scan_length_raises_by_name():
    g = cf.loop_typed_for_three()
    m = codegen.build_model(g)
    x = np.random.default_rng(41).standard_normal(3).astype(np.float32)
    _close(_run(m, {"M": np.array(3), "a0": x}), graph.evaluate(g, {"M": np.array(3), "a0": x}))
    for n in (2, 4):
        with pytest.raises(ValueError, match=r"Loop node 'loop': its scan outputs were compiled for 3 iterations"):
            m(M=np.array(n), a0=x)


def test_a_thousand_iterations_cost_no_python():
    model = cf.loop(trip_input=True)
    m = _build(model)
    m.num_threads = 1
    got = m(**cf.thousand_iterations())
    assert got[1][0] == sum(range(1000))             # b += float(i): every iteration ran
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        m.run()
        times.append(time.perf_counter() - t0)
    # a Python driver took ~12 us an iteration (12 ms here); the native loop takes nanoseconds
    assert statistics.median(times) < 3e-3, f"{statistics.median(times) * 1e3:.2f} ms for 1000 iterations"


def test_artifact_with_if_exports_and_loads(if_model, tmp_path):
    model, m = if_model
    m.export_library(str(tmp_path / "art"))
    loaded = codegen.load_model(str(tmp_path / "art"))
    assert loaded.run_list.to_json() == m.run_list.to_json()
    for feed in cf.if_feeds(np.random.default_rng(17)):
        _close(_run(loaded, feed), cf.onnxruntime_outputs(model, feed))


def test_refused_branch_raises_by_name_when_taken():
    model = cf.if_one_branch_invalid()
    with pytest.warns(RuntimeWarning, match="cannot run with the bound input shapes"):
        m = _build(model)
    x = np.random.default_rng(19).standard_normal(6).astype(np.float32)
    feed = {"x": x, "k": np.array(1, np.int64)}
    _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))
    with pytest.raises(ValueError, match=r"If node 'pick': its else_branch cannot run"):
        m(x=x, k=np.array(2, np.int64))


def _span(loc):
    return (loc.offset, loc.offset + loc.nbytes) if loc.kind == "workspace" else None


def test_loop_state_lives_across_the_loop_and_results_across_the_branch():
    from codegen.model.plan_control import IfItem, LoopItem, Steps, walk
    m = _build(cf.loop_with_if())
    run = m.run_list
    loops = [x for x in walk(run.block) if isinstance(x, LoopItem)]
    assert len(loops) == 1 and any(isinstance(x, IfItem) for x in walk(loops[0].body))
    state = [s for s in map(_span, [loops[0].iteration, loops[0].cond_in, *loops[0].carried,
                                    *(x for x in loops[0].out if x is not None)]) if s]
    inner = [run.steps[i] for x in walk(loops[0].body) if isinstance(x, Steps) for i in range(x.first, x.end)]
    assert inner
    for step in inner:                       # no body buffer overlaps the loop's state or results
        for a in (step.out, *step.scratch):
            s = _span(a)
            assert s is None or all(s[1] <= t[0] or t[1] <= s[0] for t in state)
