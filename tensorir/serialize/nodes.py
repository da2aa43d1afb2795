"""The node types of tensor-expression JSON documents (serialize.py): how each registered class is
written (its fields) and rebuilt and checked (``make``); reducers loaded from their stored expressions.

Every dataclass of expr, stmt, buffer, extern, tensor, schedule and schedule.layout is registered by its
fields; operations, tensors and tensor intrinsics by their constructor's arguments; ``CommReducer``
and ``Schedule`` have their own writers and readers (serialize/__init__.py, serialize/load.py).
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from .. import dtype as dt
from .. import expr, stmt, tensor
from ..schedule import layout as schedule_layout
from ..buffer import DeclBuffer
from ..error import TVMError
from ..expr import Expr, Var
from ..extern import ExternOp
from ..reduce import CommReducer, max_reducer, min_reducer, sum_reducer
from ..scan import ScanOp, _check_dataflow
from ..schedule import AttachType, Schedule
from ..tensor import ComputeOp, IterVar, Operation, PlaceholderOp, Tensor, _check_bodies
from ..tensor_intrin import TensorIntrin
from ..visitor import substitute

FORMAT, VERSION = "tiletune.te", 1
BUILTIN_REDUCERS = {"sum": sum_reducer, "max": max_reducer, "min": min_reducer}
ENUMS = {"AttachType": AttachType}


class SerializeError(ValueError, TVMError):
    """A document that cannot be written or read; the message names the node and the field."""


# -- node types -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Codec:
    """How one node type is written (``fields``: name -> Python value) and read (``make``)."""
    cls: type
    fields: Callable[[Any], dict]
    make: Callable[[dict], Any]
    names: tuple                  # the fields of an entry
    required: frozenset           # those an entry must have (the others have defaults)
    labels: tuple = ()            # fields that only name the object: blank in structural_hash
    identity: bool = True         # two equal-looking objects stay two (Vars, operations...)

    @property
    def type_name(self) -> str:
        return self.cls.__name__


def _dataclass_codec(cls) -> Codec:
    fs = [f for f in dataclasses.fields(cls) if f.name != "uid"]
    names = tuple(f.name for f in fs)
    required = frozenset(f.name for f in fs if f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)

    def make(d):
        for f in fs:
            if f.name in d:
                _check_annotation(f.name, f.type, d[f.name])
        return cls(**d)
    value_like = issubclass(cls, (Expr, stmt.Stmt, tensor.Range)) and not issubclass(cls, Var)
    labels = ("name",) if issubclass(cls, (Var, stmt.Buffer, DeclBuffer, stmt.LoweredFunc)) else ()
    return Codec(cls, lambda o: {n: getattr(o, n) for n in names}, make, names, required, labels,
                 identity=not value_like)


_TYPES = {"str": str, "int": int, "float": (int, float), "bool": (bool, int), "tuple": tuple, "None": type(None),
          "Expr": Expr, "Var": Var, "Stmt": stmt.Stmt, "IterVar": IterVar,
          "Range": tensor.Range, "IndexMap": schedule_layout.IndexMap}


def _check_annotation(name: str, annotation: str, value) -> None:
    """Check ``value`` against a field annotation such as ``"Expr | tuple | None"`` (names not in
    ``_TYPES``, such as ``Any``, accept anything)."""
    allowed = []
    annotation = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    for word in annotation.split("|"):
        t = _TYPES.get(word.strip())
        if t is None:
            return
        allowed.append(t)
    if not any(isinstance(value, t) for t in allowed):
        raise SerializeError(f"field {name!r} must be {annotation}, got {type(value).__name__} {value!r}")
    if name == "dtype":
        dt.check(value)


def expect(value, types, what: str):
    """``value`` when it is one of ``types``, else a SerializeError naming ``what``."""
    if not isinstance(value, types):
        raise SerializeError(f"{what}: got {type(value).__name__} {value!r}")
    return value


def _make_placeholder(d) -> PlaceholderOp:
    expect(d["name"], str, "name")
    for e in expect(d["shape"], tuple, "shape"):
        expect(e, Expr, "shape entry")
    return PlaceholderOp(d["name"], d["shape"], dt.check(expect(d["dtype"], str, "dtype")))


def _make_compute(d) -> ComputeOp:
    expect(d["name"], str, "name")
    for iv in expect(d["axis"], tuple, "axis"):
        expect(iv, IterVar, "axis entry")
    if not expect(d["body"], tuple, "body"):
        raise SerializeError("body: a compute has at least one output")
    for b in d["body"]:
        expect(b, Expr, "body entry")
    _check_bodies(d["name"], d["body"])
    return ComputeOp(d["name"], d["axis"], d["body"], d["tag"], d["attrs"])


def _make_scan(d) -> ScanOp:
    for k in ("init", "update", "state_placeholder", "inputs"):
        for t in expect(d[k], tuple, k):
            expect(t, Tensor, f"{k} entry")
    op = ScanOp(**{**d, "scan_axis": expect(d["scan_axis"], IterVar, "scan_axis")})
    _check_dataflow(op)
    return op


def _make_extern(d) -> ExternOp:
    expect(d["body"], stmt.Stmt, "body")
    for k in ("input_buffers", "output_buffers"):
        for b in expect(d[k], tuple, k):
            expect(b, DeclBuffer, f"{k} entry")
    return ExternOp(**d)


def _make_tensor(d) -> Tensor:
    op = expect(d["op"], Operation, "op")
    k = expect(d["value_index"], int, "value_index")
    if not 0 <= k < op.num_outputs:
        raise SerializeError(f"value_index {k} out of range: operation {op.name} has {op.num_outputs} outputs")
    return op.output(k)


def _codec(cls, fields: dict, make, labels=("name",), identity=True) -> Codec:
    """A codec whose entry has ``fields`` (name -> getter), all required."""
    return Codec(cls, lambda o: {k: get(o) for k, get in fields.items()}, make, tuple(fields),
                 frozenset(fields), labels, identity)


def _attr(name: str):
    return lambda o: getattr(o, name)


_OP_TAIL = {"tag": _attr("tag"), "attrs": _attr("attrs")}
CODECS: dict[str, Codec] = {}
for _mod in (importlib.import_module(f"tensorir.{m}")
             for m in ("expr", "stmt", "buffer", "extern", "tensor", "schedule", "schedule.layout")):
    for _cls in vars(_mod).values():
        if isinstance(_cls, type) and dataclasses.is_dataclass(_cls) and _cls.__module__ == _mod.__name__:
            CODECS[_cls.__name__] = _dataclass_codec(_cls)
for _c in (
        _codec(PlaceholderOp, {k: _attr(k) for k in ("name", "shape", "dtype")}, _make_placeholder),
        _codec(ComputeOp, {"name": _attr("name"), "axis": _attr("axis"), "body": _attr("bodies"), **_OP_TAIL},
               _make_compute),
        _codec(ScanOp, {**{k: _attr(k) for k in ("name", "scan_axis", "init", "update", "state_placeholder",
                                                  "inputs")}, **_OP_TAIL}, _make_scan),
        _codec(ExternOp, {"name": _attr("name"), "inputs": _attr("inputs"),
                          "input_buffers": _attr("input_placeholders"), "output_buffers": _attr("output_placeholders"),
                          "body": _attr("body"), **_OP_TAIL}, _make_extern),
        _codec(Tensor, {"op": _attr("op"), "value_index": _attr("value_index")}, _make_tensor, (), False),
        _codec(TensorIntrin, {k: _attr(k) for k in ("name", "op", "inputs", "buffers", "body", "reset", "update",
                                                    "scalar_params")}, lambda d: TensorIntrin(**d))):
    CODECS[_c.type_name] = _c
CODECS["CommReducer"] = Codec(CommReducer, None, None, ("name", "builtin", "forms"), frozenset({"name"}), ("name",))
CODECS["Schedule"] = Codec(Schedule, None, None, ("outputs", "stages", "groups", "stage_map", "attrs"),
                           frozenset({"outputs", "stages", "stage_map"}))
_BY_CLASS = {c.cls: c for c in CODECS.values()}
assert len(_BY_CLASS) == len(CODECS), "two node types share a class name"


def codec_of(obj) -> Codec | None:
    return _BY_CLASS.get(type(obj))


@contextmanager
def deep_recursion():
    """Deep expressions recurse deeply."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


