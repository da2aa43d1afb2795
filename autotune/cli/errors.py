"""User errors of the ``tiletune`` command line.

A user error (a missing or wrong-kind file, a malformed argument, a model or artifact that cannot be
used) is one line on stderr, ``tiletune <command>: error: <message naming the culprit>``, and exit
status 2; :func:`report` is the one place that turns the error classes of :func:`user_errors` into that
line, and :class:`ArgumentParser` does the same for argparse's own errors.
"""
from __future__ import annotations

import argparse
import sys


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


__all__ = ["ArgumentParser", "CommandError", "message", "report", "user_errors"]
