"""compaction_keepup: the highest inbound rate one channel absorbs with zero emergencies.

Issue: *the background tiers keep up with bursts.*  For context windows of 2k, 8k and
32k tokens and three summarizers (the offline provider, and a fake LLM that takes 0.5 s
or 2 s per summary), it searches the highest sustained rate (messages/s of realistic
chat lengths) at which one channel takes a window's worth of traffic with **zero**
emergency truncations, with today's defaults (several passes in flight per channel) and,
in the same run, with ``parallel_compactions = 1`` (one pass at a time, the old
behaviour).

Each trial: the real ``Runtime`` on a temporary SQLite store (``synchronous=full``) with
the memory graph on, one listen-only channel whose history is pre-filled to 70 % usage,
then messages submitted one by one on a fixed schedule (message k at k / rate) until
their tokens add up to ``--windows`` context windows.  A trial passes when no emergency
happened and the submissions kept up with the schedule (the store and the actor must
absorb the rate too).  The search doubles or halves the rate until it brackets the limit,
then bisects (geometric) until the bracket is within 25 %: the figure is the highest
rate that passed.

Targets: >= 20 msg/s at 8k with a 2 s summarizer, >= 80 msg/s at 32k with 2 s, >= 150
msg/s at 8k with the offline provider.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._common import Row, machine_meta, print_table, row, write_results
from bot.runtime import Runtime
from tierbot.config import DEFAULT_SYSTEM_PROMPT, Config, validate_config
from tierbot.llm.base import ChatMessage, Completion, LLMProvider
from tierbot.llm.transcript import parse_transcript
from tierbot.logging import configure_logging
from tierbot.messages import InboundMessage, Message, Role
from tierbot.store import ChannelState, Store
from tierbot.testing.scripted import ScriptedLLM
from tierbot.tokens import TokenCounter, get_counter

NAME = "compaction_keepup"
CHANNEL = "bench:keepup"
WINDOWS = (2_000, 8_000, 32_000)
SUMMARIZERS: tuple[float | None, ...] = (None, 0.5, 2.0)  # None: the offline provider
MODES = {"parallel": 3, "one at a time": 1}  # the baseline also starts at its threshold
TARGETS = {(8_000, 2.0): ">= 20", (32_000, 2.0): ">= 80", (8_000, None): ">= 150"}
PREFILL_USAGE = 0.70
MAX_RATE = 2_000.0

_VOCAB = (
    "the deploy for release v2.3 is planned on friday we decided to use postgres because "
    "alice prefers it and bob needs to check the ci pipeline before merging PR-1234 i like "
    "the new dashboard but alerts are noisy remind me to update the docs tomorrow can you "
    "look at ticket 88 lunch at noon sounds good thanks everyone for the quick review"
).split()


def chat_text(rng: random.Random, k: int) -> str:
    """A chat line of realistic length: median ~10 words, a long tail to ~80."""
    n = max(1, min(80, int(rng.lognormvariate(2.3, 0.7))))
    return f"{k}: " + " ".join(rng.choice(_VOCAB) for _ in range(n))


def summarizer_name(latency: float | None) -> str:
    return "offline" if latency is None else f"fake {latency:g} s"


def realistic_summary(messages: Sequence[ChatMessage]) -> Completion:
    """A summary a quarter the size of what it covers, at most 400 tokens (a model's
    summary under ``max_summary_tokens``)."""
    counter = get_counter()
    transcript = next((m.content for m in reversed(messages) if m.role == "user"), "")
    covered = sum(counter.count_message(e.text) for e in parse_transcript(transcript))
    return Completion(text="summary " * max(8, min(400, covered // 4)))


def make_llm(latency: float | None) -> LLMProvider | None:
    if latency is None:
        return None  # the runtime builds the configured (offline) provider
    llm = ScriptedLLM(latency={"summary": latency})
    llm.push("summary", *itertools.repeat(realistic_summary, 100_000))
    return llm


def make_config(tmp: Path, window: int, parallel: int, *, predictive: bool) -> Config:
    return validate_config(
        {
            "storage": {"path": str(tmp / "tierbot.db")},
            "memory": {"index_dir": str(tmp / "memory")},
            "adapters": {"console": {"enabled": False}},
            "defaults": {
                "context_window": window,
                "respond": "listen",
                "compaction": {
                    "parallel_compactions": parallel,
                    "predictive_start": predictive,
                },
            },
        },
        "compaction_keepup",
    )


async def prefill(cfg: Config, counter: TokenCounter, window: int) -> None:
    """Store history up to ``PREFILL_USAGE`` (the channel rehydrates it, as after a restart)."""
    rng = random.Random(7)
    total = counter.count_message(DEFAULT_SYSTEM_PROMPT)
    msgs: list[Message] = []
    for k in itertools.count():
        text = chat_text(rng, -k - 1)
        tokens = counter.count_message(text)
        if (total + tokens) / window > PREFILL_USAGE:
            break
        total += tokens
        msgs.append(
            Message(
                CHANNEL,
                f"pre-{k}",
                Role.USER,
                text,
                f"u{k % 9}",
                f"user{k % 9}",
                ts=float(k),
                tokens=tokens,
            )
        )
    async with await Store.open(cfg.storage_path(), synchronous="full") as store:
        stored = await store.append_many(msgs)
        last = max(m.id for m in stored if m is not None)
        await store.save_channel_state(CHANNEL, ChannelState(handled_upto=last))


async def _entered(actor: Any) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Trial:
    rate: float
    messages: int
    emergencies: int
    achieved: float
    passes: int
    peak: float
    seconds: float

    @property
    def ok(self) -> bool:
        return self.emergencies == 0 and self.achieved >= 0.9 * self.rate


async def trial(
    window: int, latency: float | None, parallel: int, rate: float, windows: float
) -> Trial:
    """Feed ``windows`` context windows of chat at ``rate`` msg/s into a fresh channel."""
    counter = get_counter()
    rng = random.Random(11)
    texts: list[str] = []
    budget = windows * window
    while budget > 0:
        texts.append(chat_text(rng, len(texts)))
        budget -= counter.count_message(texts[-1])
    with tempfile.TemporaryDirectory(prefix="tierbot-keepup-") as tmp:
        cfg = make_config(Path(tmp), window, parallel, predictive=parallel > 1)
        await prefill(cfg, counter, window)
        started = time.perf_counter()
        async with Runtime.open(cfg, llm=make_llm(latency)) as rt:
            actor = await rt.registry.actor(CHANNEL)
            loop = asyncio.get_running_loop()
            # Warm-up at half the rate until one pass has landed: a running channel knows
            # how long its passes take (a cold one starts at its threshold).
            k = 0
            while (
                actor.compactor.counters["background"] + actor.compactor.counters["aggressive"] < 1
                and not actor.compactor.counters["emergency"]
            ):
                await rt.submit(
                    InboundMessage(
                        CHANNEL, f"w{k}", f"u{k % 9}", f"user{k % 9}", chat_text(rng, -k)
                    )
                )
                k += 1
                await asyncio.sleep(2 / rate)
            warm_emergencies = int(actor.compactor.counters["emergency"])
            t0 = loop.time()
            sent = 0
            for k, text in enumerate(texts):
                delay = t0 + k / rate - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await rt.submit(InboundMessage(CHANNEL, f"m{k}", f"u{k % 9}", f"user{k % 9}", text))
                sent += 1
                if actor.compactor.counters["emergency"] > warm_emergencies:
                    break  # failed: no need to wait for the rest
            elapsed = max(loop.time() - t0, 1e-9)
            # The rate is what the channel took in: it must also have entered the messages
            # (a call runs after everything queued before it).
            await actor.call(_entered)
            achieved = sent / max(loop.time() - t0, elapsed)
            counters = actor.compactor.counters
            result = Trial(
                rate=rate,
                messages=sent,
                emergencies=int(counters["emergency"]) - warm_emergencies,
                achieved=achieved if sent == len(texts) else 0.0,
                passes=int(counters["background"] + counters["aggressive"]),
                peak=actor.peak_usage,
                seconds=time.perf_counter() - started,
            )
    return result


@dataclass
class Search:
    window: int
    latency: float | None
    mode: str
    trials: list[Trial]

    @property
    def best(self) -> float:
        return max((t.rate for t in self.trials if t.ok), default=0.0)


async def search(
    window: int, latency: float | None, mode: str, start: float, windows: float, max_trials: int
) -> Search:
    """Highest passing rate: double/halve until bracketed, then bisect to within 25 %."""
    s = Search(window, latency, mode, [])
    lo, hi = 0.0, math.inf
    rate = start
    for _ in range(max_trials):
        t = await trial(window, latency, MODES[mode], rate, windows)
        s.trials.append(t)
        if t.ok:
            lo = rate
        else:
            hi = rate
        if lo >= MAX_RATE or (lo > 0 and hi / lo <= 1.25) or hi <= 1.0:
            break
        if math.isinf(hi):
            rate = min(MAX_RATE, rate * 2)
        elif lo == 0:
            rate = rate / 2
        else:
            rate = math.sqrt(lo * hi)
    return s


def start_rate(window: int, latency: float | None) -> float:
    """A first guess: the rate whose tokens fill the 15 % between the background and
    emergency thresholds in one summary's time (~20 tokens a message)."""
    seconds = 0.25 if latency is None else latency
    return max(2.0, round(0.15 * window / 20 / seconds))


