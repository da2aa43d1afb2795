"""``conv2d_kernel_cuda``, the CUDA tuning template of fused convolution kernels, without a GPU.

``extract_tasks(g, params, "cuda")`` gives a small ResNet-18's conv kernels (conv + bias + ReLU, + residual
add, stride 2, 1x1 downsampling, padding a stage of its own, batch 2) the template's task and keeps an
auto-scheduler task, with the reason, for the kernels it does not fit (depthwise, dilated...).  Its
fallback config, the default CUDA rule's tiles, and random configs either are rejected by name or run
correctly on the CPU under tests/cuda_sim.py (numpy reference, NaN-poisoned outputs, fresh data); the
CUDA C of full-size ResNet layers compiles with nvcc within the block limits.  Deployment
(``apply_history_best(log)`` around ``build_model(g, "cuda")``) schedules a kernel with its template
record (the manifest and ``m.stats()`` say so) and the simulated model matches the CPU build; a short
tune by the task scheduler (nvcc builds, simulated runner) measures the fallback first and deploys its
fastest record.  tests/model/test_model_tuning_cuda_conv_template_gpu.py tunes on a real GPU."""
from __future__ import annotations

import json
import random
import time
import warnings

import cuda_sim
import numpy as np
import pytest

import autotune
import codegen
import tensorir as te
from autotune.kernel_templates import KernelTemplateTask, dag_json, match_template
from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.model_history import MissingRecordWarning
from autotune.record import append_records, make_record
from tensorir.schedule.space import FallbackConfig, InstantiationError
from autotune.task_extraction import KernelSearchTask
from autotune.templates.conv2d_cuda import conv2d_reference
from tensorir.graph.schedules.conv2d_direct import column_tiles, conv_geometry, fallback_tiles, rule_tiles
from tensorir import graph, topi

onnx = pytest.importorskip("onnx")

TEMPLATE = "conv2d_kernel_cuda"
REJECTED = ("threads per block", "bytes of shared memory")       # direct_config's reasons


@pytest.fixture(scope="module")
def resnet():
    """ResNet-18 at 32x32, 8 channels wide, batch 2: its kernels and their CUDA tasks."""
    from tensorir.graph import testing
    model = testing.resnet18(batch=2, image=32, width=8, classes=10)
    g, params = graph.from_onnx(model)
    tasks, weights = autotune.extract_tasks(g, params, target="cuda")
    return model, g, params, tasks, weights


def _describe(task) -> dict:
    """The convolution of a template task: batch, channels, filter size, stride, output size, epilogue."""
    tensors = task.compute_dag.tensors
    anchor = next(st.op for st in te.create_schedule(tensors[-1].op).stages if getattr(st.op, "reduce_axis", None))
    geo = conv_geometry(anchor)
    n, f, oh, _ = (int(d) for d in tensors[-1].shape)
    inputs = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    return {"N": n, "C": int(geo.filters.shape[1]), "F": f, "K": int(geo.filters.shape[2]), "stride": geo.stride,
            "OH": oh, "residual": len(inputs) == 4, "relu": "relu" in task.kernel_name}


def _find(tasks, **want):
    return next(t for t in tasks if isinstance(t, KernelTemplateTask) and
                all(_describe(t)[k] == v for k, v in want.items()))


