"""pgq.dsn.tcp_defaults: what a worker adds to its DSN so that a silent database is found
dead in seconds, never overriding what the DSN, its service file or the environment say."""

from __future__ import annotations

import psycopg
import pytest

from pgq.dsn import TCP_DEFAULTS, tcp_defaults


@pytest.fixture(autouse=True)
def _no_libpq_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGSERVICE", raising=False)
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)


def test_a_plain_dsn_gets_every_default() -> None:
    assert tcp_defaults("host=db.example port=5432 dbname=app") == TCP_DEFAULTS
    assert tcp_defaults("postgresql://app@db.example/app") == TCP_DEFAULTS
    assert tcp_defaults("") == TCP_DEFAULTS  # libpq's environment: PGHOST and the rest


def test_what_the_dsn_sets_is_kept() -> None:
    got = tcp_defaults("host=db.example keepalives_idle=60 tcp_user_timeout=0")
    assert "keepalives_idle" not in got and "tcp_user_timeout" not in got
    assert got["keepalives_interval"] == TCP_DEFAULTS["keepalives_interval"]
    assert "connect_timeout" not in tcp_defaults("postgresql://db.example/app?connect_timeout=3")


def test_a_service_or_the_environment_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tcp_defaults("service=queue") == {}
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "30")
    assert "connect_timeout" not in tcp_defaults("host=db.example")
    monkeypatch.setenv("PGSERVICE", "queue")
    assert tcp_defaults("host=db.example") == {}


def test_connections_that_handlers_use_get_no_user_timeout() -> None:
    got = tcp_defaults("host=db.example", user_timeout=False)
    assert "tcp_user_timeout" not in got and got["keepalives_idle"] == TCP_DEFAULTS["keepalives_idle"]


def test_libpq_before_12_gets_no_user_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psycopg.pq, "version", lambda: 110000)  # it would refuse the option
    assert tcp_defaults("host=db.example") == {
        k: v for k, v in TCP_DEFAULTS.items() if k != "tcp_user_timeout"
    }


def test_a_malformed_dsn_is_left_to_libpq() -> None:
    assert tcp_defaults("host=db.example port") == {}
