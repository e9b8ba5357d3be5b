"""Replay files as editors write them: a byte order mark or CRLF line ends are not bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main

from .procs import write_config


def test_bom_at_start_of_replay_file_does_not_reject_first_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A UTF-8 file saved with a byte order mark and CRLF line ends replays with exit 0 and
    its first line stored, not rejected as invalid JSON."""
    feed = tmp_path / "notepad.jsonl"
    feed.write_bytes(
        b'\xef\xbb\xbf{"id": "first", "author": "ann", "text": "hello", "ts": 1700000000}\r\n'
        b'{"id": "second", "author": "ann", "text": "again", "ts": 1700000001}\r\n'
    )
    cfg = str(write_config(tmp_path))
    code = main(
        ["replay", str(feed), "--channel", "b:1", "--listen-only", "--json", "--config", cfg]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["rejected"] == [] and report["messages_in"] == 2
    assert main(["history", "export", "--channel", "b:1", "--config", cfg]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["text"]) for r in rows] == [("first", "hello"), ("second", "again")]
