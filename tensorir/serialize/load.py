"""Reading tensor-expression JSON documents (see serialize.py for the format): only registered node
types are built, from their checked fields; no eval, no pickle, no code."""
from __future__ import annotations

import json
from typing import Any

from ..expr import Expr, Var
from ..reduce import CommReducer
from ..schedule import IterVarAttr, Schedule, Stage
from ..schedule.group import StageGroup
from .nodes import BUILTIN_REDUCERS, CODECS, ENUMS, Codec, SerializeError, StoredReducer, expect
from ..tensor import Operation


class Reader:
    """Builds the nodes of one document on demand (each once), keeping the path for error messages."""
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
        return list(self.value(read_array(self, x, "list")))

    def tag_dict(self, x):
        out = {}
        for item in read_array(self, x, "dict"):
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
        except SerializeError as e:
            if str(e).startswith("load_json:"):
                raise
            raise self.fail(str(e)) from None
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
        return codec.make(fields)

    def reducer(self, entry: dict) -> CommReducer:
        name = entry["name"]
        if not isinstance(name, str):
            raise self.fail(f"a reducer's name must be a string, got {name!r}")
        if entry.get("builtin"):
            if name not in BUILTIN_REDUCERS:
                raise self.fail(f"unknown built-in reducer {name!r} (known: {', '.join(BUILTIN_REDUCERS)})")
            return BUILTIN_REDUCERS[name]
        forms = {}
        for form in read_array(self, entry.get("forms", []), "forms"):
            if not isinstance(form, dict) or set(form) != {"tuple", "lhs", "rhs", "result", "identity"}:
                raise self.fail(f"reducer {name}: a form is {{tuple, lhs, rhs, result, identity}}, got {form!r:.80}")
            lhs, rhs, result, ident = (self.value(read_array(self, form[k], k))
                                       for k in ("lhs", "rhs", "result", "identity"))
            parts = [lhs, rhs, result, ident]
            if any(len(p) != len(lhs) or not all(isinstance(e, Expr) for e in p) for p in parts) or \
                    not all(isinstance(v, Var) for v in lhs + rhs):
                raise self.fail(f"reducer {name}: a form needs as many lhs and rhs Vars, results and identities")
            forms[(bool(form["tuple"]), tuple(v.dtype for v in lhs))] = tuple(parts)
        stored = StoredReducer(name, forms)
        return CommReducer(name, stored.combine, stored.identity)

    def schedule(self, entry: dict) -> Schedule:
        sch = Schedule([])
        allowed = set(vars(sch))
        self.path.append("outputs")
        sch.outputs = [expect(op, Operation, "output") for op in expect(self.value(entry["outputs"]), list, "outputs")]
        self.path.pop()
        stages = [expect(r, dict, "stage record") for r in read_array(self, entry["stages"], "stages")]
        groups = [expect(r, dict, "group record") for r in read_array(self, entry.get("groups", []), "groups")]
        for i, rec in enumerate(stages):  # every stage exists before any record refers to one
            self.path.append(f"stage {i}")
            sch.stages.append(Stage(expect(self.value(rec.get("op")), Operation, "op"), sch))
            self.path.pop()
        sch.groups = [StageGroup(sch, [], None) for _ in groups]
        self.stages, self.groups = sch.stages, sch.groups
        try:
            records = [(st, rec, f"stage {st.op.name}") for st, rec in zip(sch.stages, stages)]
            records += [(g, rec, f"group {i}") for i, (g, rec) in enumerate(zip(sch.groups, groups))]
            for obj, rec, where in records:
                self.path.append(where)
                self.restore(obj, rec)
                self.path.pop()
            self.path.append("stage_map")
            for item in read_array(self, entry["stage_map"], "stage_map"):
                if not isinstance(item, list) or len(item) != 2:
                    raise self.fail(f"item {item!r} is not [operation, stage index]")
                sch.stage_map[expect(self.value(item[0]), Operation, "operation")] = self.tag_stage(item[1])
            self.path.pop()
            for k, v in expect(entry.get("attrs", {}), dict, "attrs").items():
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


def read_array(r: Reader, x, what: str) -> list:
    if not isinstance(x, list):
        raise r.fail(f"{what} must be a JSON array, got {json.dumps(x)[:80]}")
    return x
