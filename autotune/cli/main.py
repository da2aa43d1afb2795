"""``tiletune``: the parser, its commands in the order ``--help`` lists them, and the one place a user
error becomes a line on stderr and exit status 2 (:func:`main`)."""
from __future__ import annotations

import sys
import warnings

from .errors import ArgumentParser, report, user_errors
from .model import add_compile, add_inspect, add_run
from .tune import add_demo, add_logs, add_tune_model, add_tune_op

COMMANDS = (add_demo, add_tune_op, add_logs, add_compile, add_tune_model, add_run, add_inspect)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"tiletune: warning: {message} ({category.__name__})\n"


def parser() -> ArgumentParser:
    """The ``tiletune`` argument parser, every command of :data:`COMMANDS` added."""
    top = ArgumentParser(prog="tiletune", description="Tensor-expression compiler and autotuner")
    sub = top.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning     # a skipped log line is one line, not a source excerpt
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:        # the reader went away (`tiletune logs show x | head`): stop quietly
        sys.stderr.close()
        return 0
    except user_errors() as e:     # the one place a user error becomes a line and exit status 2
        return report(args.command, e)


__all__ = ["COMMANDS", "main", "parser"]
