"""Live reload of config.toml into a running runtime: file edits, SIGHUP, rejections, restarts."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from bot.adapters.discord import DiscordAdapter
from bot.reload import ConfigWatcher, changed_keys, is_live
from bot.runtime import Runtime, install_signal_handlers
from tests.helpers import export_ids, inbound, wait_for
from tierbot.config import load_config
from tierbot.logging import configure_logging, set_log_level
from tierbot.testing.scripted import ScriptedLLM

CH = "test:1"


def config_text(db: Path, *, background: float = 0.80, extra: str = "") -> str:
    """A 1,000-token listen-only window; ``background`` is the threshold under test."""
    return f"""
[storage]
path = "{db}"
synchronous = "normal"

[memory]
enabled = false

[adapters.console]
enabled = false

[workers]
retry_base_seconds = 0.0

[defaults]
context_window = 1000
system_prompt = "sys"
respond = "listen"

[defaults.compaction]
min_messages_between = 0
summary_share = 0.9
branch_preflight_threshold = {background - 0.1:.2f}
background_threshold = {background:.2f}
{extra}
"""


def save(path: Path, text: str) -> None:
    """Write the file as an editor would (a tiny write; fine inside the event loop)."""
    path.write_text(text)


def text(tokens: int) -> str:
    return "alpha " * (tokens - 5)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(config_text(tmp_path / "tierbot.db"))
    return path


@pytest.fixture
async def rt(config_path: Path) -> AsyncIterator[Runtime]:
    async with Runtime.open(load_config(config_path, environ={}), llm=ScriptedLLM()) as runtime:
        yield runtime


def watcher(rt: Runtime, path: Path, interval: float = 0.02) -> ConfigWatcher:
    return ConfigWatcher(rt, path, interval=interval, debounce=0.02, environ={})


async def test_lowering_a_threshold_on_a_running_bot_makes_the_next_message_compact(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """At 50% usage nothing compacts; after the file's background threshold drops to 40%,
    the very next message starts a background compaction in the same actor, no message lost."""
    actor = await rt.registry.actor(CH)
    sent = []
    while actor.usage < 0.5:
        sent.append(f"m{len(sent)}")
        await rt.submit(inbound(CH, text(50), pid=sent[-1]))
        await rt.drain()
    assert sum(actor.compactor.counters.values()) == 0
    async with watcher(rt, config_path) as w:
        save(config_path, config_text(tmp_path / "tierbot.db", background=0.40))
        await wait_for(lambda: w.last_applied is not None)
    assert w.last_applied is not None
    assert w.last_applied.live == (
        "defaults.compaction.background_threshold",
        "defaults.compaction.branch_preflight_threshold",
    )
    sent.append("after-edit")
    await rt.submit(inbound(CH, text(50), pid=sent[-1]))
    await rt.drain()
    assert await rt.registry.actor(CH) is actor
    # One pass, or a second beside it when the first alone is projected not to suffice.
    assert actor.compactor.counters["background"] >= 1
    assert actor.usage < 0.40
    assert sorted(i for i in await export_ids(rt, CH) if i in sent) == sorted(sent)


async def test_a_longer_system_prompt_counts_in_a_running_channels_usage(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """The system prompt's tokens are part of every channel's usage: a reload that makes it
    longer shows in a running channel at its next message, and shorter again after."""
    actor = await rt.registry.actor(CH)
    await rt.submit(inbound(CH, text(50), pid="m0"))
    await rt.drain()
    before = actor.usage
    prompt = "Answer kindly and cite who said what. " * 20
    longer = config_text(tmp_path / "tierbot.db").replace('"sys"', f'"{prompt}"')
    save(config_path, longer)
    rt.set_config(load_config(config_path, environ={}))
    await rt.submit(inbound(CH, text(50), pid="m1"))
    await rt.drain()
    added = rt.counter.count_message(prompt) - rt.counter.count_message("sys")
    assert added > 100
    assert actor.usage == pytest.approx(before + (added + 50) / 1000, abs=0.005)
    save(config_path, config_text(tmp_path / "tierbot.db"))
    rt.set_config(load_config(config_path, environ={}))
    await rt.submit(inbound(CH, text(50), pid="m2"))
    await rt.drain()
    assert actor.usage == pytest.approx(before + 100 / 1000, abs=0.005)


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        ("backgrund_threshold = 0.4", "defaults.compaction.backgrund_threshold"),
        ("aggressive_threshold = 0.5", "defaults.compaction.aggressive_threshold"),
        ("notice = [", ""),
    ],
    ids=["typo", "misordered", "bad-toml"],
)
async def test_an_invalid_edit_is_rejected_with_its_key_path_and_the_old_config_runs_on(
    rt: Runtime, config_path: Path, tmp_path: Path, edit: str, key: str
) -> None:
    """A bad edit logs config.rejected naming the key, keeps the running config object, and
    the next good save applies."""
    before = rt.config
    db = tmp_path / "tierbot.db"
    with structlog.testing.capture_logs() as logs:
        async with watcher(rt, config_path) as w:
            save(config_path, config_text(db, extra=edit))
            await wait_for(lambda: w.last is not None)
            assert w.last is not None and w.last.outcome == "rejected"
            assert rt.config is before
            save(config_path, config_text(db, background=0.70))
            await wait_for(lambda: w.last is not None and w.last.outcome == "applied")
    assert rt.config.defaults.compaction.background_threshold == 0.70
    [rejected] = [e for e in logs if e["event"] == "config.rejected"]
    assert rejected["log_level"] == "error"
    assert str(config_path) in rejected["error"]
    if key:
        assert key in rejected["keys"]
        assert f"{key}: " in rejected["error"]
    else:
        assert "invalid TOML" in rejected["error"]


PROMPT = "Answer kindly and cite who said what, with the date it was said. " * 18


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda t: t.replace("context_window = 1000", "context_window = 400"), "defaults"),
        (lambda t: t + '[[channels]]\nmatch = "test:*"\ncontext_window = 400\n', "channels[0]"),
        (lambda t: t.replace(PROMPT, PROMPT * 3), "defaults"),
    ],
    ids=["smaller-window", "smaller-override", "longer-prompt"],
)
async def test_a_reload_that_leaves_a_window_too_little_room_is_rejected_like_at_start(
    rt: Runtime, config_path: Path, tmp_path: Path, edit: Any, key: str
) -> None:
    """An edit whose context window (the default's or an override's) the system prompt would
    nearly fill is rejected as startup refuses it: config.rejected names the key and the
    smallest window that works, the running channel keeps its window, and saving that
    smallest window then applies (such edits used to be applied unchecked)."""
    actor = await rt.registry.actor(CH)
    good = config_text(tmp_path / "tierbot.db").replace('"sys"', f'"{PROMPT}"')
    bad = edit(good)
    with structlog.testing.capture_logs() as logs:
        async with watcher(rt, config_path) as w:
            save(config_path, good)
            await wait_for(lambda: w.last is not None and w.last.outcome == "applied")
            before = rt.config
            save(config_path, bad)
            await wait_for(lambda: w.last is not None and w.last.outcome == "rejected")
            assert rt.config is before
            assert actor.settings.context_window == 1000
            smallest = int(re.findall(r"set it to at least (\d+)", w.last.error)[0])
            window = "400" if "= 400" in bad else "1000"
            save(
                config_path,
                bad.replace(f"context_window = {window}", f"context_window = {smallest}"),
            )
            await wait_for(lambda: w.last is not None and w.last.outcome == "applied")
    [rejected] = [e for e in logs if e["event"] == "config.rejected"]
    assert rejected["keys"] == [f"{key}.context_window"]
    assert f"{key}.context_window: " in rejected["error"]
    assert "leave the conversation too little room" in rejected["error"]
    await rt.submit(inbound(CH, text(50), pid="after-edit"))
    await rt.drain()
    assert actor.settings.context_window == smallest


async def test_sighup_reloads_the_file_without_waiting_for_the_poll(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """SIGHUP through install_signal_handlers' reload callback applies an edit at once."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    async with watcher(rt, config_path, interval=3600.0) as w:
        install_signal_handlers(stop, reload=w.request_reload)
        try:
            save(config_path, config_text(tmp_path / "tierbot.db", background=0.50))
            os.kill(os.getpid(), signal.SIGHUP)
            await wait_for(lambda: rt.config.defaults.compaction.background_threshold == 0.50)
        finally:
            for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
    assert w.last is not None and w.last.trigger == "signal"
    assert not stop.is_set()


