"""``tierbot status`` through a running bot's ops endpoint; ``channel show`` from the store."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.ops import OperatorSeat
from bot.runtime import Runtime
from tests.helpers import inbound, wait_for
from tierbot.config import load_config
from tierbot.logging import configure_logging
from tierbot.testing.scripted import ScriptedLLM

CH = "replay:1"


@pytest.fixture(autouse=True)
def _logs_to_stderr() -> Iterator[None]:
    """Keep the runtime's logs off stdout, where the commands print their views."""
    configure_logging("info", "json", sys.stderr)
    yield


def save(path: Path, text: str) -> None:
    """Write the file as an editor would (a tiny write; fine inside the event loop)."""
    path.write_text(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_config(tmp_path: Path, *, ops: bool = True, port: int = 0, window: int = 1000) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f"""
[storage]
path = "{tmp_path / "tierbot.db"}"
synchronous = "normal"

[memory]
enabled = false

[adapters.console]
enabled = false

[workers]
retry_base_seconds = 0.0

[defaults]
context_window = {window}
system_prompt = "sys"
respond = "listen"

[defaults.compaction]
min_messages_between = 0
summary_share = 0.9

[ops]
enabled = {"true" if ops else "false"}
port = {port}
""")
    return path


async def test_status_lists_channels_fullest_first_with_bars_and_threshold_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the [ops] endpoint of a bot started like `tierbot run` (OperatorSeat), the text
    view shows health, pools and each channel's bar with | at its thresholds, fullest first;
    --json gives the same snapshot to scripts."""
    path = write_config(tmp_path, port=free_port(), window=4000)
    async with (
        Runtime.open(load_config(path, environ={}), llm=ScriptedLLM()) as rt,
        OperatorSeat(rt),
    ):
        for i, size in enumerate((40, 400, 150)):
            await rt.submit(inbound(f"load:{i}", "alpha " * size))
        await rt.drain()
        code = await asyncio.to_thread(main, ["status", "--config", str(path)])
        out = capsys.readouterr().out
        json_code = await asyncio.to_thread(main, ["status", "--config", str(path), "--json"])
        snap = json.loads(capsys.readouterr().out)
    assert code == 0 and json_code == 0
    assert out.splitlines()[0].endswith(": healthy")
    assert "pools: compaction 0 running / 0 queued (of 4)" in out
    rows = [line for line in out.splitlines() if line.strip().startswith("load:")]
    assert [r.split()[0] for r in rows] == ["load:1", "load:2", "load:0"]
    bar = rows[0][rows[0].index("[") : rows[0].index("]") + 1]
    assert len(bar) == 32 and bar.count("|") == 3 and "#" in bar
    assert [c["channel"] for c in snap["channels"]] == ["load:1", "load:2", "load:0"]
    assert snap["health"]["status"] == "ok" and snap["config"]["watching"] is True


async def test_status_reports_a_rejected_edit_and_pending_restart_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a bad edit the status view says it was rejected (with the key path) and that the
    old config still runs; a storage.path edit is listed as restart required."""
    path = write_config(tmp_path, port=free_port())
    config_text = path.read_text()
    async with Runtime.open(load_config(path, environ={}), llm=ScriptedLLM()) as rt:
        async with OperatorSeat(rt, interval=0.02) as seat:
            assert seat.watcher is not None
            text = config_text
            save(
                path,
                text.replace('path = "', 'path = "moved-').replace(
                    "[ops]", "[ops]\nmetrics_top_channels = 5"
                ),
            )
            await wait_for(lambda: seat.watcher is not None and seat.watcher.last is not None)
            save(path, text.replace("summary_share = 0.9", "summary_share = 9"))
            await wait_for(
                lambda: (
                    seat.watcher is not None
                    and seat.watcher.last is not None
                    and seat.watcher.last.outcome == "rejected"
                )
            )
            code = await asyncio.to_thread(main, ["status", "--config", str(path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "last edit REJECTED" in out
    assert "defaults.compaction.summary_share: input should be less than 1" in out
    assert "restart required for: storage.path" in out


def test_status_without_a_running_bot_exits_1_naming_the_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listening: exit 1 and a message naming the URL and the [ops] switch."""
    port = free_port()
    assert main(["status", "--config", str(write_config(tmp_path, port=port))]) == 1
    err = capsys.readouterr().err
    assert f"no tierbot answers at http://127.0.0.1:{port}" in err and "[ops] enabled" in err


def test_status_with_the_endpoint_off_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[ops] enabled = false: exit 2 and say which switch to flip."""
    assert main(["status", "--config", str(write_config(tmp_path, ops=False))]) == 2
    assert "set [ops] enabled = true" in capsys.readouterr().err


async def test_channel_show_lists_every_compaction_from_the_store_with_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the bot stopped, `channel show` reads each compaction (time, tier, usage before and
    after, messages, memories, duration) and, after an emergency, advises an earlier start."""
    path = write_config(tmp_path)
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    async with Runtime.open(load_config(path, environ={}), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while actor.compactor.counters["emergency"] == 0:
            await rt.submit(inbound(CH, "alpha " * 95, pid=f"m{n}"))
            await asyncio.sleep(0.01)
            n += 1
        llm.gate["summary"].set()
        await rt.drain()
        expected = await rt.store.compactions(CH)
    assert (
        await asyncio.to_thread(main, ["channel", "show", "--channel", CH, "--config", str(path)])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(f"channel {CH}: {len(expected)} compactions")
    assert "thresholds now: background 80%, aggressive 85%, emergency 95% of 1000 tokens" in out
    rows = [line for line in out.splitlines() if line[:2] == "20"]
    assert [r.split()[2] for r in rows] == [r.tier for r in reversed(expected)]
    assert "emergency" in [r.split()[2] for r in rows]
    assert (
        "advice: 1 emergency truncation(s)" in out and "background_threshold (0.80 -> 0.70)" in out
    )
    show_json = ["channel", "show", "--channel", CH, "--config", str(path), "--json"]
    assert await asyncio.to_thread(main, show_json) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["tier"] for r in records] == [r.tier for r in reversed(expected)]
    assert {r["context_window"] for r in records} == {1000}
    # The operator later raised the window: the history still says what it ran at, and an
    # unknown channel is "not found" (exit 1), not an empty history.
    write_config(tmp_path, window=32000)
    assert (
        await asyncio.to_thread(main, ["channel", "show", "--channel", CH, "--config", str(path)])
        == 0
    )
    assert "of 32000 tokens (the last compaction ran at 1000 tokens" in capsys.readouterr().out
    unknown = ["channel", "show", "--channel", "nosuch:chan", "--config", str(path)]
    assert await asyncio.to_thread(main, unknown) == 1
    captured = capsys.readouterr()
    assert "no channel 'nosuch:chan' in the store" in captured.err and captured.out == ""
    [first] = [r for r in records if r["tier"] == "emergency"]
    assert set(first) >= {
        "time",
        "tier",
        "usage_before",
        "usage_after",
        "messages",
        "memories",
        "duration",
        "tokens_before",
        "tokens_after",
    }
    assert first["usage_before"] > first["usage_after"]


def test_channel_show_without_a_store_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No database at the configured path: exit 2 naming it, and no empty database is created."""
    path = write_config(tmp_path)
    assert main(["channel", "show", "--channel", CH, "--config", str(path)]) == 2
    assert f"no store at {tmp_path / 'tierbot.db'}" in capsys.readouterr().err
    assert not (tmp_path / "tierbot.db").exists()
