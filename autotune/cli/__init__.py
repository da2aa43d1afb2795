"""The ``tiletune`` command line (``python -m autotune.cli``; the ``tiletune`` console script).

* :mod:`.main`       the parser, the command list and the dispatch (:func:`main`).
* :mod:`.tune`       ``demo``, ``tune-op``, ``logs``, ``tune-model``.
* :mod:`.model`      ``compile``, ``run``, ``inspect``.
* :mod:`.arguments`  argument types and parsers (``--shape``, ``--input``, ``--time-budget``, numbers).
* :mod:`.files`      the files a command reads and writes, checked first and written atomically.
* :mod:`.errors`     user errors: one line on stderr, exit status 2.
"""
from __future__ import annotations

from .main import main

__all__ = ["main"]
