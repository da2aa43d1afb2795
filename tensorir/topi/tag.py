"""Operator tags of TVM's topi: what a schedule or a fusion pass may assume about an operation.

A tag may be composed, generic part first (``"injective,pad"``)."""
ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def is_broadcast(tag: str) -> bool:
    """Whether ``tag`` is elementwise or broadcast (possibly composed: ``"broadcast,foo"``)."""
    return tag.startswith(ELEMWISE) or tag.startswith(BROADCAST)


def is_injective(tag: str) -> bool:
    """Whether ``tag`` is elementwise, broadcast or injective (possibly composed)."""
    return is_broadcast(tag) or tag.startswith(INJECTIVE)


__all__ = ["ELEMWISE", "BROADCAST", "INJECTIVE", "COMM_REDUCE", "COMM_REDUCE_IDX", "is_broadcast", "is_injective"]
