"""The channel keeps answering during compaction: turn latency while a 2 s summary runs.

Drives the real :class:`~bot.runtime.Runtime` (a temporary SQLite store, the scripted fake
LLM taking 2 s per summary and 2 ms per chat reply) with one channel, one message at a
time: a turn is timed from ``registry.submit`` until its reply reaches the runtime's outbox.
Each turn adds a user message and a reply, so the channel's usage climbs past 80% by
itself and a background compaction starts.  A round is then

* **idle**: the ``--turns`` turns just before that crossing (no compaction running);
* **busy**: the ``--turns`` turns from the crossing on, every one answered while that
  compaction ran (checked at each reply: ``compactor.running`` is the same plan);
* the **swap**: the benchmark pauses (more turns would push usage into the emergency
  tier), resumes just before the summary is due, times the turn that crosses its swap,
  and checks that the summary landed.

Usage is then back near 63% and the next round climbs again, so idle and busy phases
alternate through one run and see contexts of nearly the same size.  The figures are
medians over the rounds of each phase's p50 and p99; the target is the ratio of the
median p99s: busy <= 1.2 x idle.

Two modes, same script, same measurement:

* ``async``: the runtime as it is (the summary runs in the worker pool);
* ``sync``: the baseline of a bot that compacts synchronously: the chat call of a turn
  first waits until no compaction is queued or running, so the turn that triggers one
  answers only after its summary.  Only that turn overlaps the compaction (the bot
  answers nothing else meanwhile), so its busy phase is one or two turns.

    python -m benchmarks.compaction_latency [--mode both|async|sync] [--turns N]
        [--rounds N] [--sync-rounds N] [--quick] [--synchronous full|normal]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    Row,
    machine_meta,
    median,
    percentile,
    print_table,
    row,
    write_results,
)
from bot.adapters.base import Outbound
from bot.runtime import Runtime
from channels import BOT_AUTHOR, ChannelActor
from compactor import Plan
from tierbot.config import DEFAULT_SYSTEM_PROMPT, validate_config
from tierbot.llm.base import ChatMessage, Completion, Purpose, ToolSpec
from tierbot.logging import configure_logging
from tierbot.messages import InboundMessage, Message, Role
from tierbot.store import ChannelState, Store
from tierbot.testing.scripted import ScriptedLLM
from tierbot.tokens import TokenCounter, get_counter
from workers import WorkerPool

NAME = "compaction_latency"
CHANNEL = "bench:latency"
SUMMARY_SECONDS = 2.0
CHAT_SECONDS = 0.002
CHAT_REPLY = "ok"
THRESHOLD = 0.80  # the default background threshold the channel crosses
BUSY_GROWTH = 0.10  # usage the busy turns add: from 0.80 to ~0.90, clear of emergency (0.95)
RATIO_TARGET = "<= 1.2"
TURN_TIMEOUT = 60.0
MODES = ("async", "sync")


def user_text(i: int) -> str:
    return f"msg {i}: how is build {i % 97} doing on staging?"


@dataclass(frozen=True, slots=True)
class Turn:
    seconds: float
    running: Plan | None  # the compaction running when the reply was delivered


@dataclass
class Round:
    """One idle phase and the busy phase that followed it."""

    idle: list[float]
    busy: list[float]
    same_plan: bool  # every busy reply was delivered while the same compaction ran
    landed: bool  # and afterwards its summary replaced the covered messages
    compaction_seconds: float  # as the store recorded it
    busy_seconds: float  # wall time of the busy phase
    landing: float  # the first turn answered after the summary landed (it waits for the swap)

    @property
    def ratio(self) -> float:
        return percentile(self.busy, 99) / percentile(self.idle, 99)


@dataclass
class ModeResult:
    mode: str
    rounds: list[Round] = field(default_factory=list)
    window: int = 0
    prefill_messages: int = 0
    seconds: float = 0.0


class InlineCompactionLLM:
    """The sync baseline's provider: a chat call first waits until no compaction is queued
    or running, so a turn that triggers one answers only after its summary."""

    def __init__(self, inner: ScriptedLLM) -> None:
        self.inner = inner
        self.name = "scripted+inline-compaction"
        self.pool: WorkerPool | None = None

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        if purpose == "chat" and self.pool is not None:
            await self.pool.drain()
        return await self.inner.complete(messages, tools, max_tokens, purpose)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Channel:
    """The benchmark's channel in a running runtime, driven one turn at a time."""

    def __init__(self, rt: Runtime, fake: ScriptedLLM) -> None:
        self.rt = rt
        self.fake = fake
        self._seq = itertools.count()
        self._waiting: dict[str, asyncio.Future[tuple[float, Plan | None]]] = {}
        deps = rt.registry.deps
        self._deliver = deps.deliver
        deps.deliver = self._delivered  # see each reply as it reaches the outbox

    @property
    def actor(self) -> ChannelActor:
        return self.rt.registry.actors[CHANNEL]

    async def _delivered(self, out: Outbound) -> None:
        await self._deliver(out)
        fut = self._waiting.pop(out.reply_to or "", None)
        if fut is not None and not fut.done():
            actor = self.rt.registry.actors.get(CHANNEL)
            fut.set_result((time.perf_counter(), actor.compactor.running if actor else None))

    async def turn(self) -> Turn:
        """Send one message and wait for its reply."""
        i = next(self._seq)
        pid = f"bench-{i}"
        fut: asyncio.Future[tuple[float, Plan | None]] = asyncio.get_running_loop().create_future()
        self._waiting[pid] = fut
        msg = InboundMessage(CHANNEL, pid, "alice", "alice", user_text(i), addressed=True)
        t0 = time.perf_counter()
        await self.rt.registry.submit(msg)
        try:
            t1, running = await asyncio.wait_for(fut, TURN_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(f"no reply to {pid} within {TURN_TIMEOUT:.0f} s") from None
        # The fake records every prompt it gets; thousands of turns would pile them up.
        self.fake.calls.clear()
        return Turn(t1 - t0, running)

    async def settled(self, plan: Plan) -> None:
        """Wait until ``plan`` is no longer running and the actor has finished applying it."""
        deadline = time.monotonic() + TURN_TIMEOUT
        while self.actor.compactor.running is plan:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the compaction did not finish within {TURN_TIMEOUT:.0f} s")
            await asyncio.sleep(0.005)

        async def barrier(actor: ChannelActor) -> None:
            return None  # runs after the actor's current mailbox item: the swap is done

        await self.actor.call(barrier)


def tokens_per_turn(counter: TokenCounter) -> float:
    sample = [counter.count_message(user_text(i)) for i in range(1000)]
    return sum(sample) / len(sample) + counter.count_message(CHAT_REPLY)


def window_for(turns: int, per_turn: float) -> int:
    """A context window in which ``turns`` turns add about BUSY_GROWTH of usage."""
    return max(1000, math.ceil(turns * per_turn / BUSY_GROWTH / 1000) * 1000)


async def prefill(path: Path, counter: TokenCounter, window: int, usage: float, sync: str) -> int:
    """Store a history of past turns (user message + reply) up to ``usage``; return its size.

    The channel rehydrates it from the store on its first message, as after a restart.
    """
    total = counter.count_message(DEFAULT_SYSTEM_PROMPT)
    msgs: list[Message] = []
    for k in itertools.count():
        text = user_text(100_000 + k)
        pair = [
            Message(
                CHANNEL,
                f"pre-{k}-u",
                Role.USER,
                text,
                "alice",
                "alice",
                ts=float(k),
                tokens=counter.count_message(text),
            ),
            Message(
                CHANNEL,
                f"pre-{k}-a",
                Role.ASSISTANT,
                CHAT_REPLY,
                BOT_AUTHOR,
                BOT_AUTHOR,
                ts=float(k),
                tokens=counter.count_message(CHAT_REPLY),
            ),
        ]
        added = sum(m.tokens for m in pair)
        if (total + added) / window > usage:
            break
        total += added
        msgs += pair
    async with await Store.open(path, synchronous=sync) as store:
        stored = await store.append_many(msgs)
        last = max(m.id for m in stored if m is not None)
        await store.save_channel_state(CHANNEL, ChannelState(handled_upto=last))
    return len(msgs)


async def busy_phase(ch: Channel, first: Turn, turns: int, idle: list[float]) -> Round:
    """``first`` was answered while a compaction ran: measure turns until ``turns`` were
    answered during it (or it finished early), then cross its landing and check it landed."""
    plan = first.running
    assert plan is not None
    started = time.perf_counter() - first.seconds
    done_before = ch.actor.compactor.counters[plan.kind.value]
    busy = [first.seconds]
    same = True
    landing: float | None = None
    while len(busy) < turns:
        t = await ch.turn()
        if t.running is None:
            landing = t.seconds  # it finished early: this turn came after it
            break
        same = same and t.running is plan
        busy.append(t.seconds)
    busy_seconds = time.perf_counter() - started
    if landing is None:
        # Pause (more turns would push usage to the emergency tier), resume just before
        # the summary is due, and time the turns that cross the swap.
        await asyncio.sleep(max(0.0, started + SUMMARY_SECONDS - 0.05 - time.perf_counter()))
        for _ in range(turns):
            t = await ch.turn()
            if t.running is not plan:
                landing = t.seconds
                break
    await ch.settled(plan)
    records = await ch.rt.store.compactions(CHANNEL, limit=1)
    record = records[0] if records else None
    landed = (
        ch.actor.compactor.counters[plan.kind.value] == done_before + 1
        and record is not None
        and record.outcome == "ok"
        and record.tier == plan.kind.value
        and any(m.role is Role.SUMMARY for m in ch.actor.ctx.items)
    )
    return Round(
        idle=idle,
        busy=busy,
        same_plan=same,
        landed=landed and landing is not None,
        compaction_seconds=record.duration if record else 0.0,
        busy_seconds=busy_seconds,
        landing=landing or 0.0,
    )


async def measure(
    mode: str, turns: int, rounds: int, synchronous: str, workdir: Path
) -> ModeResult:
    started = time.perf_counter()
    counter = get_counter("o200k_base")
    per_turn = tokens_per_turn(counter)
    window = window_for(turns, per_turn)
    # Start low enough that more than ``turns`` idle turns (plus warm-up) precede the crossing.
    start_usage = THRESHOLD - (1.3 * turns + 20) * per_turn / window
    db = workdir / f"{mode}.db"
    result = ModeResult(mode, window=window)
    result.prefill_messages = await prefill(db, counter, window, start_usage, synchronous)
    cfg = validate_config(
        {
            # The rounds are laid out around the 80 % crossing; a start predicted from the
            # turns' pace would move it (compaction_keepup measures that start).
            "defaults": {"context_window": window, "compaction": {"predictive_start": False}},
            "memory": {"enabled": False},
            "adapters": {"console": {"enabled": False}},
            "storage": {"path": str(db), "synchronous": synchronous},
        },
        f"<{NAME}>",
    )
    fake = ScriptedLLM(
        chat_reply=CHAT_REPLY, latency={"summary": SUMMARY_SECONDS, "chat": CHAT_SECONDS}
    )
    llm = fake if mode == "async" else InlineCompactionLLM(fake)
    async with Runtime.open(cfg, llm=llm) as rt:
        if isinstance(llm, InlineCompactionLLM):
            llm.pool = rt.pool
        ch = Channel(rt, fake)
        idle: deque[float] = deque(maxlen=turns)
        while len(result.rounds) < rounds:
            t = await ch.turn()
            if t.running is None:
                idle.append(t.seconds)
                continue
            result.rounds.append(await busy_phase(ch, t, turns, list(idle)))
            idle.clear()
            r = result.rounds[-1]
            print(
                f"  {mode} round {len(result.rounds)}/{rounds}: idle p99 "
                f"{percentile(r.idle, 99) * 1e3:.1f} ms ({len(r.idle)} turns), busy p99 "
                f"{percentile(r.busy, 99) * 1e3:.1f} ms ({len(r.busy)} turns), "
                f"compaction {r.compaction_seconds:.2f} s, landed {r.landed}",
                flush=True,
            )
    result.seconds = time.perf_counter() - started
    return result


def mode_rows(res: ModeResult, turns: int) -> list[Row]:
    rs = res.rounds
    m = res.mode
    idle_p50 = median(percentile(r.idle, 50) for r in rs) * 1e3
    idle_p99 = median(percentile(r.idle, 99) for r in rs) * 1e3
    busy_p50 = median(percentile(r.busy, 50) for r in rs) * 1e3
    busy_p99 = median(percentile(r.busy, 99) for r in rs) * 1e3
    ratios = [r.ratio for r in rs]
    verified = sum(1 for r in rs if r.same_plan and r.landed)
    out = [
        row(f"{m}: idle p50", idle_p50, "ms"),
        row(f"{m}: idle p99", idle_p99, "ms"),
        row(f"{m}: busy p50", busy_p50, "ms"),
        row(f"{m}: busy p99", busy_p99, "ms"),
    ]
    if m == "async":
        out += [
            row(f"{m}: p99 busy/idle", busy_p99 / idle_p99, "x", RATIO_TARGET),
            row(f"{m}: p99 busy/idle, lowest round (noise)", min(ratios), "x"),
            row(f"{m}: p99 busy/idle, highest round (noise)", max(ratios), "x"),
            row(
                f"{m}: busy turns per compaction (fewest)",
                min(len(r.busy) for r in rs),
                "turns",
                f">= {turns}",
            ),
            row(f"{m}: rounds verified concurrent and landed", verified, "rounds", f">= {len(rs)}"),
        ]
    else:
        out += [
            row(f"{m}: p99 busy/idle (baseline)", busy_p99 / idle_p99, "x"),
            row(f"{m}: busy turns per compaction (most)", max(len(r.busy) for r in rs), "turns"),
            row(
                f"{m}: rounds whose summary landed",
                sum(r.landed for r in rs),
                "rounds",
                f">= {len(rs)}",
            ),
        ]
    out += [
        row(
            f"{m}: turn across the summary swap (median)", median(r.landing for r in rs) * 1e3, "ms"
        ),
        row(f"{m}: compaction duration (median)", median(r.compaction_seconds for r in rs), "s"),
    ]
    return out


def mode_meta(res: ModeResult) -> dict[str, Any]:
    return {
        "context_window": res.window,
        "prefill_messages": res.prefill_messages,
        "seconds": round(res.seconds, 2),
        "rounds": [
            {
                "idle_turns": len(r.idle),
                "busy_turns": len(r.busy),
                "idle_p50_ms": round(percentile(r.idle, 50) * 1e3, 3),
                "idle_p99_ms": round(percentile(r.idle, 99) * 1e3, 3),
                "busy_p50_ms": round(percentile(r.busy, 50) * 1e3, 3),
                "busy_p99_ms": round(percentile(r.busy, 99) * 1e3, 3),
                "busy_max_ms": round(max(r.busy) * 1e3, 3),
                "ratio_p99": round(r.ratio, 4),
                "same_plan": r.same_plan,
                "landed": r.landed,
                "compaction_seconds": round(r.compaction_seconds, 3),
                "busy_phase_seconds": round(r.busy_seconds, 3),
                "landing_turn_ms": round(r.landing * 1e3, 3),
            }
            for r in res.rounds
        ],
    }


async def run(
    modes: Sequence[str], turns: int, rounds: dict[str, int], synchronous: str
) -> list[ModeResult]:
    with tempfile.TemporaryDirectory(prefix="tierbot-bench-") as tmp:
        return [await measure(m, turns, rounds[m], synchronous, Path(tmp)) for m in modes]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.compaction_latency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--mode", choices=["both", *MODES], default="both")
    parser.add_argument("--turns", type=int, default=None, help="turns per phase (100)")
    parser.add_argument("--rounds", type=int, default=None, help="async rounds (7)")
    parser.add_argument(
        "--sync-rounds",
        type=int,
        default=None,
        help="sync baseline rounds (3: each one blocks a turn for the whole summary)",
    )
    parser.add_argument("--quick", action="store_true", help="50 turns, 3 + 2 rounds")
    parser.add_argument(
        "--synchronous",
        choices=["full", "normal"],
        default="full",
        help="the store's SQLite synchronous setting (tierbot's default: full)",
    )
    args = parser.parse_args(argv)
    turns = args.turns or (50 if args.quick else 100)
    rounds = {
        "async": args.rounds or (3 if args.quick else 7),
        "sync": args.sync_rounds or (2 if args.quick else 3),
    }
    if turns < 2 or min(rounds.values()) < 1:
        parser.error("--turns must be >= 2 and --rounds, --sync-rounds >= 1")
    modes = MODES if args.mode == "both" else (args.mode,)
    configure_logging("warning")

    results = asyncio.run(run(modes, turns, rounds, args.synchronous))
    rows = [r for res in results for r in mode_rows(res, turns)]
    print_table(
        f"{NAME}: turn latency while a {SUMMARY_SECONDS:g} s compaction runs "
        f"(medians over rounds of {turns} turns per phase)",
        rows,
    )
    meta = machine_meta(
        turns=turns,
        rounds={m: rounds[m] for m in modes},
        summary_seconds=SUMMARY_SECONDS,
        chat_seconds=CHAT_SECONDS,
        store_synchronous=args.synchronous,
        statistic="median over rounds of each phase's percentile; ratio of the median p99s",
        modes={res.mode: mode_meta(res) for res in results},
    )
    short = [res.mode for res in results if min(len(r.busy) for r in res.rounds) < turns]
    if "async" in short:
        print(
            f"\nnote: some compactions finished before {turns} turns were answered: the machine"
            " was too slow for --turns at the moment (see loadavg_1m in the results); lower it."
        )
    path = write_results(NAME, rows, meta)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