def _numpy(desc, ins):
    """The kernel's outputs in numpy: conv (padding K // 2, as ResNet's) + bias [+ residual] [ReLU]."""
    x, w, b, *res = ins
    y = conv2d_reference(x, w, desc["stride"], desc["K"] // 2) + b[None, :, None, None]
    if res:
        y = y + res[0]
    return np.maximum(y, 0) if desc["relu"] else y


def _valid(task, n, seed, accept=lambda cfg: True) -> list[int]:
    """``n`` random configs of ``task`` that the template accepts and ``accept`` likes; every rejection
    must be one of the template's named ones (direct_config's block limits)."""
    rng, space, out = random.Random(seed), task.config_space, []
    for _ in range(3000):
        i = rng.randrange(len(space))
        if not accept(space.get(i)):
            continue
        try:
            task.instantiate(i)
        except InstantiationError as e:
            assert any(r in str(e) for r in REJECTED), str(e)
            continue
        out.append(i)
        if len(out) == n:
            return out
    raise AssertionError(f"fewer than {n} valid configs among 3000 draws of {task}")


KERNELS = {"stem_7x7_s2": {"K": 7, "stride": 2}, "3x3_residual": {"K": 3, "stride": 1, "residual": True},
           "3x3_s2": {"K": 3, "stride": 2}, "1x1_s2": {"K": 1, "stride": 2}}


# -- task extraction ------------------------------------------------------------------------------------------
def test_extract_gives_every_conv_kernel_the_template(resnet):
    from autotune.auto_scheduler import ComputeDAG
    from codegen.model.cuda import CUDA_COMPUTES
    from tensorir.graph import Kernel
    from tensorir.graph.lower_te import lower_kernel
    _, g, params, tasks, weights = resnet
    for t in tasks:
        conv = "conv2d" in t.kernel_name
        assert isinstance(t, KernelTemplateTask if conv else KernelSearchTask), t
        if conv:
            assert t.name == TEMPLATE and t.workload[0] == TEMPLATE and t.target.startswith("cuda")
            assert t.config_space.flop > 0 and len(t.config_space) > 1000
        else:   # the float32 dense kernel: the GEMM entry's space tunes 16-bit GEMMs (tensor cores)
            assert t.template_skipped is None or \
                t.template_skipped.startswith("gemm_tensorcore_cuda: float32 inputs"), t.template_skipped
    convs = [_describe(t) for t in tasks if isinstance(t, KernelTemplateTask)]
    kinds = {(d["K"], d["stride"]) for d in convs}
    assert {(7, 2), (3, 1), (3, 2), (1, 2)} <= kinds
    assert any(d["residual"] and d["relu"] for d in convs) and any(not d["relu"] for d in convs)
    assert {d["N"] for d in convs} == {2}
    fused = graph.optimize(g, params, target="cuda")
    built = {ComputeDAG(lower_kernel(n.op, CUDA_COMPUTES).args).hash for n in fused.nodes if isinstance(n.op, Kernel)}
    assert {t.compute_dag.hash for t in tasks} == built
    plain, plain_weights = autotune.extract_tasks(g, params, target="cuda", templates=False)
    assert all(isinstance(t, KernelSearchTask) for t in plain) and plain_weights == weights
    assert [t.compute_dag.hash for t in plain] == [t.compute_dag.hash for t in tasks]


def test_kernels_the_template_does_not_fit_keep_their_search_task():
    """Depthwise (a model's), grouped, dilated, NHWC, uneven strides, two reductions: why is said."""
    import graph_models as gm
    g, params = graph.from_onnx(gm.small_cnn(), {"N": 1})
    tasks, _ = autotune.extract_tasks(g, params, target="cuda")
    depthwise = [t for t in tasks if isinstance(t, KernelSearchTask) and t.anchor_op == "nn.conv2d"]
    assert len(depthwise) == 1 and "conv2d_kernel_cuda: a group_conv2d_nchw reduction" in depthwise[0].template_skipped
    assert sum(isinstance(t, KernelTemplateTask) for t in tasks) == 2        # the 3x3/2 and the 1x1 + residual

    X, W = te.placeholder((1, 8, 10, 10), name="X"), te.placeholder((16, 8, 3, 3), name="W")

    def why(out, *inputs, target="cuda"):
        tmpl, reason = match_template([*inputs, out], "nn.conv2d", target)
        assert tmpl is None
        return reason
    assert match_template([X, W, topi.nn.relu(topi.nn.conv2d_nchw(X, W, 1, 1, 1))], "nn.conv2d", "cuda")[0].name \
        == TEMPLATE
    assert match_template([X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)], "nn.conv2d", "llvm") == (None, None)
    assert "dilated" in why(topi.nn.conv2d_nchw(X, W, 1, 2, 2), X, W)
    assert "strides 1 x 2" in why(topi.nn.conv2d_nchw(X, W, (1, 2), 1, 1), X, W)
    G = te.placeholder((16, 4, 3, 3), name="G")
    assert "group_conv2d_nchw" in why(topi.nn.group_conv2d_nchw(X, G, 1, 1, 1, 2), X, G)
    XH, WH = te.placeholder((1, 10, 10, 8), name="XH"), te.placeholder((3, 3, 8, 16), name="WH")
    assert "conv2d_nhwc" in why(topi.nn.conv2d_nhwc(XH, WH, 1, 1, 1), XH, WH)
    assert "2 reduction stages" in why(topi.sum(topi.nn.conv2d_nchw(X, W, 1, 1, 1), axis=(2, 3)), X, W)
    XF, WF = (te.placeholder(t.shape, name=t.name, dtype="float16") for t in (X, W))
    assert "dtypes ['float16']" in why(topi.nn.conv2d_nchw(XF, WF, 1, 1, 1), XF, WF)


