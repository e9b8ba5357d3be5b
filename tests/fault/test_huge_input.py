"""A message over ``[runtime] max_message_chars`` is refused where it enters, said so to
its author (an adapter) or named by line (replay), and never stored cut short."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.base import route_inbound
from bot.cli import main
from bot.runtime import Runtime
from tests.helpers import inbound
from tierbot.messages import Outbound, Role
from tierbot.testing.scripted import ScriptedLLM

CH = "discord:1:2"


class _Recorder:
    name = "discord"

    def __init__(self) -> None:
        self.sent: list[Outbound] = []

    async def send(self, out: Outbound) -> list[str]:
        self.sent.append(out)
        return ["r1"]


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))


async def test_an_adapter_refuses_a_huge_message_and_tells_its_author(make_config: Any) -> None:
    cfg = make_config({"runtime": {"max_message_chars": 1000}, "defaults": {"respond": "listen"}})
    adapter, log = _Recorder(), _Log()
    async with Runtime.open(cfg, llm=ScriptedLLM()) as rt:
        huge = inbound(CH, "x" * 20_000, pid="big", addressed=True)
        delivery = await route_inbound(adapter, rt, huge, is_admin=False, log=log)
        assert delivery is not None and delivery.too_long and delivery.limit == 1000
        ok = await route_inbound(
            adapter, rt, inbound(CH, "y" * 1000, pid="fits"), is_admin=False, log=log
        )
        assert ok is not None and ok.accepted
        await rt.drain()
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
    assert stored == ["fits"]
    [reply] = adapter.sent
    assert reply.reply_to == "big" and "20,000 characters" in reply.text and "1,000" in reply.text
    assert ("message.ignored", {"channel": CH, "platform_id": "big"}) in [
        (e, {k: kw[k] for k in ("channel", "platform_id")}) for e, kw in log.events
    ]


def test_replay_names_the_line_over_the_configured_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp_path / "bot.db"}"\n[runtime]\nmax_message_chars = 500\n'
        '[memory]\nenabled = false\n[logging]\nlevel = "error"\n'
        "[adapters.console]\nenabled = false\n"
    )
    feed = tmp_path / "in.jsonl"
    rows = [
        {"id": "a", "author": "u", "text": "short"},
        {"id": "b", "author": "u", "text": "z" * 501},
    ]
    feed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["replay", str(feed), "--channel", "r:1", "--config", str(cfg), "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert f"{feed}:2: 'text' is 501 characters long; the limit is 500" in err
    assert "[runtime] max_message_chars" in err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["messages_in"] == 1 and report["rejected_total"] == 1
