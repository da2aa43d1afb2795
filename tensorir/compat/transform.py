"""TVM's ``tvm.transform``: :class:`~tensorir.pass_context.PassContext` under TVM's module name."""
from ..pass_context import CONFIG_KEYS, PassContext

__all__ = ["CONFIG_KEYS", "PassContext"]
