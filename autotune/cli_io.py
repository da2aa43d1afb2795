"""What every ``tiletune`` command shares: user errors and the files a command reads and writes.

A user error (a missing or wrong-kind file, a malformed argument, a model or artifact that cannot be
used) is one line on stderr, ``tiletune <command>: error: <message naming the culprit>``, and exit
status 2; :func:`report` is the one place that turns the error classes of :data:`USER_ERRORS` into that
line.  Arguments are checked before any work (:func:`input_file`, :func:`output_file`,
:func:`output_dir`), and outputs are written to a temporary name beside their destination and renamed
into place only when complete (:func:`writing_file`, :func:`writing_dir`), so a failed command leaves
nothing behind.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile


class CommandError(Exception):
    """A user error: printed as ``tiletune <command>: error: <message>``."""


def user_errors() -> tuple[type[BaseException], ...]:
    """The exception classes that are the user's doing (bad files, arguments, models, artifacts, logs)."""
    from tensorir.graph import GraphError
    return (CommandError, GraphError, ValueError, OSError, RuntimeError)


def message(e: BaseException) -> str:
    """One line for ``e`` (an OSError names its file)."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return " ".join(str(e).split()) or type(e).__name__


def report(command: str, e: BaseException) -> int:
    print(f"tiletune {command}: error: {message(e)}", file=sys.stderr)
    return 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse's errors as one line naming the command (``tiletune compile: error: ...``), exit 2."""

    def error(self, text: str):
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")


# -- argument types ---------------------------------------------------------------------------------------
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


# -- paths ---------------------------------------------------------------------------------------------------
def input_file(path: str, what: str) -> str:
    """``path`` if it is an existing regular file (not a directory), else a CommandError naming it."""
    if not os.path.exists(path):
        raise CommandError(f"{what} {path} does not exist")
    if not os.path.isfile(path):
        raise CommandError(f"{what} {path} is not a regular file")
    return path


def _check_parent(path: str, what: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):                 # created when the output is written
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CommandError(f"{what} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise CommandError(f"{what} {path}: {parent} is not writable")


def output_file(path: str, what: str) -> str:
    """``path`` if a file can be written there: not a directory, under a directory (or a path that
    can become one)."""
    if os.path.isdir(path):
        raise CommandError(f"{what} {path} is a directory (expected a file)")
    if os.path.exists(path) and not os.path.isfile(path):
        raise CommandError(f"{what} {path} is not a regular file")
    _check_parent(path, what)
    return path


def output_dir(path: str, what: str) -> str:
    """``path`` if a directory can be written there: a directory, or nothing yet."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CommandError(f"{what} {path} exists and is not a directory")
    if os.path.isdir(path) and not os.access(path, os.W_OK):
        raise CommandError(f"{what} {path} is not writable")
    if not os.path.isdir(path):
        _check_parent(path, what)
    return path


def _missing_parents(path: str) -> str | None:
    """The outermost directory above ``path`` that does not exist yet (created by a write), or None."""
    top, parent = None, os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        top, parent = parent, os.path.dirname(parent)
    return top


@contextlib.contextmanager
def writing_file(path: str):
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it (and any
    directory made for it) is removed."""
    created = _missing_parents(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if created:
            shutil.rmtree(created, ignore_errors=True)
        raise


@contextlib.contextmanager
def writing_dir(path: str):
    """Yield a temporary directory beside ``path`` (inside it, if it exists); on success its files move
    into ``path`` (created if needed, files of the same names replaced), on failure it is removed with
    any directory made for it."""
    exists = os.path.isdir(path)
    created = None if exists else _missing_parents(path)
    parent = path if exists else os.path.dirname(os.path.abspath(path))    # the temporary inside, if it exists
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(path))}.", suffix=".partial", dir=parent)
    try:
        yield tmp
        if not exists:
            os.rename(tmp, path)
        else:
            for name in os.listdir(tmp):
                os.replace(os.path.join(tmp, name), os.path.join(path, name))
            os.rmdir(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:
            shutil.rmtree(created, ignore_errors=True)
        raise


__all__ = ["CommandError", "ArgumentParser", "check_target", "report", "message", "user_errors", "input_file",
           "output_file", "output_dir", "writing_file", "writing_dir", "positive_int", "nonnegative_int", "positive_float",
           "nonnegative_float"]


def add_measure_args(parser) -> None:
    """The measurement options that ``tune`` and ``tune-model`` share."""
    parser.add_argument("--n-parallel", type=positive_int, default=None, help="build processes (default: CPU count)")
    parser.add_argument("--build-timeout", type=positive_float, default=10.0)
    parser.add_argument("--number", type=positive_int, default=4)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--min-repeat-ms", type=nonnegative_float, default=0)
    parser.add_argument("--timeout", type=positive_float, default=10.0, help="seconds per measurement")
