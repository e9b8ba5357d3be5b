"""A Discord API that accepts connections and never answers (a black hole) must neither hang
`start` nor make SIGTERM wait for the connection to give up."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.discord import DiscordAdapter
from tierbot.config import DiscordAdapterConfig
from tierbot.errors import AdapterError

from .procs import EXIT_BOUND, env, no_traceback, tierbot, wait_for_writer, write_config


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A 127.0.0.1 port that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        done.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


class _Nobody:
    async def submit(self, message: object) -> None:
        raise AssertionError("no message can arrive")

    async def command(self, message: object, *, is_admin: bool) -> None:
        return None


async def test_discord_login_to_a_black_hole_fails_within_ready_timeout(black_hole: int) -> None:
    """`start` against an API that never answers raises AdapterError ("no answer within")
    after ready_timeout, so the runtime retries it instead of waiting forever."""
    base = f"http://127.0.0.1:{black_hole}"
    cfg = DiscordAdapterConfig(
        enabled=True, api_base=f"{base}/api/v10", gateway_url=f"ws://127.0.0.1:{black_hole}/"
    )
    adapter = DiscordAdapter(cfg, environ={"DISCORD_TOKEN": "t0ken"}, ready_timeout=1.0)
    try:
        with pytest.raises(AdapterError, match="no answer within 1 s"):
            await asyncio.wait_for(adapter.start(_Nobody()), EXIT_BOUND)  # type: ignore[arg-type]
    finally:
        await adapter.stop()


def _run_against_the_black_hole(tmp_path: Path, black_hole: int, *, memory: bool) -> Any:
    """`tierbot run` whose Discord API is the black hole, once it holds the writer lock."""
    cfg = write_config(
        tmp_path,
        f'[adapters.discord]\nenabled = true\napi_base = "http://127.0.0.1:{black_hole}/api/v10"\n'
        f'gateway_url = "ws://127.0.0.1:{black_hole}/"\ntoken_env = "TIERBOT_TEST_TOKEN"\n',
        memory=memory,
    )
    proc = subprocess.Popen(
        tierbot("run", "--config", str(cfg)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env(), "TIERBOT_TEST_TOKEN": "t0ken"},
    )
    wait_for_writer(proc, tmp_path / "bot.db.lock")
    return proc


def _sigterm(proc: Any) -> str:
    """SIGTERM ``proc`` and wait for it within the bound; its stderr."""
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=EXIT_BOUND)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return str(err)


@pytest.mark.slow
def test_sigterm_while_discord_login_hangs_stops_the_bot(tmp_path: Path, black_hole: int) -> None:
    """`tierbot run` whose Discord API is a black hole: SIGTERM during that first login ends
    the process within the bound, exit 0, no traceback, no unclosed session."""
    proc = _run_against_the_black_hole(tmp_path, black_hole, memory=False)
    time.sleep(0.5)  # let the login reach the black hole; the test holds either way
    err = _sigterm(proc)
    assert proc.returncode == 0, err
    assert no_traceback(err) and "Unclosed client session" not in err, err


@pytest.mark.slow
def test_sigterm_the_moment_the_store_is_locked_is_a_clean_stop(
    tmp_path: Path, black_hole: int
) -> None:
    """SIGTERM while `tierbot run` is still opening its store (the writer lock just taken,
    the memory graph still loading) stops it with exit 0 and no traceback, never the
    default action's kill (-15) half-way through the start."""
    proc = _run_against_the_black_hole(tmp_path, black_hole, memory=True)
    err = _sigterm(proc)
    assert proc.returncode == 0, err
    assert no_traceback(err), err
