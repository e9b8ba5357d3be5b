"""Backends the contract suites run against: each fixture is parametrized by backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_graph import MemoryGraph
from memory_graph.backends import open_graph
from tierbot.config import Config, MemoryConfig


@pytest.fixture(params=["sqlite", "postgres", "postgres+pgvector-search"])
async def graph(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryGraph]:
    """A fresh memory graph whose ``storage`` is the implementation under test."""
    if request.param == "sqlite":
        async with await MemoryGraph.open(
            tmp_path / "tierbot.db", MemoryConfig.model_validate({})
        ) as g:
            yield g
        return
    server: Any = request.getfixturevalue("pg_server")
    dsn = server.create_database()
    search = "database" if request.param.endswith("pgvector-search") else "memory"
    config = Config.model_validate(
        {
            "storage": {"backend": "postgres", "pool_min": 1},
            "memory": {"vector_search": search, "index_dir": str(tmp_path / "index")},
        }
    )
    async with await open_graph(config, environ={"TIERBOT_DATABASE_URL": dsn}) as g:
        yield g
