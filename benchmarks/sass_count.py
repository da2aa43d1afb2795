"""Counts of SASS instructions (``cuobjdump -sass``) in the kernel of one ResNet-18 layer on tensor cores:
``python benchmarks/sass_count.py [--layer N] [--batch 32] HGMMA LDGSTS``."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conv2d_cuda import RESNET18, build_tensorcore


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ops", nargs="+")
    p.add_argument("--layer", type=int, default=1, help="index in conv2d_cuda.RESNET18")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--precision", default="float16")
    args = p.parse_args()
    got = build_tensorcore(args.batch, args.precision, RESNET18[args.layer])
    if isinstance(got, str):
        p.error(f"{RESNET18[args.layer][0]}: {got}")
    mod = got[0]
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(mod.cubin)
        f.flush()
        sass = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True, check=True).stdout
    counts = {op: sum(bool(re.search(rf"\b{op}\b", line)) for line in sass.splitlines()) for op in args.ops}
    print(f"{RESNET18[args.layer][0]} (batch {args.batch}, {mod.arch}): "
          + ", ".join(f"{op} {n}" for op, n in counts.items()))


if __name__ == "__main__":
    main()
