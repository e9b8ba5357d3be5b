"""The command line as a new operator meets it: `init`, `--version`, `config check` of the
file and of the environment, strict values, one way to name things, exit codes, and
inspection that changes nothing."""

from __future__ import annotations

import argparse
import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bot.cli import build_parser, main
from tierbot.config import Config, load_config
from tierbot.config_template import render

ROOT = Path(__file__).resolve().parents[2]


def _positionals(parser: argparse.ArgumentParser, path: str = "tierbot") -> list[tuple[str, Any]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _positionals(sub, f"{path} {name}")
        elif not action.option_strings:
            out.append((f"{path} {action.dest}", action.help))
    return out


def test_version_and_help_speak_to_the_operator(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("tierbot 0.")
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "tierbot init" in text and "exit codes" in text
    assert "``" not in text and "Only this module" not in text
    missing = [name for name, helptext in _positionals(build_parser()) if not helptext]
    assert not missing, f"positional arguments without help: {missing}"


def test_every_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["nosuch"], ["memory"], ["channel", "show"], ["replies", "drop", "x"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2, argv
    capsys.readouterr()


def test_init_writes_the_shipped_template_and_keeps_an_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "bot"
    assert main(["init", str(target)]) == 0
    written = (target / "config.toml").read_text()
    assert written == render() == (ROOT / "config.toml").read_text(), "run `make config`"
    assert "tierbot config check --config" in capsys.readouterr().out
    # Every key at its default: the file loads to exactly the defaults.
    assert load_config(target / "config.toml", environ={}).model_dump() == Config().model_dump()
    (target / "config.toml").write_text("# mine\n")
    assert main(["init", str(target)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert (target / "config.toml").read_text() == "# mine\n"
    assert main(["init", str(target), "--force"]) == 0
    assert (target / "config.toml").read_text() == written


def test_template_has_a_line_for_every_key_and_no_stale_note() -> None:
    from tierbot.config_template import BEFORE, NOTES

    data = tomllib.loads(render())

    def keys(d: dict[str, Any], prefix: str = "") -> set[str]:
        out = set()
        for k, v in d.items():
            out |= keys(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k}
        return out

    dumped = Config().model_dump()
    dumped.pop("channels")
    assert keys(data) == keys(dumped)
    sections = {k.rsplit(".", 1)[0] for k in keys(data)}
    stale = [k for k in (*NOTES, *BEFORE) if k not in keys(data) and k not in sections]
    assert not stale, f"notes for keys that no longer exist: {stale}"


def test_no_config_file_is_an_error_not_an_empty_bot_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (
        ["config", "check"],
        ["history", "export", "--channel", "a:1"],
        ["memory", "search", "x", "--channel", "a:1"],
        ["channel", "show", "--channel", "a:1"],
        ["replies", "list"],
    ):
        assert main(argv) == 2, argv
        assert "no config file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _check(tmp_path: Path, body: str, *extra: str) -> tuple[int, str, str]:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[storage]\npath = "{tmp_path / "bot.db"}"\n' + body)
    return _run(["config", "check", "--config", str(cfg), *extra])


def _run(argv: list[str]) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_config_check_checks_the_environment_a_run_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = (
        "[adapters.discord]\nenabled = true\n"
        '[llm]\nprovider = "openai"\nmodel = "gpt-4o-mini"\napi_key_env = "OPENAI_API_KEY"\n'
    )
    code, out, err = _check(tmp_path, body)
    assert code == 2
    assert "adapters.discord.token_env: environment variable DISCORD_TOKEN" in err
    assert "llm.api_key_env: environment variable OPENAI_API_KEY" in err
    assert not any(line.startswith("ok") for line in out.splitlines())
    monkeypatch.setenv("DISCORD_TOKEN", "x")
    monkeypatch.setenv("OPENAI_API_KEY", "y")
    code, out, err = _check(tmp_path, body)
    assert code == 0, err
    assert "not checked: whether Discord accepts the token" in out
    assert out.strip().endswith(f"ok: {tmp_path / 'config.toml'}")


def test_config_check_names_a_store_or_index_folder_that_cannot_be_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "afile").write_text("")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[storage]\npath = "{tmp_path / "afile" / "bot.db"}"\n')
    code, _, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2 and "storage.path: " in err and "is not a folder" in err
    cfg.write_text(
        f'[storage]\npath = "{tmp_path / "bot.db"}"\n'
        f'[memory]\nindex_dir = "{tmp_path / "afile" / "index"}"\n'
    )
    code, _, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2 and "memory.index_dir: " in err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_config_check_refuses_a_store_where_no_file_can_be_created(tmp_path: Path) -> None:
    """`[storage] path` on /proc (writable to root by os.access, yet no file can be made
    there) is a problem naming storage.path, exit 2; no ok."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[storage]\npath = "/proc/tierbot.db"\n[memory]\nenabled = false\n')
    code, out, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2 and not out.startswith("ok")
    assert err.splitlines()[0] == (
        f"{cfg}: storage.path: /proc is on a virtual filesystem (such as /proc or /sys) "
        "that holds no files"
    )


def test_config_check_refuses_an_existing_file_that_is_not_sqlite(tmp_path: Path) -> None:
    """An existing store path holding something else is named (storage.path, exit 2) without
    being touched; an empty file or a SQLite database there is fine."""
    import sqlite3

    db = tmp_path / "bot.db"
    db.write_text("shopping list\n")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[storage]\npath = "{db}"\n')
    code, out, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2 and not out.startswith("ok")
    assert err.splitlines()[0] == (
        f"{cfg}: storage.path: {db} is not a SQLite database: point it at a tierbot store or a "
        "file that does not exist yet"
    )
    assert db.read_text() == "shopping list\n"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["bot.db", "config.toml"]
    db.write_bytes(b"")
    assert _run(["config", "check", "--config", str(cfg)])[0] == 0
    db.unlink()
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    assert _run(["config", "check", "--config", str(cfg)])[0] == 0


def test_config_check_on_postgres_offline_and_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = '[storage]\nbackend = "postgres"\nconnect_timeout_seconds = 2\n'
    cfg = tmp_path / "config.toml"
    cfg.write_text(body)
    monkeypatch.delenv("TIERBOT_DATABASE_URL", raising=False)
    code, _, err = _run(["config", "check", "--config", str(cfg), "--offline"])
    assert code == 2 and "storage.dsn_env: environment variable TIERBOT_DATABASE_URL" in err
    monkeypatch.setenv("TIERBOT_DATABASE_URL", "postgresql://u:secret@127.0.0.1:1/db")
    code, out, err = _run(["config", "check", "--config", str(cfg), "--offline"])
    assert code == 0, err
    assert "not checked: whether the PostgreSQL server is reachable (--offline)" in out
    code, out, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2 and "storage.dsn_env" in err and "secret" not in err


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (
            "[memory]\nmaintenance_interval_seconds = 1e-300\n",
            "memory.maintenance_interval_seconds",
        ),
        ('[storage]\npath = ""\n', "storage.path"),
        ("[adapters.discord]\nallowed_guilds = [1.5e20]\n", "adapters.discord.allowed_guilds[0]"),
        ('[adapters.discord]\nadmins = ["me"]\n', "adapters.discord.admins[0]"),
        ('[adapters.slack]\nallowed_teams = ["t1"]\n', "adapters.slack.allowed_teams[0]"),
        ('[storage]\npath = "data/\\u0000.db"\n', "storage.path"),
        ("[defaults]\nidle_evict_seconds = inf\n", "defaults.idle_evict_seconds"),
        ("[runtime]\ndrain_seconds = nan\n", "runtime.drain_seconds"),
        ("[llm]\ntimeout_seconds = 1e308\n", "llm.timeout_seconds"),
        ("[memory]\ndecay_half_life_days = 1e-300\n", "memory.decay_half_life_days"),
    ],
)
def test_nonsense_values_are_refused_by_key_path(tmp_path: Path, body: str, key: str) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(body)
    code, out, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2, (body, out)
    assert f"{cfg}: {key}: " in err, err
    assert "Traceback" not in err


def test_integer_ids_still_load_as_strings(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[adapters.discord]\nallowed_guilds = [123456789012345678, "42"]\n')
    loaded = load_config(cfg, environ={})
    assert loaded.adapters.discord.allowed_guilds == ["123456789012345678", "42"]


def test_an_environment_override_must_be_exactly_one_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[storage]\npath = "{tmp_path / "bot.db"}"\n')
    monkeypatch.setenv("TIERBOT__DEFAULTS__CONTEXT_WINDOW", '1000\n[llm]\nprovider = "openai"')
    code, _, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2
    assert "TIERBOT__DEFAULTS__CONTEXT_WINDOW" in err and "more than one TOML value" in err
    monkeypatch.setenv("TIERBOT__DEFAULTS__CONTEXT_WINDOW", "1000 trailing")
    code, _, err = _run(["config", "check", "--config", str(cfg)])
    assert code == 2 and "defaults.context_window" in err
    monkeypatch.setenv("TIERBOT__DEFAULTS__CONTEXT_WINDOW", "4000")
    monkeypatch.setenv("TIERBOT__LLM__MODEL", "gpt-4o-mini")  # a bare string needs no quotes
    loaded = load_config(cfg)
    assert loaded.defaults.context_window == 4000 and loaded.llm.model == "gpt-4o-mini"


@pytest.mark.parametrize(
    "raw",
    [
        "[storage]\npath = 'x.db'\n".encode("utf-16"),
        bytes(range(256)) * 4,
        b"\x00\x00\x00\x00",
    ],
    ids=["utf-16", "binary", "nul-bytes"],
)
def test_an_unreadable_config_is_one_line_and_exit_2(tmp_path: Path, raw: bytes) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_bytes(raw)
    for argv in (["config", "check", "--config", str(cfg)], ["run", "--config", str(cfg)]):
        code, _, err = _run(argv)
        assert code == 2, argv
        assert len(err.strip().splitlines()) == 1 and str(cfg) in err


def _store_with_memories(tmp_path: Path) -> Path:
    from memory_graph import MemoryDraft, MemoryGraph

    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[storage]\npath = "{tmp_path / "bot.db"}"\n[logging]\nlevel = "error"\n')
    loaded = load_config(cfg, environ={})

    async def fill() -> None:
        from tierbot.store import Store

        async with await Store.open(loaded.storage_path()):
            pass
        async with await MemoryGraph.open(loaded.storage_path(), loaded.memory) as g:
            await g.save_many(
                [
                    MemoryDraft(
                        content="Dana leads the platform team and climbs on Sundays",
                        memory_type="identity",
                        channel="discord:1:2",
                        sources=("m1",),
                        author_id="u1",
                    )
                ]
            )

    asyncio.run(fill())
    return cfg


def test_inspection_changes_nothing_and_not_found_is_exit_1(tmp_path: Path) -> None:
    cfg = _store_with_memories(tmp_path)
    conf = ["--config", str(cfg)]

    def exported() -> list[dict[str, Any]]:
        code, out, err = _run(["memory", "export", *conf])
        assert code == 0, err
        return [json.loads(line) for line in out.splitlines()]

    before = exported()
    [node] = [n for n in before if str(n.get("id", "")).startswith("mem_")]
    for _ in range(3):
        code, out, _ = _run(
            ["memory", "search", "platform team", "--channel", "discord:1:2", *conf]
        )
        assert code == 0 and node["id"] in out
        assert _run(["memory", "show", node["id"], *conf])[0] == 0
    assert exported() == before, "search and show must not change access counts or decay"
    code, _, err = _run(["memory", "show", "mem_nosuch", *conf])
    assert code == 1 and "no memory with id 'mem_nosuch'" in err
    code, _, err = _run(["memory", "forget", "mem_nosuch", *conf])
    assert code == 1
    code, out, err = _run(["memory", "forget", "--author", "nobody", *conf])
    assert code == 1 and "nothing to forget" in err and "'nobody'" in err
    code, _, err = _run(["memory", "forget", "--author", "nobody", "--yes", *conf])
    assert code == 1 and "nothing to forget" in err
    code, _, err = _run(["replies", "drop", "99", *conf])
    assert code == 1 and "no kept reply with id 99" in err