def test_fallback_config_is_the_default_rules_block(resnet):
    """Each conv task's fallback config is in its space and accepted; it launches the default CUDA rule's
    block (threads) and as many blocks (measured first, it is the default the tuner must beat), with
    more channel threads where the rule's block is under a warp (the 2 x 2 outputs of stage 3)."""
    from tensorir.graph.schedules import kernel_schedule
    from tensorir.graph.lower_te import KernelTE
    _, _, _, tasks, _ = resnet
    convs = [t for t in tasks if isinstance(t, KernelTemplateTask)]
    for t in convs:
        cfg = FallbackConfig()
        t.instantiate(cfg)
        assert t.config_space.index_from_values(cfg.knobs()) >= 0
    for t in [_find(convs, **kw) for kw in KERNELS.values()] + [_find(convs, OH=2, K=3, stride=1)]:
        s, args = t.instantiate(FallbackConfig())
        mine = codegen.build(s, args, target="cuda").launch
        tensors = t.compute_dag.tensors
        inputs = [x for x in tensors if isinstance(x.op, te.PlaceholderOp)]
        kt = KernelTE(None, inputs, [tensors[-1]], "nn.conv2d")
        rule = codegen.build(kernel_schedule(kt, "cuda")[0], list(tensors), target="cuda").launch
        if np.prod(rule.block) >= 32:
            assert mine.block == rule.block and np.prod(mine.grid) == np.prod(rule.grid), t.kernel_name
        else:
            assert mine.block[:2] == rule.block[:2] and mine.block[2] > rule.block[2] and np.prod(mine.block) >= 32


def test_fallback_tiles_divide_and_shrink_for_small_grids():
    """The rule's tiles (56 columns: 7 threads x 2; 4 x 4 channels at batch 32, fewer at batch 1 where
    the grid would be small); where the rule's tile leaves a tail, a divisor of the axis."""
    assert rule_tiles(32, 64, 56, 56, 64) == {"tile_f": [-1, 1, 4, 4], "tile_y": [-1, 1, 8, 1],
                                              "tile_x": [-1, 1, 7, 2], "tile_rc": [-1, 4]}
    assert fallback_tiles(1, 64, 56, 56, 64)["tile_f"] == [-1, 1, 4, 1]
    assert fallback_tiles(1, 512, 7, 7, 512)["tile_y"] == [-1, 1, 7, 1]
    odd = fallback_tiles(1, 12, 26, 13, 6)          # 13 columns: the rule takes 8 threads (a tail), here 1
    assert odd["tile_x"] == [-1, 1, 1, 1] and odd["tile_y"] == [-1, 1, 2, 1] and odd["tile_rc"] == [-1, 3]
    assert 12 % (odd["tile_f"][2] * odd["tile_f"][3]) == 0


def test_large_grids_take_column_tiles():
    """At batch 32 each thread computes a column of rows for 4 filters, double-buffered (7x7: 7 rows, one
    segment; 14x14 and 28x28: two segments of 7; 56x56: 8 rows, 14 columns of threads); the RGB stem
    and batch 1 keep the rule's tiles."""
    assert fallback_tiles(32, 512, 7, 7, 512) == {"tile_f": [-1, 2, 8, 2], "tile_y": [-1, 1, 1, 7],
                                                  "tile_x": [-1, 1, 7, 1], "tile_rc": [-1, 2], "double_buffer": True}
    assert fallback_tiles(32, 256, 14, 14, 128)["tile_y"] == [-1, 1, 2, 7]
    assert fallback_tiles(32, 128, 28, 28, 128)["tile_y"] == [-1, 1, 2, 7]
    assert fallback_tiles(32, 64, 56, 56, 64)["tile_x"] == [-1, 1, 14, 1]
    assert column_tiles(32, 64, 112, 112, 3) is None and column_tiles(1, 512, 7, 7, 512) is None
    assert fallback_tiles(1, 512, 7, 7, 512) == rule_tiles(1, 512, 7, 7, 512)


