"""Bound inference under a fused block loop: isl writes the hull of ``fused // 16`` with divisions
(``fused - (fused * 15 + 15) // 16``), whose width no longer simplifies to a constant; the relaxed region
of constant width, already as narrow as isl's widest, is kept.  Without that, a shared tile attached
below virtual threads spanned the whole batch and every output channel (``conv2d_nchw_cuda`` and
``conv2d_kernel_cuda`` at batch 32: 760 KB of shared memory for a 6 KB tile)."""
from __future__ import annotations

import re

import tensorir as te
from autotune.templates.conv2d_cuda import conv2d_schedule


def _shared(s, args) -> dict[str, str]:
    text = str(te.lower(s, args, simple_mode=True))
    return dict(re.findall(r"allocate (\S+)\[float32 \* ([^\]]*)\] shared", text))


def test_shared_tiles_under_a_fused_batch_and_virtual_threads_are_the_blocks():
    # batch 32 x 16 channel blocks fused on blockIdx.z, virtual threads on channels and columns
    s, args = conv2d_schedule(32, 64, 56, 56, 128, 1, 1, stride=2, pad=0, tile_f=(2, 4, 1), tile_y=(1, 28, 1),
                              tile_x=(2, 7, 1))
    assert _shared(s, args) == {"pad.shared": "1 * 4 * 55 * 27", "kernel.shared": "8 * 4 * 1 * 1"}


def test_the_same_tiles_at_batch_one():
    s, args = conv2d_schedule(1, 64, 56, 56, 128, 1, 1, stride=2, pad=0, tile_f=(2, 4, 1), tile_y=(1, 28, 1),
                              tile_x=(2, 7, 1))
    assert _shared(s, args) == {"pad.shared": "1 * 4 * 55 * 27", "kernel.shared": "8 * 4 * 1 * 1"}
