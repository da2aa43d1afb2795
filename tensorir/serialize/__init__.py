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

import enum
import hashlib
import json
from typing import Any

import numpy as np

from ..expr import Reduce, Var
from ..reduce import CommReducer
from ..schedule import IterVarAttr, Schedule, Stage
from ..schedule.group import StageGroup
from .load import Reader, read_array
from .nodes import (BUILTIN_REDUCERS, ENUMS, FORMAT, VERSION, Codec, SerializeError, StoredReducer,
                              codec_of, deep_recursion)


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
        codec = codec_of(x)
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
        if isinstance(stored, StoredReducer) and (is_tuple, dtypes) in stored.forms:
            lhs, rhs, result, ident = stored.forms[(is_tuple, dtypes)]  # loaded: written back as it came
        else:
            lhs = tuple(Var(f"x{k}", d) for k, d in enumerate(dtypes))
            rhs = tuple(Var(f"y{k}", d) for k, d in enumerate(dtypes))
            try:
                if is_tuple:
                    result, ident = r.combine_tuple(lhs, rhs), r.identity_tuple(dtypes)
                else:
                    result, ident = (r.combine(lhs[0], rhs[0]),), (r.identity(dtypes[0]),)
            except Exception as e:
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
    with deep_recursion():
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
    missing = [k for k in ("root", "nodes") if k not in doc]
    if missing:
        raise SerializeError(f"load_json: the document has no {' and no '.join(map(repr, missing))}")
    r = Reader(doc["nodes"])
    read_array(r, r.nodes, "nodes")
    with deep_recursion():
        r.path.append("var_order")
        for k in read_array(r, doc.get("var_order", []), "var_order"):
            if not isinstance(r.tag_ref(k), Var):
                raise r.fail(f"node {k} is not a Var")
        r.path = ["root"]
        root = r.value(doc.get("root"))
    return root


__all__ = ["FORMAT", "VERSION", "SerializeError", "load_json", "save_json", "structural_hash"]
