"""Config spaces: named, typed knob spaces whose product a config indexes.

A template declares its knobs on the config it gets from :func:`autotune.get_config`::

    cfg.define_split("tile_y", y, num_outputs=2)        # SplitSpace: factor lists
    cfg.define_knob("parallel", [True, False])          # OtherOptionSpace: any JSON values
    cfg.define_reorder("order", [k, i, j], policy="all")  # ReorderSpace: permutations
    cfg.define_annotate("ann", [i, j], policy="try_unroll_vec")  # AnnotateSpace: per-axis annotations

and applies the chosen entity, which applies itself: ``yo, yi = cfg["tile_y"].apply(s, C, y)``.
Knobs that constrain one another are filtered after the last definition,
``cfg.multi_filter(lambda e: e["warp"].val <= e["block"].val)``: ``len(space)`` counts the configs kept, their
indices stay those of the product (``range_length``), and tuners only propose kept ones (``is_index_valid``).

While a task collects its space the template runs with a :class:`ConfigSpace`: every ``define_*``
adds a space and ``cfg[name]`` is that space's first entity.  Tuning instantiates the template with
a :class:`ConfigEntity` (``space.get(index)``), whose ``define_*`` calls do nothing.  A config index
is mixed radix over the knobs in definition order, the first knob varying fastest.
"""
from __future__ import annotations

import bisect
import itertools
import math
from typing import Any, Callable, Sequence


class InstantiationError(ValueError):
    """Raised by a template for a config it cannot realise; the trial is recorded as
    ``INSTANTIATION_ERROR`` and costs one trial."""


def _axis_length(axis) -> int:
    if isinstance(axis, int):
        return axis
    dom = getattr(axis, "dom", None)
    value = getattr(getattr(dom, "extent", None), "value", None)
    if not isinstance(value, int):
        raise ValueError(f"cannot define a split over {axis!r}: its extent must be a constant")
    return value


def _factors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# -- spaces and their entities -------------------------------------------------------------------------
class Space:
    """A finite list of entities of one kind."""
    kind = "space"

    def __init__(self, entities: Sequence):
        if not entities:
            raise ValueError(f"{type(self).__name__}: the space is empty (check its filter / candidates)")
        self.entities = list(entities)

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i: int):
        return self.entities[i]

    def index_of(self, val) -> int:
        """The position of the entity whose ``val`` equals ``val`` (ValueError if none)."""
        for i, e in enumerate(self.entities):
            if e.val == val:
                return i
        raise ValueError(f"{val!r} is not in {self}")

    def describe(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()}) len={len(self)}"


class SplitEntity:
    """Split factors outer to inner; ``size[0]`` is -1 (whatever is left)."""

    def __init__(self, size: Sequence[int]):
        self.size = [int(x) for x in size]

    @property
    def val(self) -> list[int]:
        return list(self.size)

    def apply(self, s, op, axis) -> list:
        """Split ``axis`` of ``s[op]`` into ``len(size)`` loops, outer first."""
        stage = s[op]
        out = []
        for i in range(1, len(self.size)):
            outer, axis = stage.split(axis, factor=math.prod(self.size[i:]))
            out.append(outer)
        return out + [axis]

    def __repr__(self) -> str:
        return f"{self.size}"


class SplitSpace(Space):
    """Ways to split an axis of ``product`` iterations into ``num_outputs`` loops.

    ``policy="factors"``: inner factors whose product divides ``product`` (no tails);
    ``"power2"``: inner factors powers of two up to ``product`` (tails are guarded);
    ``"candidate"``: the given ``candidate`` size lists.  ``max_factor`` bounds each inner factor and
    ``filter(entity) -> bool`` drops entities."""
    kind = "split"

    def __init__(self, product: int, num_outputs: int = 2, policy: str = "factors", candidate=None,
                 max_factor: int | None = None, filter: Callable | None = None):
        if num_outputs < 2:
            raise ValueError(f"define_split: num_outputs must be >= 2, got {num_outputs}")
        self.product, self.num_outputs, self.policy = product, num_outputs, policy
        bound = min(product, max_factor) if max_factor else product
        if policy == "factors":
            choices = [f for f in _factors(product) if f <= bound]
            sizes = [(-1, *inner) for inner in itertools.product(choices, repeat=num_outputs - 1)
                     if product % math.prod(inner) == 0]
        elif policy == "power2":
            choices = [2 ** e for e in range(bound.bit_length()) if 2 ** e <= bound]
            sizes = [(-1, *inner) for inner in itertools.product(choices, repeat=num_outputs - 1)
                     if math.prod(inner) <= product]
        elif policy == "candidate":
            if not candidate:
                raise ValueError("define_split(policy='candidate') needs candidate=[[...], ...]")
            sizes = [tuple(c) for c in candidate]
            for c in sizes:
                if len(c) != num_outputs:
                    raise ValueError(f"define_split: candidate {list(c)} does not have {num_outputs} factors")
        else:
            raise ValueError(f"define_split: unknown policy {policy!r}; use 'factors', 'power2' or 'candidate'")
        entities = [SplitEntity(sz) for sz in sizes]
        super().__init__([e for e in entities if filter is None or filter(e)])

    def index_of(self, val) -> int:
        return super().index_of([int(x) for x in val])

    def describe(self) -> str:
        return f"policy={self.policy}, product={self.product}, num_outputs={self.num_outputs}"


