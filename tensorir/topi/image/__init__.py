"""``topi.image``: resizing."""
from .resize import resize1d, resize2d

__all__ = ["resize1d", "resize2d"]
