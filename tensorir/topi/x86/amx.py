"""AMX tiles (Sapphire/Emerald Rapids) for the packed int8 and bfloat16 dense and conv: ``tdpbusd`` /
``tdpbf16ps`` (an :class:`AmxDot`) on a block of rows x columns over the whole reduction (32 x 32 by default; any
block whose tiles fit the 8 tile registers, :func:`tiles_fit`, for the tuning spaces), a tensor
intrinsic whose body calls one generated LLVM IR function.

The weights are packed ``NK16n4k`` for ``vpdpbusd`` / ``NK16n2k`` for ``vdpbf16ps`` (:mod:`..nn.qnn`), which are
AMX's B-tile layouts: one column block's 16 rows of 4 reduction bytes (4 int8, 2 bfloat16) by 16 columns are
1 KiB, contiguous.  The IR below counts the reduction in bytes (64 a step: 64 int8 or 32 bfloat16).  The micro-kernel holds the
accumulators (2 x 2 tiles of 16 rows x 16 int32 by default) in tile registers over the reduction, 64 bytes a step
(A tiles: up to 16 rows x 64 bytes of the data, stride its row; B tiles: 16 x 64 bytes, all loaded before the
dots where they fit the registers beside the others, else each just before its dots), then stores them; a
reduction that is not a multiple of 64 ends in a second function with the remainder's tile shapes.  The
functions use LLVM's shaped intrinsics (``llvm.x86.tileloadd64.internal``, ``tdpbusd.internal``,
``tilestored64.internal``, ``tilezero.internal``): LLVM writes the 64-byte palette-1 configuration and
``ldtilecfg`` at each function's entry and ``tilerelease`` at its exit, so each call is self-contained
(``noinline``: each keeps its own configuration).  Linux grants a process the tile data state only on request
(``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``): the runtime asks once before any AMX code runs
(:mod:`codegen.amx`).

``tdpbusd`` sums u8 x s8 products into int32 lanes with wrapping, as ``vpdpbusd`` does: exact for reductions
below 66,000.  ``tdpbf16ps`` (Intel SDM, TDPBF16PS) accumulates bfloat16 products (exact in float32) in float32
with round-to-nearest-even at each accumulation, whatever MXCSR says, treating subnormal inputs as zero and
flushing subnormal results; its pseudo-code keeps the even and odd products of each pair in separate sums over
a 32-element step and adds both to the accumulator at its end, an order unlike ``vdpbf16ps``'s (odd then even
product per pair, :mod:`.bf16_intrin`): the results differ in the last bits of the float32 sums, both within
K float32 roundings of the exact sum.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...buffer import decl_buffer
from ...expr import const, var
from ...extern import call_extern
from ...reduce import sum as rsum
from ...tensor import compute, placeholder, reduce_axis
from ...tensor_intrin import TensorIntrin, decl_tensor_intrin
from ..nn.utils import scaled



@dataclass(frozen=True)
class AmxDot:
    """One tile dot product: its instruction, the LLVM features it needs, operand and accumulator types, the
    reduction elements of one 4-byte pair / quad (``group``) and its kernels' name tag."""
    instruction: str
    features: tuple
    a_dtype: str
    b_dtype: str
    acc_dtype: str
    group: int
    tag: str

    @property
    def bytes(self) -> int:
        """Bytes of one reduction element."""
        return 4 // self.group


TDPBUSD = AmxDot("tdpbusd", ("amx-tile", "amx-int8"), "uint8", "int8", "int32", 4, "u8s8s32")
TDPBF16PS = AmxDot("tdpbf16ps", ("amx-tile", "amx-bf16"), "bfloat16", "bfloat16", "float32", 2, "bf16f32")
#: LLVM's features an AMX int8 / bf16 kernel needs
AMX_INT8, AMX_BF16 = TDPBUSD.features, TDPBF16PS.features
#: the default rules' block: rows (two A tiles of 16) and column blocks of 16 (two B tiles)
MAX_ROWS, MAX_COL_BLOCKS = 32, 2
TILE_REGISTERS = 8  # tmm0-7
_STEP = 64          # reduction bytes of one tile product (a full A tile row)


