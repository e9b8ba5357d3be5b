"""Messages per second through one process's channels, end to end, on SQLite.

Targets (one process, the shipped defaults but for the respond mode, the offline provider):

* **addressed**: 10,000 channels x 5 messages, 10 % of them addressed (``respond =
  "mention"``), each submitted as an adapter does (stored durably, then handed to the
  channel's actor), at most ``--inflight`` submissions at once as a busy gateway would
  have them: **>= 1,000 msgs/s** from the first submission until every addressed
  message has its reply stored, **submit p99 <= 250 ms** (the time until the platform
  could be acknowledged), **<= 20 KB RSS per idle channel** (the RSS the run added,
  with every channel's actor resident and idle, divided by the channels: an upper
  bound, as it also holds the page caches and indexes the messages filled), and no
  channel left resident after the idle sweep evicted them.  Beside it, measured
  exactly with tracemalloc: the Python heap of an idle resident channel (up to 2,000
  of the run's channels started again from the store once the memory indexer has
  caught up, left idle) and what is left of it once they are evicted;
* **listen-only**: 1,000 channels x 20 messages, nothing addressed (``respond =
  "listen"``): **>= 2,000 msgs/s**; beside it, the store's own ceiling: counting the
  same messages' tokens and appending them in one batch per channel.

Each figure is the median of ``--runs`` runs (3; ``--quick``: 1, with a tenth of the
channels), each on a fresh database in a fresh process, so one run's caches and RSS do
not flatter the next.

Usage: python -m benchmarks.channel_throughput [--quick] [--runs N] [--inflight N]
       [--set section.key=value ...]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import (  # noqa: E402
    Row,
    machine_meta,
    median,
    percentile,
    print_table,
    row,
    write_results,
)

ADDRESSED_CHANNELS, ADDRESSED_PER_CHANNEL, ADDRESSED_SHARE = 10_000, 5, 0.10
LISTEN_CHANNELS, LISTEN_PER_CHANNEL = 1_000, 20
RESULT = "RESULT "
WORDS = (
    "deploy build queue lunch review ticket merge release staging rollback coffee "
    "standup retro docs schema cache latency index alert pager weekend plan"
).split()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _text(rng: random.Random, i: int) -> str:
    return f"message {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))


def _inbounds(channels: int, per_channel: int, share: float) -> list[Any]:
    """Every channel's messages, round by round (as a busy server interleaves them)."""
    from tierbot.messages import InboundMessage

    rng = random.Random(7)
    out = []
    for r in range(per_channel):
        for c in range(channels):
            i = r * channels + c
            out.append(
                InboundMessage(
                    channel=f"discord:1:{c}",
                    platform_id=f"m{i}",
                    author_id=f"u{i % 13}",
                    author_name=f"user{i % 13}",
                    text=_text(rng, i),
                    ts=1.7e9 + i,
                    addressed=rng.random() < share,
                )
            )
    return out


def _config(db: Path, respond: str, overrides: list[str]) -> Any:
    """The shipped config.toml, on ``db``, console off, answering in ``respond`` mode,
    with ``--set section.key=value`` overrides (the value read as JSON, else a string)."""
    import tomllib

    from tierbot.config import validate_config

    data = tomllib.loads((ROOT / "config.toml").read_text(encoding="utf-8"))
    data["storage"]["path"] = str(db)
    data["defaults"]["respond"] = respond
    data["adapters"]["console"] = {"enabled": False}
    data["logging"] = {"level": "warning", "format": "json"}
    for item in overrides:
        key, _, raw = item.partition("=")
        *sections, name = key.split(".")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        table = data
        for section in sections:
            table = table.setdefault(section, {})
        table[name] = value
    return validate_config(data, "benchmark")


