#!/usr/bin/env python3
"""Write the sync client (pgq.Client) from the async one (pgq.AsyncClient): one definition.

    scripts/async_to_sync.py            rewrite python/pgq/client*.py from async_client*.py
    scripts/async_to_sync.py --check    exit 1 if a generated file differs (make lint runs it)
    scripts/async_to_sync.py --out DIR  write the generated files into DIR instead

The async modules are the source, edited by hand. The rewrite (after psycopg 3's
tools/async_to_sync.py) is located with `ast` and applied to the text, so that comments and
layout survive:

- `async def` -> `def`, `async with` -> `with`, `async for` -> `for`, `await x` -> `x`
  (and `(await x).y` -> `x.y`);
- the names of NAMES -> their sync twins, in code, in comments and in strings other than
  docstrings (a docstring serves both clients, so it is written for both);
- a call of a name in UNWRAP -> its argument (`_maybe_await(f(x))` -> `f(x)`);
- a statement whose first line carries the comment `# async only` is left out.

Then ruff sorts the imports and formats the result, as `make lint` wants it.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "pgq"
# Source (async, by hand) -> generated (sync), in python/pgq.
FILES = {
    "async_client.py": "client.py",
    "async_client_enqueue.py": "client_enqueue.py",
    "async_client_admin.py": "client_admin.py",
}
NAMES = {
    "AsyncClient": "Client",
    "AsyncClientAdmin": "ClientAdmin",
    "AsyncClientEnqueue": "ClientEnqueue",
    "async_client_admin": "client_admin",
    "async_client_enqueue": "client_enqueue",
    "AsyncConnection": "Connection",
    "AsyncIterator": "Iterator",
    "AsyncPool": "Pool",
    "asynccontextmanager": "contextmanager",
    "asyncio": "threading",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "pgq-async-client": "pgq-client",
}
UNWRAP = {"_maybe_await"}
ASYNC_ONLY = "# async only"
_ALTERNATIVES = "|".join(re.escape(n) for n in sorted(NAMES, key=len, reverse=True))
WORDS = re.compile(rf"(?<![\w-])({_ALTERNATIVES})(?![\w-])")
FSTRING_MIDDLE = getattr(tokenize, "FSTRING_MIDDLE", None)  # Python 3.12+


class Text:
    """Offsets into the source from ast's (line, UTF-8 byte column) positions."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:col].decode())

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


def _docstrings(tree: ast.Module) -> set[int]:
    """The line numbers where docstrings start: left as written."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            constant = first.value if isinstance(first, ast.Expr) else None
            if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                found.add(first.lineno)
    return found


def _parent_of(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def convert(source: str) -> str:
    """The sync text of one async module (before formatting)."""
    tree = ast.parse(source)
    text = Text(source)
    parents = _parent_of(tree)
    edits: list[tuple[int, int, str]] = []
    dropped: list[tuple[int, int]] = []

    comments = {}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and comments.get(node.lineno, "").startswith(ASYNC_ONLY):
            # The whole lines of the statement.
            dropped.append((text.starts[node.lineno - 1], text.starts[node.end_lineno]))  # type: ignore[index]

    for node in ast.walk(tree):
        if isinstance(node, (ast.AsyncFunctionDef, ast.AsyncWith, ast.AsyncFor)):
            start = text.start(node)
            keyword = re.compile(r"async\s+").match(source, start)
            assert keyword, f"line {node.lineno}: no `async` where ast puts it"
            edits.append((start, keyword.end(), ""))
        elif isinstance(node, ast.Await):
            edits.append((text.start(node), text.start(node.value), ""))
            parent = parents.get(node)
            if (isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node) or (
                isinstance(parent, ast.Call) and parent.func is node
            ):
                # `(await x).y`: the parentheses go with the await.
                before = source.rindex("(", 0, text.start(node))
                after = source.index(")", text.end(node))
                assert not source[before + 1 : text.start(node)].strip(), f"line {node.lineno}"
                assert not source[text.end(node) : after].strip(), f"line {node.lineno}"
                edits += [(before, before + 1, ""), (after, after + 1, "")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in UNWRAP:
            (arg,) = node.args
            edits += [(text.start(node), text.start(arg), ""), (text.end(arg), text.end(node), "")]

    docstrings = _docstrings(tree)
    for tok in tokens:
        start = text.starts[tok.start[0] - 1] + tok.start[1]  # tokenize counts characters
        end = start + len(tok.string)
        if source[start:end] != tok.string:
            continue  # a token whose text is not the source's (3.12's f-string parts with {{)
        if tok.type == tokenize.NAME and tok.string in NAMES:
            edits.append((start, end, NAMES[tok.string]))
        elif tok.type in (tokenize.COMMENT, FSTRING_MIDDLE) or (
            tok.type == tokenize.STRING and tok.start[0] not in docstrings
        ):
            renamed = WORDS.sub(lambda m: NAMES[m.group(1)], tok.string)
            if renamed != tok.string:
                edits.append((start, end, renamed))

    kept = [e for e in edits if not any(lo <= e[0] and e[1] <= hi for lo, hi in dropped)]
    kept += [(lo, hi, "") for lo, hi in dropped]
    kept.sort(reverse=True)
    out = source
    previous = len(source) + 1
    for start, end, replacement in kept:
        assert end <= previous, f"overlapping edits at offset {start}"
        out = out[:start] + replacement + out[end:]
        previous = start
    return out


def _ruff(args: list[str], text: str, target: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(target), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"ruff {' '.join(args)} failed on {target.name}:\n{done.stderr}{done.stdout}")
    return done.stdout


def generate(source_name: str, target_name: str) -> str:
    """The full text of one generated module."""
    source = (PACKAGE / source_name).read_text()
    header = (
        f"# Generated from {source_name} by scripts/async_to_sync.py: do not edit.\n"
        f"# Edit {source_name} and run `make client`.\n"
    )
    text = header + convert(source)
    tree = ast.parse(text)
    asynchronous = (ast.Await, ast.AsyncFunctionDef, ast.AsyncWith, ast.AsyncFor)
    left = [node.lineno for node in ast.walk(tree) if isinstance(node, asynchronous)]  # type: ignore[attr-defined]
    if left:
        sys.exit(f"{source_name}: async code left at lines {left}")
    target = PACKAGE / target_name
    text = _ruff(["check", "--fix-only", "--select", "I", "--quiet"], text, target)
    return _ruff(["format", "--quiet"], text, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file differs")
    parser.add_argument("--out", type=Path, help="write the generated files into this directory")
    args = parser.parse_args()
    stale = []
    for source_name, target_name in FILES.items():
        text = generate(source_name, target_name)
        target = (args.out or PACKAGE) / target_name
        if args.check:
            current = target.read_text() if target.exists() else ""
            if current != text:
                stale.append(target_name)
                sys.stderr.writelines(
                    difflib.unified_diff(
                        current.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        f"python/pgq/{target_name}",
                        f"generated from {source_name}",
                    )
                )
        else:
            target.write_text(text)
    if stale:
        print(
            f"out of date: {', '.join(stale)} (edit the async modules, then run scripts/async_to_sync.py)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