@pytest.mark.cuda_sim
def test_column_tile_fallback_computes_the_layer_on_the_simulated_gpu():
    """The fallback of a batch-32 7x7 layer (16 input channels, so the simulation stays short): double
    buffered, one block per image and 32 filters, checked against numpy on NaN-poisoned outputs."""
    t = _resnet_layer(n=32, c=16, f=256, hw=7, residual=True)
    cfg = FallbackConfig()
    s, args = t.instantiate(cfg)
    assert cfg.knobs()["double_buffer"] and cfg.knobs()["tile_y"] == [-1, 1, 1, 7]
    mod = codegen.build(s, args, target="cuda")
    assert tuple(mod.launch.block) == (7, 1, 8) and int(np.prod(mod.launch.grid)) == 32 * 256 // 32
    rng = np.random.default_rng()
    ins = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in mod.signature.args if not a.written]
    outs = [np.empty(a.shape, a.dtype) for a in mod.signature.args if a.written]
    desc = {"stride": 1, "K": 3, "relu": True}
    cuda_sim.check(mod, ins, outs, lambda *x: _numpy(desc, x), rtol=1e-4, atol=1e-4)


# -- configs: rejected by name, or correct ----------------------------------------------------------------------
STATIC_ONLY = "cuda -arch=sm_90 -max_shared_memory_per_block=49152"   # no dynamic shared memory


