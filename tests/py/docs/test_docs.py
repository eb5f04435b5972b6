"""Every example in README.md and docs/**/*.md runs: each fenced ```sql block through psql,
each ```python block with this interpreter, each ```shell block with bash (the `pgq` console
script on PATH). Each page runs against a fresh database of its own with pgq installed
($PGQ_DSN points at it), its examples in page order: a page may build on its own earlier
examples, never on another page's.

A block preceded by `<!-- example: not run: REASON -->` (a worker that runs until stopped,
the whole test suite) is only compiled (Python) or syntax-checked (bash). Output listings
are ```text blocks, configuration files ```ini or ```dockerfile; a fence without a language
fails the test, so nothing escapes by accident.

README.md is not part of the docs site (mkdocs.yml builds docs/ with --strict, which checks
the links between pages), so its own links into docs/ are checked here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import create_database, drop_database

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*example:\s*not run\b")
RUN = ("sql", "python", "shell")
LISTINGS = ("text", "ini", "dockerfile", "yaml")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    run: bool

    def __str__(self) -> str:
        return f"{self.page}:{self.line}:{self.language}"


def blocks(page: Path) -> list[Block]:
    name = str(page.relative_to(ROOT))
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            language = lines[i][3:].strip()
            previous = next((line for line in reversed(lines[:i]) if line.strip()), "")
            end = lines.index("```", i + 1)
            code = "\n".join(lines[i + 1 : end]) + "\n"
            found.append(Block(name, i + 1, language, code, not NOT_RUN.search(previous)))
            i = end
        i += 1
    return found


ALL = [block for page in PAGES for block in blocks(page)]
EXAMPLES = [block for block in ALL if block.language in RUN]


def test_every_fence_names_its_language() -> None:
    unknown = [f"{b.page}:{b.line}: {b.language!r}" for b in ALL if b.language not in RUN + LISTINGS]
    assert unknown == [], "use one of " + ", ".join(RUN + LISTINGS)


def test_the_docs_have_examples_of_each_kind() -> None:
    kinds = {(b.language, b.run) for b in ALL}
    assert {("sql", True), ("python", True), ("shell", True), ("python", False)} <= kinds
    assert all(b.run for b in ALL if b.language == "sql"), "SQL examples always run"


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (mkdocs) gives a heading."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text)).strip("-")


def test_the_readme_links_resolve() -> None:
    """Each relative link of README.md names a file of the repository and, with #anchor, a
    heading of that page."""
    readme = (ROOT / "README.md").read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path if path else ROOT / "README.md"
        if not page.exists():
            broken.append(target)
        elif anchor and page.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
            if anchor not in {slug(h) for h in headings}:
                broken.append(target)
    assert broken == []


@pytest.fixture(scope="module")
def page_database(template_db: str) -> Iterator[Callable[[str], str]]:
    """The DSN of a fresh database for a page: the first example of a page makes it (and
    drops the previous page's), so each page's examples share one database, in order."""
    current: dict[str, tuple[str, str]] = {}

    def database(page: str) -> str:
        if page not in current:
            for name, _ in current.values():
                drop_database(name)
            current.clear()
            name = f"pgq_docs_{re.sub(r'[^a-z0-9]', '_', page.lower())[:40]}_{os.getpid()}"
            current[page] = (name, create_database(name, template=template_db))
        return current[page][1]

    yield database
    for name, _ in current.values():
        drop_database(name)


@pytest.mark.parametrize("block", EXAMPLES, ids=str)
def test_docs_example(block: Block, page_database: Callable[[str], str], tmp_path: Path) -> None:
    if block.language == "python" and not block.run:
        compile(block.code, str(block), "exec")
        return
    if block.language == "shell" and not block.run:
        result = subprocess.run(["bash", "-n", "-c", block.code], capture_output=True, text=True)
        assert result.returncode == 0, f"{block}: {result.stderr}"
        return
    dsn = page_database(block.page)
    env = {
        **os.environ,
        "PGQ_DSN": dsn,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    elif block.language == "shell":
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    else:
        psql = shutil.which("psql")
        assert psql is not None
        command = [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", "-"]
    result = subprocess.run(
        command,
        input=block.code if block.language == "sql" else None,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{block} failed:\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
