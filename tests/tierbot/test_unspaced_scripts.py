"""Text in scripts written without spaces (Japanese, Chinese, Thai) is searchable by part
of a run: a question that names the locker number finds the sentence that gave it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.runtime import Runtime
from memory_graph import MemoryGraph
from memory_graph.text import terms
from tests.helpers import inbound
from tierbot.config import Config, MemoryConfig
from tierbot.llm.extraction import is_question
from tierbot.llm.offline import OfflineProvider
from tierbot.llm.text import split_unspaced, words
from tierbot.messages import Message, Role

CH = "chat:jp"


def test_runs_without_spaces_become_character_pairs() -> None:
    assert split_unspaced("ロッカー番号") == ["ロッ", "ッカ", "カー", "ー番", "番号"]
    assert split_unspaced("番") == ["番"]
    assert split_unspaced("4411です") == ["4411", "です"]
    assert split_unspaced("café") == ["café"]
    # Accents fold, a kana's voicing mark does not: です and てす are different words.
    assert words("Café déjà") == ["cafe", "deja"]
    assert "です" in words("4411です") and "てす" not in words("4411です")
    # The graph's terms agree: a question shares pairs with the sentence that answers it.
    assert set(terms("ロッカー番号は？")) <= set(terms("私のロッカー番号は4411です。"))


def test_full_width_question_marks_ask() -> None:
    assert is_question("ロッカー番号は？")
    assert is_question("هل هذا صحيح؟")
    assert not is_question("私のロッカー番号は4411です。")


async def test_a_japanese_question_is_answered_from_what_was_said(
    make_config: Callable[..., Config],
) -> None:
    async with Runtime.open(
        make_config({"memory": {"enabled": True}}), llm=OfflineProvider()
    ) as rt:
        for pid, text in (("j1", "私のロッカー番号は4411です。"), ("j2", "今日はいい天気ですね。")):
            await rt.submit(inbound(CH, text, pid=pid, author="yuki"))
            await rt.drain()
        await rt.submit(inbound(CH, "ロッカー番号は？", pid="j3", author="yuki"))
        await rt.drain()
        assert "4411" in rt.outbox.sent[-1].text


async def test_recall_finds_a_japanese_message_by_part_of_its_run(tmp_path: Path) -> None:
    """Full-text search and the offline vectors both index the pairs: recall of a few
    characters of a long run finds the message, before and after a restart."""
    said = [
        ("p1", "私のロッカー番号は4411です。"),
        ("p2", "明日は大阪に出張します。"),
        ("p3", "我的自行车是绿色的。"),
    ]
    db = tmp_path / "t.db"
    for attempt in range(2):
        async with await MemoryGraph.open(db, MemoryConfig()) as g:
            if attempt == 0:
                await g.add_episodes(
                    [Message(CH, pid, Role.USER, text, "u1", "Yuki", 1e9) for pid, text in said]
                )
            for query, pid in (("ロッカー番号", "p1"), ("大阪", "p2"), ("自行车", "p3")):
                hits = await g.recall(query, channel=CH, limit=1)
                assert [h.source_message_ids for h in hits] == [(pid,)], (query, hits)
