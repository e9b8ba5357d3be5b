"""A vector index metadata file that is valid JSON but not an object is rebuilt, not a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .procs import messages, no_traceback, run, write_config, write_lines


@pytest.mark.slow
@pytest.mark.parametrize("meta", ["[]", "null"])
def test_vectors_json_not_an_object_is_rebuilt_not_a_traceback(tmp_path: Path, meta: str) -> None:
    """vectors.json overwritten with JSON that is not an object: `memory search` and `replay`
    log a rebuild and exit 0 with their results, with no traceback."""
    cfg = write_config(tmp_path, "[defaults]\ncontext_window = 1500\n", memory=True)
    feed = write_lines(tmp_path / "feed.jsonl", messages(120, "v"))
    first = run(
        "replay", str(feed), "--channel", "v:1", "--listen-only", "--config", str(cfg), timeout=120
    )
    assert first.returncode == 0, first.stderr
    meta_file = tmp_path / "bot.db.memory-index" / "vectors.json"
    assert meta_file.is_file()

    meta_file.write_text(meta)
    search = run(
        "memory", "search", "v says line 7", "--channel", "v:1", "--config", str(cfg), timeout=120
    )
    assert search.returncode == 0 and no_traceback(search.stderr), search.stderr
    assert "memory.vector_rebuild" in search.stderr and "not a JSON object" in search.stderr
    assert json.loads(search.stdout)

    meta_file.write_text(meta)
    more = write_lines(tmp_path / "more.jsonl", messages(3, "w"))
    again = run(
        "replay", str(more), "--channel", "v:1", "--listen-only", "--config", str(cfg), timeout=120
    )
    assert again.returncode == 0 and no_traceback(again.stderr), again.stderr
    assert "memory.vector_rebuild" in again.stderr