class OtherOptionEntity:
    def __init__(self, val):
        self.val = val

    def __repr__(self) -> str:
        return repr(self.val)


class OtherOptionSpace(Space):
    """A knob: one of ``values`` (JSON values: numbers, strings, booleans, None, lists)."""
    kind = "knob"

    def __init__(self, values: Sequence):
        super().__init__([OtherOptionEntity(v) for v in values])

    def describe(self) -> str:
        return f"[{', '.join(repr(e.val) for e in self.entities)}]"


class ReorderEntity:
    """A permutation of the axes it is applied to."""

    def __init__(self, perm: Sequence[int]):
        self.perm = [int(p) for p in perm]

    @property
    def val(self) -> list[int]:
        return list(self.perm)

    def apply(self, s, op, axes) -> list:
        ordered = [axes[i] for i in self.perm]
        s[op].reorder(*ordered)
        return ordered

    def __repr__(self) -> str:
        return f"{self.perm}"


class ReorderSpace(Space):
    """Loop orders of ``axes``: ``"all"`` permutations, ``"identity"``, or ``"candidate"`` orders
    (lists of the same axes)."""
    kind = "reorder"

    def __init__(self, axes: Sequence, policy: str = "all", candidate=None):
        n = len(axes)
        self.policy = policy
        if policy == "all":
            if n > 7:
                raise ValueError(f"define_reorder: {n} axes have {math.factorial(n)} orders; use candidates")
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        elif policy == "candidate":
            if not candidate:
                raise ValueError("define_reorder(policy='candidate') needs candidate=[[axes...], ...]")
            ids = [id(a) for a in axes]
            perms = []
            for order in candidate:
                try:
                    perms.append(tuple(ids.index(id(a)) for a in order))
                except ValueError:
                    raise ValueError("define_reorder: a candidate order uses an axis not in axes") from None
        else:
            raise ValueError(f"define_reorder: unknown policy {policy!r}; use 'all', 'identity' or 'candidate'")
        super().__init__([ReorderEntity(p) for p in perms])

    def describe(self) -> str:
        return f"policy={self.policy}"


ANNOTATIONS = {"try_unroll": ("none", "unroll"), "try_vec": ("none", "vec"),
               "try_unroll_vec": ("none", "unroll", "vec"), "none": ("none",)}


class AnnotateEntity:
    """One annotation per axis: ``"none"``, ``"unroll"`` or ``"vec"``."""

    def __init__(self, anns: Sequence[str]):
        self.anns = list(anns)

    @property
    def val(self) -> list[str]:
        return list(self.anns)

    def apply(self, s, op, axes, axis_lens: Sequence[int] | None = None, max_unroll: int | None = None) -> list:
        """Annotate ``axes``; an unroll over more than ``max_unroll`` iterations (by ``axis_lens``) is
        skipped."""
        stage = s[op]
        for i, (ax, ann) in enumerate(zip(axes, self.anns)):
            if ann == "unroll":
                if max_unroll is None or axis_lens is None or axis_lens[i] <= max_unroll:
                    stage.unroll(ax)
            elif ann == "vec":
                stage.vectorize(ax)
        return list(axes)

    def __repr__(self) -> str:
        return f"{self.anns}"


