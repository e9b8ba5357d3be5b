"""SIGTERM or SIGINT during ``tierbot replay``: it stops, says how far it got, and a resume
from the line it names stores the rest exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .procs import (
    EXIT_BOUND,
    env,
    last_line,
    messages,
    no_traceback,
    start,
    stored_ids,
    tierbot,
    wait_for_writer,
    write_config,
)


def _wait_stored(db: Path, channel: str, proc: subprocess.Popen[str], at_least: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if len(stored_ids(db, channel)) >= at_least:
                return
        except Exception:  # the table may not exist yet
            pass
        time.sleep(0.05)
    raise AssertionError(
        f"nothing stored: {proc.poll()} {proc.stderr.read() if proc.stderr else ''}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_during_replay_exits_143_without_a_word(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A replay signalled mid-feed exits 1 with one stderr line naming the lines stored and
    where to resume, prints a report marked interrupted, and the resumed feed completes the
    channel with every line stored exactly once."""
    cfg = write_config(tmp_path)
    db = tmp_path / "bot.db"
    rows = messages(150, "s")
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    proc = start(
        "replay", str(fifo), "--channel", "s:1", "--listen-only", "--json", "--config", str(cfg)
    )
    writer = os.open(fifo, os.O_WRONLY)
    try:
        # More than one batch, then the feed stays open: the replay waits for line 151.
        os.write(writer, "".join(json.dumps(m) + "\n" for m in rows).encode())
        wait_for_writer(proc, tmp_path / "bot.db.lock")
        _wait_stored(db, "s:1", proc, 1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=EXIT_BOUND)
    finally:
        os.close(writer)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, (proc.returncode, out, err)
    assert no_traceback(err), err
    report = json.loads(out)
    stored = stored_ids(db, "s:1")
    n = report["last_line_stored"]
    assert report["interrupted"] is True and report["signal"] == sig.name
    assert 1 <= n < 150 and report["messages_in"] == n and report["resume_from_line"] == n + 1
    # Everything up to the named line is stored, nothing after it.
    assert stored == [m["id"] for m in rows[:n]]
    line = last_line(err)
    assert line.startswith("tierbot: replay interrupted") and f"through line {n} " in line
    assert f"tail -n +{n + 1} " in line

    # The resume the line suggests stores the rest; nothing twice.
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(json.dumps(m) + "\n" for m in rows))
    rest = subprocess.run(
        f"tail -n +{n + 1} {feed} | "
        + " ".join(
            tierbot(
                "replay",
                "/dev/stdin",
                "--channel",
                "s:1",
                "--listen-only",
                "--json",
                "--config",
                str(cfg),
            )
        ),
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )
    assert rest.returncode == 0, rest.stderr
    assert json.loads(rest.stdout)["interrupted"] is False
    assert stored_ids(db, "s:1") == [m["id"] for m in rows]