def tiles_fit(rows: int, col_blocks: int) -> bool:
    """Whether a block of ``rows`` x ``col_blocks`` column blocks keeps its accumulators, its A tiles and one B
    tile in the 8 tile registers (each B tile then loaded just before its dots): 32 x 2 blocks, 16 x 6, 48 x 1."""
    r = -(-rows // 16)
    return rows > 0 and col_blocks > 0 and r * col_blocks + r + 1 <= TILE_REGISTERS


def _decls(dot: AmxDot) -> str:
    return f"""declare x86_amx @llvm.x86.tileloadd64.internal(i16, i16, ptr, i64)
declare x86_amx @llvm.x86.{dot.instruction}.internal(i16, i16, i16, x86_amx, x86_amx, x86_amx)
declare void @llvm.x86.tilestored64.internal(i16, i16, ptr, i64, x86_amx)
declare x86_amx @llvm.x86.tilezero.internal(i16, i16)
"""


def _row_tiles(rows: int) -> list[int]:
    return [16] * (rows // 16) + ([rows % 16] if rows % 16 else [])


def kernel_name(rows: int, col_blocks: int, k: int, taps: tuple = (1, 1), dot: AmxDot = TDPBUSD) -> str:
    """The micro-kernel's name (``k``: reduction bytes a tap)."""
    conv = f"_t{taps[0]}x{taps[1]}" if taps != (1, 1) else ""
    return f"tiletune_amx_{dot.tag}_m{rows}_n{col_blocks * 16}_k{k}{conv}"


_NAME = re.compile(r"tiletune_amx_(\w+?)_m(\d+)_n(\d+)_k(\d+)(?:_t(\d+)x(\d+))?")
_DOTS = {d.tag: d for d in (TDPBUSD, TDPBF16PS)}


def block_ops(name: str) -> int | None:
    """The operations (multiplies and adds) of one call of the micro-kernel ``name`` (:func:`kernel_name`), None
    for another function: what the cost model's features count for the call."""
    found = _NAME.fullmatch(name)
    if found is None or found.group(1) not in _DOTS:
        return None
    rows, cols, k, th, tw = (int(g or 1) for g in found.groups()[1:])
    return 2 * rows * cols * (k // _DOTS[found.group(1)].bytes) * th * tw


#: the micro-kernel's arguments (byte strides): C and its row / column-block strides, A and its row / tap-row /
#: tap-column strides, B and its column-block / 4-byte-row / tap-row / tap-column strides
ARGS = ("ptr %c, i64 %ldc, i64 %cblock, ptr %a, i64 %lda, i64 %aty, i64 %atx, "
        "ptr %b, i64 %bblock, i64 %brow, i64 %bty, i64 %btx")


def _function(name: str, rows: int, col_blocks: int, taps: tuple, chunks: int, kbytes: int, accumulate: bool,
              dot: AmxDot) -> str:
    """``i32 name(ARGS)``: C[rows, col_blocks * 16] (+)= the sum over ``taps`` (kernel rows x columns, each at
    its tap offsets) and ``chunks`` reduction steps of ``kbytes`` bytes of A x B."""
    rt = _row_tiles(rows)
    cs = [(r, j) for r in range(len(rt)) for j in range(col_blocks)]
    body = ["entry:"]
    for r, j in cs:
        body += [f"  %cr{r}{j} = mul i64 {r * 16}, %ldc", f"  %cj{r}{j} = mul i64 {j}, %cblock",
                 f"  %coff{r}{j} = add i64 %cr{r}{j}, %cj{r}{j}", f"  %pc{r}{j} = getelementptr i8, ptr %c, i64 %coff{r}{j}"]
        body.append(f"  %z{r}{j} = call x86_amx @llvm.x86.tileloadd64.internal(i16 {rt[r]}, i16 64, ptr %pc{r}{j}, "
                    f"i64 %ldc)" if accumulate else
                    f"  %z{r}{j} = call x86_amx @llvm.x86.tilezero.internal(i16 {rt[r]}, i16 64)")
    body += ["  br label %loop", "loop:", "  %s = phi i64 [0, %entry], [%s1, %loop]"]
    body += [f"  %acc{r}{j} = phi x86_amx [%z{r}{j}, %entry], [%d{r}{j}, %loop]" for r, j in cs]
    body += [f"  %ry = udiv i64 %s, {taps[1] * chunks}", f"  %sx = udiv i64 %s, {chunks}",
             f"  %rx = urem i64 %sx, {taps[1]}", f"  %ci = urem i64 %s, {chunks}",
             "  %aoy = mul i64 %ry, %aty", "  %aox = mul i64 %rx, %atx", "  %aot = add i64 %aoy, %aox",
             f"  %aoc = mul i64 %ci, {kbytes}", "  %ak = add i64 %aot, %aoc",
             "  %boy = mul i64 %ry, %bty", "  %box = mul i64 %rx, %btx", "  %bot = add i64 %boy, %box",
             f"  %bkr = mul i64 %ci, {kbytes // 4}", "  %boc = mul i64 %bkr, %brow", "  %bk = add i64 %bot, %boc"]
    for r in range(len(rt)):
        body += [f"  %ar{r} = mul i64 {r * 16}, %lda", f"  %ao{r} = add i64 %ar{r}, %ak",
                 f"  %pa{r} = getelementptr i8, ptr %a, i64 %ao{r}",
                 f"  %ta{r} = call x86_amx @llvm.x86.tileloadd64.internal(i16 {rt[r]}, i16 {kbytes}, ptr %pa{r}, "
                 f"i64 %lda)"]
    dot_ = lambda r, j: (f"  %d{r}{j} = call x86_amx @llvm.x86.{dot.instruction}.internal(i16 {rt[r]}, i16 64, "
                         f"i16 {kbytes}, x86_amx %acc{r}{j}, x86_amx %ta{r}, x86_amx %tb{j})")
    every_b = len(cs) + len(rt) + col_blocks <= TILE_REGISTERS   # all B tiles live at once (the default 2 x 2)
    for j in range(col_blocks):     # else each B tile just before its dots: one B register live
        body += [f"  %bj{j} = mul i64 {j}, %bblock", f"  %bo{j} = add i64 %bj{j}, %bk",
                 f"  %pb{j} = getelementptr i8, ptr %b, i64 %bo{j}",
                 f"  %tb{j} = call x86_amx @llvm.x86.tileloadd64.internal(i16 {kbytes // 4}, i16 64, ptr %pb{j}, "
                 f"i64 %brow)"] + ([] if every_b else [dot_(r, j) for r in range(len(rt))])
    body += [dot_(r, j) for r, j in cs] if every_b else []
    body += ["  %s1 = add i64 %s, 1", f"  %done = icmp eq i64 %s1, {taps[0] * taps[1] * chunks}",
             "  br i1 %done, label %exit, label %loop", "exit:"]
    body += [f"  call void @llvm.x86.tilestored64.internal(i16 {rt[r]}, i16 64, ptr %pc{r}{j}, i64 %ldc, "
             f"x86_amx %d{r}{j})" for r, j in cs]
    body.append("  ret i32 0")
    return f"define linkonce_odr i32 @{name}({ARGS}) noinline nounwind {{\n" + "\n".join(body) + "\n}\n"


def block_ir(rows: int, col_blocks: int, k: int, taps: tuple = (1, 1), dot: AmxDot = TDPBUSD) -> str:
    """The LLVM IR of :func:`kernel_name` (a block :func:`tiles_fit`, ``k`` bytes a multiple of 4 per tap):
    every tap's full 64-byte steps, then (where ``k % 64``) every tap's remainder in a second function (its own
    tile shapes), called with the stored accumulators (int32 or float32, stored exactly)."""
    if not (tiles_fit(rows, col_blocks) and k > 0 and k % 4 == 0):
        raise ValueError(f"amx block: {rows} rows x {col_blocks} column blocks x {k} bytes is not a tile block")
    name, full, rest = kernel_name(rows, col_blocks, k, taps, dot), k // _STEP, k % _STEP
    if not rest:
        return _decls(dot) + _function(name, rows, col_blocks, taps, full, _STEP, False, dot)
    if not full:
        return _decls(dot) + _function(name, rows, col_blocks, taps, 1, rest, False, dot)
    main, tail = _function(name + "_main", rows, col_blocks, taps, full, _STEP, False, dot), \
        _function(name + "_tail", rows, col_blocks, taps, 1, rest, True, dot)
    call = lambda f, a, b: (f"  %{f} = call i32 @{name}_{f}(ptr %c, i64 %ldc, i64 %cblock, ptr {a}, i64 %lda, "
                            f"i64 %aty, i64 %atx, ptr {b}, i64 %bblock, i64 %brow, i64 %bty, i64 %btx)")
    return (_decls(dot) + main + tail + f"define linkonce_odr i32 @{name}({ARGS}) alwaysinline nounwind {{\nentry:\n"
            + call("main", "%a", "%b") + f"\n  %a2 = getelementptr i8, ptr %a, i64 {full * _STEP}\n"
            f"  %b2o = mul i64 %brow, {full * _STEP // 4}\n  %b2 = getelementptr i8, ptr %b, i64 %b2o\n"
            + call("tail", "%a2", "%b2") + "\n  ret i32 0\n}\n")


def dense_ir(rows: int, col_blocks: int, k: int, dot: AmxDot = TDPBUSD) -> str:
    """:func:`block_ir` of the dense (one tap)."""
    return block_ir(rows, col_blocks, k, dot=dot)


def _i64(e, size: int = 1):
    return const(e * size, "int64") if isinstance(e, int) else (e * size).astype("int64")


def _call(dot: AmxDot, name: str, bc, c_row, c_block, ba, a_row, a_ty, a_tx, bb, b_block, b_row, b_ty, b_tx):
    """The micro-kernel's call: element strides as byte strides (accumulators 4 bytes, operands ``dot.bytes``)."""
    e = dot.bytes
    return call_extern("int32", name, bc.access_ptr("w"), _i64(c_row, 4), _i64(c_block, 4), ba.access_ptr("r"),
                       _i64(a_row, e), _i64(a_ty, e), _i64(a_tx, e), bb.access_ptr("r"), _i64(b_block, e),
                       _i64(b_row, e), _i64(b_ty, e), _i64(b_tx, e))


def dense_amx(rows: int, col_blocks: int, k: int, dot: AmxDot = TDPBUSD) -> TensorIntrin:
    """``c[i, jo, ji] = sum_{ko, ki} a[i, ko * g + ki] * b[jo, ko, ji * g + ki]`` (``dot``'s operands, its
    accumulator, ``g = dot.group``) over a block of ``rows`` x ``col_blocks`` x 16 and the whole reduction of
    ``k`` elements: the body calls :func:`dense_ir`'s function (import it with ``pragma(axis, "import_llvm",
    dense_ir(rows, col_blocks, k * dot.bytes, dot))``)."""
    g = dot.group
    a = placeholder((rows, k), dtype=dot.a_dtype, name="a")
    b = placeholder((col_blocks, k // g, 16 * g), dtype=dot.b_dtype, name="b")
    ko, ki = reduce_axis((0, k // g), name="ko"), reduce_axis((0, g), name="ki")
    c = compute((rows, col_blocks, 16), lambda i, jo, ji: rsum(
        a[i, ko * g + ki].astype(dot.acc_dtype) * b[jo, ko, ji * g + ki].astype(dot.acc_dtype), axis=[ko, ki]),
        name="c")
    bufs = {a: decl_buffer(a.shape, a.dtype, "A", strides=[var("a_s0"), 1], offset_factor=1),
            b: decl_buffer(b.shape, b.dtype, "B", strides=[var("b_s0"), var("b_s1"), 1], offset_factor=1),
            c: decl_buffer(c.shape, c.dtype, "C", strides=[var("c_s0"), var("c_s1"), 1], offset_factor=1)}
    name = kernel_name(rows, col_blocks, k * dot.bytes, dot=dot)

    def body(ins, outs):
        (ba, bb), (bc,) = ins, outs
        return _call(dot, name, bc, bc.strides[0], bc.strides[1], ba, ba.strides[0], 0, 0,
                     bb, bb.strides[0], bb.strides[1], 0, 0)
    return decl_tensor_intrin(c.op, body, name=name, binds=bufs)


def conv_amx(rows: int, col_blocks: int, groups: int, taps: tuple, strides: tuple, dilation: tuple,
             dot: AmxDot = TDPBUSD) -> TensorIntrin:
    """The packed conv's block (:func:`..nn.qnn.conv2d_pack_int8` / ``conv2d_pack_bf16``): ``c[jo, 0, x, ji] =
    sum_{ico, ry, rx, ici} a[ry * dh, x * sw + rx * dw, ico, ici] * b[jo, ico, ry, rx, ji * g + ici]`` for
    ``rows`` output columns of one output row x ``col_blocks`` x 16 channels over the whole reduction
    (``groups`` blocks of ``g = dot.group`` channels, kernel ``taps``): the body calls :func:`block_ir` (``k =
    4 * groups`` bytes, ``taps``, ``dot``)'s function."""
    (kh, kw), (sh, stride), (dh, dw), g = taps, strides, dilation, dot.group
    a = placeholder(((kh - 1) * dh + 1, (rows - 1) * stride + (kw - 1) * dw + 1, groups, g), dtype=dot.a_dtype,
                    name="a")
    b = placeholder((col_blocks, groups, kh, kw, 16 * g), dtype=dot.b_dtype, name="b")
    ico, ici = reduce_axis((0, groups), name="ic_outer"), reduce_axis((0, g), name="ic_inner")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    c = compute((col_blocks, 1, rows, 16), lambda jo, y, x, ji: rsum(
        a[scaled(y, sh) + scaled(ry, dh), scaled(x, stride) + scaled(rx, dw), ico, ici].astype(dot.acc_dtype)
        * b[jo, ico, ry, rx, ji * g + ici].astype(dot.acc_dtype), axis=[ico, ry, rx, ici]), name="c")
    bufs = {a: decl_buffer(a.shape, a.dtype, "A", strides=[var("a_s0"), var("a_s1"), g, 1], offset_factor=1),
            b: decl_buffer(b.shape, b.dtype, "B", strides=[var(f"b_s{i}") for i in range(4)] + [1], offset_factor=1),
            c: decl_buffer(c.shape, c.dtype, "C", strides=[var("c_s0"), var("c_s1"), var("c_s2"), 1],
                           offset_factor=1)}
    name = kernel_name(rows, col_blocks, 4 * groups, taps, dot)

    def body(ins, outs):
        (ba, bb), (bc,) = ins, outs
        s = ba.strides
        return _call(dot, name, bc, bc.strides[2], bc.strides[0], ba, s[1] * stride, s[0] * dh, s[1] * dw,
                     bb, bb.strides[0], bb.strides[1], bb.strides[2], bb.strides[3])
    return decl_tensor_intrin(c.op, body, name=name, binds=bufs)


#: the scalar stand-in's element arithmetic per dot: (load type, widening of A, of B, multiply, add, result type)
_SCALAR = {TDPBUSD.tag: ("i8", "  %aw = zext i8 %av to i32", "  %bw = sext i8 %bv to i32", "mul", "add", "i32", "0"),
           TDPBF16PS.tag: ("i16", "  %az = zext i16 %av to i32\n  %as = shl i32 %az, 16\n  %aw = bitcast i32 %as to float",
                           "  %bz = zext i16 %bv to i32\n  %bs = shl i32 %bz, 16\n  %bw = bitcast i32 %bs to float",
                           "fmul", "fadd", "float", "0.0")}


def block_ir_reference(rows: int, col_blocks: int, k: int, taps: tuple = (1, 1), dot: AmxDot = TDPBUSD) -> str:
    """:func:`block_ir`'s function in scalar LLVM IR (same name, arguments and result, no AMX; one sum per output
    in reduction order): what a test runs on a host without AMX to check a block's addressing (the tensorize
    binding, strides, offsets)."""
    name = kernel_name(rows, col_blocks, k, taps, dot)
    load, widen_a, widen_b, mul, add, acc, zero = _SCALAR[dot.tag]
    e, elems = dot.bytes, k // dot.bytes
    steps = taps[0] * taps[1] * elems
    return f"""define linkonce_odr i32 @{name}({ARGS}) noinline nounwind {{
entry:
  br label %row
row:
  %i = phi i64 [0, %entry], [%i1, %rowend]
  br label %col
col:
  %j = phi i64 [0, %row], [%j1, %colend]
  br label %red
red:
  %s = phi i64 [0, %col], [%s1, %red]
  %acc = phi {acc} [{zero}, %col], [%acc1, %red]
  %ry = udiv i64 %s, {taps[1] * elems}
  %sx = udiv i64 %s, {elems}
  %rx = urem i64 %sx, {taps[1]}
  %kk = urem i64 %s, {elems}
  %ai = mul i64 %i, %lda
  %ay = mul i64 %ry, %aty
  %ax = mul i64 %rx, %atx
  %a1 = add i64 %ai, %ay
  %a2 = add i64 %a1, %ax
  %ak = mul i64 %kk, {e}
  %ao = add i64 %a2, %ak
  %pa = getelementptr i8, ptr %a, i64 %ao
  %av = load {load}, ptr %pa
{widen_a}
  %jo = udiv i64 %j, 16
  %ji = urem i64 %j, 16
  %ko = udiv i64 %kk, {dot.group}
  %ki = urem i64 %kk, {dot.group}
  %b0 = mul i64 %jo, %bblock
  %b1 = mul i64 %ko, %brow
  %b2 = mul i64 %ji, 4
  %by = mul i64 %ry, %bty
  %bx = mul i64 %rx, %btx
  %b01 = add i64 %b0, %b1
  %b012 = add i64 %b01, %b2
  %b0123 = add i64 %b012, %by
  %b01234 = add i64 %b0123, %bx
  %bki = mul i64 %ki, {e}
  %bo = add i64 %b01234, %bki
  %pb = getelementptr i8, ptr %b, i64 %bo
  %bv = load {load}, ptr %pb
{widen_b}
  %p = {mul} {acc} %aw, %bw
  %acc1 = {add} {acc} %acc, %p
  %s1 = add i64 %s, 1
  %kd = icmp eq i64 %s1, {steps}
  br i1 %kd, label %colend, label %red
colend:
  %ci = mul i64 %i, %ldc
  %cj = mul i64 %jo, %cblock
  %cl = mul i64 %ji, 4
  %c01 = add i64 %ci, %cj
  %co = add i64 %c01, %cl
  %pc = getelementptr i8, ptr %c, i64 %co
  store {acc} %acc1, ptr %pc
  %j1 = add i64 %j, 1
  %jd = icmp eq i64 %j1, {col_blocks * 16}
  br i1 %jd, label %rowend, label %col
rowend:
  %i1 = add i64 %i, 1
  %id = icmp eq i64 %i1, {rows}
  br i1 %id, label %exit, label %row
exit:
  ret i32 0
}}
"""


def dense_ir_reference(rows: int, col_blocks: int, k: int, dot: AmxDot = TDPBUSD) -> str:
    """:func:`block_ir_reference` of the dense."""
    return block_ir_reference(rows, col_blocks, k, dot=dot)


__all__ = ["AMX_BF16", "AMX_INT8", "ARGS", "AmxDot", "MAX_COL_BLOCKS", "MAX_ROWS", "TDPBF16PS", "TDPBUSD", "TILE_REGISTERS",
           "block_ir", "block_ops", "block_ir_reference", "conv_amx", "dense_amx", "dense_ir", "dense_ir_reference", "kernel_name",
           "tiles_fit"]
