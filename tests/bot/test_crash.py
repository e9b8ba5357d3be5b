"""Crash safety: a real `tierbot replay` process is SIGKILLed and run again."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHANNEL = "crash:1"


def write_replay(path: Path, n: int) -> list[str]:
    ids = [f"c{i}" for i in range(n)]
    with path.open("w") as f:
        for i, pid in enumerate(ids):
            text = f"line {i}: alice told bob that build {i % 50} passed on runner r{i % 7}."
            f.write(json.dumps({"id": pid, "author": f"u{i % 5}", "text": text}) + "\n")
    return ids


def write_config(tmp: Path, window: int) -> Path:
    cfg = tmp / "config.toml"
    cfg.write_text(
        f'[defaults]\ncontext_window = {window}\n[storage]\npath = "{tmp / "bot.db"}"\n'
        '[logging]\nlevel = "warning"\n[adapters.console]\nenabled = false\n'
    )
    return cfg


def tierbot(*args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", *args]


def stored(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def kill_after(cmd: list[str], db: Path, *, min_rows: int, extra: float) -> None:
    """Start ``cmd``, wait until ``min_rows`` messages are stored plus ``extra`` s, SIGKILL."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while stored(db) < min_rows and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(extra)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def stored_ids(db: Path) -> list[str]:
    """The platform ids of the channel's user messages, live or archived, in log order."""
    with sqlite3.connect(db, timeout=5) as conn:
        rows = conn.execute(
            "SELECT platform_id FROM messages WHERE channel = ? AND role = 'user' ORDER BY id",
            (CHANNEL,),
        ).fetchall()
    return [r[0] for r in rows]


def export(cfg: Path) -> list[str]:
    out = subprocess.run(
        tierbot("history", "export", "--channel", CHANNEL, "--config", str(cfg)),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line)["id"] for line in out.splitlines() if line.strip()]


def check_consistent(db: Path) -> None:
    """No message is both live and inside a live summary; nothing left the context unlinked."""
    with sqlite3.connect(db, timeout=5) as conn:
        dup = conn.execute(
            "SELECT COUNT(*) FROM summary_members sm JOIN messages s ON s.id = sm.summary_id "
            "JOIN messages m ON m.id = sm.message_id WHERE s.state='live' AND m.state='live'"
        ).fetchone()[0]
        assert dup == 0, "a live summary covers a message that is still live"
        orphans = conn.execute(
            "SELECT COUNT(*) FROM messages m WHERE m.state='archived' AND m.role IN "
            "('user', 'assistant', 'tool_call', 'tool_result') AND NOT EXISTS "
            "(SELECT 1 FROM summary_members sm WHERE sm.message_id = m.id)"
        ).fetchone()[0]
        assert orphans == 0, "an archived message is linked to no summary or marker"
        twice = conn.execute(
            "SELECT COUNT(*) FROM (SELECT channel, platform_id FROM messages "
            "GROUP BY channel, platform_id HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        assert twice == 0


def test_sigkill_mid_replay_then_rerun_keeps_every_message_once(tmp_path: Path) -> None:
    """Killing a replay halfway and running it again ends with every message exactly once."""
    ids = write_replay(tmp_path / "in.jsonl", 3000)
    cfg = write_config(tmp_path, 200_000)
    cmd = tierbot(
        "replay",
        str(tmp_path / "in.jsonl"),
        "--channel",
        CHANNEL,
        "--config",
        str(cfg),
        "--listen-only",
        "--json",
    )
    kill_after(cmd, tmp_path / "bot.db", min_rows=500, extra=0.0)
    partial = export(cfg)
    assert 0 < len(partial) < len(ids), "the kill should land mid-replay"
    assert partial == ids[: len(partial)]
    subprocess.run(cmd, check=True, capture_output=True)
    assert export(cfg) == ids


def test_sigkill_during_compactions_20_times_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL at random points while compactions run, 20 times: after each restart the
    store is consistent, and the final export has every message exactly once."""
    ids = write_replay(tmp_path / "in.jsonl", 1500)
    cfg = write_config(tmp_path, 1500)
    db = tmp_path / "bot.db"
    cmd = tierbot(
        "replay",
        str(tmp_path / "in.jsonl"),
        "--channel",
        CHANNEL,
        "--config",
        str(cfg),
        "--listen-only",
        "--json",
    )
    rng = random.Random(20)
    for _ in range(20):
        kill_after(cmd, db, min_rows=stored(db) + 60, extra=rng.uniform(0.0, 0.4))
        check_consistent(db)
        got = stored_ids(db)  # the export command itself is run once, at the end
        assert len(got) == len(set(got))
        assert got == ids[: len(got)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    report = json.loads(done.stdout)
    check_consistent(db)
    assert export(cfg) == ids
    assert report["final_usage"] < 0.8, report
    with sqlite3.connect(db) as conn:
        kinds = dict(conn.execute("SELECT tier, COUNT(*) FROM compactions GROUP BY tier"))
    assert kinds.get("emergency", 0) + kinds.get("background", 0) > 0