class StoredReducer:
    """The functions of a loaded reducer: substitution into the stored expressions, per dtypes."""

    def __init__(self, name: str, forms: dict):
        self.name, self.forms = name, forms  # (is_tuple, dtypes) -> (lhs, rhs, result, identity)

    def form(self, is_tuple: bool, dtypes: tuple):
        f = self.forms.get((is_tuple, dtypes))
        if f is None:
            saved = "; ".join(("tuple " if t else "") + ", ".join(d) for t, d in self.forms) or "no dtype"
            raise TypeError(f"reducer {self.name} was loaded from JSON with its functions for {saved} only, "
                            f"not for {', '.join(dtypes)}")
        return f

    def combine(self, a, b):
        is_tuple = isinstance(a, tuple)
        a, b = (a, b) if is_tuple else ((a,), (b,))
        a, b = tuple(map(expr.convert, a)), tuple(map(expr.convert, b))
        lhs, rhs, result, _ = self.form(is_tuple, tuple(x.dtype for x in a))
        out = substitute(result, {**dict(zip(lhs, a)), **dict(zip(rhs, b))})
        return out if is_tuple else out[0]

    def identity(self, *dtypes):
        if (False, dtypes) in self.forms:
            return self.forms[(False, dtypes)][3][0]
        return self.form(True, dtypes)[3]


__all__ = ["BUILTIN_REDUCERS", "CODECS", "ENUMS", "FORMAT", "VERSION", "Codec", "SerializeError", "StoredReducer"]
