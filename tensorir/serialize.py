"""Tensor-expression objects as JSON data: ``save_json`` / ``load_json`` (TVM's ``tvm.ir.save_json``)
and ``structural_hash``.

A document is ``{"format": "tiletune.te", "version": 1, "root": V, "nodes": [...], "var_order": [...]}``.
Every object of a registered node type (expressions, statements, buffers, iter vars, ranges, tensors,
operations, reducers, relations, tensor intrinsics, schedules) is one entry of ``nodes``, written once
and referenced by index wherever it appears: a Var shared by two expressions is one Var after loading.
An entry is ``{"type": T, <field>: V, ...}``.  A value V is JSON null, a bool, an int, a string, an
array (a Python tuple) or a one-key object: ``{"ref": k}`` (node k), ``{"float": "1.5"}`` (repr, so
``nan`` and ``inf`` survive), ``{"list": [...]}``, ``{"dict": [[key, value], ...]}``,
``{"enum": [name, value]}``, and inside a schedule ``{"stage": i}``, ``{"group": i}``,
``{"iter_var_attr": [kind, stage, axis]}``.  ``var_order`` lists the Vars in creation order, which
the simplifier uses to order terms, so a loaded DAG lowers to the same text.

A reducer's Python functions travel as data, as in TVM: ``fcombine`` evaluated on fresh variables
and ``fidentity`` for each dtype the document reduces, stored as expressions; the loaded reducer
substitutes into them.  ``te.sum`` / ``te.max`` / ``te.min`` are stored by name and load as themselves.

Loading builds registered types from their fields only (no eval, no pickle, no code) and checks
them; a malformed document raises :class:`SerializeError` naming the node and field.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import importlib
import json
import sys
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np

from . import buffer, expr, schedule, schedule_layout, stmt, tensor
from . import dtype as dt
from .error import TVMError
from .expr import Expr, Reduce, Var
from .reduce import CommReducer, max_reducer, min_reducer, sum_reducer
from .extern import ExternOp
from .scan import ScanOp, _check_dataflow
from .schedule import AttachType, IterVarAttr, Schedule, Stage
from .schedule_group import StageGroup
from .tensor import ComputeOp, IterVar, Operation, PlaceholderOp, Tensor, _check_bodies
from .tensor_intrin import TensorIntrin
from .visitor import substitute

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
    labels = ("name",) if issubclass(cls, (Var, stmt.Buffer, buffer.DeclBuffer, stmt.LoweredFunc)) else ()
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


def _expect(value, types, what: str):
    if not isinstance(value, types):
        raise SerializeError(f"{what}: got {type(value).__name__} {value!r}")
    return value


def _make_compute(d) -> ComputeOp:
    _expect(d["name"], str, "name")
    for iv in _expect(d["axis"], tuple, "axis"):
        _expect(iv, IterVar, "axis entry")
    if not _expect(d["body"], tuple, "body"):
        raise SerializeError("body: a compute has at least one output")
    for b in d["body"]:
        _expect(b, Expr, "body entry")
    _check_bodies(d["name"], d["body"])
    return ComputeOp(d["name"], d["axis"], d["body"], d["tag"], d["attrs"])


def _make_scan(d) -> ScanOp:
    for k in ("init", "update", "state_placeholder", "inputs"):
        for t in _expect(d[k], tuple, k):
            _expect(t, Tensor, f"{k} entry")
    op = ScanOp(**{**d, "scan_axis": _expect(d["scan_axis"], IterVar, "scan_axis")})
    _check_dataflow(op)
    return op


def _make_extern(d) -> ExternOp:
    _expect(d["body"], stmt.Stmt, "body")
    for k in ("input_buffers", "output_buffers"):
        for b in _expect(d[k], tuple, k):
            _expect(b, buffer.DeclBuffer, f"{k} entry")
    return ExternOp(**d)


def _make_tensor(d) -> Tensor:
    op = _expect(d["op"], Operation, "op")
    k = _expect(d["value_index"], int, "value_index")
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
for _mod in map(importlib.import_module, ("tensorir.expr", "tensorir.stmt", "tensorir.buffer", "tensorir.extern",
                                         "tensorir.tensor", "tensorir.schedule", "tensorir.schedule_layout")):
    for _cls in vars(_mod).values():
        if isinstance(_cls, type) and dataclasses.is_dataclass(_cls) and _cls.__module__ == _mod.__name__:
            CODECS[_cls.__name__] = _dataclass_codec(_cls)
for _c in (
        _codec(PlaceholderOp, {k: _attr(k) for k in ("name", "shape", "dtype")}, lambda d: PlaceholderOp(**d)),
        _codec(ComputeOp, {"name": _attr("name"), "axis": _attr("axis"), "body": _attr("bodies"), **_OP_TAIL},
               _make_compute),
        _codec(ScanOp, {**{k: _attr(k) for k in ("name", "scan_axis", "init", "update", "state_placeholder",
                                                  "inputs")}, **_OP_TAIL}, _make_scan),
        _codec(ExternOp, {"name": _attr("name"), "inputs": _attr("inputs"),
                                 "input_buffers": _attr("input_placeholders"),
                                 "output_buffers": _attr("output_placeholders"), "body": _attr("body"), **_OP_TAIL},
               _make_extern),
        _codec(Tensor, {"op": _attr("op"), "value_index": _attr("value_index")}, _make_tensor, (), False),
        _codec(TensorIntrin, {k: _attr(k) for k in ("name", "op", "inputs", "buffers", "body", "reset", "update",
                                                    "scalar_params")}, lambda d: TensorIntrin(**d))):
    CODECS[_c.type_name] = _c
CODECS["CommReducer"] = Codec(CommReducer, None, None, ("name", "builtin", "forms"), frozenset({"name"}), ("name",))
CODECS["Schedule"] = Codec(Schedule, None, None, ("outputs", "stages", "groups", "stage_map", "attrs"),
                           frozenset({"outputs", "stages", "stage_map"}))
_BY_CLASS = {c.cls: c for c in CODECS.values()}
assert len(_BY_CLASS) == len(CODECS), "two node types share a class name"


def _codec_of(obj) -> Codec | None:
    return _BY_CLASS.get(type(obj))


@contextmanager
def _deep():
    """Deep expressions recurse deeply."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# -- writing ----------------------------------------------------------------------------------------
