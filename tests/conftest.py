"""Shared fixtures: configs on temporary stores, and runtimes driven by the scripted LLM."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import Runtime
from tierbot.config import Config, validate_config
from tierbot.testing.scripted import ScriptedLLM


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., Config]:
    """Build a validated Config whose store lives in the test's temporary folder."""

    def build(data: dict[str, Any] | None = None) -> Config:
        base = {
            "storage": {"path": str(tmp_path / "tierbot.db"), "synchronous": "normal"},
            "memory": {"enabled": False},
            "adapters": {"console": {"enabled": False}},
            "workers": {"retry_base_seconds": 0.0},
        }
        return validate_config(_merge(base, data or {}), "test")

    return build


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
async def runtime(make_config: Callable[..., Config], llm: ScriptedLLM) -> AsyncIterator[Runtime]:
    """A runtime on the default test config, answering with the scripted LLM."""
    async with Runtime.open(make_config(), llm=llm) as rt:
        yield rt


@pytest.fixture(autouse=True)
def _reset_logging() -> Any:
    """CLI tests configure structlog globally; give every test the defaults back."""
    import structlog

    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def pg_server() -> Any:
    """One private PostgreSQL (with pgvector) for the whole run; tests take databases."""
    from tierbot.testing.postgres import PostgresServer

    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_dsn(pg_server: Any) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    dsn: str = pg_server.create_database()
    return dsn
