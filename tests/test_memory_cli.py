"""``tierbot memory ...``: search (one query and a queries file), show, forget, export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import load_config
from bot.messages import Message, Role
from memory_graph import MemoryGraph

CHANNEL = "discord:1:2"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text('[storage]\npath = "tierbot.db"\n\n[logging]\nlevel = "warning"\n')
    return path


@pytest.fixture
def memory_id(config_path: Path) -> str:
    async def fill() -> str:
        cfg = load_config(config_path)
        async with await MemoryGraph.open(cfg.storage_path(), cfg.memory) as graph:
            await graph.add_episodes([
                Message(channel=CHANNEL, platform_id="p1", role=Role.USER, author_id="u1",
                        author_name="Ann", text="I planted tomatoes in the garden", ts=1e9),
            ])  # fmt: skip
            saved = await graph.save("Ann grows tomatoes", "fact", channel=CHANNEL,
                                     author_id="u1", sources=["p1"])  # fmt: skip
            return saved.id

    return asyncio.run(fill())


def test_search_prints_the_recall_json_array(
    config_path: Path, memory_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory search QUERY` prints one JSON array of hits, best first."""
    code = main(["memory", "search", "tomatoes", "--channel", CHANNEL, "--limit", "5",
                 "--config", str(config_path)])  # fmt: skip
    assert code == 0
    hits = json.loads(capsys.readouterr().out)
    assert {h["id"] for h in hits} >= {memory_id}
    assert all(set(h) >= {"id", "type", "score", "source_message_ids"} for h in hits)


def test_search_queries_file_prints_one_line_per_query(
    config_path: Path, memory_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory search --queries FILE` answers every line with {id, results}, in order."""
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "tomatoes"}\n\n{"id": "b", "query": "garden"}\n')
    code = main(["memory", "search", "--queries", str(queries), "--channel", CHANNEL,
                 "--config", str(config_path)])  # fmt: skip
    assert code == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["id"] for x in lines] == ["a", "b"]
    assert lines[1]["results"][0]["source_message_ids"] == ["p1"]


def test_show_forget_and_export(
    config_path: Path, memory_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """show prints the node, forget deletes it, export lists what remains as JSON Lines."""
    assert main(["memory", "show", memory_id, "--config", str(config_path)]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == "Ann grows tomatoes"
    assert main(["memory", "forget", memory_id, "--config", str(config_path)]) == 0
    capsys.readouterr()
    assert main(["memory", "export", "--config", str(config_path)]) == 0
    items = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["type"] for x in items] == ["episode"]


def test_forget_author_reports_the_affected_messages(
    config_path: Path, memory_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory forget --author` prints counts and the (channel, id) of affected messages."""
    assert main(["memory", "forget", "--author", "u1", "--config", str(config_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["memories_deleted"], report["episodes_deleted"]) == (1, 1)
    assert report["messages"] == [{"channel": CHANNEL, "id": "p1"}]


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "show", "mem_nope"],
        ["memory", "forget", "mem_nope"],
        ["memory", "forget"],
        ["memory", "search", "--channel", CHANNEL],
        ["memory", "search", "x", "--channel", CHANNEL, "--limit", "99"],
        ["memory", "search", "--queries", "/nonexistent.jsonl", "--channel", CHANNEL],
    ],
)
def test_bad_input_exits_2_with_one_line(
    config_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Unknown ids, missing arguments and unreadable files exit 2 with a one-line error."""
    assert main([*argv, "--config", str(config_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tierbot memory:") and "\n" not in err
