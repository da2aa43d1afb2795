"""The files a ``tiletune`` command reads and writes.

Arguments are checked before any work (:func:`input_file`, :func:`output_file`, :func:`output_dir`:
a missing or wrong-kind path is a :class:`~.errors.CommandError` naming it), and outputs are written to
a temporary name beside their destination and renamed into place only when complete
(:func:`writing_file`, :func:`writing_dir`), so a failed command leaves nothing behind.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from .errors import CommandError


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


__all__ = ["input_file", "output_dir", "output_file", "writing_dir", "writing_file"]
