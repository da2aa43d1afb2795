"""TVM's ``tir.stmt_functor`` helpers over tiletune's one Visitor/Mutator: walk and rewrite IR trees."""
from __future__ import annotations

from typing import Any, Callable

from .visitor import Mutator, Visitor, substitute

__all__ = ["post_order_visit", "pre_order_visit", "ir_transform", "substitute"]


class _Order(Visitor):
    def __init__(self, fvisit: Callable[[Any], Any], post: bool):
        self.fvisit, self.post = fvisit, post

    def generic_visit(self, node: Any) -> None:
        if not self.post and self.fvisit(node) is False:
            return  # pre-order: returning False stops the descent, as TVM's pre_order_visit
        super().generic_visit(node)
        if self.post:
            self.fvisit(node)


def post_order_visit(node: Any, fvisit: Callable[[Any], None]) -> None:
    """Call ``fvisit`` on every expression and statement of ``node``, children first."""
    _Order(fvisit, post=True).visit(node)


def pre_order_visit(node: Any, fvisit: Callable[[Any], bool]) -> None:
    """Call ``fvisit`` on every node, parents first; a ``False`` result skips the node's children."""
    _Order(fvisit, post=False).visit(node)


def ir_transform(node: Any, preorder: Callable | None, postorder: Callable | None,
                 only_enable: list[str] | None = None) -> Any:
    """Rewrite ``node`` bottom-up: ``preorder(n)`` may return a replacement (its children are then
    left alone), ``postorder(n)`` may return a replacement after the children were transformed;
    ``None`` keeps the node. ``only_enable`` limits the callbacks to these node type names."""
    def enabled(n) -> bool:
        return only_enable is None or type(n).__name__ in only_enable

    class Transform(Mutator):
        def visit(self, n):
            if preorder is not None and enabled(n) and not isinstance(n, tuple):
                out = preorder(n)
                if out is not None:
                    return out
            n = super().visit(n)
            if postorder is not None and enabled(n) and not isinstance(n, tuple):
                out = postorder(n)
                if out is not None:
                    return out
            return n

    return Transform().visit(node)