def rows_for(searches: Sequence[Search]) -> list[Row]:
    out: list[Row] = []
    by = {(s.window, s.latency, s.mode): s for s in searches}
    for window in WINDOWS:
        for latency in SUMMARIZERS:
            par = by.get((window, latency, "parallel"))
            one = by.get((window, latency, "one at a time"))
            if par is None or one is None:
                continue
            cell = f"{window // 1000}k, {summarizer_name(latency)}"
            target = TARGETS.get((window, latency), "")
            out.append(row(f"{cell}: rate, zero emergencies", par.best, "msg/s", target))
            out.append(row(f"{cell}: rate, one pass at a time (baseline)", one.best, "msg/s"))
            if one.best > 0:
                out.append(row(f"{cell}: ratio to baseline", par.best / one.best, "x"))
    return out


def table_lines(searches: Sequence[Search]) -> list[str]:
    """The Markdown table docs/tuning.md shows (rates in msg/s, parallel vs baseline)."""
    by = {(s.window, s.latency, s.mode): s for s in searches}
    head = "| window | " + " | ".join(summarizer_name(lat) for lat in SUMMARIZERS) + " |"
    lines = [head, "|---|" + "---|" * len(SUMMARIZERS)]
    for window in WINDOWS:
        cells = []
        for latency in SUMMARIZERS:
            par = by.get((window, latency, "parallel"))
            one = by.get((window, latency, "one at a time"))
            cells.append(f"{par.best:g} ({one.best:g})" if par and one else "-")
        lines.append(f"| {window // 1000}k | " + " | ".join(cells) + " |")
    return lines


