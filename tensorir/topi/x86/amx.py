"""AMX tiles (Sapphire/Emerald Rapids) for the packed int8 dense: ``tdpbusd`` on a block of up to 32 rows x 32
columns over the whole reduction, a tensor intrinsic whose body calls one generated LLVM IR function.

The weights are packed ``NK16n4k`` for ``vpdpbusd`` (:mod:`..nn.qnn`), which is AMX's int8 B-tile layout: one
column block's 16 rows of 4 reduction bytes by 16 columns are 1 KiB, contiguous.  The micro-kernel holds the
accumulators (up to 2 x 2 tiles of 16 rows x 16 int32) in tile registers over the reduction, 64 bytes a step
(A tiles: up to 16 rows x 64 bytes of the data, stride its row; B tiles: 16 x 64 bytes), then stores them; a
reduction that is not a multiple of 64 ends in a second function with the remainder's tile shapes.  The
functions use LLVM's shaped intrinsics (``llvm.x86.tileloadd64.internal``, ``tdpbusd.internal``,
``tilestored64.internal``, ``tilezero.internal``): LLVM writes the 64-byte palette-1 configuration and
``ldtilecfg`` at each function's entry and ``tilerelease`` at its exit, so each call is self-contained
(``noinline``: each keeps its own configuration).  Linux grants a process the tile data state only on request
(``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``): the runtime asks once before any AMX code runs
(:mod:`codegen.amx`).

``tdpbusd`` sums u8 x s8 products into int32 lanes with wrapping, as ``vpdpbusd`` does: exact for reductions
below 66,000.
"""
from __future__ import annotations

from ...buffer import decl_buffer
from ...expr import const, var
from ...extern import call_extern
from ...reduce import sum as rsum
from ...tensor import compute, placeholder, reduce_axis
from ...tensor_intrin import TensorIntrin, decl_tensor_intrin
from ..nn.utils import scaled

#: LLVM's features an AMX int8 kernel needs
AMX_INT8 = ("amx-tile", "amx-int8")
#: the block one call computes: rows (two A tiles of 16) and column blocks of 16 (two B tiles)
MAX_ROWS, MAX_COL_BLOCKS = 32, 2
_STEP = 64          # reduction bytes of one tdpbusd (a full A tile row)

_DECLS = """declare x86_amx @llvm.x86.tileloadd64.internal(i16, i16, ptr, i64)
declare x86_amx @llvm.x86.tdpbusd.internal(i16, i16, i16, x86_amx, x86_amx, x86_amx)
declare void @llvm.x86.tilestored64.internal(i16, i16, ptr, i64, x86_amx)
declare x86_amx @llvm.x86.tilezero.internal(i16, i16)
"""


def _row_tiles(rows: int) -> list[int]:
    return [16, rows - 16] if rows > 16 else [rows]


def kernel_name(rows: int, col_blocks: int, k: int, taps: tuple = (1, 1)) -> str:
    conv = f"_t{taps[0]}x{taps[1]}" if taps != (1, 1) else ""
    return f"tiletune_amx_u8s8s32_m{rows}_n{col_blocks * 16}_k{k}{conv}"


#: the micro-kernel's arguments (byte strides): C and its row / column-block strides, A and its row / tap-row /
#: tap-column strides, B and its column-block / 4-byte-row / tap-row / tap-column strides
ARGS = ("ptr %c, i64 %ldc, i64 %cblock, ptr %a, i64 %lda, i64 %aty, i64 %atx, "
        "ptr %b, i64 %bblock, i64 %brow, i64 %bty, i64 %btx")


def _function(name: str, rows: int, col_blocks: int, taps: tuple, chunks: int, kbytes: int, accumulate: bool) -> str:
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
    for j in range(col_blocks):
        body += [f"  %bj{j} = mul i64 {j}, %bblock", f"  %bo{j} = add i64 %bj{j}, %bk",
                 f"  %pb{j} = getelementptr i8, ptr %b, i64 %bo{j}",
                 f"  %tb{j} = call x86_amx @llvm.x86.tileloadd64.internal(i16 {kbytes // 4}, i16 64, ptr %pb{j}, "
                 f"i64 %brow)"]
    body += [f"  %d{r}{j} = call x86_amx @llvm.x86.tdpbusd.internal(i16 {rt[r]}, i16 64, i16 {kbytes}, "
             f"x86_amx %acc{r}{j}, x86_amx %ta{r}, x86_amx %tb{j})" for r, j in cs]
    body += ["  %s1 = add i64 %s, 1", f"  %done = icmp eq i64 %s1, {taps[0] * taps[1] * chunks}",
             "  br i1 %done, label %exit, label %loop", "exit:"]
    body += [f"  call void @llvm.x86.tilestored64.internal(i16 {rt[r]}, i16 64, ptr %pc{r}{j}, i64 %ldc, "
             f"x86_amx %d{r}{j})" for r, j in cs]
    body.append("  ret i32 0")
    return f"define linkonce_odr i32 @{name}({ARGS}) noinline nounwind {{\n" + "\n".join(body) + "\n}\n"


