"""The ``tiletune`` command line's argument types and parsers: numbers, ``--target``, ``--shape``,
``--input``, ``--time-budget``, template arguments, and the measurement options the tuning commands
share.  A malformed value is a :class:`~.errors.CommandError` (or argparse's error) naming it."""
from __future__ import annotations

import argparse
import json

from .errors import CommandError


def _number(kind, low: float, strict: bool, what: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not (value > low if strict else value >= low) or value != value:
            raise argparse.ArgumentTypeError(f"{text!r}: must be {what}")
        return value
    parse.__name__ = what
    return parse


positive_int = _number(int, 0, True, "a positive integer")
nonnegative_int = _number(int, 0, False, "a non-negative integer")
positive_float = _number(float, 0, True, "a positive number")
nonnegative_float = _number(float, 0, False, "a non-negative number")


def check_target(text: str):
    """The parsed ``--target``, or a CommandError naming it."""
    from codegen.target import parse
    try:
        return parse(text)
    except ValueError as e:
        raise CommandError(f"--target {text!r}: {e}") from None


def parse_arg(text: str):
    """A template argument from the command line: JSON if it parses (``64``, ``1.5``, ``[1, 2]``,
    ``true``), else the string itself (``float32``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_shape(text: str) -> tuple[str, object]:
    """``x=1,3,224,224`` -> ``("x", (1, 3, 224, 224))``; ``N=4`` (a dimension name) -> ``("N", 4)``."""
    name, sep, dims = text.partition("=")
    if not sep or not name or not dims:
        raise CommandError(f"--shape {text!r}: expected NAME=D1,D2,... (an input) or NAME=D (a dimension)")
    try:
        values = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise CommandError(f"--shape {text!r}: dimensions must be integers") from None
    if any(v < 0 for v in values):
        raise CommandError(f"--shape {text!r}: dimensions must not be negative")
    return name, values[0] if len(values) == 1 and "," not in dims else values


def parse_input(text: str) -> tuple[str, str]:
    """``x=x.npy`` -> ``("x", "x.npy")``."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise CommandError(f"--input {text!r}: expected NAME=FILE.npy")
    return name, path


def parse_duration(text: str) -> float:
    """``"1h"``, ``"30m"``, ``"90s"``, ``"3600"`` -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    scale = units.get(t[-1:], None)
    try:
        value = float(t[:-1] if scale else t) * (scale or 1)
    except ValueError:
        raise CommandError(f"--time-budget {text!r}: expected seconds or a number with s, m, h (1h, 30m)") from None
    if value <= 0:
        raise CommandError(f"--time-budget {text!r}: must be positive")
    return value


def unique(option: str, pairs: list[tuple[str, object]]) -> dict:
    """``dict(pairs)``, refusing a name given twice (the second would silently win)."""
    out: dict = {}
    for name, value in pairs:
        if name in out:
            raise CommandError(f"{option} {name}: given twice")
        out[name] = value
    return out


def add_model_args(parser) -> None:
    """The model, its ``--shape`` bindings and the ``--target``: what ``compile`` and ``tune-model`` take first."""
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...",
                        help="bind an input's shape (x=1,3,224,224) or a symbolic dimension (N=1); repeatable")
    parser.add_argument("--target", default="llvm", help="target string (default: llvm, this CPU)")


def add_precision_arg(parser, what: str) -> None:
    """``--precision float16|bfloat16`` (``graph.to_mixed_precision``'s dtypes): ``compile`` builds that model,
    ``tune-model`` tunes its kernels."""
    parser.add_argument("--precision", default=None, choices=["float16", "bfloat16"], help=what)


def add_measure_args(parser) -> None:
    """The measurement options that ``tune-op`` and ``tune-model`` share."""
    parser.add_argument("--n-parallel", type=positive_int, default=None, help="build processes (default: CPU count)")
    parser.add_argument("--build-timeout", type=positive_float, default=10.0)
    parser.add_argument("--number", type=positive_int, default=4)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--min-repeat-ms", type=nonnegative_float, default=0)
    parser.add_argument("--timeout", type=positive_float, default=10.0, help="seconds per measurement")


__all__ = ["add_measure_args", "add_model_args", "add_precision_arg", "check_target", "nonnegative_float", "nonnegative_int", "parse_arg",
           "parse_duration", "parse_input", "parse_shape", "positive_float", "positive_int", "unique"]
