"""The schema of an artifact's ``manifest.json`` and ``graph.json``, declared field -> type, and the one
function that checks a document against it (:func:`check`).

A wrong-typed field is refused naming it (``field 'triple' must be a string, got 42``) before any of
the loader's code reads it, so a hostile or damaged artifact never reaches numpy or the run list
with a value of the wrong kind.  Records accept fields they do not declare (newer writers may add
some) unless ``closed``.  Cross-field facts (a buffer inside the workspace, an input index in
range) are the run list's own checks, not the schema's.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from tensorir.dtype import SCALAR_DTYPES

MAX_DIM = 1 << 40             # one dimension's extent
MAX_ELEMENTS = 1 << 48        # one buffer's element count (its bytes still fit an int64)


class FieldError(ValueError):
    """``path`` is missing or is not ``what``; ``str()`` is the message without the file."""

    def __init__(self, path: str, what: str, value=None, missing: bool = False):
        self.path, self.what = path, what
        if missing:
            super().__init__(f"field '{path}' is missing (expected {what})")
        else:
            super().__init__(f"field '{path}' must be {what}, got {_show(value)}")


def _show(value) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` for a key that is not an identifier (a file name)."""
    if not key.isidentifier():
        return f"{path}[{json.dumps(key)}]"
    return f"{path}.{key}" if path else key


class Spec:
    what = "valid"

    def check(self, value, path: str) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Type(Spec):
    """An instance of ``types`` (``bool`` is not an ``int`` here)."""
    types: tuple
    what: str

    def check(self, value, path):
        if isinstance(value, bool) and bool not in self.types or not isinstance(value, self.types):
            raise FieldError(path, self.what, value)


@dataclass(frozen=True)
class Int(Spec):
    lo: int = 0
    hi: int = 1 << 62
    what: str = "a non-negative integer"

    def check(self, value, path):
        if isinstance(value, bool) or not isinstance(value, int) or not self.lo <= value <= self.hi:
            raise FieldError(path, self.what, value)


@dataclass(frozen=True)
class Number(Spec):
    what: str = "a finite number"

    def check(self, value, path):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise FieldError(path, self.what, value)


@dataclass(frozen=True)
class Enum(Spec):
    values: tuple
    what: str = ""

    def __post_init__(self):
        if not self.what:
            object.__setattr__(self, "what", "one of " + ", ".join(map(str, self.values)))

    def check(self, value, path):
        if not isinstance(value, str) or value not in self.values:
            raise FieldError(path, self.what, value)


@dataclass(frozen=True)
class Pattern(Spec):
    regex: str
    what: str

    def check(self, value, path):
        if not isinstance(value, str) or not re.fullmatch(self.regex, value):
            raise FieldError(path, self.what, value)


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec

    @property
    def what(self):
        return f"a list (each item {self.item.what})"

    def check(self, value, path):
        if not isinstance(value, list):
            raise FieldError(path, self.what, value)
        for k, v in enumerate(value):
            self.item.check(v, f"{path}[{k}]")


@dataclass(frozen=True)
class MapOf(Spec):
    """An object whose keys match ``keys`` and whose values are ``value``."""
    value: Spec
    keys: str = ".*"

    @property
    def what(self):
        return f"an object (each value {self.value.what})"

    def check(self, value, path):
        if not isinstance(value, dict):
            raise FieldError(path, self.what, value)
        for k, v in value.items():
            if not re.fullmatch(self.keys, k):
                raise FieldError(_join(path, k), f"a key matching {self.keys}", k)
            self.value.check(v, _join(path, k))


@dataclass(frozen=True)
class Record(Spec):
    """An object with the ``required`` fields and, where present, the ``optional`` ones."""
    required: dict
    optional: dict = field(default_factory=dict)
    what: str = "an object"
    closed: bool = False

    def check(self, value, path):
        if not isinstance(value, dict):
            raise FieldError(path, self.what, value)
        for name, spec in self.required.items():
            if name not in value:
                raise FieldError(_join(path, name), spec.what, missing=True)
            spec.check(value[name], _join(path, name))
        for name, spec in self.optional.items():
            if name in value:
                spec.check(value[name], _join(path, name))
        if self.closed:
            extra = sorted(set(value) - set(self.required) - set(self.optional))
            if extra:
                raise FieldError(_join(path, extra[0]), "absent (not a field of this record)", value[extra[0]])


@dataclass(frozen=True)
class Either(Spec):
    options: tuple
    what: str

    def check(self, value, path):
        for spec in self.options:
            try:
                spec.check(value, path)
                return
            except FieldError:
                pass
        records = [spec for spec in self.options if isinstance(spec, Record)]
        if isinstance(value, dict) and len(records) == 1:
            records[0].check(value, path)      # an object: name the field of it that is wrong
        raise FieldError(path, self.what, value)


