"""Real ``tierbot`` processes for the fault suite: configs, replay files, bounded runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: A process that cannot run must end within this many seconds (generous: the machine is busy).
EXIT_BOUND = 15.0
ROOT = Path(__file__).resolve().parents[2]


def tierbot(*args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", *args]


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    return out


def write_config(tmp: Path, extra: str = "", *, memory: bool = False, storage: str = "") -> Path:
    """A config on ``tmp/bot.db`` with no console, quiet logs, ``storage`` lines added to
    ``[storage]`` and ``extra`` TOML appended."""
    cfg = tmp / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp / "bot.db"}"\nsynchronous = "normal"\n{storage}'
        '[logging]\nlevel = "warning"\nformat = "json"\n'
        "[adapters.console]\nenabled = false\n"
        f"[memory]\nenabled = {'true' if memory else 'false'}\n" + extra
    )
    return cfg


def write_lines(path: Path, rows: list[Any]) -> Path:
    """One JSON value per line (``str`` rows are written as they are)."""
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def messages(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "author": f"u{i % 3}", "text": f"{prefix} says line {i} " + "x" * 40}
        for i in range(n)
    ]


def run(
    *args: str, timeout: float = EXIT_BOUND, preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``tierbot ARGS``; a hang past ``timeout`` fails the test (TimeoutExpired)."""
    return subprocess.run(
        tierbot(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        preexec_fn=preexec_fn,
    )


def start(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        tierbot(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), **kw
    )


def wait_for_writer(bot: subprocess.Popen[str], lock: Path, timeout: float = 60.0) -> None:
    """Return once ``bot`` holds the store's writer lock (its pid is in ``lock``); fail the
    test with the bot's stderr if it exited instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and bot.poll() is None:
        try:
            if json.loads(lock.read_text() or "{}").get("pid") == bot.pid:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    assert bot.poll() is None, bot.communicate()[1]


def stored_ids(db: Path, channel: str) -> list[str]:
    with sqlite3.connect(db, timeout=30) as conn:
        rows = conn.execute(
            "SELECT platform_id FROM messages WHERE channel = ? AND role = 'user' ORDER BY id",
            (channel,),
        ).fetchall()
    return [r[0] for r in rows]


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def no_traceback(stderr: str) -> bool:
    """No raw Python traceback reached the terminal (structured log records may carry one)."""
    return not any(line.startswith("Traceback") for line in stderr.splitlines())