def block_ir(rows: int, col_blocks: int, k: int, taps: tuple = (1, 1)) -> str:
    """The LLVM IR of :func:`kernel_name` (``rows`` <= 32, ``col_blocks`` <= 2, ``k`` bytes a multiple of 4 per
    tap): every tap's full 64-byte steps, then (where ``k % 64``) every tap's remainder in a second function
    (its own tile shapes), called with the stored accumulators (integer sums: the order is free)."""
    if not (0 < rows <= MAX_ROWS and 0 < col_blocks <= MAX_COL_BLOCKS and k > 0 and k % 4 == 0):
        raise ValueError(f"amx block: {rows} rows x {col_blocks} column blocks x {k} bytes is not a tile block")
    name, full, rest = kernel_name(rows, col_blocks, k, taps), k // _STEP, k % _STEP
    if not rest:
        return _DECLS + _function(name, rows, col_blocks, taps, full, _STEP, False)
    if not full:
        return _DECLS + _function(name, rows, col_blocks, taps, 1, rest, False)
    main, tail = _function(name + "_main", rows, col_blocks, taps, full, _STEP, False), \
        _function(name + "_tail", rows, col_blocks, taps, 1, rest, True)
    call = lambda f, a, b: (f"  %{f} = call i32 @{name}_{f}(ptr %c, i64 %ldc, i64 %cblock, ptr {a}, i64 %lda, "
                            f"i64 %aty, i64 %atx, ptr {b}, i64 %bblock, i64 %brow, i64 %bty, i64 %btx)")
    return (_DECLS + main + tail + f"define linkonce_odr i32 @{name}({ARGS}) alwaysinline nounwind {{\nentry:\n"
            + call("main", "%a", "%b") + f"\n  %a2 = getelementptr i8, ptr %a, i64 {full * _STEP}\n"
            f"  %b2o = mul i64 %brow, {full * _STEP // 4}\n  %b2 = getelementptr i8, ptr %b, i64 %b2o\n"
            + call("tail", "%a2", "%b2") + "\n  ret i32 0\n}\n")


def dense_ir(rows: int, col_blocks: int, k: int) -> str:
    """:func:`block_ir` of the dense (one tap)."""
    return block_ir(rows, col_blocks, k)


def _i64(e, size: int = 1):
    return const(e * size, "int64") if isinstance(e, int) else (e * size).astype("int64")


def _call(name: str, bc, c_row, c_block, ba, a_row, a_ty, a_tx, bb, b_block, b_row, b_ty, b_tx):
    return call_extern("int32", name, bc.access_ptr("w"), _i64(c_row, 4), _i64(c_block, 4), ba.access_ptr("r"),
                       _i64(a_row), _i64(a_ty), _i64(a_tx), bb.access_ptr("r"), _i64(b_block), _i64(b_row),
                       _i64(b_ty), _i64(b_tx))


