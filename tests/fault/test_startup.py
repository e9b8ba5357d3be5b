"""Processes that cannot run end within seconds, non-zero, with a one-line reason, so systemd
or Docker can restart them (a corrupt database: see test_storage.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .procs import EXIT_BOUND, env, last_line, messages, no_traceback, write_config, write_lines

pytestmark = pytest.mark.slow


def _run_bounded(args: list[str], extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``tierbot ARGS``; fail the test if it is still alive after EXIT_BOUND seconds."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env(), **(extra_env or {})},
    )
    try:
        _, err = proc.communicate(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"tierbot {' '.join(args)} still running after {EXIT_BOUND:.0f} s")
    assert time.monotonic() - started < EXIT_BOUND
    return proc.returncode, err


def _config(tmp: Path, case: str) -> tuple[Path, dict[str, str], str]:
    """A config with one fatal startup error, the environment it runs in, what must be said."""
    if case == "openai with an empty model":
        cfg = write_config(tmp, '[llm]\nprovider = "openai"\nmodel = ""\n')
        return cfg, {"OPENAI_API_KEY": "sk-test"}, "[llm] model is empty"
    blocker = tmp / "not-a-directory"
    blocker.write_text("a file where the index directory should be")
    cfg = write_config(tmp, memory=True)
    cfg.write_text(
        cfg.read_text().replace(
            "[memory]\nenabled = true\n",
            f'[memory]\nenabled = true\nindex_dir = "{blocker / "index"}"\n',
        )
    )
    return cfg, {}, str(blocker / "index")


@pytest.mark.parametrize("case", ["openai with an empty model", "memory index cannot be created"])
@pytest.mark.parametrize("command", ["run", "replay"])
def test_fatal_startup_error_exits_within_seconds(tmp_path: Path, case: str, command: str) -> None:
    """`tierbot run` / `replay` that cannot start print one line naming the problem and exit
    non-zero within 15 s instead of hanging on open database threads; the store is unlocked."""
    cfg, extra_env, named = _config(tmp_path, case)
    feed = write_lines(tmp_path / "feed.jsonl", messages(3))
    args = ["run"] if command == "run" else ["replay", str(feed), "--channel", "s:1"]
    code, err = _run_bounded([*args, "--config", str(cfg)], extra_env)
    assert code != 0
    line = last_line(err)
    assert line.startswith("tierbot: ") and named in line, err
    assert no_traceback(err)
    # Nothing stays locked behind it: the next writer is not told the store is in use.
    code, err = _run_bounded(
        ["replay", str(feed), "--channel", "s:1", "--config", str(cfg)], extra_env
    )
    assert "in use by" not in err


@pytest.mark.parametrize("case", ["folder that holds no files", "file that is not a database"])
@pytest.mark.parametrize("command", ["run", "replay"])
def test_a_store_path_that_cannot_be_opened_names_storage_path_and_exits_1(
    tmp_path: Path, case: str, command: str
) -> None:
    """A store that cannot be created or is no SQLite file: one line naming `storage.path`
    and what to do, exit 1 within seconds; the file found there is left as it was."""
    cfg = write_config(tmp_path)
    if case == "file that is not a database":
        db = tmp_path / "notes.txt"
        db.write_text("shopping list\n" * 100)
        cause = f"cannot open the store at {db}: file is not a database"
        advice = f"not a tierbot store, or a damaged one: point [storage] path in {cfg}"
    else:
        if not Path("/proc/self").is_dir():
            pytest.skip("needs /proc")
        db = Path("/proc/tierbot.db")
        cause = f"cannot create the writer lock {db}.lock"
        advice = f"point [storage] path in {cfg} at a file in a folder this user can write"
    cfg.write_text(cfg.read_text().replace(str(tmp_path / "bot.db"), str(db)))
    before = db.read_bytes() if db.is_file() else None
    feed = write_lines(tmp_path / "feed.jsonl", messages(3))
    args = ["run"] if command == "run" else ["replay", str(feed), "--channel", "s:1"]
    code, err = _run_bounded([*args, "--config", str(cfg)])
    line = last_line(err)
    assert code == 1, err
    assert line.startswith(f"tierbot: storage.path: {cause}") and advice in line, line
    assert no_traceback(err)
    if before is not None:
        assert db.read_bytes() == before


@pytest.mark.parametrize("command", ["run", "replay"])
def test_a_missing_sentence_transformers_extra_exits_before_the_store_is_created(
    tmp_path: Path, command: str
) -> None:
    """With `[memory] embedder = "sentence-transformers"` and the package missing (an import
    of it fails, installed or not), `run` / `replay` exit 2 within seconds naming
    memory.embedder and the extra to install, and write nothing: no store folder, no store
    file, no lock (the store used to be created and migrated first)."""
    missing = tmp_path / "site"
    (missing / "sentence_transformers").mkdir(parents=True)
    (missing / "sentence_transformers" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'sentence_transformers'\", "
        "name='sentence_transformers')\n"
    )
    bot = tmp_path / "bot"
    bot.mkdir()
    cfg = write_config(bot, memory=True)
    cfg.write_text(
        cfg.read_text()
        .replace(str(bot / "bot.db"), str(bot / "data" / "bot.db"))
        .replace(
            "[memory]\nenabled = true\n",
            f'[memory]\nenabled = true\nembedder = "sentence-transformers"\n'
            f'embedder_model = "{tmp_path}"\n',
        )
    )
    feed = write_lines(tmp_path / "feed.jsonl", messages(3))
    args = ["run"] if command == "run" else ["replay", str(feed), "--channel", "s:1"]
    pythonpath = f"{missing}{os.pathsep}{env()['PYTHONPATH']}"
    code, err = _run_bounded([*args, "--config", str(cfg)], {"PYTHONPATH": pythonpath})
    assert code == 2, err
    assert sorted(f.name for f in bot.iterdir()) == ["config.toml"]
    line = last_line(err)
    assert line.startswith(f"{cfg}: memory.embedder: sentence-transformers is not installed")
    assert "pip install 'tierbot[sentence-transformers]'" in line, line
    assert no_traceback(err)


def test_no_adapter_exits_within_seconds(tmp_path: Path) -> None:
    """`tierbot run` with every adapter off says so and exits 1 within seconds."""
    cfg = write_config(tmp_path)
    code, err = _run_bounded(["run", "--config", str(cfg)])
    assert code == 1 and "no adapter is running" in last_line(err)
    assert os.path.exists(tmp_path / "bot.db")


async def test_a_memory_graph_that_fails_after_opening_leaves_no_thread_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory indexer failing to start, after the graph's connection is open, raises out
    of Runtime.open with every database thread closed: a left-over aiosqlite thread (not a
    daemon) would keep a process that cannot run alive instead of letting it exit."""
    import threading

    from bot.runtime import Runtime
    from channels.memory import EpisodeIndexer
    from tierbot.config import load_config
    from tierbot.testing.scripted import ScriptedLLM

    def broken(self: EpisodeIndexer) -> None:
        raise RuntimeError("indexer refused to start")

    monkeypatch.setattr(EpisodeIndexer, "start", broken)
    cfg = load_config(write_config(tmp_path, memory=True), environ={})

    def database_threads() -> set[threading.Thread]:
        # Not the event loop's own executor (asyncio_N), which asyncio.run shuts down.
        return {
            t
            for t in threading.enumerate()
            if not t.daemon
            and not t.name.startswith("asyncio_")
            and t is not threading.main_thread()
        }

    before = database_threads()
    with pytest.raises(RuntimeError, match="indexer refused to start"):
        await Runtime.open(cfg, llm=ScriptedLLM())
    for _ in range(200):  # aiosqlite joins its thread shortly after close() returns
        left = sorted(database_threads() - before, key=str)
        if not left:
            break
        await asyncio.sleep(0.01)
    assert not left, f"threads left running: {left}"


