"""The same conversation and memories in a SQLite and a PostgreSQL graph rank alike:
the text scores match term by term and recall returns the same hits in the same order.
(LoCoMo's evidence recall on both backends is in benchmarks/locomo.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_graph import MemoryGraph
from memory_graph.backends import open_graph
from memory_graph.storage import TermWeight, TextFilter
from memory_graph.text import terms
from tierbot.config import Config, MemoryConfig
from tierbot.messages import Message, Role

pytestmark = pytest.mark.slow

CH = "discord:9:1"
PEOPLE = ["ada", "bo", "cy"]
LINES = [
    "I finally adopted a greyhound named Pixel from the shelter",
    "Pixel sleeps twenty hours a day, typical greyhound",
    "our build server kestrel is down again, the disk is full",
    "I moved kestrel's logs to the archive volume, builds pass now",
    "the team offsite is in Lisbon on the third of May",
    "bring sunscreen to Lisbon, it will be hot",
    "Pixel chewed my running shoes this morning",
    "kestrel needs a bigger disk before the release",
    "I booked the Lisbon flights for ada and bo",
    "the release candidate passed on kestrel tonight",
] * 3


async def _fill(g: MemoryGraph) -> None:
    msgs = [
        Message(
            CH,
            f"p{i}",
            Role.USER,
            text,
            author_id=PEOPLE[i % 3],
            author_name=PEOPLE[i % 3],
            ts=1.7e9 + 60 * i,
        )
        for i, text in enumerate(LINES)
    ]
    await g.add_episodes(msgs)
    await g.save("Ada adopted a greyhound named Pixel", "fact", channel=CH, sources=["p0"])
    await g.save("kestrel is the build server; its disk fills up", "entity", channel=CH)
    await g.save("the offsite is in Lisbon on 3 May", "event", channel=CH, sources=["p4"])


@pytest.fixture
async def both(tmp_path: Path, pg_server: Any) -> AsyncIterator[tuple[MemoryGraph, MemoryGraph]]:
    cfg = Config.model_validate(
        {
            "storage": {"backend": "postgres", "pool_min": 1},
            "memory": {"index_dir": str(tmp_path / "index")},
        }
    )
    env = {"TIERBOT_DATABASE_URL": pg_server.create_database()}
    async with (
        await MemoryGraph.open(tmp_path / "t.db", MemoryConfig.model_validate({})) as lite,
        await open_graph(cfg, environ=env) as pg,
    ):
        await _fill(lite)
        await _fill(pg)
        yield lite, pg


async def test_text_scores_match_term_by_term(both: tuple[MemoryGraph, MemoryGraph]) -> None:
    lite, pg = both
    assert lite.n_rows == pg.n_rows and lite.df == pg.df
    for word in ["kestrel", "greyhound", "lisbon", "disk", "pixel", "release"]:
        [t] = terms(word)
        tw = [TermWeight(t, lite.df[t], 2.5)]
        a = dict(await lite.storage.term_scores(tw, lite.n_rows, TextFilter()))
        b = dict(await pg.storage.term_scores(tw, pg.n_rows, TextFilter()))
        assert a.keys() == b.keys() and a
        for rowid, score in a.items():
            assert b[rowid] == pytest.approx(score, rel=1e-6), (word, rowid)


async def test_recall_returns_the_same_hits_in_the_same_order(
    both: tuple[MemoryGraph, MemoryGraph],
) -> None:
    lite, pg = both
    for query in [
        "what is the greyhound called",
        "why did the builds fail on kestrel",
        "when is the offsite in Lisbon",
        "who chewed the running shoes",
    ]:
        a = await lite.recall(query, channel=CH, limit=8)
        b = await pg.recall(query, channel=CH, limit=8)
        # Ids are random per graph: a hit is its type and content.
        assert [(h.type, h.content) for h in a] == [(h.type, h.content) for h in b], query
        assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-4), query
