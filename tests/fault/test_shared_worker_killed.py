"""A ``tierbot worker`` SIGKILLed in the middle of a summary loses nothing.

The channel's owner (a runtime in this test process, ``run_jobs = false``) sends its
compaction to the shared queue; worker A takes the job and is killed while the model
is still answering.  A's heartbeat stops, worker B puts the job back on the queue and
runs it, and the owner swaps in B's summary: once, over exactly the messages it
planned, with every message still stored.  The model is a fake OpenAI server the
workers reach through the real SDK.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import Runtime
from tests.fault.procs import env, tierbot
from tests.helpers import inbound, wait_for
from tierbot.config import Config
from tierbot.messages import Role
from tierbot.testing.llm_server import FakeLLMServer, Reply
from tierbot.testing.scripted import ScriptedLLM
from tierbot.vocab import Outcome

pytestmark = pytest.mark.slow

CH = "test:killed-worker"


def worker_config(tmp: Path, name: str, llm_url: str) -> Path:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(
        '[storage]\nbackend = "postgres"\npool_max = 4\n'
        '[logging]\nlevel = "warning"\nformat = "json"\n'
        "[memory]\nenabled = false\n"
        "[adapters.console]\nenabled = false\n"
        f'[llm]\nprovider = "openai"\nmodel = "fake-model"\nbase_url = "{llm_url}"\n'
        'api_key_env = "FAKE_LLM_KEY"\nmax_retries = 0\n'
        '[workers]\nqueue = "shared"\nstalled_job_seconds = 2.0\n'
        f'[cluster]\nprocess_id = "{name}"\n'
    )
    return cfg


def spawn(cfg: Path, dsn: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        tierbot("worker", "--config", str(cfg)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env(), "TIERBOT_DATABASE_URL": dsn, "FAKE_LLM_KEY": "sk-test"},
    )


async def test_a_worker_killed_mid_summary_hands_its_job_to_another(
    tmp_path: Path, make_config: Any, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERBOT_DATABASE_URL", pg_dsn)
    owner_cfg: Config = make_config(
        {
            "storage": {"backend": "postgres"},
            "defaults": {
                "context_window": 1000,
                "system_prompt": "sys",
                "respond": "listen",
                "compaction": {"min_messages_between": 0, "parallel_compactions": 1},
            },
            "workers": {"queue": "shared", "run_jobs": False},
        }
    )
    procs: list[subprocess.Popen[str]] = []
    async with FakeLLMServer(
        default=Reply("The team planned the kestrel launch.", delay=120)
    ) as llm:
        try:
            async with Runtime.open(owner_cfg, llm=ScriptedLLM()) as owner:
                a = spawn(worker_config(tmp_path, "worker-a", llm.openai_base_url), pg_dsn)
                procs.append(a)
                actor = await owner.registry.actor(CH)
                n = 0
                while actor.compactor.running is None:
                    await owner.submit(inbound(CH, "alpha " * 45, pid=f"f{n}"))
                    await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
                    n += 1
                plan = actor.compactor.running
                covered = sorted(m.id for m in plan.covered)
                # A has the job and is waiting for the model: kill it there.
                await wait_for(lambda: len(llm.requests) == 1, timeout=60)
                a.send_signal(signal.SIGKILL)
                assert a.wait(timeout=10) == -signal.SIGKILL
                assert actor.compactor.running is plan  # the owner still waits for it
                llm.default = Reply("The team planned the kestrel launch.")
                b = spawn(worker_config(tmp_path, "worker-b", llm.openai_base_url), pg_dsn)
                procs.append(b)
                await wait_for(lambda: actor.compactor.running is None, timeout=60)
                await owner.drain()

                records = await owner.store.compactions(CH)
                assert [r.outcome for r in records] == [Outcome.OK]
                live = await owner.store.load_live(CH)
                summaries = [m for m in live if m.role is Role.SUMMARY]
                assert len(summaries) == 1
                assert "kestrel launch" in summaries[0].text
                assert sorted(await owner.store.covered_by(summaries[0].id)) == covered
                assert not {m.id for m in live} & set(covered)
                stored = [m.platform_id async for m in owner.store.export(CH)]
                assert sorted(stored) == sorted(f"f{i}" for i in range(n))
                # Two model calls: A's, cut off by the kill, and B's.
                assert len(llm.requests) == 2
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    _out, err = p.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    raise
                assert p.returncode in (0, -signal.SIGKILL), err[-2000:]
            await asyncio.sleep(0)
