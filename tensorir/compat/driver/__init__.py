"""TVM's ``tvm.driver``: ``lower``, ``build`` and ``build_module.schedule_to_module``."""
from .build_module import build, lower, schedule_to_module

__all__ = ["lower", "build", "schedule_to_module"]
