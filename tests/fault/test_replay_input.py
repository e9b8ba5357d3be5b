"""Hostile replay input: every bad line is skipped and named, every good line is stored,
and `history export` keeps working afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main

from .procs import messages, run, write_config, write_lines

GOOD_1 = b'{"id": "g1", "author": "ann", "text": "before the bad line", "ts": 1700000000}\n'
GOOD_3 = (
    b'{"id": "g3", "author": "ann", "text": "after the bad line", "ts": "2024-05-01T10:00:00"}\n'
)

BAD_LINES = {
    "NaN": (b'{"id": "b", "author": "ann", "text": "t", "ts": NaN}', "finite"),
    "1e300": (b'{"id": "b", "author": "ann", "text": "t", "ts": 1e300}', "between 1970"),
    "Infinity": (b'{"id": "b", "author": "ann", "text": "t", "ts": Infinity}', "finite"),
    "-1e12": (b'{"id": "b", "author": "ann", "text": "t", "ts": -1e12}', "between 1970"),
    "lone surrogate": (b'{"id": "b", "author": "ann", "text": "x \\ud800 y"}', "lone surrogate"),
    "invalid UTF-8": (b'{"id": "b", "author": "ann", "text": "caf\xe9"}', "not valid UTF-8"),
    "100,000-deep nesting": (
        b'{"id": "b", "author": "ann", "text": "t", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "nested too deeply",
    ),
    "text over the limit": (
        json.dumps({"id": "b", "author": "ann", "text": "w" * 100_001}).encode(),
        "the limit is 100,000",
    ),
    "ts not ISO": (b'{"id": "b", "author": "ann", "text": "t", "ts": "yesterday"}', "ISO-8601"),
    "empty id": (b'{"id": "", "author": "ann", "text": "t"}', "'id' must not be empty"),
    "not an object": (b'["id", "author", "text"]', "expected a JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_bad_replay_line_is_skipped_named_and_good_lines_stored(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad line between two good ones: exit 2, one stderr line `FILE:2: reason (skipped)`,
    the report lists it, both good lines are stored and `history export` still works."""
    bad, reason = BAD_LINES[case]
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(GOOD_1 + bad + b"\n" + GOOD_3)
    cfg = str(write_config(tmp_path))
    code = main(
        ["replay", str(feed), "--channel", "r:1", "--listen-only", "--json", "--config", cfg]
    )
    out, err = capsys.readouterr()
    assert code == 2
    skipped = [line for line in err.splitlines() if line.startswith("tierbot: ")]
    assert len(skipped) == 1 and skipped[0].startswith(f"tierbot: {feed}:2: "), err
    assert reason in skipped[0] and skipped[0].endswith("(skipped)")
    report = json.loads(out)
    assert report["messages_in"] == 2 and report["rejected_total"] == 1
    assert report["rejected"][0]["line"] == 2 and reason in report["rejected"][0]["error"]
    assert main(["history", "export", "--channel", "r:1", "--config", cfg]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in rows] == ["g1", "g3"]
    assert rows[1]["ts"].startswith("2024-05-01T10:00:00")


def test_good_lines_of_a_chunk_with_bad_lines_are_all_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """150 bad lines spread through 500 lines: every good line is stored in file order, the
    report lists the first 100 rejections and counts all 150."""
    rows: list[object] = []
    want = []
    for i, m in enumerate(messages(500, "c")):
        if i % 10 in (3, 6, 9):
            rows.append(f'{{"id": "x{i}", "author": "a", "text": "t", "ts": NaN}}')
        else:
            rows.append(m)
            want.append(m["id"])
    feed = write_lines(tmp_path / "mixed.jsonl", rows)
    cfg = str(write_config(tmp_path))
    assert (
        main(["replay", str(feed), "--channel", "m:1", "--listen-only", "--json", "--config", cfg])
        == 2
    )
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["rejected_total"] == 150 and len(report["rejected"]) == 100
    assert report["messages_in"] == len(want)
    assert len([line for line in err.splitlines() if line.endswith("(skipped)")]) == 150
    assert main(["history", "export", "--channel", "m:1", "--config", cfg]) == 0
    assert [json.loads(x)["id"] for x in capsys.readouterr().out.splitlines()] == want


def test_clean_replay_exits_0_with_nothing_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of good lines exits 0 and reports no rejections."""
    feed = write_lines(tmp_path / "ok.jsonl", messages(10))
    cfg = str(write_config(tmp_path))
    assert (
        main(["replay", str(feed), "--channel", "o:1", "--listen-only", "--json", "--config", cfg])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["rejected"] == [] and report["rejected_total"] == 0
    assert report["messages_in"] == 10


@pytest.mark.slow
def test_replay_process_with_every_kind_of_bad_line_exits_2(tmp_path: Path) -> None:
    """A real `tierbot replay` process given every bad line above: no traceback, exit 2,
    one skipped line each, every good line stored."""
    body = b"".join(
        b'{"id": "g%d", "author": "ann", "text": "good line %d"}\n' % (i, i) + bad + b"\n"
        for i, (bad, _) in enumerate(BAD_LINES.values())
    )
    feed = tmp_path / "all.jsonl"
    feed.write_bytes(body + GOOD_3.replace(b'"g3"', b'"last"'))
    n = len(BAD_LINES)
    cfg = write_config(tmp_path)
    proc = run(
        "replay",
        str(feed),
        "--channel",
        "p:1",
        "--listen-only",
        "--json",
        "--config",
        str(cfg),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if line.endswith("(skipped)")]
    assert len(skipped) == len(BAD_LINES)
    assert json.loads(proc.stdout)["messages_in"] == n + 1
    export = run("history", "export", "--channel", "p:1", "--config", str(cfg))
    assert export.returncode == 0 and len(export.stdout.splitlines()) == n + 1