@dataclass(frozen=True)
class Shape(Spec):
    what: str = f"a shape (a list of integers in [0, {MAX_DIM}])"

    def check(self, value, path):
        if not isinstance(value, list):
            raise FieldError(path, self.what, value)
        for k, v in enumerate(value):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DIM:
                raise FieldError(f"{path}[{k}]", f"a dimension (an integer in [0, {MAX_DIM}])", v)
        n = math.prod(value)
        if n > MAX_ELEMENTS:
            raise FieldError(path, f"a shape of at most {MAX_ELEMENTS} elements", value)


class NumpyDType(Spec):
    """A numpy dtype's name, of data (not ``object``: no Python object is ever built from an artifact)."""
    what = "a numpy dtype of data (not object)"

    def check(self, value, path):
        try:
            ok = isinstance(value, str) and len(value) < 64 and (np.dtype(value).kind not in "OV"
                                                                 or value == "bfloat16")
        except (TypeError, ValueError, SyntaxError):
            ok = False
        if not ok:
            raise FieldError(path, self.what, value)


class AnyValue(Spec):
    what = "any JSON value"

    def check(self, value, path):
        pass


class AttrValue(Spec):
    """A fallback body's attribute or constant (:mod:`codegen.runtime.fallback`'s encoding)."""
    what = "a JSON scalar, or an object {bytes}, {ndarray, dtype, shape} or {tuple}"

    def check(self, value, path):
        if value is None or isinstance(value, (bool, int, float, str)):
            return
        if isinstance(value, dict) and "tuple" in value:
            return ListOf(self).check(value["tuple"], _join(path, "tuple"))
        for spec in (_BYTES, _NDARRAY):
            if isinstance(value, dict) and set(spec.required) <= set(value):
                return spec.check(value, path)
        raise FieldError(path, self.what, value)


def check(document, spec: Spec, where: str, error: type = ValueError) -> None:
    """Raise ``error("<where>: field ... must be ...")`` unless ``document`` matches ``spec``."""
    try:
        spec.check(document, "")
    except FieldError as e:
        raise error(f"{where}: {e}") from None


# -- the fields --------------------------------------------------------------------------------------------------
STR = Type((str,), "a string")
BOOL = Type((bool,), "true or false")
OBJECT = Type((dict,), "an object")
COUNT = Int()
NUMBER = Number()
ANY = AnyValue()
DTYPE = Enum(SCALAR_DTYPES, "a dtype (" + ", ".join(SCALAR_DTYPES) + ")")
SHAPE = Shape()
SHA256 = Pattern("[0-9a-f]{64}", "a sha256 (64 hex digits)")


def nullable(spec: Spec) -> Spec:
    return Either((Type((type(None),), "null"), spec), f"{spec.what} or null")


_BYTES = Record({"bytes": STR}, closed=True)
_NDARRAY = Record({"ndarray": ANY, "dtype": NumpyDType(), "shape": SHAPE}, closed=True)
FILE_ENTRY = Either((Record({"sha256": SHA256, "bytes": COUNT}), SHA256), "an object {sha256, bytes}")


def files_spec(names) -> Spec:
    """``files``: the sha256 and size of each of ``names``."""
    return Record({n: FILE_ENTRY for n in names}, what="an object {file: {sha256, bytes}} listing " + ", ".join(names))


LOC = Record({"kind": Enum(("input", "output", "workspace", "weights")), "dtype": DTYPE, "shape": SHAPE},
             {"index": COUNT, "offset": COUNT})
IO = Record({"name": STR, "dtype": DTYPE, "shape": SHAPE})
INDEX_CHECK = Record({"arg": COUNT, "size": COUNT, "axis": COUNT, "node": STR}, {"onnx_op": STR, "sizes": ListOf(COUNT)},
                     closed=True)
FALLBACK_BODY = Record({"name": STR, "pattern": STR, "inputs": ListOf(COUNT), "outputs": ListOf(COUNT),
                        "values": ListOf(Record({"dtype": DTYPE, "shape": SHAPE},
                                                {"var": STR, "const": AttrValue(), "name": nullable(STR), "op": STR,
                                                 "inputs": ListOf(COUNT), "attrs": MapOf(AttrValue()),
                                                 "node_name": nullable(STR)}))})
STEP = Record({"kernel": STR, "symbol": nullable(STR), "native": BOOL, "parallel": BOOL, "args": ListOf(LOC), "out": LOC,
               "nodes": ListOf(STR), "index_checks": ListOf(INDEX_CHECK), "schedule": nullable(OBJECT)},
              {"body": FALLBACK_BODY})


