"""TVM's ``tvm.contrib`` helpers that TE code uses around building: ``utils.tempdir``."""
from . import utils

__all__ = ["utils"]