async def run(
    windows_: Sequence[int], latencies: Sequence[float | None], windows: float, max_trials: int
) -> list[Search]:
    out = []
    for window in windows_:
        for latency in latencies:
            for mode in MODES:
                first = start_rate(window, latency)
                s = await search(window, latency, mode, first, windows, max_trials)
                tried = ", ".join(f"{t.rate:g}{'+' if t.ok else '-'}" for t in s.trials)
                name = summarizer_name(latency)
                print(
                    f"{window // 1000}k {name:>10} {mode:>13}: {s.best:g} msg/s  trials {tried}",
                    flush=True,
                )
                out.append(s)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.compaction_keepup", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="half a window per trial, at most 4 trials a cell"
    )
    parser.add_argument(
        "--windows", type=float, default=None, help="context windows of traffic per trial (1.0)"
    )
    parser.add_argument(
        "--only", default="", help="e.g. 8000:2 or 32000:offline, comma-separated cells"
    )
    args = parser.parse_args(argv)
    windows = args.windows or (0.5 if args.quick else 1.0)
    max_trials = 4 if args.quick else 6
    configure_logging("error")
    cells: list[tuple[int, float | None]] = [(w, lat) for w in WINDOWS for lat in SUMMARIZERS]
    if args.only:
        wanted = set()
        for part in args.only.split(","):
            w, _, lat = part.partition(":")
            wanted.add((int(w), None if lat == "offline" else float(lat)))
        cells = [c for c in cells if c in wanted]
    started = time.perf_counter()
    searches: list[Search] = []
    for window, latency in cells:
        searches += asyncio.run(run([window], [latency], windows, max_trials))
    rows = rows_for(searches)
    print_table(f"{NAME}: highest rate with zero emergency truncations (msg/s)", rows)
    print("\nrate with several passes in flight (one pass at a time):")
    print("\n".join(table_lines(searches)))
    meta: dict[str, Any] = machine_meta(
        windows_of_traffic=windows,
        prefill_usage=PREFILL_USAGE,
        max_trials=max_trials,
        parallel_compactions={k: v for k, v in MODES.items()},
        seconds=round(time.perf_counter() - started, 1),
        table=table_lines(searches),
        trials=[
            {
                "window": s.window,
                "summarizer": summarizer_name(s.latency),
                "mode": s.mode,
                "trials": [
                    {
                        "rate": t.rate,
                        "ok": t.ok,
                        "emergencies": t.emergencies,
                        "achieved": round(t.achieved, 1),
                        "passes": t.passes,
                        "peak": round(t.peak, 3),
                        "messages": t.messages,
                        "seconds": round(t.seconds, 1),
                    }
                    for t in s.trials
                ],
            }
            for s in searches
        ],
    )
    path = write_results(NAME, rows, meta)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