def _resnet_layer(n=32, c=64, f=64, hw=56, k=3, stride=1, residual=True, target="cuda -arch=sm_90"):
    """A full-size ResNet-18 layer as build_model lowers it: padded input, conv, bias, [residual], ReLU."""
    X = te.placeholder((n, c, hw, hw), name="p0")
    W = te.placeholder((f, c, k, k), name="p1")
    B = te.placeholder((f,), name="p2")
    conv = topi.nn.conv2d_nchw(X, W, stride, k // 2, 1)
    ins = [X, W, B]
    if residual:
        R = te.placeholder(tuple(conv.shape), name="p3")
        ins.append(R)
        out = te.compute(conv.shape, lambda b, o, y, x: te.max(conv[b, o, y, x] + B[o] + R[b, o, y, x], 0.0),
                         name="T_relu")
    else:
        out = te.compute(conv.shape, lambda b, o, y, x: conv[b, o, y, x] + B[o], name="T_add")
    return autotune.task.create(TEMPLATE, (dag_json([*ins, out]),), target=target)


def _knobs(task, **change) -> int:
    """The index of the fallback config with ``change``d knobs."""
    cfg = FallbackConfig()
    task.instantiate(cfg)
    return task.config_space.index_from_values({**cfg.knobs(), **change})


def test_configs_over_the_block_limits_are_rejected_by_name():
    t = _resnet_layer()
    cases = [({"tile_y": [-1, 1, 8, 7], "tile_x": [-1, 1, 8, 7], "tile_rc": [-1, 64]}, r"bytes of shared memory"),
             ({"tile_f": [-1, 1, 32, 1], "tile_y": [-1, 1, 8, 1], "tile_x": [-1, 1, 8, 1]}, r"2048 threads .*\(> 1024\)"),
             ({"tile_f": [-1, 1, 1, 4], "tile_y": [-1, 1, 2, 1], "tile_x": [-1, 1, 2, 1]}, r"4 threads per block \(< 32")]
    for change, message in cases:
        with pytest.raises(InstantiationError, match=message):
            t.instantiate(_knobs(t, **change))
    doubled = dict(tile_y=[-1, 1, 4, 2], tile_x=[-1, 1, 7, 4], tile_rc=[-1, 16], double_buffer=True)
    static = _resnet_layer(target=STATIC_ONLY)
    with pytest.raises(InstantiationError, match="shared memory"):           # double buffering doubles it
        static.instantiate(_knobs(static, **doubled))
    static.instantiate(_knobs(static, **{**doubled, "double_buffer": False}))
    s, args = t.instantiate(_knobs(t, **doubled))                             # sm_90: dynamic shared memory
    assert codegen.build(s, args, target=t.target).kernels[0].dynamic_shared > 48 * 1024


@pytest.mark.nvcc
@pytest.mark.parametrize("layer", [{}, {"c": 64, "f": 128, "hw": 56, "k": 1, "stride": 2, "residual": False}],
                         ids=["3x3_residual_b32", "1x1_stride2_b32"])
def test_full_size_resnet_layers_compile_within_the_limits(layer):
    """The fallback and random configs (one double-buffered) of a batch-32 ResNet layer: PTX from nvcc,
    the block the config asks for, and the shared memory ptxas reports is the template's estimate (its
    48 KiB check is exact): the shared tiles are one block's, not the batch's."""
    import math
    t = _resnet_layer(**layer, target=STATIC_ONLY)
    stride = layer.get("stride", 1)
    db = _valid(t, 1, seed=3, accept=lambda c: c["double_buffer"].val and c["auto_unroll_max_step"].val < 1500)
    for i in [_knobs(t)] + db + _valid(t, 1, seed=7, accept=lambda c: c["auto_unroll_max_step"].val == 0):
        c = t.config_space.get(i)
        mod = codegen.build(*t.instantiate(i), target=t.target, name=f"conv_kernel_{i}")
        assert ".entry" in mod.get_source("ptx")
        assert tuple(mod.launch.block) == tuple(c[n].size[2] for n in ("tile_x", "tile_y", "tile_f"))
        by, bx, bf = (math.prod(c[n].size[1:]) for n in ("tile_y", "tile_x", "tile_f"))
        rc, ry, rx = (c[n].size[-1] for n in ("tile_rc", "tile_ry", "tile_rx"))
        window = ((by - 1) * stride + ry) * ((bx - 1) * stride + rx)
        estimate = 4 * rc * (window + bf * ry * rx) * (2 if c["double_buffer"].val else 1)
        assert mod.resource_usage["shared_bytes"] == estimate <= 48 * 1024, c.knobs()


@pytest.mark.cuda_sim
@pytest.mark.parametrize("which", list(KERNELS))
def test_configs_compute_the_kernel_on_the_simulated_gpu(resnet, which):
    """The fallback config and random configs (one double-buffered, with the filter window split where
    it has one) run on the CPU simulator against numpy, outputs NaN-poisoned, fresh data each."""
    _, _, _, tasks, _ = resnet
    t = _find(tasks, **KERNELS[which])
    desc = _describe(t)
    k = desc["K"]
    split = (lambda c: c["tile_ry"].size[-1] < k or c["tile_rx"].size[-1] < k) if k > 1 else (lambda c: True)
    configs = [None] + _valid(t, 1, seed=1) + _valid(t, 1, seed=2, accept=lambda c: c["double_buffer"].val and split(c))
    rng = np.random.default_rng()
    for i in configs:
        s, args = t.instantiate(FallbackConfig() if i is None else i)
        mod = codegen.build(s, args, target="cuda")
        sig = mod.signature
        ins = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in sig.args if not a.written]
        outs = [np.empty(a.shape, a.dtype) for a in sig.args if a.written]
        assert ins[0].shape[:2] == (2, desc["C"]) and ins[1].shape == (desc["F"], desc["C"], k, k)
        cuda_sim.check(mod, ins, outs, lambda *x: _numpy(desc, x), rtol=1e-4, atol=1e-4)


# -- deployment ---------------------------------------------------------------------------------------------
def _write_record(log, task, index, cost=1e-5):
    res = MeasureResult((cost,), MeasureErrorNo.NO_ERROR, 0.1, time.time())
    append_records(log, [make_record(MeasureInput(task, task.config_space.get(index)), res)])


