"""Ingest speed of the message store on SQLite and on PostgreSQL, side by side, in one run.

Target: PostgreSQL ingests at least half as many messages per second as SQLite
(ratio PostgreSQL / SQLite >= 0.5) on both workloads:

* **replay**: ``tierbot replay --listen-only`` of a 2,000-message chat log (memory off;
  the figure is the replay's own messages/s, so process start-up is not counted);
* **fan-in**: 1,000 channels receiving 20 messages each at once, every message stored
  with ``append`` (as an adapter does before it acknowledges), the store's group commit
  sharing each commit among the channels waiting on it.

PostgreSQL is a private server started for the run (the ``pgserver`` wheel of the dev
extra), on this machine's loopback socket, with the store's default durability
(``synchronous_commit`` on); SQLite uses ``synchronous = "full"``, the shipped default.
Each figure is the median of ``--runs`` runs (3; ``--quick``: 1) on a fresh database.

Usage: python -m benchmarks.storage_ingest [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import (  # noqa: E402
    Row,
    machine_meta,
    median,
    print_table,
    row,
    write_results,
)
from tierbot.messages import Message, Role  # noqa: E402
from tierbot.pg.store import PostgresStore  # noqa: E402
from tierbot.store import Store  # noqa: E402
from tierbot.testing.postgres import PostgresServer  # noqa: E402

REPLAY_MESSAGES = 2_000
CHANNELS, PER_CHANNEL = 1_000, 20


def write_log(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            text = f"message {i} about the deploy, the build queue and lunch plans " * 2
            fh.write(json.dumps({"id": f"m{i}", "author": f"u{i % 7}", "text": text}) + "\n")


def write_config(directory: Path, backend: str) -> Path:
    cfg = directory / "config.toml"
    cfg.write_text(
        f'[storage]\nbackend = "{backend}"\npath = "{directory / "tierbot.db"}"\n'
        '[logging]\nlevel = "warning"\nformat = "json"\n'
        "[memory]\nenabled = false\n[adapters.console]\nenabled = false\n",
        encoding="utf-8",
    )
    return cfg


def replay_rate(directory: Path, backend: str, dsn: str) -> float:
    """Messages/s of one fresh ``tierbot replay --listen-only`` of the chat log."""
    directory.mkdir(parents=True)
    log = directory / "chat.jsonl"
    write_log(log, REPLAY_MESSAGES)
    cfg = write_config(directory, backend)
    cmd = [sys.executable, "-m", "bot.cli", "replay", str(log), "--channel", "bench:ingest"]
    cmd += ["--listen-only", "--json", "--config", str(cfg)]
    env = {**os.environ, "TIERBOT_DATABASE_URL": dsn}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"replay on {backend} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["messages_in"] == REPLAY_MESSAGES, report
    return float(report["messages_in"]) / float(report["seconds"])


async def fan_in_rate(store: Store | PostgresStore) -> float:
    """Messages/s of 1,000 channels appending 20 messages each, all at once."""

    async def channel(c: int) -> None:
        for i in range(PER_CHANNEL):
            text = f"channel {c} says {i}: the usual chatter about builds and lunch"
            stored = await store.append(
                Message(f"bench:{c}", f"p{i}", Role.USER, text, tokens=14, ts=time.time())
            )
            assert stored is not None

    started = time.perf_counter()
    await asyncio.gather(*(channel(c) for c in range(CHANNELS)))
    seconds = time.perf_counter() - started
    assert await store.last_message_id() >= CHANNELS * PER_CHANNEL
    return CHANNELS * PER_CHANNEL / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of each (default 3)")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    runs = args.runs or (1 if args.quick else 3)
    server = PostgresServer.start()
    rates: dict[tuple[str, str], list[float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="tierbot-ingest-") as tmp:
            work = Path(tmp)
            for n in range(runs):
                for backend in ("sqlite", "postgres"):
                    dsn = server.create_database() if backend == "postgres" else ""
                    rate = replay_rate(work / f"replay-{backend}-{n}", backend, dsn)
                    rates.setdefault(("replay", backend), []).append(rate)
                    rates.setdefault(("fan-in", backend), []).append(
                        asyncio.run(_fan_in(backend, work / f"fan-{n}.db", server))
                    )
    finally:
        server.stop()
    rows: list[Row] = []
    for load, label in (("replay", "2,000-message replay"), ("fan-in", "1,000 channels x 20")):
        lite = median(rates[(load, "sqlite")])
        pg = median(rates[(load, "postgres")])
        rows.append(row(f"{label}, SQLite", round(lite), "msg/s"))
        rows.append(row(f"{label}, PostgreSQL", round(pg), "msg/s"))
        rows.append(row(f"{label}, PostgreSQL / SQLite", round(pg / lite, 2), "x", ">= 0.5"))
    print_table(f"storage_ingest: messages/s by backend (median of {runs})", rows)
    write_results("storage_ingest", rows, machine_meta(runs=runs))


async def _fan_in(backend: str, path: Path, server: PostgresServer) -> float:
    store: Store | PostgresStore
    if backend == "sqlite":
        store = await Store.open(path, synchronous="full")
    else:
        store = await PostgresStore.connect(server.create_database())
    try:
        return await fan_in_rate(store)
    finally:
        await store.aclose()


if __name__ == "__main__":
    main()