@pytest.mark.parametrize(
    ("case", "code", "named"),
    [
        ("queue is local", 2, '[workers] queue is "local"'),
        ("database refuses", 1, "cannot reach PostgreSQL at"),
        ("database url unset", 1, "TIERBOT_DATABASE_URL"),
    ],
)
def test_a_worker_that_cannot_run_exits_within_seconds(
    tmp_path: Path, case: str, code: int, named: str
) -> None:
    """`tierbot worker` with nothing to do (no shared queue) or no database to take jobs
    from ends within seconds, non-zero, with one line naming the problem: never an idle
    process that looks like a worker and runs nothing."""
    queue = "local" if case == "queue is local" else "shared"
    cfg = tmp_path / "worker.toml"
    cfg.write_text(
        '[storage]\nbackend = "postgres"\n[logging]\nlevel = "warning"\nformat = "json"\n'
        f'[workers]\nqueue = "{queue}"\n'
    )
    extra = {"TIERBOT_DATABASE_URL": "postgresql://tierbot@127.0.0.1:1/tierbot"}
    if case == "database url unset":
        extra = {"TIERBOT_DATABASE_URL": ""}
    got, err = _run_bounded(["worker", "--config", str(cfg)], extra)
    assert got == code, err
    line = last_line(err)
    assert line.startswith("tierbot: ") and named in line, err
    assert no_traceback(err)
