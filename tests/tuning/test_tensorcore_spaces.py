"""The tensor-core templates' config spaces over real models' kernels (ResNet-18, a BERT layer; float16 and bfloat16,
sm_90 and sm_80): every config of a space instantiates and the configs it filters out are those the template refuses,
so that a tuner never spends a trial on a config that cannot run (ResNet-18 at batch 1 on an H200 had three
convolutions whose 48 trials all failed: tiles that do not divide the GEMM, warps outside their blocks, row blocks
taller than a 7 x 7 map's 49 pixels).  Lowering is slow (0.1 s a config): a sample of each space is lowered."""
from __future__ import annotations

import random
import warnings

import pytest

import autotune
import tensorir as te
from autotune.kernel_templates import KernelTemplateTask
from autotune.tuner.tuner import Tuner
from tensorir import graph
from tensorir.graph import testing
from tensorir.schedule.space import InstantiationError

def _batch_matmul():
    """A batched MatMul ([12, 128, 64] x [12, 64, 128]: BERT's attention scores, unfused)."""
    from onnx import TensorProto, helper
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
          for n, s in (("a", [12, 128, 64]), ("b", [12, 64, 128]), ("y", [12, 128, 128]))]
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "bmm", io[:2], io[2:])
    return graph.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


MODELS = {"resnet18_b1": lambda: graph.from_onnx(testing.resnet18(batch=1)),
          "resnet18_b32": lambda: graph.from_onnx(testing.resnet18(batch=32)),
          "bert": lambda: graph.from_onnx(testing.bert_layer()), "batch_matmul": _batch_matmul}


def _tasks(model: str, dtype: str, target: str) -> list:
    g, params = MODELS[model]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks, _ = autotune.extract_tasks(graph.to_mixed_precision(g, dtype), params, target=target)
    return [t for t in tasks if isinstance(t, KernelTemplateTask)]


def _check_spaces(tasks, every: bool, lowered: int, refused: int, seed: int = 0) -> None:
    """Each task's default config is in its space; every config (``every``, else as many as ``refused``) instantiates,
    ``lowered`` of them (and the default) lower; ``refused`` of the indices the filter drops are refused by the template."""
    rng = random.Random(seed)
    assert tasks
    for task in tasks:
        space = task.config_space
        default = Tuner(task).default_index()
        assert default is not None and space.is_index_valid(default), task
        kept = [space.valid_index(k) for k in range(len(space))]
        for i in kept if every else rng.sample(kept, min(refused, len(kept))):
            task.instantiate(i)
        for i in [default] + rng.sample(kept, min(lowered, len(kept))):
            te.lower(*task.instantiate(i))
        dropped = set(range(space.range_length)) - set(kept)
        for i in rng.sample(sorted(dropped), min(refused, len(dropped))):
            with pytest.raises(InstantiationError):
                task.instantiate(i)


@pytest.mark.cuda_sim
def test_resnet18_b1_float16_spaces_instantiate():
    """The batch-1 run's failing tasks (7 x 7 maps: 49 pixels in 64 GEMM rows): whole spaces, a sample lowered."""
    tasks = _tasks("resnet18_b1", "float16", "cuda -arch=sm_90")
    assert len(tasks) == 13
    small = [t for t in tasks if len(t.config_space) <= 64]
    assert len(small) == 1 and len(tasks[0].config_space) > 64       # the others: the slow test
    _check_spaces(small, every=True, lowered=3, refused=32)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype,arch", [("float16", "sm_90"), ("bfloat16", "sm_80")])
def test_bert_gemm_spaces_instantiate(dtype, arch):
    """The GEMM template (with sm_90's wgmma knobs: 34560 combinations, about 800 kept)."""
    _check_spaces(_tasks("bert", dtype, f"cuda -arch={arch}"), every=False, lowered=2, refused=24)


