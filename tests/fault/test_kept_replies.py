"""A kept (undelivered) reply whose post is cut off by a crash is never posted twice: the
next start reports it instead, and the operator settles it with ``tierbot replies``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.fault.procs import run
from tests.fault.running_bot import (
    Bot,
    run_until_event,
    slack_env,
    slack_section,
    until,
    write_config,
)
from tierbot.store import Store
from tierbot.testing import FakeSlack

DM = "D100"


@pytest.mark.slow
async def test_kept_reply_double_posts_after_a_crash_between_post_and_delete(
    tmp_path: Path,
) -> None:
    """SIGKILL while a kept reply's post is in flight: the next start does not post it again
    but logs it as uncertain (with its text), still posts the other kept reply once, and
    `tierbot replies list/drop` show and settle it."""
    async with FakeSlack() as fake:
        channel = f"slack:{fake.team_id}:{DM}"
        cfg = write_config(tmp_path, slack_section(fake.api_base_url))
        async with await Store.open(tmp_path / "bot.db") as store:
            first_id = await store.save_undelivered(channel, "the first answer", "1.000001", "down")
            await store.save_undelivered(channel, "the second answer", "1.000002", "down")

        fake.hold_posts()  # the first kept reply's post reaches Slack and gets no answer
        crashed = await Bot(cfg, slack_env(fake)).start()
        try:
            await until(lambda: fake.post_requests, within=60, what="the kept reply's post")
            assert crashed.proc is not None
            crashed.proc.kill()  # SIGKILL: no cleanup, the row stays as it was mid-post
            assert await crashed.exit_code() == -9
        finally:
            await crashed.stop()
        fake.release_posts()  # Slack did take that post: a second one would be a duplicate
        await fake.wait_for(lambda: fake.posted(DM), within=15)

        again = await run_until_event(
            cfg, slack_env(fake), "replies.redelivered", "the kept replies to be handled"
        )
        texts = Counter(p["text"] for p in fake.posted(DM))
        assert texts == {"the first answer": 1, "the second answer": 1}, texts
        uncertain = again.events("reply.delivery_uncertain")
        assert [(e["reply_id"], e["channel"], e["text"]) for e in uncertain] == [
            (first_id, channel, "the first answer")
        ]
        assert again.events("replies.redelivered")[-1]["posted"] == 1

    listed = run("replies", "list", "--json", "--config", str(cfg))
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["state"], r["text"]) for r in rows] == [
        (first_id, "uncertain", "the first answer")
    ]
    dropped = run("replies", "drop", str(first_id), "--config", str(cfg))
    assert dropped.returncode == 0, dropped.stderr
    assert run("replies", "list", "--json", "--config", str(cfg)).stdout == ""
    missing = run("replies", "drop", str(first_id), "--config", str(cfg))
    assert missing.returncode == 1 and "no kept reply" in missing.stderr  # not found
