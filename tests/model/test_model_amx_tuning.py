"""Tuning the AMX tile kernels: ``extract_tasks`` on a target with AMX gives packed int8 dense layers / convs the
templates ``dense_int8_amx`` / ``conv2d_int8_amx`` and the bfloat16 ones ``dense_bf16_amx`` / ``conv2d_bf16_amx``
(a conv over few channels runs the vector rule and is tuned in its space, ``conv2d_int8_cpu``); every config's
block (rows or output columns x column blocks within the 8 tile registers) and tile order schedules its kernel
exactly as the default does, checked on any x86 host through the scalar stand-in of the micro-kernel and on
tiles where the host has AMX (outputs poisoned); every block's tile code compiles for Sapphire Rapids without
spilling a tile; the fallback config is the default rule; the cost model's features count the micro-kernel's
block."""
import platform
import re

import numpy as np
import pytest

import autotune
from autotune import features
import codegen
import tensorir as te
from autotune.kernel_templates import KernelTemplateTask, kernel_te
from codegen import jit
from codegen.target import Target, host, parse
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.registry import call
from tensorir.graph.schedules import cpu_amx, kernel_schedule
from tensorir.schedule.space import FallbackConfig
from tensorir.topi.x86 import amx

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
rng = np.random.default_rng(2830)
SPR = "llvm -mcpu=sapphirerapids -mattr=+avx512f,+avx512bw,+avx512vl,+avx512vnni,+avx512bf16,+amx-tile,+amx-int8,+amx-bf16"


def stand_in(monkeypatch) -> str:
    """This host's features and AMX, the micro-kernels replaced by the scalar IR taking the same arguments."""
    monkeypatch.setattr(cpu_amx, "dense_ir", amx.dense_ir_reference)
    monkeypatch.setattr(cpu_amx, "block_ir", amx.block_ir_reference)
    monkeypatch.setattr("codegen.amx.request_amx", lambda where: None)
    return f"llvm -mcpu={host().mcpu} -mattr=" + ",".join((*host().mattr, "+amx-tile", "+amx-int8", "+amx-bf16"))


def int8_graph() -> Graph:
    """A 2-d dense (64 rows, 6 column blocks), a 3-d one with its requantization, a conv over 64 channels and one
    over 3 (the vector rule's)."""
    x, v = Var("x", TensorType((64, 128), "uint8")), Var("v", TensorType((4, 8, 192), "uint8"))
    img, rgb = Var("img", TensorType((1, 64, 9, 9), "uint8")), Var("rgb", TensorType((1, 3, 9, 9), "uint8"))
    w = lambda *s: Const(rng.integers(-128, 128, s).astype(np.int8))
    d = call("qnn.dense", x, w(96, 128))
    q = call("cast", call("clip", call("round", call("multiply", call("cast", call("qnn.dense", v, w(64, 192)),
             dtype="float32"), Const(np.float32(0.002)))), a_min=0.0, a_max=255.0), dtype="uint8")
    c, c3 = (call("qnn.conv2d", i, w(32, i.type.shape[1], 3, 3), strides=(1, 1), padding=(1, 1, 1, 1),
                  input_zero_point=3) for i in (img, rgb))
    return Graph((x, v, img, rgb), (d, q, c, c3), (), ("d", "q", "c", "c3"))


def bf16_graph() -> Graph:
    """A bfloat16 dense, batch matmul and conv over 32 channels."""
    x, a, b = (Var(n, TensorType(s, "bfloat16")) for n, s in (("x", (48, 64)), ("a", (2, 40, 64)), ("b", (2, 32, 64))))
    img = Var("img", TensorType((1, 32, 7, 7), "bfloat16"))
    w = lambda *s: Const(rng.integers(-4, 5, s).astype("bfloat16"))
    outs = (call("nn.dense", x, w(64, 64)), call("nn.batch_matmul", a, b, transpose_b=True),
            call("nn.conv2d", img, w(32, 32, 3, 3), strides=(1, 1), padding=(1, 1, 1, 1)))
    return Graph((x, a, b, img), outs, (), ("d", "bm", "c"))


def _inputs(tensors):
    """Random inputs: integers over the type's range, bfloat16 small integers (every sum exact: any order, same bits)."""
    out = []
    for t in tensors:
        shape = [int(d) for d in t.shape]
        if np.dtype(t.dtype).kind in "iu":
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max + 1, shape).astype(t.dtype))
        else:
            out.append(rng.integers(-4, 5, shape).astype(t.dtype))
    return out


def _run(s, tensors, ins, n_out):
    f = codegen.build(s, tensors)
    outs = [np.full([int(d) for d in t.shape], 0x5A if np.dtype(t.dtype).kind in "iu" else np.nan, t.dtype)
            for t in tensors[-n_out:]]
    f(*ins, *outs)
    return outs


def _tasks(g, target):
    tasks, _ = autotune.extract_tasks(g, target=target, include_simple_tasks=False)
    return tasks


@pytest.mark.parametrize("target", ["llvm -mcpu=sapphirerapids", "llvm -mcpu=emeraldrapids"])
def test_amx_kernels_get_the_amx_templates(target):
    """On AMX targets (extraction only: any host); the conv over 3 channels runs the VNNI rule and is tuned in
    its space, ``conv2d_int8_cpu``."""
    names = sorted(t.name for t in _tasks(int8_graph(), target) if isinstance(t, KernelTemplateTask))
    assert names == ["conv2d_int8_amx", "conv2d_int8_cpu", "dense_int8_amx", "dense_int8_amx"], names
    names = sorted(t.name for t in _tasks(bf16_graph(), target) if isinstance(t, KernelTemplateTask))
    assert names == ["conv2d_bf16_amx", "dense_bf16_amx", "dense_bf16_amx"], names