class _Writer:
    def __init__(self, anonymous: bool = False):
        self.anonymous = anonymous            # structural_hash: labels blank, equal values merged
        self.nodes: list[dict] = []
        self.memo: dict[int, tuple[Any, int]] = {}   # id -> (object kept alive, index)
        self.merged: dict[str, int] = {}
        self.vars: list[tuple[int, int]] = []        # (uid, index)
        self.reducers: dict[int, tuple[dict, set]] = {}
        self.path: list[str] = []
        self.active: set[int] = set()
        self.stages: dict[int, int] | None = None
        self.groups: dict[int, int] | None = None

    def fail(self, msg: str) -> SerializeError:
        where = " / ".join(self.path) or "root"
        return SerializeError(f"save_json: {where}: {msg}")

    def value(self, x) -> Any:
        if x is None or isinstance(x, bool):
            return x
        if isinstance(x, enum.Enum):
            if type(x).__name__ not in ENUMS:
                raise self.fail(f"cannot save the enum {type(x).__name__}")
            return {"enum": [type(x).__name__, x.value]}
        if isinstance(x, IterVarAttr):
            return {"iter_var_attr": [str(x), self.value(x.stage), self.value(x.iv)]}
        if isinstance(x, (np.integer, np.floating, np.bool_)):
            return self.value(x.item())
        if isinstance(x, (str, int)):
            return str(x) if isinstance(x, str) else int(x)
        if isinstance(x, float):
            return {"float": repr(float(x))}
        if isinstance(x, tuple):
            return [self.value(v) for v in x]
        if isinstance(x, list):
            return {"list": [self.value(v) for v in x]}
        if isinstance(x, dict):
            items = [[self.value(k), self.value(v)] for k, v in x.items()]
            if self.anonymous and all(isinstance(k, str) for k in x):
                items.sort(key=lambda kv: kv[0])
            return {"dict": items}
        for kind, table in (("stage", self.stages), ("group", self.groups)):
            if isinstance(x, Stage if kind == "stage" else StageGroup):
                if table is None or id(x) not in table:
                    raise self.fail(f"{x!r} is not a {kind} of the schedule being saved")
                return {kind: table[id(x)]}
        codec = _codec_of(x)
        if codec is None:
            raise self.fail(f"cannot save {type(x).__name__} {x!r}: not a tensor-expression node or plain data "
                            "(Python functions and other objects do not travel as JSON)")
        return {"ref": self.node(x, codec)}

    def node(self, x, codec: Codec) -> int:
        hit = self.memo.get(id(x))
        if hit is not None:
            return hit[1]
        if id(x) in self.active:
            raise self.fail(f"{codec.type_name} refers to itself")
        self.active.add(id(x))
        self.path.append(f"{codec.type_name} {getattr(x, 'name', '')}".rstrip())
        try:
            entry = {"type": codec.type_name}
            if codec.cls is Schedule:
                entry.update(self.schedule(x))
            elif codec.cls is CommReducer:
                entry.update(self.reducer(x))
            else:
                for k, v in codec.fields(x).items():
                    self.path.append(k)
                    entry[k] = "" if self.anonymous and k in codec.labels else self.value(v)
                    self.path.pop()
            index = self.append(x, codec, entry)
            if isinstance(x, Reduce):
                self.reducer_form(x)
        finally:
            self.path.pop()
            self.active.discard(id(x))
        return index

    def append(self, x, codec: Codec, entry: dict) -> int:
        if self.anonymous and not codec.identity:
            text = json.dumps(entry, sort_keys=True)
            index = self.merged.setdefault(text, len(self.nodes))
            if index < len(self.nodes):
                self.memo[id(x)] = (x, index)
                return index
        index = len(self.nodes)
        self.nodes.append(entry)
        self.memo[id(x)] = (x, index)
        if isinstance(x, Var):
            self.vars.append((x.uid, index))
        return index

    # -- reducers: functions stored as expressions, per reduced dtype ----------------------------
    def reducer(self, r: CommReducer) -> dict:
        for name, builtin in BUILTIN_REDUCERS.items():
            if r is builtin:
                return {"name": name, "builtin": True}
        entry = {"name": "" if self.anonymous else r.name, "forms": []}
        self.reducers[id(r)] = (entry, set())
        return entry

    def reducer_form(self, red: Reduce) -> None:
        slot = self.reducers.get(id(red.combiner))
        is_tuple = isinstance(red.source, tuple)
        dtypes = tuple(e.dtype for e in red.source) if is_tuple else (red.dtype,)
        if slot is None or (is_tuple, dtypes) in slot[1]:
            return
        slot[1].add((is_tuple, dtypes))
        r = red.combiner
        stored = getattr(r.fcombine, "__self__", None)
        if isinstance(stored, _StoredReducer) and (is_tuple, dtypes) in stored.forms:
            lhs, rhs, result, ident = stored.forms[(is_tuple, dtypes)]  # loaded: written back as it came
        else:
            lhs = tuple(Var(f"x{k}", d) for k, d in enumerate(dtypes))
            rhs = tuple(Var(f"y{k}", d) for k, d in enumerate(dtypes))
            try:
                if is_tuple:
                    result, ident = r.combine_tuple(lhs, rhs), r.identity_tuple(dtypes)
                else:
                    result, ident = (r.combine(lhs[0], rhs[0]),), (r.identity(dtypes[0]),)
            except Exception as e:  # noqa: BLE001 - the user's functions may raise anything
                raise self.fail(f"reducer {r.name}: evaluating its functions for {', '.join(dtypes)} failed: "
                                f"{type(e).__name__}: {e}") from e
        self.path.append(f"reducer {r.name}")
        slot[0]["forms"].append({"tuple": is_tuple, "lhs": self.value(lhs), "rhs": self.value(rhs),
                                 "result": self.value(tuple(result)), "identity": self.value(tuple(ident))})
        self.path.pop()

    # -- schedules: stages and groups are records of the schedule, referenced by position -------------
    def schedule(self, sch: Schedule) -> dict:
        self.stages = {id(st): i for i, st in enumerate(sch.stages)}
        self.groups = {id(g): i for i, g in enumerate(sch.groups)}
        try:
            out = {"outputs": self.value(list(sch.outputs))}
            out["stages"] = [self.record(st, f"stage {st.op.name}") for st in sch.stages]
            out["groups"] = [self.record(g, g.name) for g in sch.groups]
            out["stage_map"] = [[self.value(op), self.stages[id(st)]] for op, st in sch.stage_map.items()]
            rest = {k: v for k, v in vars(sch).items() if k not in ("outputs", "stages", "groups", "stage_map")}
            if rest:
                out["attrs"] = {k: self.value(v) for k, v in rest.items()}
            return out
        finally:
            self.stages = self.groups = None

    def record(self, obj, where: str) -> dict:
        self.path.append(where)
        out = {}
        for k, v in vars(obj).items():
            if k != "schedule":
                self.path.append(k)
                out[k] = self.value(v)
                self.path.pop()
        self.path.pop()
        return out


