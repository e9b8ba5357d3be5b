"""A relative `[memory] index_dir` must name one folder whatever the working directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from tierbot.config import load_config


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
    assert (
        main(
            [
                "replay",
                str(feed),
                "--channel",
                "z:1",
                "--listen-only",
                "--json",
                "--config",
                str(cfg),
            ]
        )
        == 0
    )
    assert (home / "idx" / "vectors.hnsw").is_file()
    assert list(service_cwd.iterdir()) == []
    capsys.readouterr()
    monkeypatch.chdir(shell_cwd)
    assert main(["memory", "search", "zebra vault", "--channel", "z:1", "--config", str(cfg)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) and "memory.vector_rebuild" not in err, err
    assert list(shell_cwd.iterdir()) == []


def test_config_file_not_utf8_is_one_line_error_not_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config.toml saved in Latin-1 exits 2 with one line naming the file and the byte,
    for `config check` and `run` alike; no traceback."""
    cfg = tmp_path / "config.toml"
    cfg.write_bytes(b'[llm]\nmodel = "caf\xe9"\n')
    for argv in (["config", "check", "--config", str(cfg)], ["run", "--config", str(cfg)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"{cfg}: not UTF-8 (byte 19 of the file); save it as UTF-8", err


def test_config_file_with_byte_order_mark_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config.toml an editor saved with a UTF-8 byte order mark validates, and its values
    are the ones used."""
    cfg = tmp_path / "config.toml"
    cfg.write_bytes(b"\xef\xbb\xbf[defaults]\ncontext_window = 4096\n")
    assert main(["config", "check", "--config", str(cfg)]) == 0
    assert load_config(cfg).defaults.context_window == 4096


def test_memory_queries_file_not_utf8_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory search --queries FILE` with a Latin-1 file exits 2 naming the file and byte."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp_path / "bot.db"}"\n[adapters.console]\nenabled = false\n'
    )
    feed = tmp_path / "feed.jsonl"
    feed.write_text('{"id": "m1", "author": "ann", "text": "hello"}\n')
    assert (
        main(["replay", str(feed), "--channel", "q:1", "--listen-only", "--config", str(cfg)]) == 0
    )
    queries = tmp_path / "q.jsonl"
    queries.write_bytes(b'{"query": "caf\xe9"}\n')
    capsys.readouterr()
    code = main(
        ["memory", "search", "--queries", str(queries), "--channel", "q:1", "--config", str(cfg)]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith(f"{queries}: not UTF-8 (byte 15 of the file)"), err