@pytest.mark.cuda_sim
def test_deploy_schedules_the_kernel_with_its_template_record(resnet, tmp_path):
    """A log with one hand-written record of the residual conv kernel: build_model(g, "cuda") inside
    apply_history_best schedules both kernels of that DAG with the record's config (the CUDA C of the
    config built alone, its block), the manifest and stats() name the record, the other kernels keep
    their default; the model simulated on the CPU matches the CPU build."""
    _, g, params, tasks, weights = resnet
    t = _find(tasks, K=3, stride=1, residual=True)
    (index,) = _valid(t, 1, seed=5, accept=lambda c: c["double_buffer"].val and c["tile_f"].size[2] > 1)
    cfg = t.config_space.get(index)
    fallback = codegen.build(*t.instantiate(FallbackConfig()), target="cuda").launch.block
    log = str(tmp_path / "conv.jsonl")
    _write_record(log, t, index)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, "cuda", params)
    assert any(issubclass(w.category, MissingRecordWarning) for w in caught)
    templated = [s for s in m.run_list.steps if s.schedule["kind"] == "template"]
    assert len(templated) == weights[tasks.index(t)] == 2
    for step in templated:
        origin = step.schedule
        assert origin["template"] == TEMPLATE and origin["log"] == log and len(origin["log_sha256"]) == 64
        assert origin["record"]["config_index"] == index and origin["record"]["cost"] == 1e-5
        assert origin["record"]["dag_hash"] == t.compute_dag.hash
        kernel = m.kernels[step.symbol]
        assert kernel.source == codegen.build(*t.instantiate(index), target="cuda", name=step.symbol).get_source()
        assert tuple(kernel.block) == tuple(cfg[k].size[2] for k in ("tile_x", "tile_y", "tile_f")) != fallback
    assert all(s.schedule["kind"] == "default" for s in m.run_list.steps if all(s is not x for x in templated))
    schedules = m.stats()["schedules"]
    assert sum(kind == "template" for kind in schedules.values()) == 2
    assert {schedules[s.kernel] for s in templated} == {"template"}
    m.export_library(str(tmp_path / "out"))
    with open(tmp_path / "out" / "manifest.json") as f:
        named = {k["kernel"]: k["schedule"] for k in json.load(f)["kernels"]}
    assert all(named[s.kernel]["kind"] == "template" and named[s.kernel]["record"]["config_index"] == index
               for s in templated)
    from test_model_cuda import simulate
    x = np.random.default_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    cpu = codegen.build_model(g, "llvm", params)
    for b in cpu.buffers:
        b.fill(np.nan)
    (want,) = cpu(data=x)
    (got,) = simulate(m, {"data": x})
    assert np.isfinite(got).all() and np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_scheduler_tunes_a_conv_kernel_with_the_template(resnet, tmp_path):
    """The task scheduler's flow with nvcc builds and a simulated GPU runner (each candidate run on the
    CPU against the template's reference): the fallback config measured first, no wrong answers; the
    fastest record deployed (tests/model/test_model_tuning_cuda_conv_template_gpu.py does this on a GPU)."""
    _, g, params, tasks, weights = resnet
    t = _find(tasks, K=3, stride=2)
    runner = cuda_sim.SimulatedGPU(lambda *x: t.template.reference(*x, args=t.args), atol=1e-4)
    log = str(tmp_path / "tuned.jsonl")
    sched = autotune.TaskScheduler([t], [weights[tasks.index(t)]], verbose=0)
    sched.tune(6, measure_option=autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1, timeout=120),
                                                         runner=runner), log=log, num_measures_per_round=3,
               progress=False)
    with open(log) as f:
        recs = [json.loads(x) for x in f if x.strip()]
    assert len(recs) == sched.total_trials == 6
    assert all(e.startswith("InstantiationError") and any(r in e for r in REJECTED) for e in runner.errors)
    default, recs = recs[0], recs[1:]           # the kernel's default rule first (the untuned build's schedule)
    assert default["workload"][0] == "auto_scheduler" and "default" in default["config"]["knobs"]
    cfg = FallbackConfig()
    t.instantiate(cfg)
    assert recs[0]["config"]["index"] == t.config_space.index_from_values(cfg.knobs())      # then the fallback
    ok = [r for r in recs if r["result"]["error_no"] == 0]
    assert recs[0] in ok and len(runner.blocks) == len(ok) + (default["result"]["error_no"] == 0)
    assert {r["result"]["error"] for r in recs if r not in ok} <= {"INSTANTIATION_ERROR"}
    fastest = min(ok, key=lambda r: r["result"]["costs"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, "cuda", params)
    if default["result"]["error_no"] == 0 and default["result"]["costs"][0] < fastest["result"]["costs"][0]:
        assert any(s.schedule["kind"] == "default" and s.schedule.get("measured") for s in m.run_list.steps)
        return
    (step,) = [s for s in m.run_list.steps if s.schedule["kind"] == "template"]
    assert step.schedule["record"]["config_index"] == fastest["config"]["index"]