def _document(obj, anonymous: bool) -> dict:
    w = _Writer(anonymous)
    with _deep():
        root = w.value(obj)
    doc = {"format": FORMAT, "version": VERSION, "root": root, "nodes": w.nodes}
    if not anonymous:
        doc["var_order"] = [index for _, index in sorted(w.vars)]
    return doc


def save_json(obj) -> str:
    """The JSON text of ``obj``: a tensor, operation, schedule, expression, statement... or a tuple,
    list or dict of them (one document, so objects they share stay shared after loading)."""
    return json.dumps(_document(obj, anonymous=False), separators=(",", ":"))


def structural_hash(obj) -> str:
    """A hex SHA-256 of ``obj``'s structure: independent of the names of tensors, variables and
    buffers, of object identities (equal subexpressions count once) and of the process; distinct
    Vars and operations stay distinct.  Constants, dtypes, shapes, operations, tags and attrs count."""
    text = json.dumps(_document(obj, anonymous=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# -- reading ----------------------------------------------------------------------------------------
class _StoredReducer:
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


class _Reader:
    TAGS = ("ref", "float", "list", "dict", "enum", "stage", "group", "iter_var_attr")

    def __init__(self, nodes: list):
        self.nodes = nodes
        self.done: dict[int, Any] = {}
        self.tuples: dict[tuple, tuple] = {}
        self.active: set[int] = set()
        self.path: list[str] = []
        self.stages: list | None = None
        self.groups: list | None = None

    def fail(self, msg: str) -> SerializeError:
        return SerializeError(f"load_json: {' / '.join(self.path) or 'document'}: {msg}")

    def value(self, v) -> Any:
        if v is None or isinstance(v, (bool, int, str, float)):
            return v
        if isinstance(v, list):  # tuples of the same objects are one tuple (a tuple reduction's shared source)
            t = tuple(self.value(x) for x in v)
            if not t or any(x is None or isinstance(x, (bool, int, str, float)) for x in t):
                return t
            return self.tuples.setdefault(tuple(map(id, t)), t)
        if not isinstance(v, dict) or len(v) != 1 or next(iter(v)) not in self.TAGS:
            raise self.fail(f"bad value {json.dumps(v)[:80]}: expected a JSON scalar, an array or one of "
                            f"{{{', '.join(self.TAGS)}: ...}}")
        tag, x = next(iter(v.items()))
        return getattr(self, "tag_" + tag)(x)

    def tag_ref(self, k):
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(self.nodes):
            raise self.fail(f"reference {k!r} is not a node index (the document has {len(self.nodes)} nodes)")
        return self.node(k)

    def tag_float(self, x):
        try:
            return float(x)
        except (TypeError, ValueError):
            raise self.fail(f"bad float {x!r}") from None

    def tag_list(self, x):
        return list(self.value(_array(self, x, "list")))

    def tag_dict(self, x):
        out = {}
        for item in _array(self, x, "dict"):
            if not isinstance(item, list) or len(item) != 2:
                raise self.fail(f"dict item {item!r} is not a [key, value] pair")
            out[self.value(item[0])] = self.value(item[1])
        return out

    def tag_enum(self, x):
        if not isinstance(x, list) or len(x) != 2 or x[0] not in ENUMS:
            raise self.fail(f"bad enum {x!r} (known: {', '.join(ENUMS)})")
        try:
            return ENUMS[x[0]](x[1])
        except ValueError:
            raise self.fail(f"{x[1]!r} is not a value of {x[0]}") from None

    def tag_stage(self, i):
        return self._member(self.stages, i, "stage")

    def tag_group(self, i):
        return self._member(self.groups, i, "group")

    def _member(self, table, i, kind):
        if table is None:
            raise self.fail(f"a {kind} reference outside a schedule")
        if not isinstance(i, int) or not 0 <= i < len(table):
            raise self.fail(f"{kind} {i!r} does not exist (the schedule has {len(table)})")
        return table[i]

    def tag_iter_var_attr(self, x):
        if not isinstance(x, list) or len(x) != 3 or not isinstance(x[0], str):
            raise self.fail(f"bad iter_var_attr {x!r}: expected [kind, stage, axis]")
        return IterVarAttr(x[0], self.value(x[1]), self.value(x[2]))

    def node(self, k: int) -> Any:
        if k in self.done:
            return self.done[k]
        entry = self.nodes[k]
        kind = entry.get("type") if isinstance(entry, dict) else None
        self.path.append(f"node {k} ({kind})")
        if k in self.active:
            raise self.fail("the node refers to itself")
        codec = CODECS.get(kind) if isinstance(kind, str) else None
        if codec is None:
            raise self.fail(f"unknown node type {kind!r}" if isinstance(entry, dict) else
                            "a node must be a JSON object with a 'type'")
        self.active.add(k)
        try:
            obj = self.build(codec, entry)
        except SerializeError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise self.fail(f"{type(e).__name__}: {e}") from None
        self.active.discard(k)
        self.path.pop()
        self.done[k] = obj
        return obj

    def build(self, codec: Codec, entry: dict) -> Any:
        keys = set(entry) - {"type"}
        if keys - set(codec.names) or codec.required - keys:
            missing, unknown = sorted(codec.required - keys), sorted(keys - set(codec.names))
            raise self.fail(f"{codec.type_name} has fields {', '.join(codec.names)}" +
                            (f"; missing {', '.join(missing)}" if missing else "") +
                            (f"; unknown {', '.join(unknown)}" if unknown else ""))
        if codec.cls is Schedule:
            return self.schedule(entry)
        if codec.cls is CommReducer:
            return self.reducer(entry)
        fields = {}
        for k in codec.names:
            if k in entry:
                self.path.append(k)
                fields[k] = self.value(entry[k])
                self.path.pop()
        try:
            return codec.make(fields)
        except SerializeError as e:
            raise self.fail(str(e)) from None

    def reducer(self, entry: dict) -> CommReducer:
        name = entry["name"]
        if not isinstance(name, str):
            raise self.fail(f"a reducer's name must be a string, got {name!r}")
        if entry.get("builtin"):
            if name not in BUILTIN_REDUCERS:
                raise self.fail(f"unknown built-in reducer {name!r} (known: {', '.join(BUILTIN_REDUCERS)})")
            return BUILTIN_REDUCERS[name]
        forms = {}
        for form in _array(self, entry.get("forms", []), "forms"):
            if not isinstance(form, dict) or set(form) != {"tuple", "lhs", "rhs", "result", "identity"}:
                raise self.fail(f"reducer {name}: a form is {{tuple, lhs, rhs, result, identity}}, got {form!r:.80}")
            lhs, rhs, result, ident = (self.value(_array(self, form[k], k))
                                       for k in ("lhs", "rhs", "result", "identity"))
            parts = [lhs, rhs, result, ident]
            if any(len(p) != len(lhs) or not all(isinstance(e, Expr) for e in p) for p in parts) or \
                    not all(isinstance(v, Var) for v in lhs + rhs):
                raise self.fail(f"reducer {name}: a form needs as many lhs and rhs Vars, results and identities")
            forms[(bool(form["tuple"]), tuple(v.dtype for v in lhs))] = tuple(parts)
        stored = _StoredReducer(name, forms)
        return CommReducer(name, stored.combine, stored.identity)

    def schedule(self, entry: dict) -> Schedule:
        sch = Schedule([])
        allowed = set(vars(sch))
        self.path.append("outputs")
        sch.outputs = [_expect(op, Operation, "output") for op in _expect(self.value(entry["outputs"]), list,
                                                                           "outputs")]
        self.path.pop()
        stages, groups = _array(self, entry["stages"], "stages"), _array(self, entry.get("groups", []), "groups")
        for i, rec in enumerate(stages):
            self.path.append(f"stage {i}")
            op = self.value(_expect(rec, dict, "stage record").get("op"))
            sch.stages.append(Stage(_expect(op, Operation, "op"), sch))
            self.path.pop()
        sch.groups = [StageGroup(sch, [], None) for _ in groups]
        self.stages, self.groups = sch.stages, sch.groups
        try:
            for obj, rec, where in [(st, r, f"stage {st.op.name}") for st, r in zip(sch.stages, stages)] + \
                    [(g, _expect(r, dict, "group record"), f"group {i}") for i, (g, r) in enumerate(zip(sch.groups, groups))]:
                self.path.append(where)
                self.restore(obj, rec)
                self.path.pop()
            self.path.append("stage_map")
            for item in _array(self, entry["stage_map"], "stage_map"):
                if not isinstance(item, list) or len(item) != 2:
                    raise self.fail(f"item {item!r} is not [operation, stage index]")
                sch.stage_map[_expect(self.value(item[0]), Operation, "operation")] = self.tag_stage(item[1])
            self.path.pop()
            for k, v in _expect(entry.get("attrs", {}), dict, "attrs").items():
                if k not in allowed:
                    raise self.fail(f"unknown schedule attribute {k!r}")
                setattr(sch, k, self.value(v))
        finally:
            self.stages = self.groups = None
        return sch

    def restore(self, obj, rec: dict) -> None:
        """Set the attributes of a fresh stage or group from its record (only those it has)."""
        allowed = set(vars(obj)) - {"schedule"}
        for k, v in rec.items():
            if k not in allowed:
                raise self.fail(f"unknown attribute {k!r} (known: {', '.join(sorted(allowed))})")
            self.path.append(k)
            setattr(obj, k, self.value(v))
            self.path.pop()


def _array(r: _Reader, x, what: str) -> list:
    if not isinstance(x, list):
        raise r.fail(f"{what} must be a JSON array, got {json.dumps(x)[:80]}")
    return x


def load_json(text: str | bytes):
    """The object :func:`save_json` wrote (new objects; those shared in the document stay shared)."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as e:
        raise SerializeError(f"load_json: not a JSON document: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SerializeError(f"load_json: not a tiletune tensor-expression document (no \"format\": \"{FORMAT}\")")
    version = doc.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise SerializeError(f"load_json: format version {version!r} is not supported (this tiletune reads 1 to "
                             f"{VERSION}; a newer tiletune wrote it?)")
    r = _Reader(doc.get("nodes"))
    _array(r, r.nodes, "nodes")
    with _deep():
        r.path.append("var_order")
        for k in _array(r, doc.get("var_order", []), "var_order"):
            if not isinstance(r.tag_ref(k), Var):
                raise r.fail(f"node {k} is not a Var")
        r.path = ["root"]
        root = r.value(doc.get("root"))
    return root


__all__ = ["save_json", "load_json", "structural_hash", "SerializeError", "FORMAT", "VERSION"]
