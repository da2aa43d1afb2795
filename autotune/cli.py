"""The ``tiletune`` command line."""
from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    return run_demo(size=args.size, rounds=args.rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tiletune", description="Tensor-expression compiler and autotuner")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile a GEMM with the naive and the packed schedule, time them "
                                       "beside numpy")
    demo.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    demo.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default 5)")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
