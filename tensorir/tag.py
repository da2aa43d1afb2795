"""``te.tag_scope(tag)``: computes created inside the scope get ``op.tag == tag`` (TVM's TagScope).

A context manager and a decorator.  Scopes do not nest (``ValueError``, as in TVM); a scope whose
tag no compute used warns on exit.  An explicit ``te.compute(..., tag=...)`` keeps its own tag.
"""
from __future__ import annotations

import functools
import warnings


class TagScope:
    """The active tag while inside ``with`` (one at a time, like TVM's)."""

    _current: "TagScope | None" = None

    def __init__(self, tag: str):
        self.tag, self.accessed = tag, False

    @classmethod
    def get_current(cls) -> "TagScope | None":
        if cls._current is not None:
            cls._current.accessed = True
        return cls._current

    def __enter__(self) -> "TagScope":
        if TagScope._current is not None:
            raise ValueError(f"tag_scope({self.tag!r}) inside tag_scope({TagScope._current.tag!r}): "
                             "nested op_tag is not allowed")
        TagScope._current = self
        return self

    def __exit__(self, *exc) -> None:
        TagScope._current = None
        if not self.accessed:
            warnings.warn(f"Tag '{self.tag}' declared via TagScope was not used.", stacklevel=2)

    def __call__(self, fdecl):
        @functools.wraps(fdecl)
        def tagged(*args, **kwargs):
            with TagScope(self.tag):
                return fdecl(*args, **kwargs)
        return tagged


def tag_scope(tag: str) -> TagScope:
    """``with te.tag_scope("matmul"): C = te.compute(...)`` or ``@te.tag_scope("conv")``."""
    return TagScope(tag)


def current_tag(default: str = "") -> str:
    """The tag of the active scope, else ``default``."""
    scope = TagScope.get_current()
    return default if scope is None else scope.tag


__all__ = ["TagScope", "tag_scope", "current_tag"]
