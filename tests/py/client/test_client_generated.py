"""One definition of the client API: pgq.Client (client*.py) is generated from pgq.AsyncClient
(async_client*.py) by scripts/async_to_sync.py. The checked-in files must be what the script
writes, so that an edit to one side only (or a forgotten regeneration) fails here.

No database, no processes but the script's ruff.
"""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pgq

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "async_to_sync.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sync_client_is_what_the_script_generates(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    generated = sorted(p.name for p in tmp_path.iterdir())
    assert generated == sorted(_script().FILES.values())
    for name in generated:
        checked_in = (ROOT / "python" / "pgq" / name).read_text()
        assert (tmp_path / name).read_text() == checked_in, f"python/pgq/{name} is stale: run make client"


def test_the_two_clients_have_the_same_methods_and_arguments() -> None:
    def public(cls: type) -> dict[str, object]:
        return {n: getattr(cls, n) for n in dir(cls) if not n.startswith("_")}

    sync, asynchronous = public(pgq.Client), public(pgq.AsyncClient)
    assert sorted(sync) == sorted(asynchronous)
    for name, method in asynchronous.items():
        if not callable(method):
            continue
        a, s = inspect.signature(method), inspect.signature(sync[name])  # type: ignore[arg-type]
        shape = [(p.name, p.kind, p.default) for p in a.parameters.values()]
        assert shape == [(p.name, p.kind, p.default) for p in s.parameters.values()], name
        assert inspect.getdoc(method) == inspect.getdoc(sync[name]), name
        if inspect.iscoroutinefunction(method):
            assert not inspect.iscoroutinefunction(sync[name]), name


def test_the_rewrite() -> None:
    """Each rule of the script on a sample: what is rewritten and what is left alone."""
    source = '''\
import asyncio
import inspect  # async only: for _maybe_await


class AsyncClient:
    """Docstrings serve both clients: AsyncClient stays."""

    async def __aenter__(self) -> AsyncClient:
        await self._open()  # async only
        return self

    async def f(self, conn: psycopg.AsyncConnection) -> int:
        # AsyncClient in a comment, pgq-async-client in a string:
        name = "pgq-async-client"
        async with await psycopg.AsyncConnection.connect("") as c:
            (n,) = (await (await c.execute("SELECT 1")).fetchall())[0]
        async for x in c.notifies():
            await _maybe_await(on(x))
        return int(await self.g(name))
'''
    assert (
        _script().convert(source)
        == '''\
import threading


class Client:
    """Docstrings serve both clients: AsyncClient stays."""

    def __enter__(self) -> Client:
        return self

    def f(self, conn: psycopg.Connection) -> int:
        # Client in a comment, pgq-client in a string:
        name = "pgq-client"
        with psycopg.Connection.connect("") as c:
            (n,) = c.execute("SELECT 1").fetchall()[0]
        for x in c.notifies():
            on(x)
        return int(self.g(name))
'''
    )
