"""A relative `[memory] index_dir` must name one folder whatever the working directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main


def test_relative_index_dir_is_beside_config_not_in_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`index_dir = "idx"` puts the vector index in the config file's folder (as `[storage]
    path` is), so a replay started in another directory leaves nothing there and a
    `memory search` from a third directory finds the same index without rebuilding it."""
    home = tmp_path / "bot"
    home.mkdir()
    cfg = home / "config.toml"
    cfg.write_text(
        '[storage]\npath = "bot.db"\nsynchronous = "normal"\n'
        '[logging]\nlevel = "info"\nformat = "json"\n'
        "[adapters.console]\nenabled = false\n[defaults]\ncontext_window = 1500\n"
        '[memory]\nenabled = true\nindex_dir = "idx"\n'
    )
    feed = home / "feed.jsonl"
    feed.write_text(
        "".join(
            json.dumps({"id": f"m{i}", "author": "ann", "text": f"the zebra vault plan {i} " * 8})
            + "\n"
            for i in range(120)
        )
    )
    service_cwd = tmp_path / "service"
    shell_cwd = tmp_path / "shell"
    service_cwd.mkdir()
    shell_cwd.mkdir()
    monkeypatch.chdir(service_cwd)
    assert main(["replay", str(feed), "--channel", "z:1", "--listen-only", "--json",
                 "--config", str(cfg)]) == 0  # fmt: skip
    assert (home / "idx" / "vectors.hnsw").is_file()
    assert list(service_cwd.iterdir()) == []
    capsys.readouterr()
    monkeypatch.chdir(shell_cwd)
    assert main(["memory", "search", "zebra vault", "--channel", "z:1", "--config", str(cfg)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) and "memory.vector_rebuild" not in err, err
    assert list(shell_cwd.iterdir()) == []
