"""A rescue (the summaries of what an emergency set aside) whose messages were forgotten
meanwhile finishes with what is left instead of retrying forever.  A real store on disk,
two runtimes one after the other, the operator's own /forget in between."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from bot.runtime import Runtime
from tests.fault.running_bot import until
from tests.helpers import inbound
from tierbot.config import load_config
from tierbot.testing.scripted import ScriptedLLM

CH = "rescue:1"


def markers(db: Path) -> list[list[int]]:
    """The set-aside ids of each live marker of the channel."""
    with sqlite3.connect(db, timeout=30) as conn:
        rows = conn.execute(
            "SELECT meta FROM messages WHERE channel=? AND role='marker' AND state='live'", (CH,)
        ).fetchall()
    return [json.loads(meta or "{}").get("set_aside", []) for (meta,) in rows]


def authors_of(db: Path, ids: list[int]) -> list[str]:
    with sqlite3.connect(db, timeout=30) as conn:
        marks = ",".join("?" * len(ids))
        rows = conn.execute(f"SELECT author_id FROM messages WHERE id IN ({marks})", ids)
        return [a for (a,) in rows.fetchall()]


@pytest.mark.slow
@pytest.mark.parametrize("bob_too", [True, False], ids=["some-forgotten", "all-forgotten"])
async def test_rescue_whose_set_aside_messages_were_forgotten_retries_forever(
    tmp_path: Path, bob_too: bool
) -> None:
    """An emergency sets messages aside; `/forget --author alice` (raw messages deleted)
    runs before the rescue: the rescue summarises bob's set-aside messages (if any), skips
    alice's, leaves no marker behind and stops (a handful of attempts, not a loop)."""
    path = tmp_path / "config.toml"
    path.write_text(
        f'[storage]\npath = "{tmp_path / "bot.db"}"\n'
        '[defaults]\ncontext_window = 2000\nsystem_prompt = "sys"\n'
        "[defaults.compaction]\nmin_messages_between = 0\nrescue_chunk_messages = 4\n"
        "[workers]\nretry_base_seconds = 0.05\nretry_max_seconds = 0.2\n"
        "[memory]\nenabled = true\nkeep_messages_on_forget = false\n"
    )
    cfg = load_config(path)
    db = tmp_path / "bot.db"

    # 1. Summaries never come back: the channel fills until an emergency sets messages aside.
    stuck = ScriptedLLM()
    stuck.gate["summary"] = asyncio.Event()
    rt = await Runtime.open(cfg, llm=stuck, respond_override="listen")
    try:
        for i in range(200):
            who = "bob" if bob_too and i % 2 else "alice"
            await rt.submit(inbound(CH, f"{who} says line {i} " + "word " * 30, author=who))
            if markers(db):
                break
        await until(lambda: markers(db), within=30, what="an emergency to set messages aside")
    finally:
        await asyncio.wait_for(rt.aclose(drain_seconds=0.5), 30)
    aside = [i for ids in markers(db) for i in ids]
    assert set(authors_of(db, aside)) == ({"alice", "bob"} if bob_too else {"alice"})

    # 2. The operator forgets alice before any rescue ran; 3. the channel comes back.
    async with Runtime.open(cfg, respond_override="listen") as rt:
        answer = await rt.command(inbound(CH, "/forget --author alice"), is_admin=True)
        assert answer is not None and "Deleted" in answer, answer
        assert "alice" not in authors_of(db, aside)
        await rt.submit(inbound(CH, "bob is back", author="bob"))
        await asyncio.wait_for(rt.drain(), 30)
        rescues = [r for r in await rt.store.compactions(CH) if r.tier == "rescue"]
    assert markers(db) == []  # no set-aside message is left waiting for a rescue
    outcomes = [(r.outcome, r.reason) for r in rescues]
    assert all(outcome == "ok" for outcome, _ in outcomes), outcomes
    bob_aside = len(authors_of(db, aside))
    if bob_too:
        # One attempt per chunk of bob's messages, plus at most one finding nothing left.
        assert bob_aside > 0 and 1 <= len(rescues) <= bob_aside // 4 + 2, outcomes
    else:
        # One pass that finds every set-aside message gone, says so, and ends the rescue.
        assert bob_aside == 0 and len(outcomes) == 1, outcomes
        assert (
            outcomes[0][1]
            == f"{len(aside)} set-aside messages were forgotten before they were summarized"
        )