@pytest.mark.slow
@pytest.mark.cuda_sim
@pytest.mark.parametrize("model,dtype", [("resnet18_b1", "float16"), ("resnet18_b32", "float16"), ("resnet18_b32", "bfloat16"),
                                         ("resnet18_b1", "bfloat16"), ("bert", "bfloat16")])
def test_model_spaces_instantiate_every_config(model, dtype):
    _check_spaces(_tasks(model, dtype, "cuda -arch=sm_90"), every=True, lowered=2, refused=64)


@pytest.mark.cuda_sim
def test_resnet18_tasks_measure_the_deployed_defaults():
    """Each task's default (a template's fallback config, a search task's default rule), recreated from its payload
    as a measuring worker does, is the kernel the model build deploys untuned: on sm_90 the convolutions' gathering
    wgmma loop where the rule takes it (the space's ``wgmma`` config), else its ``mma.sync`` tiles."""
    from autotune.task import Task
    from codegen.model.build import fused_graph, model_kernels
    from tensorir.graph.schedules import kernel_schedule
    from tensorir.schedule.space import FallbackConfig
    target = "cuda -arch=sm_90"
    g, params = graph.from_onnx(testing.resnet18(batch=1, image=64))
    g = graph.to_mixed_precision(g, "float16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks, _ = autotune.extract_tasks(g, params, target=target)
        kernels = {mk.kernel.name: mk for mk in model_kernels(fused_graph(g, params, target), target)}
    wgmma = 0
    for task in tasks:
        mk = kernels[task.kernel_name]
        deployed = str(te.lower(kernel_schedule(mk.te, target)[0], mk.te.args, name="k"))
        worker = Task.from_payload(task.payload())
        config = FallbackConfig() if isinstance(task, KernelTemplateTask) else worker.default_config()
        assert str(te.lower(*worker.instantiate(config), name="k")) == deployed, task.kernel_name
        wgmma += "tt_wgmma" in deployed
    assert wgmma


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("model,dtype,arch", [("resnet18_b32", "float16", "sm_90"), ("resnet18_b1", "bfloat16", "sm_80"),
                                              ("bert", "float16", "sm_90"), ("bert", "bfloat16", "sm_80"),
                                              ("batch_matmul", "float16", "sm_90"), ("batch_matmul", "bfloat16", "sm_80")])
def test_sampled_configs_build_to_cubin(model, dtype, arch):
    """Each task's default, a random config of its space and a swizzled one lower, print as CUDA C and compile with
    nvcc to a cubin (ptxas: registers, shared memory, the wgmma / mma PTX), as a tuner's builder does: a config that
    cannot build is filtered out of the space (``space_refusal``), never a failed trial (the audit of the conv, GEMM
    and batch matmul spaces, ResNet-18 at batch 1 and 32, a BERT layer, sm_80 / sm_90: swizzled conv blocks over
    two column tiles failed at lowering, their shared tiles' bounds clipped by min / max that isl's hull did not
    need: tests/backends/test_cuda_tensorcore_conv.py::test_conv_simulated_swizzled_column_tiles)."""
    import codegen
    from codegen.cuda.nvcc import nvcc_path
    if nvcc_path() is None:
        pytest.skip("nvcc not found")
    rng = random.Random(7)
    failed = []
    for task in _tasks(model, dtype, f"cuda -arch={arch}"):
        space = task.config_space
        kept = [space.valid_index(k) for k in range(len(space))]
        swizzled = [i for i in kept if space.get(i)["swizzle"].val > 1]        # blocks in groups of row tiles
        picks = [Tuner(task).default_index(), rng.choice(kept)] + rng.sample(swizzled, min(1, len(swizzled)))
        for i in dict.fromkeys(picks):
            try:
                codegen.build(*task.instantiate(i), target=task.target, name="k").compile("cubin")
            except Exception as e:  # noqa: BLE001 - every failure is collected and named
                failed.append(f"{task.kernel_name} {space.get(i)}: {type(e).__name__}: {str(e)[:300]}")
    assert not failed, "\n".join(failed)
