"""Ctrl-C in the middle of a replay must not look like success."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from .procs import (
    EXIT_BOUND,
    last_line,
    messages,
    no_traceback,
    start,
    stored_ids,
    wait_for_writer,
    write_config,
)


@pytest.mark.slow
def test_replay_interrupted_by_ctrl_c_exits_non_zero(tmp_path: Path) -> None:
    """A replay that gets SIGINT while reading its feed (a FIFO, so the moment is certain)
    exits 1 with one line saying it was interrupted, not 0 with its lines unstored."""
    cfg = write_config(tmp_path)
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    proc = start(
        "replay", str(fifo), "--channel", "i:1", "--listen-only", "--json", "--config", str(cfg)
    )
    writer = os.open(fifo, os.O_WRONLY)  # blocks until the replay opened the FIFO
    try:
        os.write(writer, "".join(json.dumps(m) + "\n" for m in messages(5, "i")).encode())
        wait_for_writer(proc, tmp_path / "bot.db.lock")
        proc.send_signal(signal.SIGINT)
        # The replay reads in its event loop: the cancellation Ctrl-C asked for runs once
        # the read returns, here at the end of the feed.
        os.close(writer)
        writer = -1
        out, err = proc.communicate(timeout=EXIT_BOUND)
    finally:
        if writer != -1:
            os.close(writer)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, (proc.returncode, out, err)
    assert no_traceback(err) and "interrupted" in last_line(err), err
    assert len(stored_ids(tmp_path / "bot.db", "i:1")) < 5
