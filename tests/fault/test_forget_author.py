"""Forgetting an author with ``keep_messages_on_forget = false`` deletes their stored
messages even when the memory graph has not indexed them yet, and a later start does not
index them back.  Real `tierbot` processes on a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .procs import run, stored_ids, write_lines

CHANNEL = "fa:1"
SECRET = "zqvaultkeyx"  # one word only the forgotten author's messages contain
OTHER = "zqharbourx"  # one word only the other author's message contains


def config(tmp: Path, *, live: bool, keep: bool = False) -> Path:
    cfg = tmp / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp / "bot.db"}"\nsynchronous = "normal"\n'
        '[logging]\nlevel = "warning"\nformat = "json"\n[adapters.console]\nenabled = false\n'
        f"[memory]\nenabled = true\nkeep_messages_on_forget = {'true' if keep else 'false'}\n"
        f"index_live_messages = {'true' if live else 'false'}\n"
    )
    return cfg


def search(cfg: Path, text: str) -> list[dict[str, object]]:
    found = run("memory", "search", text, "--channel", CHANNEL, "--config", str(cfg), timeout=120)
    assert found.returncode == 0, found.stderr
    hits: list[dict[str, object]] = json.loads(found.stdout)
    return hits


@pytest.mark.slow
def test_keep_messages_on_forget_false_skips_messages_not_indexed_yet(tmp_path: Path) -> None:
    """An author forgotten while their messages wait to be indexed: their raw messages are
    deleted (the preview counts them), and after a restart that indexes the rest, neither
    `memory search` nor `history export` shows anything of theirs."""
    rows = [
        {"id": "a1", "author": "alice", "text": f"the {SECRET} is under the mat"},
        {"id": "b1", "author": "bob", "text": f"meet me at the {OTHER} at noon"},
        {"id": "a2", "author": "alice", "text": f"and the {SECRET} opens the back door"},
    ]
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    cfg = config(tmp_path, live=False)  # the indexer does not catch up on its own
    stored = run(
        "replay",
        str(feed),
        "--channel",
        CHANNEL,
        "--listen-only",
        "--config",
        str(cfg),
        timeout=120,
    )
    assert stored.returncode == 0, stored.stderr
    assert stored_ids(tmp_path / "bot.db", CHANNEL) == ["a1", "b1", "a2"]

    preview = run("memory", "forget", "--author", "alice", "--config", str(cfg), timeout=120)
    assert preview.returncode == 2 and "2 raw messages would be deleted" in preview.stderr
    forgot = run(
        "memory", "forget", "--author", "alice", "--yes", "--config", str(cfg), timeout=120
    )
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(forgot.stdout)["messages_deleted"] == 2
    assert stored_ids(tmp_path / "bot.db", CHANNEL) == ["b1"]

    # A start with live indexing on indexes everything still stored.
    cfg = config(tmp_path, live=True)
    empty = write_lines(tmp_path / "empty.jsonl", [])
    again = run(
        "replay",
        str(empty),
        "--channel",
        "fa:other",
        "--listen-only",
        "--config",
        str(cfg),
        timeout=180,
    )
    assert again.returncode == 0, again.stderr
    assert [h["source_message_ids"] for h in search(cfg, OTHER)] == [["b1"]]
    assert search(cfg, SECRET) == []
    history = run("history", "export", "--channel", CHANNEL, "--config", str(cfg))
    assert history.returncode == 0, history.stderr
    exported = [json.loads(line) for line in history.stdout.splitlines()]
    assert [r["id"] for r in exported] == ["b1"]
    assert SECRET not in history.stdout and "alice" not in history.stdout


@pytest.mark.slow
def test_forgotten_author_messages_not_indexed_yet_are_indexed_after_restart(
    tmp_path: Path,
) -> None:
    """With the default `keep_messages_on_forget = true` the author's unindexed messages stay
    in the history, but the start that indexes the backlog skips them: `memory search`
    finds nothing of theirs, and the other author's message is found."""
    rows = [
        {"id": "a1", "author": "alice", "text": f"the {SECRET} is under the mat"},
        {"id": "b1", "author": "bob", "text": f"meet me at the {OTHER} at noon"},
    ]
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    cfg = config(tmp_path, live=False, keep=True)
    stored = run(
        "replay",
        str(feed),
        "--channel",
        CHANNEL,
        "--listen-only",
        "--config",
        str(cfg),
        timeout=120,
    )
    assert stored.returncode == 0, stored.stderr
    forgot = run(
        "memory", "forget", "--author", "alice", "--yes", "--config", str(cfg), timeout=120
    )
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(forgot.stdout)["messages_deleted"] == 0

    cfg = config(tmp_path, live=True, keep=True)
    empty = write_lines(tmp_path / "empty.jsonl", [])
    again = run(
        "replay",
        str(empty),
        "--channel",
        "fa:other",
        "--listen-only",
        "--config",
        str(cfg),
        timeout=180,
    )
    assert again.returncode == 0, again.stderr
    assert [h["source_message_ids"] for h in search(cfg, OTHER)] == [["b1"]]
    assert search(cfg, SECRET) == []
    assert stored_ids(tmp_path / "bot.db", CHANNEL) == ["a1", "b1"]  # kept, as configured
