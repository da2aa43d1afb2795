"""Reading the files of an artifact one cannot trust: regular files inside its directory, bounded reads,
JSON of bounded nesting.

A file is read only when it resolves (symbolic links followed) to a regular file inside the
artifact directory: a link that leaves the directory (``weights.npy -> /dev/zero``), a FIFO, a
device or a socket is refused before it is opened, so nothing blocks.  It is opened with
``O_NOFOLLOW | O_NONBLOCK`` and checked again on the open descriptor, and at most ``limit`` bytes are
read (the size the manifest declares): a file of another size is refused before a byte is read.
JSON nested deeper than :data:`MAX_JSON_DEPTH` is refused before ``json.loads`` sees it (Python's
parser would raise ``RecursionError``).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from itertools import accumulate

MAX_JSON_DEPTH = 64
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class UnsafeFile(ValueError):
    """A file that is not read: missing, not a regular file, outside its directory, of the wrong size."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def resolve_inside(directory: str, name: str) -> str:
    """The real path of ``directory/name``, a regular file inside ``directory`` (links followed)."""
    path = os.path.join(directory, name)
    if not os.path.lexists(path):
        raise UnsafeFile(f"{path} is missing")
    root, real = os.path.realpath(directory), os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise UnsafeFile(f"{path} is a link to {real}, outside the artifact directory")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        raise UnsafeFile(f"{path} is missing (a link to {real}, which does not exist)") from None
    if not stat.S_ISREG(mode):
        raise UnsafeFile(f"{path} is {_kind(mode)}, not a regular file")
    return real


def read_regular(directory: str, name: str, size: int | None = None, max_size: int | None = None) -> bytearray:
    """The bytes of ``directory/name``, a regular file inside ``directory`` of exactly ``size`` bytes
    (the size the manifest declares) or, without one, of at most ``max_size``; the read stops at the
    size the file had when it was opened."""
    path = os.path.join(directory, name)
    real = resolve_inside(directory, name)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UnsafeFile(f"{path} cannot be opened: {e.strerror}") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):       # replaced between the check and the open
            raise UnsafeFile(f"{path} is {_kind(st.st_mode)}, not a regular file")
        if size is not None and st.st_size != size:
            raise UnsafeFile(f"{path} is corrupt: {st.st_size} bytes, manifest.json declares {size}")
        if max_size is not None and st.st_size > max_size:
            raise UnsafeFile(f"{path} is too large: {st.st_size} bytes (at most {max_size})")
        if st.st_size > _memory_bytes():
            raise UnsafeFile(f"{path} is {st.st_size} bytes, more than this machine's memory")
        try:
            data = bytearray(st.st_size + 1)
        except MemoryError:
            raise UnsafeFile(f"{path} is {st.st_size} bytes, more than fits in memory now") from None
        view, n = memoryview(data), 0
        while n < len(data):
            k = f.readinto(view[n:])
            if not k:
                break
            n += k
        if n != st.st_size:
            raise UnsafeFile(f"{path} changed while it was read ({n} bytes, {st.st_size} when opened)")
        del view
        del data[n:]
    return data


def file_sha256(path: str | os.PathLike) -> str:
    """The hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def json_depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest in the JSON ``text`` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(_STEP[c] for c in brackets), default=0)


def loads_json(data: bytes, path: str, max_depth: int = MAX_JSON_DEPTH):
    """``json.loads`` of UTF-8 ``data`` (the file ``path``), refusing text that is not JSON or nests
    deeper than ``max_depth``."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeFile(f"{path} is corrupt (not UTF-8 JSON: {e})") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise UnsafeFile(f"{path} is corrupt: its JSON nests {depth} levels deep (at most {max_depth})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:     # JSONDecodeError, and Python's limit on integer digits
        raise UnsafeFile(f"{path} is corrupt (not JSON: {str(e)[:200]})") from None
