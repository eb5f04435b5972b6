"""The package's layout as a contract: modules a maintainer can hold, and no module reaching
into another's private names (so that a change inside one part breaks no other).

Reads the source with `ast`: no database, no processes.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "python" / "pgq"
# The worker's modules are held to ~300 lines, every other module to ~400.
WORKER_LINES = 320
MODULE_LINES = 400
# Modules allowed over the guide, each with its size: none today. An entry may shrink,
# never grow, and leaves when its module comes under the guide.
OVER: dict[str, int] = {}
# Names that look private and are not another module's: the `self`/`cls` of a method, and
# what the standard library publishes with an underscore (namedtuple's API, logging's
# frame filter).
RECEIVERS = {"self", "cls"}
ALLOWED = {"_asdict", "_replace", "_fields", "_make", "_exit", "_srcfile"}
# Uses of another module's private names outside the worker: none today; an entry here
# would be a known exception, to shrink, never to grow.
KNOWN: set[str] = set()


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(tree: ast.AST) -> set[str]:
    """The private names a module defines itself (functions, classes, fields, attributes
    it sets on self): it may use them on any object of its own."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in RECEIVERS
        ):
            names.add(node.attr)
    return {name for name in names if _private(name)}


def _violations(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of another module's private name in `source`."""
    tree = ast.parse(source)
    own = _defined(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            mine = isinstance(node.value, ast.Name) and node.value.id in RECEIVERS
            if not mine and node.attr not in own and node.attr not in ALLOWED:
                found.append((node.lineno, f".{node.attr} of {ast.unparse(node.value)}"))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    found.append(
                        (node.lineno, f"from {'.' * node.level}{node.module or ''} import {alias.name}")
                    )
    return sorted(found)


def test_no_module_uses_another_modules_private_names() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}:{line}: {what}"
        for path in _modules()
        for line, what in _violations(path.read_text())
    }
    unknown = sorted(v for v in found if f"{v.split(':')[0]}: {v.split(': ', 1)[1]}" not in KNOWN)
    assert unknown == []
    # A use that went away leaves KNOWN.
    left = {f"{v.split(':')[0]}: {v.split(': ', 1)[1]}" for v in found}
    assert KNOWN - left == set()


def test_the_check_finds_what_it_is_meant_to_find() -> None:
    sample = (
        "from .x import _hidden, shown\n"
        "def f(worker, other):\n"
        "    worker._handlers = {}\n"
        "    return other._x, worker.__dict__, worker.shown, other._mine\n"
        "class C:\n"
        "    def m(self):\n"
        "        self._mine = 1\n"
        "        return self._y, type(self).__name__, C._helper()\n"
        "    @staticmethod\n"
        "    def _helper():\n"
        "        return 0\n"
    )
    assert _violations(sample) == [
        (1, "from .x import _hidden"),
        (3, "._handlers of worker"),
        (4, "._x of other"),
    ]


def test_modules_are_of_a_size_to_hold() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in _modules()}
    too_long = {}
    for name, lines in sizes.items():
        limit = OVER.get(name, WORKER_LINES if name.startswith("worker/") else MODULE_LINES)
        if lines > limit:
            too_long[name] = lines
    assert too_long == {}
    # A module that came under the guide leaves OVER (its allowance would hide regrowth).
    guide = {name: WORKER_LINES if name.startswith("worker/") else MODULE_LINES for name in OVER}
    assert {name for name in OVER if sizes.get(name, 0) <= guide[name]} == set()
