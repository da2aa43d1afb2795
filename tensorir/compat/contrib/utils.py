"""TVM's ``tvm.contrib.utils``: ``tempdir()``, a temporary directory removed when dropped."""
from __future__ import annotations

import os
import shutil
import tempfile


class TempDirectory:
    """A temporary directory (TVM's ``TempDirectory``): ``relpath(name)``, ``listdir()``, ``remove()``,
    ``path``, ``temp / "name"``; removed on ``remove()`` or when garbage-collected, unless
    ``keep_for_debug``.  With ``custom_path`` that directory is created and used instead."""

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool | None = None):
        self._keep = bool(keep_for_debug)
        if custom_path:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.realpath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="tiletune_")
        self._created = True

    @property
    def path(self) -> str:
        return self.temp_dir

    def relpath(self, name: str) -> str:
        """The absolute path of ``name`` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def __truediv__(self, other) -> str:
        return self.relpath(os.fspath(other))

    def listdir(self) -> list[str]:
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        if getattr(self, "_created", False) and not self._keep:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self._created = False

    def __enter__(self) -> "TempDirectory":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __del__(self):
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool | None = None) -> TempDirectory:
    """``tvm.contrib.utils.tempdir()``."""
    return TempDirectory(custom_path, keep_for_debug)


__all__ = ["TempDirectory", "tempdir"]
