"""Every example in README.md runs: each fenced ```sql block through psql, each ```python
block with this interpreter, each ```shell block with bash (the `pgq` console script on
PATH), all against a database of this module with $PGQ_DSN pointing at it.

A block preceded by `<!-- example: not run: REASON -->` (a worker that runs until stopped,
the whole test suite) is only compiled (Python) or syntax-checked (bash). Output listings
are ```text blocks; a fence without a language fails the test, so nothing escapes by
accident.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
NOT_RUN = re.compile(r"<!--\s*example:\s*not run\b")
LANGUAGES = ("sql", "python", "shell", "text")


@dataclass(frozen=True)
class Block:
    line: int
    language: str
    code: str
    run: bool

    def __str__(self) -> str:
        return f"README.md:{self.line}:{self.language}"


def blocks() -> list[Block]:
    found: list[Block] = []
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            language = lines[i][3:].strip()
            previous = next((line for line in reversed(lines[:i]) if line.strip()), "")
            end = lines.index("```", i + 1)
            found.append(
                Block(i + 1, language, "\n".join(lines[i + 1 : end]) + "\n", not NOT_RUN.search(previous))
            )
            i = end
        i += 1
    return found


def test_every_fence_names_its_language() -> None:
    unknown = [f"README.md:{b.line}: {b.language!r}" for b in blocks() if b.language not in LANGUAGES]
    assert unknown == [], "use one of " + ", ".join(LANGUAGES)


def test_the_readme_has_examples_of_each_kind() -> None:
    kinds = {(b.language, b.run) for b in blocks()}
    assert {("sql", True), ("python", True), ("shell", True), ("python", False)} <= kinds


EXAMPLES = [b for b in blocks() if b.language in ("sql", "python", "shell")]


@pytest.mark.parametrize("block", EXAMPLES, ids=str)
def test_readme_example(block: Block, dsn: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PGQ_DSN": dsn,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if block.language == "python":
        if not block.run:
            compile(block.code, str(block), "exec")
            return
        command = [sys.executable, "-c", block.code]
    elif block.language == "shell":
        command = (
            ["bash", "-euo", "pipefail", "-c", block.code] if block.run else ["bash", "-n", "-c", block.code]
        )
    else:
        assert block.run, f"{block}: SQL examples always run"
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
