"""A real ``tierbot run`` process for the lifecycle fault tests: config, logs, signals, /health."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from tierbot.testing import FakeDiscord, FakeSlack


def free_port() -> int:
    """A port nothing listens on right now (for a fake started later, or the ops server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slack_section(api_base_url: str) -> str:
    return f'[adapters.slack]\nenabled = true\nmode = "socket"\napi_base_url = "{api_base_url}"\n'


def discord_section(port: int) -> str:
    return (
        f'[adapters.discord]\nenabled = true\napi_base = "http://127.0.0.1:{port}/api/v10"\n'
        f'gateway_url = "ws://127.0.0.1:{port}/gateway"\n'
    )


def write_config(tmp: Path, adapters: str, *, llm_base_url: str = "", ops_port: int = 0) -> Path:
    """A config with the console off, the memory graph off (a faster start) and ``adapters``."""
    llm = (
        f'[llm]\nprovider = "openai"\nmodel = "fake-model"\nbase_url = "{llm_base_url}"\n'
        'api_key_env = "FAKE_LLM_KEY"\nmax_retries = 0\n'
        if llm_base_url
        else ""
    )
    ops = f"[ops]\nenabled = true\nport = {ops_port}\n" if ops_port else ""
    cfg = tmp / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp / "bot.db"}"\n[memory]\nenabled = false\n'
        f"[adapters.console]\nenabled = false\n{llm}{ops}{adapters}"
    )
    return cfg


class Bot:
    """One ``tierbot run --log-format json`` subprocess; its log lines are read from a file."""

    def __init__(self, cfg: Path, env: dict[str, str]) -> None:
        self.cfg = cfg
        self.env = {**os.environ, "FAKE_LLM_KEY": "sk-fake", **env}
        self.log_path = cfg.parent / f"run-{time.monotonic_ns()}.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> Bot:
        with self.log_path.open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot.cli",
                "run",
                "--config",
                str(self.cfg),
                "--log-format",
                "json",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                cwd=self.cfg.parent,
            )
        return self

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The JSON log lines so far (optionally only the event ``name``)."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                out.append(event)
        return out

    @property
    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    async def exit_code(self, within: float = 15.0) -> int:
        """Wait for the process to end (killing it after ``within`` s: a hang fails the test)."""
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(
                f"tierbot did not exit within {within} s:\n{self.output}"
            ) from None

    async def stop(self) -> None:
        """Kill the process if a failed test left it running."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def until(check: Callable[[], object], within: float = 60.0, what: str = "") -> None:
    """Poll ``check`` until it is truthy; the bound only guards against a hang."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.05)


async def run_until_event(cfg: Path, env: dict[str, str], event: str, what: str) -> Bot:
    """Start a bot, wait until it logs ``event``, stop it with SIGTERM (it must exit 0);
    the stopped bot's log stays readable."""
    bot = await Bot(cfg, env).start()
    try:
        await until(lambda: bot.events(event), within=60, what=what)
        bot.terminate()
        assert await bot.exit_code(within=30) == 0, bot.output
    finally:
        await bot.stop()
    return bot


async def health(port: int) -> tuple[int, dict[str, Any]]:
    """(status, body) of the bot's /health; (0, {}) while it does not answer yet."""
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/health") as r,
        ):
            return r.status, await r.json()
    except aiohttp.ClientError:
        return 0, {}


async def health_until(
    port: int, predicate: Callable[[int, dict[str, Any]], bool], within: float = 60.0
) -> dict[str, Any]:
    deadline = time.monotonic() + within
    last: tuple[int, dict[str, Any]] = (0, {})
    while time.monotonic() < deadline:
        last = await health(port)
        if predicate(*last):
            return last[1]
        await asyncio.sleep(0.2)
    raise AssertionError(f"/health never matched; last answer {last}")


def slack_env(fake: FakeSlack, bot_token: str | None = None) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": bot_token or fake.bot_token, "SLACK_APP_TOKEN": fake.app_token}


def discord_env(fake: FakeDiscord, token: str | None = None) -> dict[str, str]:
    return {"DISCORD_TOKEN": token or fake.token}
