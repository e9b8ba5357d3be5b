"""Backends the contract suites run against: each fixture is parametrized by backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_graph import MemoryGraph
from tierbot.config import MemoryConfig


@pytest.fixture(params=["sqlite"])
async def graph(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryGraph]:
    """A fresh memory graph whose ``storage`` is the implementation under test."""
    assert request.param == "sqlite"
    async with await MemoryGraph.open(
        tmp_path / "tierbot.db", MemoryConfig.model_validate({})
    ) as g:
        yield g
