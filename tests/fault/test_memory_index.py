"""The memory graph's indexes under faults: a stop before indexing caught up, a corrupt
vector index file.  Real `tierbot` processes, real files on disk."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from bot.runtime import Runtime
from memory_graph import HashingEmbedder
from tests.helpers import inbound, wait_for
from tierbot.config import Config

CHANNEL = "idx:1"


def code(i: int) -> str:
    """A word that only message ``i`` contains (letters only, so no stemmer changes it)."""
    letters = "".join(chr(97 + (i // 26**k) % 26) for k in range(4))
    return f"zq{letters}x"


def write_replay(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            text = f"note {i}: the deploy of service {code(i)} went fine after lunch today."
            f.write(json.dumps({"id": f"n{i}", "author": f"u{i % 5}", "text": text}) + "\n")


def write_config(tmp: Path, extra: str = "", window: int = 32000) -> Path:
    cfg = tmp / "config.toml"
    cfg.write_text(
        f"[defaults]\ncontext_window = {window}\n"
        f'[storage]\npath = "{tmp / "bot.db"}"\nsynchronous = "normal"\n'
        '[logging]\nlevel = "info"\nformat = "json"\n[adapters.console]\nenabled = false\n'
        f"[memory]\nenabled = true\n{extra}"
    )
    return cfg


def tierbot(*args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", *args]


def query(db: Path, sql: str) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute(sql).fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0]) if row and row[0] is not None else 0


def unindexed(db: Path) -> int:
    """Stored user messages the memory graph has no episode for."""
    return query(
        db,
        "SELECT COUNT(*) FROM messages m WHERE m.role = 'user' AND NOT EXISTS "
        "(SELECT 1 FROM memory_nodes n WHERE n.channel = m.channel "
        "AND n.platform_id = m.platform_id)",
    )


def search(cfg: Path, text: str, channel: str = CHANNEL) -> list[str]:
    out = subprocess.run(
        tierbot(
            "memory", "search", text, "--channel", channel, "--limit", "3", "--config", str(cfg)
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [pid for hit in json.loads(out) for pid in hit["source_message_ids"]]


@pytest.mark.slow
def test_search_gap_after_shutdown_killed_process_is_indexed_after_restart(tmp_path: Path) -> None:
    """Messages stored but not yet indexed when the bot was SIGKILLed are found by memory
    search after the next start, without the channel getting a new message."""
    n = 1500
    data = tmp_path / "chat.jsonl"
    write_replay(data, n)
    cfg = write_config(tmp_path)
    db = tmp_path / "bot.db"
    replay = tierbot(
        "replay", str(data), "--channel", CHANNEL, "--listen-only", "--config", str(cfg)
    )
    proc = subprocess.Popen(replay, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while query(db, "SELECT COUNT(*) FROM messages") < n // 2 and proc.poll() is None:
            assert time.monotonic() < deadline, "the replay stored nothing in 120 s"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    stored = query(db, "SELECT COUNT(*) FROM messages WHERE role = 'user'")
    assert stored >= n // 2
    assert unindexed(db) > 0  # the kill did land before the indexer caught up

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = subprocess.run(
        tierbot(
            "replay", str(empty), "--channel", "idx:other", "--listen-only", "--config", str(cfg)
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert unindexed(db) == 0
    pids = [f"n{i}" for i in range(stored)]
    for i in (0, stored // 3, stored // 2, stored - 1):
        assert pids[i] in search(cfg, code(i))


async def test_search_gap_after_shutdown_drain_timeout_is_logged_and_caught_up(
    make_config: Callable[..., Config],
) -> None:
    """A shutdown that stops indexing before it caught up logs how many messages were left,
    /status shows the backlog, and the next start indexes every one of them."""
    n = 2000
    off = make_config({"memory": {"enabled": True, "index_live_messages": False}})
    async with Runtime.open(off) as rt:
        msgs = [
            inbound(CHANNEL, f"we talked about {code(i)} at the standup", pid=f"p{i}")
            for i in range(n)
        ]
        await rt.registry.submit_many(msgs)
        await rt.drain()

    hasty = make_config({"memory": {"enabled": True, "index_drain_seconds": 0}})
    with capture_logs() as logs:
        async with Runtime.open(hasty) as rt:
            from bot.ops import status_snapshot

            assert status_snapshot(rt).memory_index is not None
    db = Path(hasty.storage_path())
    left = [e for e in logs if e["event"] == "memory.index_backlog_at_shutdown"]
    assert len(left) == 1 and left[0]["log_level"] == "warning"
    assert left[0]["unindexed"] == query(
        db,
        f"SELECT COUNT(*) FROM messages WHERE role IN ('user', 'assistant') "
        f"AND id > {left[0]['indexed_upto']}",
    )
    assert left[0]["unindexed"] > 0

    async with Runtime.open(make_config({"memory": {"enabled": True}})) as rt:
        await rt.memory.indexer.flush()
        assert status_snapshot(rt).memory_index["backlog"] == 0
        for i in (0, 1, n // 2, n - 2, n - 1):
            hits = await rt.memory.search(code(i), channel=CHANNEL, limit=3)
            assert f"p{i}" in [pid for h in hits for pid in h["source_message_ids"]]
    assert unindexed(db) == 0


def corrupt_near_end(path: Path, size: int = 64 * 1024) -> None:
    """Overwrite the last ``size`` bytes of the file's node records with noise; the file
    keeps its length.  (hnswlib's file: a 96-byte header, then one fixed-size record per
    node, then the upper layers' link lists.  Noise in the records' neighbour ids is what
    crashed searches; noise in the trailing link lists already failed to load.)"""
    total = path.stat().st_size
    with path.open("r+b") as fh:
        _, _, count, per_node = struct.unpack("<4Q", fh.read(32))
        end = 96 + count * per_node
        assert end - size > 96 and end <= total
        fh.seek(end - size)
        fh.write(random.Random(12).randbytes(size))
    assert path.stat().st_size == total


@pytest.mark.slow
def test_corrupt_vector_index_is_rebuilt_not_a_segfault(tmp_path: Path) -> None:
    """With 64 KB near the end of vectors.hnsw overwritten, replay and memory search exit 0
    with the right answers, and the log says the index was rebuilt and why."""
    n = 700
    data = tmp_path / "chat.jsonl"
    write_replay(data, n)
    # A small window: many compactions, so many memories (the vector index holds memories).
    cfg = write_config(tmp_path, window=1500)
    first = subprocess.run(
        tierbot("replay", str(data), "--channel", CHANNEL, "--listen-only", "--config", str(cfg)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    index = tmp_path / "bot.db.memory-index" / "vectors.hnsw"
    corrupt_near_end(index)

    search_run = subprocess.run(
        tierbot("memory", "search", code(n - 3), "--channel", CHANNEL, "--config", str(cfg)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert search_run.returncode == 0, search_run.stderr
    assert f"n{n - 3}" in [
        p for h in json.loads(search_run.stdout) for p in h["source_message_ids"]
    ]
    assert "memory.vector_rebuild" in search_run.stderr and "corrupt" in search_run.stderr

    corrupt_near_end(index)
    more = tmp_path / "more.jsonl"
    more.write_text(
        json.dumps({"id": "late", "author": "u1", "text": "the pager rotation moves to zqlatex"})
        + "\n"
    )
    again = subprocess.run(
        tierbot("replay", str(more), "--channel", CHANNEL, "--listen-only", "--config", str(cfg)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "memory.vector_rebuild" in again.stderr and "corrupt" in again.stderr
    assert "late" in search(cfg, "pager rotation zqlatex")
    assert "n7" in search(cfg, code(7))


class _PoisonEmbedder(HashingEmbedder):
    """The offline embedder, failing on any text that holds ``POISON`` (a model or a
    remote embedder refusing one input)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any("POISON" in t for t in texts):
            raise ValueError("the embedder refused an input")
        return super().embed(texts)


