"""Operator tags of TVM's topi: what a schedule or a fusion pass may assume about an operation."""
ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"

__all__ = ["ELEMWISE", "BROADCAST", "INJECTIVE", "COMM_REDUCE", "COMM_REDUCE_IDX"]