async def test_restart_only_keys_are_reported_and_keep_their_running_values(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """storage.path and llm.model changes are logged as restart required and not applied,
    while the live key edited with them applies; reverting them clears the report."""
    db = tmp_path / "tierbot.db"
    moved = config_text(tmp_path / "elsewhere.db", background=0.60).replace(
        "[memory]", '[llm]\nmodel = "gpt-4o-mini"\n\n[memory]'
    )
    save(config_path, moved)
    w = watcher(rt, config_path)
    with structlog.testing.capture_logs() as logs:
        result = await w.reload()
    assert result.outcome == "applied"
    assert result.restart_required == ("llm.model", "storage.path")
    assert rt.config.storage_path() == db and rt.config.llm.model == ""
    assert rt.config.defaults.compaction.background_threshold == 0.60
    [event] = [e for e in logs if e["event"] == "config.restart_required"]
    assert event["keys"] == ["llm.model", "storage.path"]
    save(config_path, config_text(db, background=0.60))
    result = await w.reload()
    assert result.outcome == "unchanged" and result.restart_required == ()


async def test_a_mailbox_size_edit_is_reported_as_needing_a_restart_not_as_applied(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """A running channel's mailbox is sized once: editing [defaults] mailbox_size is listed
    as restart required and the running value stays, while a window edit saved with it
    applies (the reload used to claim the mailbox edit applied live)."""
    actor = await rt.registry.actor(CH)
    extra = "mailbox_size = 7\n"
    text = (
        config_text(tmp_path / "tierbot.db")
        .replace("[defaults]\n", "[defaults]\n" + extra)
        .replace("context_window = 1000", "context_window = 1200")
    )
    save(config_path, text)
    result = await watcher(rt, config_path).reload()
    assert result.restart_required == ("defaults.mailbox_size",)
    assert "defaults.context_window" in result.live
    assert rt.config.defaults.mailbox_size == 1000
    assert actor.settings.context_window == 1200


async def test_overrides_allow_lists_and_respond_modes_apply_to_what_is_running(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """A [[channels]] override reaches a live actor (resolved once per new config) and an
    adapter's allow-lists and admins are swapped into the running adapter."""
    actor = await rt.registry.actor(CH)
    adapter = DiscordAdapter(load_config(config_path, environ={}).adapters.discord, environ={})
    rt.adapters["discord"] = adapter
    extra = """
[adapters.discord]
allowed_channels = ["42"]
admins = ["7"]
respond = "always"

[[channels]]
match = "test:*"
context_window = 2000
"""
    save(config_path, config_text(tmp_path / "tierbot.db", extra=extra))
    result = await watcher(rt, config_path).reload()
    assert result.live == (
        "adapters.discord.admins",
        "adapters.discord.allowed_channels",
        "adapters.discord.respond",
        "channels",
    )
    assert actor.settings.context_window == 2000
    assert rt.config.for_channel(CH) is rt.config.for_channel(CH)
    assert adapter.config.allowed_channels == ["42"] and adapter.config.admins == ["7"]
    assert rt.respond_mode("discord:1:2") == "always"


async def test_log_level_edit_applies_to_loggers_bound_before_it(
    rt: Runtime, config_path: Path, tmp_path: Path
) -> None:
    """After logging.level becomes warning, an actor-style logger bound earlier drops info."""
    out = io.StringIO()
    configure_logging("info", "json", out)
    try:
        bound = structlog.get_logger("tierbot.test").bind(channel=CH)
        bound.info("before.reload")
        extra = '\n[logging]\nlevel = "warning"\n'
        save(config_path, config_text(tmp_path / "tierbot.db", extra=extra))
        assert (await watcher(rt, config_path).reload()).live == ("logging.level",)
        bound.info("after.reload")
        bound.warning("still.shown")
    finally:
        set_log_level("info")
    logged = out.getvalue()
    assert "before.reload" in logged and "still.shown" in logged
    assert "after.reload" not in logged


@pytest.mark.parametrize(
    ("key", "live"),
    [
        ("defaults.context_window", True),
        ("defaults.mailbox_size", False),
        ("defaults.idle_evict_seconds", True),
        ("defaults.compaction.emergency_threshold", True),
        ("defaults.branches.timeout_seconds", True),
        ("defaults.task_workers.max_segments", True),
        ("channels", True),
        ("workers.compaction_concurrency", True),
        ("adapters.slack.allowed_teams", True),
        ("adapters.discord.admins", True),
        ("logging.level", True),
        ("ops.metrics_top_channels", True),
        ("storage.path", False),
        ("llm.api_key_env", False),
        ("llm.provider", False),
        ("adapters.discord.enabled", False),
        ("adapters.discord.token_env", False),
        ("adapters.slack.port", False),
        ("memory.embedder", False),
        ("memory.keep_messages_on_forget", True),
        ("logging.format", False),
        ("ops.port", False),
        ("some_future_section.key", False),
    ],
)
def test_live_and_restart_required_keys(key: str, live: bool) -> None:
    """The split documented in docs/operations.md; unknown keys conservatively need a restart."""
    assert is_live(key) is live


def test_changed_keys_compare_lists_as_one_value(make_config: Any) -> None:
    """An allow-list edit is one key path, not one per element."""
    old = make_config()
    new = make_config({"adapters": {"slack": {"allowed_teams": ["T1"]}}, "llm": {"model": "x"}})
    assert changed_keys(old, new) == ["adapters.slack.allowed_teams", "llm.model"]


def test_every_live_key_is_listed_as_live_in_the_operations_guide() -> None:
    """docs/operations.md's "What applies live" table names every key a reload applies, and
    none of the keys that need a restart, so an operator reading it is never misled."""
    from bot.reload import LIVE_KEYS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    live = doc.split("### What applies live", 1)[1].split("### What needs a restart", 1)[0]
    restart = doc.split("### What needs a restart", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"[a-z_]+", live))
    missing = [k for k in sorted(LIVE_KEYS) if k.rsplit(".", 1)[-1] not in named]
    assert not missing, f"live keys missing from the guide: {missing}"
    assert "`mailbox_size`" in restart and "`mailbox_size`" not in live
