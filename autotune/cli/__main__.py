"""``python -m autotune.cli``: the ``tiletune`` command line."""
import sys

from .main import main

sys.exit(main())
