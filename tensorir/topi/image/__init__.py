"""``topi.image``: resizing."""
from .resize import resize2d

__all__ = ["resize2d"]