class AnnotateSpace(Space):
    """Per-axis annotations: ``"try_unroll"``, ``"try_vec"``, ``"try_unroll_vec"`` or ``"none"``;
    ``vec`` is offered for the innermost (last) axis only."""
    kind = "annotate"

    def __init__(self, axes: Sequence, policy: str = "try_unroll"):
        if policy not in ANNOTATIONS:
            raise ValueError(f"define_annotate: unknown policy {policy!r}; use one of {', '.join(ANNOTATIONS)}")
        self.policy = policy
        n = len(axes)
        choices = [tuple(a for a in ANNOTATIONS[policy] if a != "vec" or i == n - 1) for i in range(n)]
        super().__init__([AnnotateEntity(c) for c in itertools.product(*choices)])

    def describe(self) -> str:
        return f"policy={self.policy}"


# -- the config space and its points ---------------------------------------------------------------------
class _Definer:
    """The ``define_*`` methods shared by spaces (which record) and entities (which ignore them)."""

    def _define(self, name: str, space: Space) -> None:
        raise NotImplementedError

    def define_split(self, name: str, axis, num_outputs: int = 2, policy: str = "factors", candidate=None,
                     max_factor: int | None = None, filter: Callable | None = None) -> None:
        self._define(name, lambda: SplitSpace(_axis_length(axis), num_outputs, policy, candidate, max_factor,
                                              filter))

    def define_knob(self, name: str, values: Sequence) -> None:
        self._define(name, lambda: OtherOptionSpace(values))

    def define_reorder(self, name: str, axes: Sequence, policy: str = "all", candidate=None) -> None:
        self._define(name, lambda: ReorderSpace(axes, policy, candidate))

    def define_annotate(self, name: str, axes: Sequence, policy: str = "try_unroll") -> None:
        self._define(name, lambda: AnnotateSpace(axes, policy))

    def add_flop(self, flop: float) -> None:
        self.flop += flop

    def multi_filter(self, filter: Callable) -> None:
        """Keep only the configs for which ``filter(entity)`` is true (AutoTVM's name): the knobs' constraints on
        one another (a warp tile within its block tile), so that tuners never propose a config the template
        would reject.  Call it after the last ``define_*``; a config still gets its template's own refusal."""

    def raise_error(self, msg: str) -> None:
        """Reject this config (the trial records ``INSTANTIATION_ERROR``)."""
        raise InstantiationError(msg)


class ConfigSpace(_Definer):
    """The product of named spaces; ``space.get(index)`` is one config."""
    is_fallback = False

    def __init__(self):
        self.space_map: dict[str, Space] = {}
        self._entity_map: dict[str, Any] = {}
        self.flop = 0.0
        self._filter: Callable | None = None
        self._valid: list[int] | None = None      # the filter's configs (indices, ascending), once asked

    def _define(self, name: str, make) -> None:
        if name in self.space_map:
            raise ValueError(f"knob {name!r} is defined twice")
        if self._filter is not None:
            raise ValueError(f"knob {name!r} is defined after multi_filter")
        space = make()
        self.space_map[name] = space
        self._entity_map[name] = space[0]

    def multi_filter(self, filter: Callable) -> None:
        self._filter, self._valid = filter, None

    def _valid_indices(self) -> list[int] | None:
        """The indices the filter keeps (None: every index); a filter that keeps none is the template's error."""
        if self._filter is not None and self._valid is None:
            self._valid = [i for i in range(self.range_length) if self._filter(self.get(i))]
            if not self._valid:
                raise ValueError(f"the config space's filter refuses all its {self.range_length} configs")
        return self._valid if self._filter is not None else None

    @property
    def range_length(self) -> int:
        """The number of knob combinations (config indices), the filter's refused ones included."""
        return math.prod(len(sp) for sp in self.space_map.values())

    def is_index_valid(self, index: int) -> bool:
        """Whether config ``index`` is in the space (a knob combination the filter keeps)."""
        valid = self._valid_indices()
        return 0 <= index < self.range_length and (valid is None or _contains(valid, index))

    def valid_index(self, position: int) -> int:
        """The config index of the ``position``-th config of the space (``0 <= position < len(space)``)."""
        valid = self._valid_indices()
        return position if valid is None else valid[position]

    def __getitem__(self, name: str):
        try:
            return self._entity_map[name]
        except KeyError:
            raise KeyError(f"no knob {name!r} is defined (knobs: {', '.join(self.space_map) or 'none'})") from None

    def __len__(self) -> int:
        """The number of configs (those the filter keeps; indices range over :attr:`range_length`)."""
        valid = self._valid_indices()
        return self.range_length if valid is None else len(valid)

    @property
    def dims(self) -> list[int]:
        """The number of choices of each knob, in definition order."""
        return [len(sp) for sp in self.space_map.values()]

    def knob_indices(self, index: int) -> list[int]:
        """The choice of each knob that config ``index`` makes."""
        if not 0 <= index < self.range_length:
            raise IndexError(f"config index {index} is out of range [0, {self.range_length})")
        out = []
        for d in self.dims:
            index, r = divmod(index, d)
            out.append(r)
        return out

    def index_of(self, knob_indices: Sequence[int]) -> int:
        index, stride = 0, 1
        for i, d in zip(knob_indices, self.dims):
            if not 0 <= i < d:
                raise IndexError(f"knob choice {i} is out of range [0, {d})")
            index += i * stride
            stride *= d
        return index

    def get(self, index: int) -> "ConfigEntity":
        index = int(index)
        picks = self.knob_indices(index)
        return ConfigEntity(index, {name: sp[i] for (name, sp), i in zip(self.space_map.items(), picks)},
                            self.flop)

    def appended_since(self, given) -> list[str] | None:
        """The knobs missing from ``given`` (knob names) when they are the space's last ones: the template
        appended them after a config of ``given`` was written, and that config's index still selects their
        first choice.  None when ``given`` is not such a prefix of the space's knobs."""
        names, given = list(self.space_map), set(given)
        k = sum(n in given for n in names)
        return names[k:] if set(names[:k]) == given else None

    def index_from_values(self, knobs: dict) -> int:
        """The index of the config whose knob values are ``knobs`` (as a record stores them); knobs appended
        since take their first choice (``appended_since``)."""
        if self.appended_since(knobs) is None:
            raise ValueError(f"knobs {sorted(knobs)} do not match the space's {sorted(self.space_map)}")
        return self.index_of([sp.index_of(knobs[name]) if name in knobs else 0 for name, sp in self.space_map.items()])

    def __iter__(self):
        return (self.get(self.valid_index(k)) for k in range(len(self)))

    def __str__(self) -> str:
        kept = f" of {self.range_length}" if self._filter is not None else ""
        lines = [f"ConfigSpace (len={len(self)}{kept}, space_map="]
        for i, (name, sp) in enumerate(self.space_map.items()):
            lines.append(f"  {i:2d} {name}: {type(sp).__name__}({sp.describe()}) len={len(sp)}")
        return "\n".join(lines + [")"])

    __repr__ = __str__


