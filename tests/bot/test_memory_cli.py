"""``tierbot memory ...``: search (one query and a queries file), show, forget, export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.runtime import Runtime
from memory_graph import MemoryGraph
from tests.helpers import inbound
from tierbot.config import load_config
from tierbot.messages import Message, Role
from tierbot.store import Store
from tierbot.testing.scripted import ScriptedLLM

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
            await graph.add_episodes(
                [
                    Message(
                        channel=CHANNEL,
                        platform_id="p1",
                        role=Role.USER,
                        author_id="u1",
                        author_name="Ann",
                        text="I planted tomatoes in the garden",
                        ts=1e9,
                    ),
                ]
            )
            saved = await graph.save(
                "Ann grows tomatoes", "fact", channel=CHANNEL, author_id="u1", sources=["p1"]
            )
            return saved.id

    return asyncio.run(fill())


def test_search_prints_the_recall_json_array(
    config_path: Path, memory_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory search QUERY` prints one JSON array of hits, best first."""
    code = main(
        [
            "memory",
            "search",
            "tomatoes",
            "--channel",
            CHANNEL,
            "--limit",
            "5",
            "--config",
            str(config_path),
        ]
    )
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
    code = main(
        [
            "memory",
            "search",
            "--queries",
            str(queries),
            "--channel",
            CHANNEL,
            "--config",
            str(config_path),
        ]
    )
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
    """`memory forget --author --yes` prints counts and the (channel, id) of affected messages."""
    argv = ["memory", "forget", "--author", "u1", "--yes", "--config", str(config_path)]
    assert main(argv) == 0
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


GUILD_A, GUILD_B, DM = "discord:1:2", "discord:3:4", "discord:dm:u1"


@pytest.fixture
def three_workspaces(tmp_path: Path) -> Path:
    """u1 said something (indexed, with a memory) in two guilds and a DM; u2 in guild A."""
    path = tmp_path / "forget.toml"
    path.write_text(
        '[storage]\npath = "forget.db"\n\n[logging]\nlevel = "warning"\n\n'
        "[memory]\nkeep_messages_on_forget = false\n"
    )

    async def fill() -> None:
        cfg = load_config(path)
        async with Runtime.open(cfg, llm=ScriptedLLM()) as rt:
            for n, key in enumerate((GUILD_A, GUILD_B, DM)):
                await rt.submit(
                    inbound(key, f"u1 fact number {n}", pid=f"u1-{n}", author="u1", addressed=False)
                )
            await rt.submit(
                inbound(GUILD_A, "u2 talks too", pid="u2-0", author="u2", addressed=False)
            )
            await rt.drain()
            await rt.memory.indexer.flush()
            for n, key in enumerate((GUILD_A, GUILD_B, DM)):
                await rt.memory.graph.save(
                    f"u1 knows fact {n}", "fact", channel=key, author_id="u1", sources=[f"u1-{n}"]
                )

    asyncio.run(fill())
    return path


def _stored(path: Path) -> list[tuple[str, str]]:
    async def read() -> list[tuple[str, str]]:
        cfg = load_config(path)
        async with await Store.open(cfg.storage_path()) as store:
            return [
                (key, m.platform_id)
                for key in (GUILD_A, GUILD_B, DM)
                async for m in store.export(key)
            ]

    return asyncio.run(read())


def test_global_forget_author_previews_per_channel_and_deletes_only_with_yes(
    three_workspaces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory forget --author` without --yes deletes nothing, prints counts per channel and
    exits 2 asking for --yes; with --yes it deletes u1's memories and messages everywhere."""
    argv = ["memory", "forget", "--author", "u1", "--config", str(three_workspaces)]
    before = _stored(three_workspaces)
    assert main(argv) == 2
    captured = capsys.readouterr()
    preview = json.loads(captured.out)
    assert preview["deleted"] is False and preview["memories"] == 3
    assert preview["channels"] == [
        {"channel": key, "memories": 1, "indexed_messages": 1, "messages": 1}
        for key in sorted((GUILD_A, GUILD_B, DM))
    ]
    assert "re-run with --yes" in captured.err and "\n" not in captured.err.strip()
    assert _stored(three_workspaces) == before
    assert main(["memory", "export", "--config", str(three_workspaces)]) == 0
    assert len([x for x in capsys.readouterr().out.splitlines() if '"fact"' in x]) == 3

    assert main([*argv, "--yes"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["deleted"], done["memories_deleted"], done["messages_deleted"]) == (True, 3, 3)
    assert _stored(three_workspaces) == [(GUILD_A, "u2-0")]
    assert main(["memory", "export", "--config", str(three_workspaces)]) == 0
    assert '"fact"' not in capsys.readouterr().out
