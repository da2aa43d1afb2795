"""Tuning the vector bf16 dense and conv (``vdpbf16ps`` with AVX512-BF16, else its plain form) and the int8 dense
of n-d data: ``extract_tasks`` gives the bf16 dense and batch matmul ``dense_bf16_cpu``, the bf16 conv (NCHW
output) ``conv2d_bf16_cpu``, a 3-d int8 dense ``dense_int8_cpu`` and an int8 conv of NCHW output
``conv2d_int8_cpu``; every sampled config schedules its kernel exactly as the default does (bfloat16 small
integers: every sum exact in float32, any order the same bits), outputs poisoned, for the host's instruction
set and the plain form.  On AMX targets (extraction checked on any host) the dense layers take the tile spaces
and these convs, under 64 channel bytes a tap, the vector spaces of the rule they run."""
import platform
import random

import numpy as np
import pytest

import autotune
from autotune.kernel_templates import KernelTemplateTask, kernel_te
from codegen.target import Target, host
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.registry import call
from tensorir.graph.schedules import kernel_schedule

from test_model_amx_tuning import _inputs, _run

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
rng = np.random.default_rng(2831)
PLAIN = f"llvm -mcpu={host().mcpu} -mattr=-avx512bf16,-avx512vnni,-avxvnni,-amx-tile,-amx-int8,-amx-bf16"
NATIVE = f"llvm -mcpu={host().mcpu} -mattr=-amx-tile,-amx-int8,-amx-bf16"


def graph() -> Graph:
    """A bfloat16 dense of 3-d data (24 rows, 3 column blocks), a batch matmul, a bfloat16 conv (NCHW output, 8
    columns), an int8 dense of 3-d data and an int8 conv of NCHW output."""
    x, a, b = (Var(n, TensorType(s, "bfloat16")) for n, s in (("x", (2, 12, 64)), ("a", (2, 20, 32)), ("b", (2, 16, 32))))
    img, v = Var("img", TensorType((1, 8, 8, 8), "bfloat16")), Var("v", TensorType((3, 8, 96), "uint8"))
    u = Var("u", TensorType((1, 16, 6, 6), "uint8"))
    bf16 = lambda *s: Const(rng.integers(-4, 5, s).astype("bfloat16"))
    outs = (call("nn.dense", x, bf16(48, 64)), call("nn.batch_matmul", a, b, transpose_b=True),
            call("nn.conv2d", img, bf16(32, 8, 3, 3), strides=(1, 1), padding=(1, 1, 1, 1)),
            call("qnn.dense", v, Const(rng.integers(-128, 128, (32, 96)).astype(np.int8))),
            call("qnn.conv2d", u, Const(rng.integers(-128, 128, (32, 16, 3, 3)).astype(np.int8)), strides=(1, 1),
                 padding=(1, 1, 1, 1), input_zero_point=3))
    return Graph((x, a, b, img, v, u), outs, (), ("d", "bm", "c", "q", "qc"))


@pytest.mark.parametrize("target", [NATIVE, PLAIN])
def test_every_sampled_config_of_the_dense_spaces_is_exact(target):
    if target == NATIVE and "avx512bf16" not in host().features:
        pytest.skip("this host has no AVX512-BF16")
    tasks, _ = autotune.extract_tasks(graph(), target=target, include_simple_tasks=False)
    names = sorted(t.name for t in tasks if isinstance(t, KernelTemplateTask))
    assert names == ["conv2d_bf16_cpu", "conv2d_int8_cpu", "dense_bf16_cpu", "dense_bf16_cpu", "dense_int8_cpu"], names
    random.seed(3)
    for task in (t for t in tasks if isinstance(t, KernelTemplateTask)):
        tensors = task.compute_dag.tensors
        n_out = sum(1 for t in tensors if t.op.__class__.__name__ != "PlaceholderOp")
        ins = _inputs(tensors[:-n_out])
        with Target(target):
            default, origin = kernel_schedule(kernel_te(tensors, task.anchor_op), Target.current())
            assert origin["rule"].startswith(("schedule_dense_pack_", "schedule_conv2d_pack_")), origin
            want = _run(default, tensors, ins, n_out)
            space = task.config_space
            for index in random.sample(range(len(space)), min(5, len(space))):
                got = _run(task.kernel_template.schedule(space.get(index), tensors), tensors, ins, n_out)
                for a, w in zip(got, want):
                    np.testing.assert_array_equal(a.view(np.uint8), w.view(np.uint8),
                                                  err_msg=f"{task.name} {task.kernel_name} config {space.get(index)}")


@pytest.mark.parametrize("target,conv_isa", [
    ("llvm -mcpu=emeraldrapids", {"bf16": ["avx512bf16"], "uint8": ["avx512vnni"]}),
    ("llvm -mcpu=sapphirerapids -mattr=-avx512bf16", {"bf16": [], "uint8": ["avx512vnni"]})])
def test_an_amx_target_tunes_its_few_channel_convs_in_the_vector_spaces(target, conv_isa):
    """Extraction only (any host): an AMX target's dense layers take the tile spaces; these convs (under 64 channel
    bytes a tap) run the vector rule and are tuned in its space, of the instruction set their default names."""
    tasks, _ = autotune.extract_tasks(graph(), target=target, include_simple_tasks=False)
    names = sorted(t.name for t in tasks if isinstance(t, KernelTemplateTask))
    assert names == ["conv2d_bf16_cpu", "conv2d_int8_cpu", "dense_bf16_amx", "dense_bf16_amx", "dense_int8_amx"], names
    with Target(target):
        for task in (t for t in tasks if t.name.startswith("conv2d_")):
            kt = kernel_te(task.compute_dag.tensors, task.anchor_op)
            origin = kernel_schedule(kt, Target.current())[1]
            want = conv_isa["bf16" if "bf16" in task.name else "uint8"]
            assert origin["rule"].endswith("_amx") and origin.get("isa", []) == want, origin
            assert sorted(task.kernel_template.entry().requires) == want, task