async def _run_channels(
    mode: str, channels: int, per_channel: int, inflight: int, overrides: list[str]
) -> dict:
    """One run in this process: submit everything, wait for the replies, measure."""
    from bot.runtime import Runtime
    from tierbot.llm.offline import OfflineProvider
    from tierbot.logging import configure_logging

    share = ADDRESSED_SHARE if mode == "addressed" else 0.0
    inbounds = _inbounds(channels, per_channel, share)
    addressed = sum(m.addressed for m in inbounds)
    with tempfile.TemporaryDirectory(prefix="tierbot-tput-") as tmp:
        cfg = _config(Path(tmp) / "bot.db", "mention" if share else "listen", overrides)
        configure_logging("warning", "json")
        async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
            gc.collect()
            rss0 = _rss_bytes()
            latencies: list[float] = []
            refused = 0
            it = iter(inbounds)

            async def producer() -> None:
                nonlocal refused
                for m in it:
                    t0 = time.perf_counter()
                    d = await rt.submit(m)
                    latencies.append(time.perf_counter() - t0)
                    refused += not d.accepted

            start = time.perf_counter()
            await asyncio.gather(*(producer() for _ in range(inflight)))
            submitted = time.perf_counter() - start
            await rt.registry.drain()
            unanswered = await _unanswered(rt)
            elapsed = time.perf_counter() - start
            gc.collect()
            rss1 = _rss_bytes()
            resident = len(rt.registry.actors)
            evicted_left = await _evict_all(rt)
            heap = await _idle_heap(rt, sorted({m.channel for m in inbounds}))
        if refused or unanswered:
            raise SystemExit(
                f"{mode}: {refused} submissions refused, {unanswered} channels with an "
                f"addressed message unanswered ({addressed} addressed): the run is not valid"
            )
        return {
            "messages": len(inbounds),
            "msgs_per_s": len(inbounds) / elapsed,
            "submit_s": submitted,
            "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000,
            "kb_per_channel": (rss1 - rss0) / 1024 / channels,
            "resident": resident,
            "resident_after_evict": evicted_left,
            **heap,
        }


async def _unanswered(rt: Any) -> int:
    """Channels whose last addressed message has no reply after it."""
    import sqlite3

    con = sqlite3.connect(rt.config.storage.path)
    try:
        (n,) = con.execute(
            "SELECT count(*) FROM (SELECT channel, max(id) AS last FROM messages "
            "WHERE role = 'user' AND json_extract(meta, '$.addressed') GROUP BY channel) a "
            "WHERE NOT EXISTS (SELECT 1 FROM messages r WHERE r.channel = a.channel "
            "AND r.role = 'assistant' AND r.id > a.last)"
        ).fetchone()
    finally:
        con.close()
    return int(n)


