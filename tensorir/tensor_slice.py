"""``A[i]`` on a tensor of more dimensions: a :class:`TensorSlice` (TVM's), completed by more
indexing, ``A[i][j]``, into the load ``A[i, j]``.  An incomplete slice is not a value.  With Python
slices, ``A[i, 0:16]``, it is a region: the argument of a tensor intrinsic (``tensor_compute.py``)."""
from __future__ import annotations

from .expr import Expr


class TensorSlice:
    """The first ``len(indices)`` indices of a load from ``tensor``."""

    def __init__(self, tensor, indices: tuple):
        self.tensor, self.indices = tensor, tuple(indices)

    def __getitem__(self, indices):
        more = indices if isinstance(indices, tuple) else (indices,)
        return self.tensor[self.indices + more]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def as_expr(self) -> Expr:
        """Raises: a complete slice is already a load, so a slice used as a value is incomplete."""
        n = len(self.tensor.shape)
        if any(isinstance(i, slice) for i in self.indices):
            raise TypeError(f"{self!r} is a region of tensor {self.tensor.name}: it can only be an argument of a "
                            "tensor intrinsic (intrin(A[i, 0:16], ...)), not a value")
        raise TypeError(f"tensor {self.tensor.name} has {n} dimensions but {self.tensor.name}"
                        f"[{']['.join(map(str, self.indices))}] gives {len(self.indices)} index(es): "
                        f"index all {n} dimensions before using it as a value")

    def asobject(self) -> Expr:
        return self.as_expr()

    def _value(op):
        return lambda self, *other: getattr(self.as_expr(), op)(*other)

    for _op in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod neg pos "
                "lt le gt ge and rand or ror invert abs bool").split():
        locals()[f"__{_op}__"] = _value(f"__{_op}__")
    del _op, _value

    def __repr__(self) -> str:
        def one(i) -> str:
            return "" if i is None else str(getattr(i, "var", i))  # an IterVar as its variable

        def show(i) -> str:
            return f"{one(i.start)}:{one(i.stop)}" if isinstance(i, slice) else one(i)
        return f"{self.tensor.name}[{', '.join(map(show, self.indices))}]"


__all__ = ["TensorSlice"]