def dense_amx_int8(rows: int, col_blocks: int, k: int) -> TensorIntrin:
    """``c[i, jo, ji] = sum_{ko, ki} a[i, ko * 4 + ki] * b[jo, ko, ji * 4 + ki]`` (u8 x s8 -> s32) over a
    block of ``rows`` x ``col_blocks`` x 16 and the whole reduction ``k``: the body calls :func:`dense_ir`'s
    function (import it with ``pragma(axis, "import_llvm", dense_ir(...))``)."""
    a = placeholder((rows, k), dtype="uint8", name="a")
    b = placeholder((col_blocks, k // 4, 64), dtype="int8", name="b")
    ko, ki = reduce_axis((0, k // 4), name="ko"), reduce_axis((0, 4), name="ki")
    c = compute((rows, col_blocks, 16), lambda i, jo, ji: rsum(
        a[i, ko * 4 + ki].astype("int32") * b[jo, ko, ji * 4 + ki].astype("int32"), axis=[ko, ki]), name="c")
    bufs = {a: decl_buffer(a.shape, a.dtype, "A", strides=[var("a_s0"), 1], offset_factor=1),
            b: decl_buffer(b.shape, b.dtype, "B", strides=[var("b_s0"), var("b_s1"), 1], offset_factor=1),
            c: decl_buffer(c.shape, c.dtype, "C", strides=[var("c_s0"), var("c_s1"), 1], offset_factor=1)}

    def body(ins, outs):
        (ba, bb), (bc,) = ins, outs
        return _call(kernel_name(rows, col_blocks, k), bc, bc.strides[0], bc.strides[1], ba, ba.strides[0], 0, 0,
                     bb, bb.strides[0], bb.strides[1], 0, 0)
    return decl_tensor_intrin(c.op, body, name=kernel_name(rows, col_blocks, k), binds=bufs)


def conv_amx_int8(rows: int, col_blocks: int, groups: int, taps: tuple, strides: tuple, dilation: tuple) -> TensorIntrin:
    """The packed int8 conv's block (:func:`..nn.qnn.conv2d_pack_int8`): ``c[jo, 0, x, ji] = sum_{ico, ry, rx,
    ici} a[ry * dh, x * sw + rx * dw, ico, ici] * b[jo, ico, ry, rx, ji * 4 + ici]`` for ``rows`` output
    columns of one output row x ``col_blocks`` x 16 channels over the whole reduction (``groups`` blocks of 4
    channels, kernel ``taps``): the body calls :func:`block_ir` (``k = 4 * groups``, ``taps``)'s function."""
    (kh, kw), (sh, stride), (dh, dw) = taps, strides, dilation
    a = placeholder(((kh - 1) * dh + 1, (rows - 1) * stride + (kw - 1) * dw + 1, groups, 4), dtype="uint8", name="a")
    b = placeholder((col_blocks, groups, kh, kw, 64), dtype="int8", name="b")
    ico, ici = reduce_axis((0, groups), name="ic_outer"), reduce_axis((0, 4), name="ic_inner")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    c = compute((col_blocks, 1, rows, 16), lambda jo, y, x, ji: rsum(
        a[scaled(y, sh) + scaled(ry, dh), scaled(x, stride) + scaled(rx, dw), ico, ici].astype("int32")
        * b[jo, ico, ry, rx, ji * 4 + ici].astype("int32"), axis=[ico, ry, rx, ici]), name="c")
    bufs = {a: decl_buffer(a.shape, a.dtype, "A", strides=[var("a_s0"), var("a_s1"), 4, 1], offset_factor=1),
            b: decl_buffer(b.shape, b.dtype, "B", strides=[var(f"b_s{i}") for i in range(4)] + [1], offset_factor=1),
            c: decl_buffer(c.shape, c.dtype, "C", strides=[var("c_s0"), var("c_s1"), var("c_s2"), 1],
                           offset_factor=1)}
    name = kernel_name(rows, col_blocks, 4 * groups, taps)

    def body(ins, outs):
        (ba, bb), (bc,) = ins, outs
        s = ba.strides
        return _call(name, bc, bc.strides[2], bc.strides[0], ba, s[1] * stride, s[0] * dh, s[1] * dw,
                     bb, bb.strides[0], bb.strides[1], bb.strides[2], bb.strides[3])
    return decl_tensor_intrin(c.op, body, name=name, binds=bufs)


def block_ir_reference(rows: int, col_blocks: int, k: int, taps: tuple = (1, 1)) -> str:
    """:func:`block_ir`'s function in scalar LLVM IR (same name, arguments and result, no AMX): what a test runs
    on a host without AMX to check a block's addressing (the tensorize binding, strides, offsets)."""
    name = kernel_name(rows, col_blocks, k, taps)
    steps = taps[0] * taps[1] * k
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
  %acc = phi i32 [0, %col], [%acc1, %red]
  %ry = udiv i64 %s, {taps[1] * k}
  %sx = udiv i64 %s, {k}
  %rx = urem i64 %sx, {taps[1]}
  %kk = urem i64 %s, {k}
  %ai = mul i64 %i, %lda
  %ay = mul i64 %ry, %aty
  %ax = mul i64 %rx, %atx
  %a1 = add i64 %ai, %ay
  %a2 = add i64 %a1, %ax
  %ao = add i64 %a2, %kk
  %pa = getelementptr i8, ptr %a, i64 %ao
  %av = load i8, ptr %pa
  %aw = zext i8 %av to i32
  %jo = udiv i64 %j, 16
  %ji = urem i64 %j, 16
  %ko = udiv i64 %kk, 4
  %ki = urem i64 %kk, 4
  %b0 = mul i64 %jo, %bblock
  %b1 = mul i64 %ko, %brow
  %b2 = mul i64 %ji, 4
  %by = mul i64 %ry, %bty
  %bx = mul i64 %rx, %btx
  %b01 = add i64 %b0, %b1
  %b012 = add i64 %b01, %b2
  %b0123 = add i64 %b012, %by
  %b01234 = add i64 %b0123, %bx
  %bo = add i64 %b01234, %ki
  %pb = getelementptr i8, ptr %b, i64 %bo
  %bv = load i8, ptr %pb
  %bw = sext i8 %bv to i32
  %p = mul i32 %aw, %bw
  %acc1 = add i32 %acc, %p
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
  store i32 %acc1, ptr %pc
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


def dense_ir_reference(rows: int, col_blocks: int, k: int) -> str:
    """:func:`block_ir_reference` of the dense."""
    return block_ir_reference(rows, col_blocks, k)


__all__ = ["AMX_INT8", "ARGS", "MAX_COL_BLOCKS", "MAX_ROWS", "block_ir", "block_ir_reference", "conv_amx_int8",
           "dense_amx_int8", "dense_ir", "dense_ir_reference", "kernel_name"]
