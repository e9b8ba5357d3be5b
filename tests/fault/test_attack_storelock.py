"""The writer lock: refused however a second writer names the store (a symlink), and never
followed through a symlink planted in its place."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .procs import (
    last_line,
    messages,
    no_traceback,
    run,
    start,
    stored_ids,
    wait_for_writer,
    write_config,
    write_lines,
)


@pytest.mark.slow
def test_replay_through_symlink_to_a_running_bots_store_is_refused(tmp_path: Path) -> None:
    """A replay whose config names the running bot's database through a symlink exits 1
    naming the bot, and stores nothing beside it (no second writer, no second index)."""
    cfg = write_config(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "alias.db").symlink_to(tmp_path / "bot.db")
    cfg2 = write_config(other)
    cfg2.write_text(cfg2.read_text().replace(str(other / "bot.db"), str(other / "alias.db")))
    bot = start("chat", "--config", str(cfg), stdin=subprocess.PIPE)
    try:
        wait_for_writer(bot, tmp_path / "bot.db.lock")
        feed = write_lines(tmp_path / "feed.jsonl", messages(5, "x"))
        proc = run(
            "replay", str(feed), "--channel", "alias:1", "--listen-only", "--config", str(cfg2)
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert no_traceback(proc.stderr)
        assert f"in use by pid {bot.pid}" in last_line(proc.stderr), proc.stderr
    finally:
        try:
            bot.communicate(timeout=30)  # end of input: the chat ends
        except subprocess.TimeoutExpired:
            bot.kill()
            bot.communicate()
    assert stored_ids(tmp_path / "bot.db", "alias:1") == []
    assert not (other / "alias.db.lock").exists()


@pytest.mark.slow
def test_lock_file_replaced_by_symlink_never_overwrites_its_target(tmp_path: Path) -> None:
    """A symlink planted as `bot.db.lock` pointing at another file: the writer exits 1 with
    one line naming the lock, and the target file keeps its content."""
    cfg = write_config(tmp_path)
    victim = tmp_path / "precious.txt"
    victim.write_text("do not truncate me\n")
    (tmp_path / "bot.db.lock").symlink_to(victim)
    feed = write_lines(tmp_path / "feed.jsonl", messages(3, "s"))
    proc = run("replay", str(feed), "--channel", "s:1", "--listen-only", "--config", str(cfg))
    assert proc.returncode == 1 and no_traceback(proc.stderr), proc.stderr
    assert "cannot create the writer lock" in last_line(proc.stderr)
    assert victim.read_text() == "do not truncate me\n"