class _Block(Spec):
    """A block of the control-flow program (``codegen/model/plan_control.py``): recursive."""
    what = "a program block (a list of steps, if and loop items)"

    def check(self, value, path):
        ListOf(PROGRAM_ITEM).check(value, path)


class _Item(Spec):
    """One program item, checked as the record its one key names."""
    what = "an item {steps}, {concurrent}, {if} or {loop}"

    def check(self, value, path):
        kinds = [k for k in PROGRAM_ITEMS if isinstance(value, dict) and k in value]
        if len(kinds) != 1:
            raise FieldError(path, self.what, value)
        Record({kinds[0]: PROGRAM_ITEMS[kinds[0]]}, closed=True).check(value, path)


_LOCS = ListOf(LOC)
_OUTS = ListOf(nullable(LOC))
PROGRAM_ITEM = _Item()
PROGRAM_ITEMS = {
    "steps": ListOf(COUNT),
    "concurrent": ListOf(COUNT),
    "if": Record({"node": STR, "cond": LOC, "then": _Block(), "else": _Block(), "then_out": _LOCS,
                  "else_out": _LOCS, "out": _OUTS}, {"refused": MapOf(STR)}),
    "loop": Record({"node": STR, "trip": LOC, "cond": LOC, "init": _LOCS, "iteration": LOC, "cond_in": LOC,
                    "carried": _LOCS, "body": _Block(), "cond_out": LOC, "carried_out": _LOCS, "scan_out": _LOCS,
                    "out": _OUTS}, {"swap": LOC}),
}
RUN_LIST = {
    "inputs": ListOf(IO), "outputs": ListOf(IO), "steps": ListOf(STEP),
    "copies": ListOf(Record({"dst": LOC, "src": LOC})),
    "memory_plan": Record({"workspace_bytes": COUNT, "naive_bytes": COUNT, "offsets": ListOf(COUNT)}, {"align": COUNT}),
    "weights": Record({"bytes": COUNT, "constants": ListOf(Record({"name": STR, "offset": COUNT, "bytes": COUNT}))},
                      {"align": COUNT}),
}
PROVENANCE = {       # written by both exporters; read by ``tiletune inspect`` and ``stats()``
    "source": nullable(OBJECT), "shape_bindings": MapOf(SHAPE), "passes": ListOf(STR),
    "kernels": ListOf(Record({"kernel": STR, "nodes": ListOf(STR)}, {"symbol": nullable(STR), "native": BOOL,
                                                                    "schedule": nullable(OBJECT),
                                                                    "precision": nullable(OBJECT)})),
    "fallback": ListOf(Record({"kernel": STR, "nodes": ListOf(STR)}, {"share_of_run_time": nullable(NUMBER)})),
    "memory_plan": Record({"workspace_bytes": COUNT, "naive_bytes": COUNT}),
    "weights_bytes": COUNT, "compile_seconds": nullable(NUMBER), "tiletune": nullable(STR), "parity": nullable(OBJECT),
    "precision": nullable(OBJECT), "constants": nullable(OBJECT), "host_tail": nullable(OBJECT),
}
#: graph.json's host tail (tensorir/graph/host_tail.py): its ONNX model in base64 and the model's output order
HOST_TAIL = Record({"onnx": STR, "outputs": ListOf(STR)})


def manifest_spec(files, required: dict, optional: dict) -> Spec:
    """A manifest listing ``files``, with the target's own fields beside the provenance."""
    return Record({"format": STR, "files": files_spec(files), **required}, {**PROVENANCE, **optional})


def graph_spec(required: dict, optional: dict) -> Spec:
    """A ``graph.json``: the run list and the target's own fields."""
    return Record({"format": STR, **RUN_LIST, **required}, {"name": STR, "program": _Block(), "host_tail": HOST_TAIL,
                                                            **optional})


SIGNATURE = Record({"format": STR, "name": STR, "parallel": BOOL,
                    "args": ListOf(Record({"name": STR, "dtype": DTYPE, "written": BOOL,
                                           "shape": ListOf(Either((COUNT, STR), "a non-negative integer or a name"))})),
                    "size_vars": ListOf(Record({"name": STR, "dtype": DTYPE}))},
                   {"symbol": STR, "call_order": ListOf(ListOf(ANY))})
# CUDA allows a grid of up to 2**31 - 1 blocks along x, and 1024 threads a block
CUDA_KERNEL = Record({"symbol": STR, "grid": ListOf(Int(1, (1 << 31) - 1)), "block": ListOf(Int(1, 1024)),
                      "shared_bytes": COUNT, "signature": SIGNATURE, "aligned": MapOf(COUNT, keys="[0-9]+")},
                     {"schedule": nullable(OBJECT)})
