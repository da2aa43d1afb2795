"""The layer contract of tiletune's packages, checked over every import, including those inside functions.

Imports point down only: ``tensorir`` <- ``codegen`` <- ``autotune``.  The TVM compatibility namespace
``tensorir/compat/`` sits on top of all three: it may import anything, and nothing outside it imports it
except ``tensorir/__init__.py`` (the ``te`` facade).  An import is an ``import``/``from`` statement
anywhere in a module (in a function, under ``if TYPE_CHECKING``) or a call
``importlib.import_module("literal")`` / ``__import__("literal")``; an import built from a variable or
an f-string is not seen.

``python tests/layers.py [ROOT]`` prints each violation as
``file:line: tensorir -> codegen (import codegen.target)`` and exits 1 when there is one.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("tensorir", "codegen", "autotune")  # bottom to top
COMPAT = "tensorir.compat"
FACADES = ("tensorir/__init__.py",)             # files outside COMPAT allowed to import it
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Violation:
    file: str    # relative to the root, with forward slashes
    line: int
    source: str  # layer of the importing file
    target: str  # layer of the imported module
    statement: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.source} -> {self.target} ({self.statement})"


def layer(module: str) -> str | None:
    """The layer of a dotted module name: COMPAT, one of PACKAGES, or None (outside tiletune)."""
    if module == COMPAT or module.startswith(COMPAT + "."):
        return COMPAT
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def allowed(source: str, target: str, file: str) -> bool:
    """Whether a file of layer ``source`` may import a module of layer ``target``."""
    if source == COMPAT:
        return True
    if target == COMPAT:
        return file in FACADES
    return PACKAGES.index(target) <= PACKAGES.index(source)


def _resolve(module: str | None, level: int, package: str) -> str:
    """The absolute name of ``from <level dots><module> import``, seen from package ``package``."""
    if not level:
        return module or ""
    parts = package.split(".")
    base = parts[:len(parts) - level + 1] if level <= len(parts) else []
    return ".".join(base + ([module] if module else []))


def _literal_import(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("m")``, ``import_module("m")`` or ``__import__("m")``."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def imports(tree: ast.AST, package: str, modules: set[str]) -> list[tuple[int, str, str]]:
    """``(line, imported module, statement)`` for every import in ``tree``, a module of ``package``.

    ``from a import b`` imports ``a.b`` when that is a module of the tree (``modules``), else ``a``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, f"import {a.name}") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, package)
            text = f"from {'.' * node.level}{node.module or ''} import"
            for a in node.names:
                sub = f"{base}.{a.name}" if base else a.name
                found.append((node.lineno, sub if sub in modules else base, f"{text} {a.name}"))
        elif isinstance(node, ast.Call) and (name := _literal_import(node)) is not None:
            target = _resolve(name.lstrip("."), len(name) - len(name.lstrip(".")), package)
            found.append((node.lineno, target, f"{ast.unparse(node.func)}({name!r})"))
    return found


def _module_name(rel: Path) -> tuple[str, str]:
    """The dotted module name of a file relative to the root, and the package its relative imports see."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def check(root: Path = ROOT) -> tuple[list[Violation], int]:
    """The violations of the contract under ``root``, and the number of files read."""
    files = sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))
    names = {p: _module_name(p.relative_to(root)) for p in files}
    modules = {m for m, _ in names.values()}
    violations = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        module, package = names[path]
        source = layer(module)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for line, target_module, statement in imports(tree, package, modules):
            target = layer(target_module)
            if target is not None and not allowed(source, target, rel):
                violations.append(Violation(rel, line, source, target, statement))
    return sorted(violations, key=lambda v: (v.file, v.line, v.statement)), len(files)


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else ROOT
    violations, nfiles = check(root)
    for v in violations:
        print(v)
    if not nfiles:
        print(f"layers: no Python files under {root}/{{{','.join(PACKAGES)}}}", file=sys.stderr)
        return 1
    print(f"layers: {nfiles} files, {len(violations)} violation(s)", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
