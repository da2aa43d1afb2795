"""The layer contract (tests/layers.py): the real tree keeps it, and a planted upward import anywhere in a
module (top level, inside a function, an importlib string) is reported with its file, line and arrow."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import layers

# The fake tree: one module per layer, each importing only what the contract allows.
FAKE = {
    "tensorir/__init__.py": "from . import expr\nfrom .compat import tir\n",
    "tensorir/expr.py": "import math\nfrom . import dtype\n\n\ndef f():\n    return math.pi\n",
    "tensorir/dtype.py": "",
    "tensorir/compat/__init__.py": "import codegen.target\nimport autotune.tuner\nfrom .. import expr\n",
    "tensorir/compat/tir.py": "from ..expr import f\n",
    "codegen/__init__.py": "",
    "codegen/target.py": "import tensorir\nfrom tensorir import expr\n",
    "autotune/__init__.py": "",
    "autotune/tuner.py": "import importlib\nfrom codegen import target\nimportlib.import_module('tensorir.expr')\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name, text in FAKE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def plant(root: Path, file: str, code: str) -> None:
    """Append ``code`` to ``file`` of the fake tree."""
    with open(root / file, "a") as f:
        f.write(textwrap.dedent(code))


def found(root: Path) -> list[str]:
    violations, nfiles = layers.check(root)
    assert nfiles == len(FAKE)
    return [str(v) for v in violations]


def test_real_tree_keeps_the_contract():
    violations, nfiles = layers.check()
    assert nfiles > 200, "the checker read too few files: is layers.ROOT the repository?"
    assert [str(v) for v in violations] == []


def test_fake_tree_keeps_the_contract(tree):
    assert found(tree) == []


def test_upward_import_at_top_level(tree):
    plant(tree, "tensorir/dtype.py", "import codegen.target\n")
    assert found(tree) == ["tensorir/dtype.py:1: tensorir -> codegen (import codegen.target)"]


def test_upward_import_inside_a_function(tree):
    plant(tree, "codegen/target.py", """
        def history():
            from autotune.tuner import Tuner
            return Tuner
        """)
    assert found(tree) == ["codegen/target.py:5: codegen -> autotune (from autotune.tuner import Tuner)"]


def test_upward_import_through_importlib(tree):
    plant(tree, "tensorir/expr.py", "import importlib\nmod = importlib.import_module('autotune.tuner')\n")
    assert found(tree) == ["tensorir/expr.py:8: tensorir -> autotune (importlib.import_module('autotune.tuner'))"]


def test_relative_import_into_compat(tree):
    """Only compat itself and the facade (tensorir/__init__.py) import compat, relative imports included."""
    plant(tree, "tensorir/expr.py", "from .compat import tir\n")
    plant(tree, "autotune/tuner.py", "from tensorir import compat\n")
    assert found(tree) == ["autotune/tuner.py:4: autotune -> tensorir.compat (from tensorir import compat)",
                           "tensorir/expr.py:7: tensorir -> tensorir.compat (from .compat import tir)"]


def test_cli_prints_violations_and_exits_1(tree):
    script = Path(layers.__file__)
    ok = subprocess.run([sys.executable, str(script), str(tree)], capture_output=True, text=True)
    assert (ok.returncode, ok.stdout) == (0, "")
    plant(tree, "tensorir/dtype.py", "def f():\n    import autotune\n")
    bad = subprocess.run([sys.executable, str(script), str(tree)], capture_output=True, text=True)
    assert (bad.returncode, bad.stdout) == (1, "tensorir/dtype.py:2: tensorir -> autotune (import autotune)\n")


def test_cli_refuses_a_root_without_the_packages(tmp_path):
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir()
    run = subprocess.run([sys.executable, str(Path(layers.__file__)), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 1 and "no Python files" in run.stderr


def test_no_test_folder_shadows_a_package():
    """Scripts run from tests/ (``python tests/onnx_fuzz.py``, ``make fuzz``) have tests/ first on sys.path:
    a folder there named like a package (tests/codegen) would be imported in its place."""
    tests = Path(__file__).parent
    packages = {p.parent.name for p in tests.parent.glob("*/__init__.py")}
    assert packages >= {"tensorir", "codegen", "autotune"}
    assert not {d.name for d in tests.iterdir() if d.is_dir()} & packages