async def test_one_message_the_indexer_cannot_embed_is_named_and_the_other_channels_indexed(
    tmp_path: Path,
) -> None:
    """A batch spans many channels and is embedded in one call: one message that makes it
    fail must not keep every other channel's messages out of memory search, and the one
    left out is named at error level, not passed over quietly."""
    from channels.memory import EpisodeIndexer
    from channels.registry import to_message
    from memory_graph import MemoryGraph
    from tierbot.config import MemoryConfig
    from tierbot.store import Store
    from tierbot.tokens import get_counter

    db = tmp_path / "bot.db"
    counter = get_counter()
    texts = {
        "discord:1:10": "the staging database moves to the harbour datacenter",
        "discord:1:11": "POISON the release notes mention the quarterly budget",
        "discord:1:12": "our kayak club meets at the boathouse on saturdays",
    }
    async with await Store.open(db) as store:
        for n, (ch, text) in enumerate(texts.items()):
            await store.ensure_channel(ch)
            m = inbound(ch, text, pid=f"m{n}")
            await store.append_many([to_message(m, counter.count_message(m.text))])
        graph = await MemoryGraph.open(db, MemoryConfig(), embedder=_PoisonEmbedder())
        try:
            indexer = EpisodeIndexer(graph, store, delay=0.0)
            with capture_logs() as logs:
                indexer.start()
                await indexer.flush()
                await wait_for(lambda: indexer.mark >= 3, timeout=30.0)
                await indexer.aclose(5.0)
            for ch, words in (("discord:1:10", "harbour datacenter"), ("discord:1:12", "kayak")):
                hits = await graph.recall(words, channel=ch)
                assert [h.content for h in hits] == [texts[ch]], ch
            assert not await graph.recall("quarterly budget", channel="discord:1:11")
        finally:
            await graph.aclose()
    skipped = [e for e in logs if e["event"] == "memory.index_skipped"]
    assert [(e["channel"], e["log_level"]) for e in skipped] == [("discord:1:11", "error")]