async def _idle_heap(rt: Any, keys: list[str]) -> dict[str, float]:
    """What an idle resident channel holds on the Python heap, and what is left of it
    once evicted: up to 2,000 of the run's channels are started again from the store
    (as their next message would) under tracemalloc, left idle, then evicted."""
    import tracemalloc

    keys = keys[:: max(1, len(keys) // 2000)][:2000]
    if rt.memory is not None:
        # The run leaves the indexer a backlog; its batches in flight are not the
        # channels' heap (they were counted in, and made the figure vary with its speed).
        await rt.memory.indexer.flush()
    gc.collect()
    tracemalloc.start()
    try:
        await rt.registry.resume(keys)
        await rt.registry.drain()
        gc.collect()
        resident = tracemalloc.get_traced_memory()[0]
        await _evict_all(rt)
        gc.collect()
        left = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return {
        "heap_kb_per_idle_channel": resident / 1024 / len(keys),
        "heap_kb_left_per_evicted_channel": left / 1024 / len(keys),
    }


async def _evict_all(rt: Any) -> int:
    """Resident actors left once every channel has been idle past its eviction time."""
    await rt.registry.evict_idle(0.0)
    return len(rt.registry.actors)


async def _store_ceiling(channels: int, per_channel: int) -> float:
    """Counting and appending the listen-only messages in one batch per channel."""
    from channels.registry import to_message
    from tierbot.store import Store
    from tierbot.tokens import TokenCounter

    inbounds = _inbounds(channels, per_channel, 0.0)
    by_channel: dict[str, list[Any]] = {}
    for m in inbounds:
        by_channel.setdefault(m.channel, []).append(m)
    counter = TokenCounter()
    with tempfile.TemporaryDirectory(prefix="tierbot-tput-") as tmp:
        async with await Store.open(Path(tmp) / "bot.db") as store:
            start = time.perf_counter()
            for key, ms in by_channel.items():
                await store.ensure_channel(key)
                await store.append_many([to_message(m, counter.count_message(m.text)) for m in ms])
            return len(inbounds) / (time.perf_counter() - start)


def _child(args: argparse.Namespace) -> None:
    if args.child == "ceiling":
        out: Any = asyncio.run(_store_ceiling(args.channels, args.per_channel))
    else:
        out = asyncio.run(
            _run_channels(args.child, args.channels, args.per_channel, args.inflight, args.set)
        )
    # Marked: the runtime's own log lines (a shutdown warning) share stdout.
    print(RESULT + json.dumps(out), flush=True)


def _spawn(kind: str, channels: int, per_channel: int, inflight: int, sets: list[str]) -> Any:
    argv = [sys.executable, "-m", "benchmarks.channel_throughput", "--child", kind]
    argv += ["--channels", str(channels), "--per-channel", str(per_channel)]
    argv += ["--inflight", str(inflight)]
    argv += [f"--set={s}" for s in sets]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{done.stderr[-3000:]}")
    results = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT)]
    if not results:
        raise SystemExit(f"{kind} run printed no result:\n{done.stdout[-2000:]}")
    return json.loads(results[-1][len(RESULT) :])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--inflight", type=int, default=256)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config.toml key for the channel runs (to measure a setting)",
    )
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    p.add_argument("--channels", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--per-channel", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args)
        return
    runs = args.runs or (1 if args.quick else 3)
    scale = 10 if args.quick else 1
    a_ch, l_ch = ADDRESSED_CHANNELS // scale, LISTEN_CHANNELS // scale
    addressed = [
        _spawn("addressed", a_ch, ADDRESSED_PER_CHANNEL, args.inflight, args.set)
        for _ in range(runs)
    ]
    listen = [
        _spawn("listen", l_ch, LISTEN_PER_CHANNEL, args.inflight, args.set) for _ in range(runs)
    ]
    ceiling = [_spawn("ceiling", l_ch, LISTEN_PER_CHANNEL, 0, []) for _ in range(runs)]

    def med(results: list[dict], key: str) -> float:
        return round(median(r[key] for r in results), 1)

    rows: list[Row] = [
        row(
            f"addressed: {a_ch:,} channels x {ADDRESSED_PER_CHANNEL}, 10 % addressed",
            med(addressed, "msgs_per_s"),
            "msg/s",
            ">= 1000",
        ),
        row("addressed: submit p50", med(addressed, "p50_ms"), "ms"),
        row("addressed: submit p99", med(addressed, "p99_ms"), "ms", "<= 250"),
        row("addressed: RSS per idle channel", med(addressed, "kb_per_channel"), "KB", "<= 20"),
        row(
            "addressed: Python heap per idle resident channel",
            med(addressed, "heap_kb_per_idle_channel"),
            "KB",
            "<= 20",
        ),
        row(
            "addressed: heap left per channel once evicted",
            med(addressed, "heap_kb_left_per_evicted_channel"),
            "KB",
        ),
        row(
            "addressed: channels resident after the idle sweep",
            med(addressed, "resident_after_evict"),
            "channels",
            "== 0",
        ),
        row(
            f"listen-only: {l_ch:,} channels x {LISTEN_PER_CHANNEL}",
            med(listen, "msgs_per_s"),
            "msg/s",
            ">= 2000",
        ),
        row("listen-only: submit p99", med(listen, "p99_ms"), "ms", "<= 250"),
        row(
            "store ceiling: count + append, one batch per channel",
            round(median(ceiling), 1),
            "msg/s",
        ),
    ]
    print_table("channel throughput, one process, SQLite", rows)
    meta = machine_meta(runs=runs, inflight=args.inflight, quick=args.quick, overrides=args.set)
    meta["runs_detail"] = {"addressed": addressed, "listen": listen, "ceiling": ceiling}
    write_results("channel_throughput", rows, meta)


if __name__ == "__main__":
    main()