def _check_configs(tasks, target, every: bool, part: tuple[int, int] = (0, 1)):
    """Each AMX task's configs (``every``: all of them, else one per block value, the orders alternating; ``part``
    ``(i, n)``: the i-th of every n, counted over all the tasks' configs) against its default schedule; the
    fallback config schedules the default rule (same origin, same loops)."""
    checked, position = 0, 0
    for task in (t for t in tasks if isinstance(t, KernelTemplateTask) and t.name.endswith("_amx")):
        tensors = task.compute_dag.tensors
        n_out = sum(1 for t in tensors if t.op.__class__.__name__ != "PlaceholderOp")
        ins = _inputs(tensors[:-n_out])
        with Target(target):
            kt = kernel_te(tensors, task.anchor_op)
            default, origin = kernel_schedule(kt, Target.current())
            assert origin["rule"].endswith("_amx") and "amx-tile" in origin["isa"], origin
            want = _run(default, tensors, ins, n_out)
            space = task.config_space
            blocks = space.space_map["block"].entities
            assert len(blocks) > 1 and space.space_map["order"].entities, task
            indices = range(len(space)) if every else [i + len(blocks) * (i % 2) for i in range(len(blocks))]
            indices = [index for n, index in enumerate(indices, position) if n % part[1] == part[0]]
            position += len(space) if every else len(blocks)
            for index in indices:
                cfg = space.get(index)
                got = _run(task.kernel_template.schedule(cfg, tensors), tensors, ins, n_out)
                for a, w in zip(got, want):
                    np.testing.assert_array_equal(a.view(np.uint8), w.view(np.uint8),
                                                  err_msg=f"{task.name} {task.kernel_name} config {cfg}")
                checked += 1
            fallback = task.kernel_template.schedule(FallbackConfig(), tensors)
            assert str(te.lower(fallback, tensors)) == str(te.lower(default, tensors))
    return checked


@pytest.mark.parametrize("make", [int8_graph, bf16_graph])
def test_every_block_of_the_amx_spaces_is_exact_through_the_stand_in(monkeypatch, make):
    target = stand_in(monkeypatch)
    assert _check_configs(_tasks(make(), target), target, every=False) >= 20


@pytest.mark.skipif(not {"amx-tile", "amx-int8", "amx-bf16"} <= host().features, reason="this host has no AMX")
@pytest.mark.parametrize("make", [int8_graph, bf16_graph])
@pytest.mark.parametrize("part", range(4))
def test_every_block_of_the_amx_spaces_is_exact_on_tiles(make, part):
    """A quarter of the blocks each (20 int8, 21 bf16)."""
    assert _check_configs(_tasks(make(), "llvm"), "llvm", every=False, part=(part, 4)) >= 5


@pytest.mark.parametrize("dot", [amx.TDPBUSD, amx.TDPBF16PS])
def test_every_block_that_fits_the_tile_registers_compiles_without_spilling_a_tile(dot):
    """Each shape of block (1 to 3 A tiles, a partial one, up to 6 column blocks; a reduction tail): its tiles
    stored once at the end, none to the stack; a block past the 8 registers is refused."""
    for rows in (16, 24, 32, 40, 48):
        for cb in range(1, 7):
            if not amx.tiles_fit(rows, cb):
                with pytest.raises(ValueError, match="not a tile block"):
                    amx.block_ir(rows, cb, 128)
                continue
            asm = jit.emit_assembly(amx.block_ir(rows, cb, 160, dot=dot), parse(SPR))
            stores = re.findall(r"tilestored\s+[^\n]*", asm)
            assert len(stores) == 2 * -(-rows // 16) * cb, (rows, cb, stores)   # the main steps' and the tail's
            assert not re.search(r"tile(stored|loadd)\s+[^\n]*%rsp", asm), (rows, cb)
            assert len(re.findall(rf"\b{dot.instruction}\b", asm)) == 2 * -(-rows // 16) * cb


def test_features_see_the_tile_blocks(monkeypatch):
    """A tile kernel's main store is its micro-kernel's calls: ``2 * MACs`` operations whatever the block (the
    epilogue's float operations are fewer), reading the data and the packed weights."""
    idx = {n: i for i, n in enumerate(features.FEATURE_NAMES)}
    for task in (t for t in _tasks(int8_graph(), stand_in(monkeypatch)) if isinstance(t, KernelTemplateTask)):
        todo = list(task.compute_dag.tensors)
        while not getattr((anchor := todo.pop()).op, "reduce_axis", None):
            todo += anchor.op.input_tensors
        macs = np.prod([int(d) for d in anchor.shape]) * np.prod([int(r.dom.extent) for r in anchor.op.reduce_axis])
        space = task.config_space
        for index in (0, len(space) // 2, len(space) - 1):
            v = features.extract_config(task, index)
            assert v[idx["g.failed"]] == 0
            assert v[idx["main.flops"]] == pytest.approx(np.log2(1 + 2 * macs)), (task.kernel_name, space.get(index))