class ConfigEntity(_Definer):
    """One point of a :class:`ConfigSpace`: ``cfg[name]`` is the chosen entity of knob ``name``."""
    is_fallback = False

    def __init__(self, index: int, entity_map: dict, flop: float = 0.0):
        self.index = index
        self._entity_map = entity_map
        self.flop = flop

    def _define(self, name: str, make) -> None:
        if name not in self._entity_map:
            raise ValueError(f"knob {name!r} is not in this config's space (the template changed?)")

    def add_flop(self, flop: float) -> None:
        pass  # the space counted it

    def __getitem__(self, name: str):
        try:
            return self._entity_map[name]
        except KeyError:
            raise KeyError(f"no knob {name!r} in this config (knobs: {', '.join(self._entity_map)})") from None

    def knobs(self) -> dict:
        """``{name: value}``: what a record stores beside the index."""
        return {name: e.val for name, e in self._entity_map.items()}

    def __str__(self) -> str:
        return f"{self.index}: " + ", ".join(f"{k}={v}" for k, v in self.knobs().items())

    __repr__ = __str__


class FallbackConfig(ConfigSpace):
    """The config a template gets when no tuned config applies: each knob's first choice, unless the
    template sets a better default (``if cfg.is_fallback: cfg["tile"] = SplitEntity([-1, 8])``)."""
    is_fallback = True

    def _define(self, name: str, make) -> None:
        if name in self.space_map:
            return
        space = make()
        self.space_map[name] = space
        self._entity_map.setdefault(name, space[0])

    def multi_filter(self, filter: Callable) -> None:
        pass   # the fallback is one config: the template's own checks refuse it

    def __setitem__(self, name: str, entity) -> None:
        self._entity_map[name] = entity

    def knobs(self) -> dict:
        return {name: e.val for name, e in self._entity_map.items()}


def _contains(sorted_list: list[int], x: int) -> bool:
    i = bisect.bisect_left(sorted_list, x)
    return i < len(sorted_list) and sorted_list[i] == x


__all__ = ["ConfigSpace", "ConfigEntity", "FallbackConfig", "InstantiationError", "SplitSpace", "SplitEntity",
           "OtherOptionSpace", "OtherOptionEntity", "ReorderSpace", "ReorderEntity", "AnnotateSpace",
           "AnnotateEntity"]
