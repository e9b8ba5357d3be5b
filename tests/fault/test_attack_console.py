"""`tierbot chat` whose output goes nowhere (`tierbot chat | head -1`) must end with a reason."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .procs import EXIT_BOUND, env, last_line, no_traceback, tierbot, write_config


@pytest.mark.slow
def test_chat_with_closed_stdout_exits_1_with_one_line(tmp_path: Path) -> None:
    """stdout closed by its reader, then a command to answer: chat exits 1 within the bound
    with one line saying the console stopped and why (no traceback, no hang); what it read
    before is stored."""
    cfg = write_config(tmp_path)
    cfg.write_text(
        cfg.read_text().replace(
            "[adapters.console]\nenabled = false", "[adapters.console]\nenabled = true"
        )
    )
    proc = subprocess.Popen(
        tierbot("chat", "--config", str(cfg)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.readline()  # the banner: the console is running
    proc.stdout.close()  # like `| head -1`
    try:
        _, err = proc.communicate(b"first words\n/status\n", timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    text = err.decode()
    assert proc.returncode == 1, text
    assert no_traceback(text) and last_line(text).startswith("tierbot: the console stopped:"), text
    db = tmp_path / "bot.db"
    assert "first words" in _texts(db)


def _texts(db: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT text FROM messages WHERE role = 'user'")]
