"""Cluster ingest: messages/s that 1, 2 and 3 ``tierbot run`` processes on one PostgreSQL
acknowledge, beside one process on SQLite, in one run.

Each process serves Slack's Events API (HTTP mode) against a local fake Slack, with
``[cluster] enabled`` on PostgreSQL (a private server from the ``pgserver`` wheel).  A
driver posts signed ``message`` events round-robin to the processes from ``--senders``
concurrent connections, as a load balancer would; a 200 answer means the message is
stored.  Channels listen only (no replies), so the figure is ingest: the HTTP request,
the signature check, the count, the durable store and the owner's hand-off.
``--messages`` over ``--channels`` channels; each figure is the median of ``--runs``.

This machine may have fewer cores than processes: the driver, the fake Slack,
PostgreSQL and the bots share them, so the rows say where the limit is, not how a
cluster of machines scales.

Usage: python -m benchmarks.cluster_ingest [--quick] [--runs N] [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import Row, machine_meta, median, print_table, row, write_results  # noqa: E402
from tierbot.testing import FakeSlack  # noqa: E402
from tierbot.testing.postgres import PostgresServer  # noqa: E402
from tierbot.testing.slack_server import sign  # noqa: E402

SECRET = "bench-signing-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(folder: Path, name: str, port: int, api: str, backend: str) -> Path:
    folder.mkdir(parents=True)
    storage = (
        '[storage]\nbackend = "postgres"\npool_max = 6\n'
        if backend == "postgres"
        else f'[storage]\npath = "{folder / "bot.db"}"\n'
    )
    cluster = f'[cluster]\nenabled = true\nprocess_id = "{name}"\n' if backend == "postgres" else ""
    cfg = folder / "config.toml"
    cfg.write_text(
        storage + '[defaults]\nrespond = "listen"\n[memory]\nenabled = false\n'
        '[logging]\nlevel = "warning"\n[adapters.console]\nenabled = false\n'
        '[adapters.slack]\nenabled = true\nmode = "http"\nhost = "127.0.0.1"\n'
        f'port = {port}\napi_base_url = "{api}"\nslash_command = ""\nrespond = "listen"\n' + cluster
    )
    return cfg


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


async def wait_listening(port: int, proc: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise SystemExit(f"tierbot exited {proc.returncode}:\n{tail(log)}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise SystemExit(f"tierbot never listened on {port}:\n{tail(log)}")


def payloads(fake: FakeSlack, messages: int, channels: int) -> list[str]:
    out = []
    for i in range(messages):
        event = fake.message(
            f"C{i % channels:05d}", f"message {i}: the deploy went out, build {i} is green"
        )
        out.append(json.dumps(fake.event_callback(event)))
    return out


async def drive(urls: list[str], bodies: list[str], senders: int) -> float:
    """Post every body round-robin from ``senders`` connections; messages/s acknowledged."""
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for i, body in enumerate(bodies):
        queue.put_nowait((i, body))
    failed: list[str] = []

    async def sender(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            i, body = queue.get_nowait()
            ts = str(int(time.time()))
            headers = {
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": sign(SECRET, ts, body),
            }
            async with session.post(urls[i % len(urls)], data=body, headers=headers) as r:
                if r.status != 200:
                    failed.append(f"{r.status} {await r.text()}")

    connector = aiohttp.TCPConnector(limit=senders)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(sender(session) for _ in range(senders)))
        took = time.perf_counter() - started
    if failed:
        raise SystemExit(f"{len(failed)} deliveries refused, e.g. {failed[0]}")
    return len(bodies) / took


async def one_run(
    processes: int, backend: str, args: argparse.Namespace, work: Path, dsn: str
) -> float:
    async with FakeSlack() as fake:
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_APP_TOKEN": fake.app_token,
            "SLACK_SIGNING_SECRET": SECRET,
            "TIERBOT_DATABASE_URL": dsn,
        }
        procs = []
        ports = []
        try:
            for n in range(processes):
                port = free_port()
                folder = work / f"{backend}-{processes}-{n}-{time.monotonic_ns()}"
                cfg = write_config(folder, f"p{n}", port, fake.api_base_url, backend)
                log = folder / "run.log"
                with log.open("wb") as fh:
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "bot.cli",
                        "run",
                        "--config",
                        str(cfg),
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=fh,
                        stderr=fh,
                        env=env,
                        cwd=folder,
                    )
                procs.append((proc, log))
                ports.append(port)
            for (proc, log), port in zip(procs, ports, strict=True):
                await wait_listening(port, proc, log)
            await asyncio.sleep(1.0)  # the adapters' auth.test and the cluster join
            urls = [f"http://127.0.0.1:{p}/slack/events" for p in ports]
            return await drive(urls, payloads(fake, args.messages, args.channels), args.senders)
        finally:
            for proc, _ in procs:
                if proc.returncode is None:
                    proc.terminate()
            for proc, _ in procs:
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one run of each")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--messages", type=int, default=3_000)
    ap.add_argument("--channels", type=int, default=300)
    ap.add_argument("--senders", type=int, default=24)
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    work = Path(tempfile.mkdtemp(prefix="tierbot-cluster-ingest-"))
    server = PostgresServer.start()
    figures: dict[str, list[float]] = {}
    try:
        for _ in range(runs):
            for label, processes, backend in [
                ("sqlite, 1 process", 1, "sqlite"),
                ("postgres, 1 process", 1, "postgres"),
                ("postgres, 2 processes", 2, "postgres"),
                ("postgres, 3 processes", 3, "postgres"),
            ]:
                dsn = server.create_database() if backend == "postgres" else ""
                rate = asyncio.run(one_run(processes, backend, args, work, dsn))
                figures.setdefault(label, []).append(rate)
                print(f"{label}: {rate:,.0f} msgs/s", flush=True)
    finally:
        server.stop()
    medians = {k: median(v) for k, v in figures.items()}
    base = medians["postgres, 1 process"]
    rows: list[Row] = [row(f"{k} msgs/s", round(v, 1), "msgs/s") for k, v in medians.items()]
    rows += [
        row(f"{k} / postgres 1 process", round(v / base, 3), "ratio")
        for k, v in medians.items()
        if k.startswith("postgres, ") and k != "postgres, 1 process"
    ]
    meta: dict[str, Any] = machine_meta(
        runs=runs,
        messages=args.messages,
        channels=args.channels,
        senders=args.senders,
        per_run={k: [round(x, 1) for x in v] for k, v in figures.items()},
        cpus=os.cpu_count(),
    )
    print_table("Cluster ingest (Slack HTTP events, listen-only)", rows)
    out = write_results("cluster_ingest", rows, meta)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
