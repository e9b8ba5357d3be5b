"""Applying compaction plans: the part of a channel actor that changes its history for the
compactor.

After every message that enters the history the actor asks :meth:`ChannelCompaction.check`;
the compactor (a pure policy, :mod:`compactor`) says whether a pass is due.  An
emergency truncation happens here and now (no LLM); anything else goes to the
process-wide worker pool and comes back through the actor's mailbox as a
:class:`WorkerDone`, which is swapped in by :meth:`ChannelCompaction.worker_done`, so
the channel never waits for a summary.  Ranges that finish out of order are held
until the older ones land; a failure backs off and re-checks on a timer.

Only the channel's actor calls this, from inside its own task: the actor stays
the only writer of its history.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from channels.context import LiveContext
from channels.deps import ChannelDeps
from channels.history import History
from compactor import Compactor, Plan, forced_note
from compactor.scheduler import in_flight_ids, rescue_chunk
from compactor.scheduler import summary_budget as _summary_budget
from tierbot.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    EmergencyTruncation,
)
from tierbot.messages import Message, Outbound, Role, SetAside, State
from tierbot.retry import Backoff
from tierbot.store import ChannelState, CompactionRecord
from tierbot.vocab import CompactionKind, Outcome
from workers import CompactionJob, CompactionOutcome, minable

__all__ = ["ChannelCompaction", "PassResult", "Recheck", "WorkerDone"]


@dataclass(frozen=True, slots=True)
class WorkerDone:
    """A background pass ended (its mailbox item)."""

    plan: Plan
    outcome: CompactionOutcome | None
    error: BaseException | None
    rescued: tuple[int, ...] = ()  # a rescue's chunk: the set-aside ids it summarized
    missing: tuple[int, ...] = ()  # set-aside ids no longer in the store (forgotten)


@dataclass(frozen=True, slots=True)
class _Ran:
    """What a compaction job returns to the actor: the worker's outcome and, for a
    rescue, which set-aside messages it covered and which it found gone (None as
    outcome: nothing was left to summarise, no worker ran)."""

    outcome: CompactionOutcome | None
    rescued: tuple[int, ...] = ()
    missing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Recheck:
    """The loop guard or a failure backoff expired: look at the usage again (mailbox item)."""


@dataclass(frozen=True, slots=True)
class PassResult:
    """How one compaction pass changed the context: what its ``CompactionRecord`` says.

    ``started`` is the ``time.monotonic()`` the pass began at; usage after is
    ``tokens_after`` over the channel's window when the record is made.
    """

    plan: Plan
    outcome: Outcome
    started: float
    usage_before: float
    tokens_before: int
    tokens_after: int
    memories: int = 0
    reason: str = ""


class ChannelCompaction:
    """One channel's compactor and the code that applies its plans to the history."""

    def __init__(
        self,
        key: str,
        deps: ChannelDeps,
        history: History,
        post: Callable[[Any], None],
        log: Any,
    ) -> None:
        self.key = key
        self.deps = deps
        self.history = history
        self.compactor = Compactor(key)
        self.log = log
        self._post = post  # into the actor's mailbox
        # Finished range passes waiting for an older range to be swapped in first.
        self.held: list[WorkerDone] = []
        self._recheck: asyncio.TimerHandle | None = None
        self._recheck_at = 0.0
        self._stopped = False
        # While messages a turn will answer enter, a check that cannot be an emergency waits
        # until that turn's model request is out (see channels.turn).
        self.deferring = False
        self.check_due = False

    @property
    def ctx(self) -> LiveContext:
        return self.history.ctx

    def state(self, ending: tuple[Plan, str] | None = None) -> ChannelState:
        """What the store keeps about the channel between runs; with ``ending``, the
        counters once that pass has ended so (stored with its swap, before it is marked
        finished: a swap the store refuses leaves the pass in flight, to be failed)."""
        counters = self.compactor.counted(*ending) if ending else self.compactor.counters
        return ChannelState(self.history.handled_upto, dict(counters))

    async def save_state(self) -> None:
        await self.deps.store.save_channel_state(self.key, self.state())

    def stop(self) -> None:
        """The actor is stopping: no more timers."""
        self._stopped = True
        self._cancel_recheck()

    def idle(self) -> bool:
        """No pass in flight and none waiting to be swapped in."""
        return self.compactor.running is None and not self.held

    def pending(self) -> bool:
        """A pass is in flight, waiting to be swapped in, or due within the loop guard."""
        guard = self.history.settings.compaction.loop_guard_seconds
        due = self._recheck is not None and self._recheck_at <= time.monotonic() + guard
        return bool(self.compactor.in_flight or self.held or due)

    # -- looking -----------------------------------------------------------------------

    async def check(self) -> None:
        """Look at the usage: truncate now at the emergency tier, else launch what is due."""
        self.history.refresh_fixed()
        usage = self.history.note_usage()
        s = self.history.settings
        if self.deferring and usage < s.compaction.emergency_threshold:
            self.check_due = True  # see channels.turn
            return
        self.check_due = False
        plan = self.compactor.check(
            self.ctx.items,
            usage,
            s.context_window,
            s.compaction,
            markers=self.ctx.marker_count,
            summary_tokens=self.ctx.summary_tokens,
            in_flight=self.history.awaiting,
            fixed=self.ctx.fixed_tokens,
        )
        if plan is None:
            self._arm_recheck(self.compactor.wake_at)
            return
        if plan.kind is CompactionKind.EMERGENCY:
            await self.truncate(plan)
            await self.check()
        else:
            self.launch(plan)
            # A burst may need more than one range in flight: look again until the
            # projected usage is under the threshold or the slots are taken.
            if len(self.compactor.in_flight) < s.compaction.parallel_compactions:
                await self.check()

    async def overflowed(self) -> None:
        """The provider refused the prompt as too long: truncate now if an emergency cut
        would help (the turn then tries once more)."""
        s = self.history.settings
        plan = self.compactor.check(
            self.ctx.items,
            1.0,
            s.context_window,
            s.compaction,
            in_flight=self.history.awaiting,
            fixed=self.ctx.fixed_tokens,
        )
        if plan is not None and plan.kind is CompactionKind.EMERGENCY:
            await self.truncate(plan)

    def _arm_recheck(self, at: float | None) -> None:
        """Re-check this channel at monotonic time ``at`` even if no message comes."""
        if at is None or self._stopped:
            return
        if self._recheck is not None and self._recheck_at <= at:
            return
        self._cancel_recheck()
        loop = asyncio.get_running_loop()
        self._recheck_at = at
        self._recheck = loop.call_at(
            loop.time() + max(0.0, at - time.monotonic()), self._fire_recheck
        )

    def _fire_recheck(self) -> None:
        self._recheck = None
        if not self._stopped:
            self._post(Recheck())

    def _cancel_recheck(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None

    # -- the emergency tier ------------------------------------------------------------

    async def truncate(self, plan: Plan) -> None:
        """Emergency: set the oldest messages aside now, behind one marker; no LLM.

        Earlier markers are folded into the new one, so the context never fills
        with markers; the set-aside messages are summarized later (a rescue job).
        """
        started = time.monotonic()
        before, tokens_before = self.history.usage, self.ctx.total
        old_markers = [m for m in self.ctx.items if m.role is Role.MARKER]
        aside = [i for mk in old_markers for i in SetAside.of(mk).ids]
        aside += [m.id for m in plan.covered]
        first_pos = min([m.pos for m in plan.covered] + [mk.pos for mk in old_markers])
        marker = self._marker(SetAside(tuple(sorted(set(aside))))).with_(pos=first_pos)
        remove = [m.id for m in plan.covered] + [mk.id for mk in old_markers]
        self.compactor.emergency_done()
        placed = await self.deps.store.swap(self.key, remove, marker, state=self.state())
        self.ctx.replace(remove, placed)
        result = PassResult(plan, Outcome.OK, started, before, tokens_before, self.ctx.total)
        await self.deps.store.record_compaction(self._record(result))
        after = self.history.usage
        self.log.warning(
            "compaction.emergency",
            usage_before=round(before, 3),
            usage_after=round(after, 3),
            set_aside=len(plan.covered),
        )
        self.deps.events.publish(EmergencyTruncation(self.key, before, after, len(plan.covered)))

    def _marker(self, aside: SetAside) -> Message:
        text = (
            f"[{len(aside)} earlier messages were set aside to keep this conversation within "
            "its context window. They are archived and will be summarized.]"
        )
        return self.history.new(Role.MARKER, text, **aside.meta())

    # -- background passes ---------------------------------------------------------------

    def launch(self, plan: Plan) -> None:
        """Hand ``plan`` to the worker pool; its result comes back through the mailbox."""
        self.compactor.started(plan)
        self.log.info(
            "compaction.triggered",
            tier=plan.kind.value,
            usage=round(plan.usage, 3),
            messages=len(plan.covered),
        )
        self.deps.events.publish(CompactionStarted(self.key, plan.kind))
        worker = self.deps.worker
        busy = in_flight_ids(p.covered for p in self.compactor.ranges)

        async def run() -> _Ran:
            messages: tuple[Message, ...] = plan.covered
            rescued: tuple[int, ...] = ()
            missing: tuple[int, ...] = ()
            if plan.kind is CompactionKind.RESCUE and plan.marker is not None:
                chunk, missing = await self._rescue_chunk(plan.marker, busy)
                messages = tuple(chunk)
                rescued = tuple(m.id for m in messages)
                if not messages:  # every set-aside message left was forgotten
                    return _Ran(None, (), missing)
            messages = await self._unforgotten(messages)
            job = CompactionJob(
                channel=self.key,
                kind=plan.kind.value,
                messages=messages,
                max_summary_tokens=self.summary_budget(),
                level=plan.level,
                extract_memories=plan.kind is not CompactionKind.META,
            )
            return _Ran(await worker.run(job), rescued, missing)

        def done(result: Any, error: BaseException | None) -> None:
            ran = result if isinstance(result, _Ran) else _Ran(None)
            self._post(WorkerDone(plan, ran.outcome, error, ran.rescued, ran.missing))

        self.deps.pool.submit(self.key, run, done, urgency=plan.usage)

    async def _unforgotten(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """``messages`` without those someone asked to be forgotten (by id, or with their
        author): a summary must not say again what was forgotten.  They are archived with
        the rest of the pass, unread.  When nothing else is left, or there was only tool
        traffic, a note says so (a summary of nothing would fail the pass and bring it
        back)."""
        memory = self.deps.memory
        if not messages:
            return messages
        gone = await memory.forgotten_messages(self.key, messages) if memory else set()
        kept = tuple(m for m in messages if m.platform_id not in gone) if gone else messages
        if any(minable(m) for m in kept):
            return kept
        # A rescue chunk can hold only the bot's tool calls and results: with nothing to
        # read, the summary came back empty and the same chunk failed again and again.
        text = (
            "(what was said here was forgotten at its author's request)"
            if gone
            else "(only the bot's own tool calls and their results were here)"
        )
        note = messages[0].with_(role=Role.USER, text=text, author_id="", author_name="", meta={})
        return (*kept, note)

    async def _rescue_chunk(
        self, marker: Message, busy: set[int]
    ) -> tuple[list[Message], tuple[int, ...]]:
        """The oldest bounded chunk of what ``marker`` set aside (ids a range in flight
        covers are left to it): at most ``rescue_chunk_messages`` messages and the
        tokens of a background pass, so no summary covers thousands of messages.

        Also the set-aside ids looked at and no longer stored (a user forgotten with
        ``keep_messages_on_forget = false``): they are skipped, never waited for.  An
        empty chunk means nothing set aside is left to summarise.
        """
        s = self.history.settings
        ids = sorted(i for i in SetAside.of(marker).ids if i not in busy)
        limit = s.compaction.rescue_chunk_messages
        max_tokens = max(1, int(s.compaction.background_fraction * s.context_window))
        # Set-aside ids are in history order; a few more than the limit let the chunk
        # finish a tool call/result pair.  A window whose messages are all gone moves
        # on to the next, so forgotten messages never stall the rescue.
        step = limit + 8
        missing: list[int] = []
        for start in range(0, len(ids), step):
            window = ids[start : start + step]
            loaded = await self.deps.store.get_messages(window)
            found = {m.id for m in loaded}
            missing += [i for i in window if i not in found]
            if loaded:
                return rescue_chunk(loaded, max_tokens, limit), tuple(missing)
        return [], tuple(missing)

    def summary_budget(self) -> int:
        """Tokens one summary may take: the configured cap, but never more than half the
        share summaries may fill of what the fixed prompt leaves of the window, so a small
        window is not flooded by its summaries."""
        s = self.history.settings
        return _summary_budget(s.compaction, s.context_window, self.ctx.fixed_tokens)

    async def force(self) -> str:
        """Start a background compaction now (the ``/compact`` command)."""
        s = self.history.settings
        plan = self.compactor.forced(
            self.ctx.items, self.history.usage, s.compaction, self.history.awaiting
        )
        if plan is None:
            if self.compactor.running is not None:
                return "A compaction is already running."
            if self.compactor.only_noops_left(self.ctx.items, self.history.awaiting):
                return (
                    "Nothing more to compact yet: a summary of these few short messages is "
                    "not smaller than they are. Keep talking; once the conversation is "
                    "longer, /compact can summarize more."
                )
            return "Nothing to compact yet."
        self.launch(plan)
        return (
            f"Compacting the oldest {len(plan.covered)} messages in the background; "
            "I will say here how it went."
        )

    # -- swapping results in ---------------------------------------------------------------

    async def worker_done(self, done: WorkerDone) -> None:
        """Swap in a finished pass; a range that finished before an older one waits for it,
        so summaries land in the order of the history they cover."""
        if not self.compactor.first_range(done.plan):
            self.held.append(done)
            return
        await self._land(done)
        while self.held:
            nxt = next((d for d in self.held if self.compactor.first_range(d.plan)), None)
            if nxt is None:
                return
            self.held.remove(nxt)
            await self._land(nxt)

    async def _land(self, done: WorkerDone) -> None:
        """:meth:`_apply` ``done``; a pass that raised before it ended (the store refused
        its swap: a full disk) ends as failed and is retried after the backoff.  Never
        raises: the ranges held behind it must not wait for a swap that will not come,
        nor an import waiting for room (``ChannelActor.make_room``) with them."""
        try:
            await self._apply(done)
        except Exception as exc:
            self.log.exception("compaction.apply_failed", tier=done.plan.kind.value)
            if any(p is done.plan for p in self.compactor.in_flight):
                memories = done.outcome.memories if done.outcome else 0
                try:
                    await self._failed(
                        done.plan, Outcome.FAILED, str(exc), time.monotonic(), memories
                    )
                except Exception:
                    self.log.exception("compaction.failure_unreported", tier=done.plan.kind.value)

    async def _apply(self, done: WorkerDone) -> None:
        plan, outcome = done.plan, done.outcome
        started = time.monotonic() - (outcome.duration if outcome else 0.0)
        before, tokens_before = self.history.usage, self.ctx.total
        memories = outcome.memories if outcome else 0
        if (
            plan.kind is CompactionKind.RESCUE
            and done.missing
            and not done.rescued
            and done.error is None
        ):
            await self._rescue_gone(plan, done.missing, started)
            return
        if outcome is None or outcome.summary is None:
            reason = str(done.error) if done.error else (outcome.error if outcome else "")
            await self._failed(plan, Outcome.FAILED, reason or "unknown", started, memories)
            return
        live = self.ctx.ids()
        cover = [m for m in plan.covered if m.id in live]
        summary = self._summary(plan, outcome.summary, len(done.rescued))
        frees = sum(m.tokens for m in cover) - summary.tokens
        if plan.kind is not CompactionKind.RESCUE and cover and frees <= 0:
            reason = (
                f"the summary ({summary.tokens} tokens) is not smaller than the "
                f"{len(cover)} messages it would replace ({summary.tokens + frees} tokens)"
            )
            await self._failed(plan, Outcome.NOOP, reason, started, memories)
            return
        cover_ids = {m.id for m in plan.covered}
        if plan.kind is CompactionKind.RESCUE and done.rescued:
            # One chunk: the marker stays (reworded) until its last chunk lands.
            cover_ids = set(done.rescued)
        elif plan.kind is CompactionKind.RESCUE and plan.marker is not None:
            cover_ids |= set(SetAside.of(plan.marker).ids)
        gone = set(done.missing)
        if gone:
            self.log.warning(
                "compaction.rescue_missing",
                missing=len(gone),
                hint="set-aside messages were forgotten; skipped",
            )
        updates: list[Message] = []
        for mk in [m for m in self.ctx.items if m.role is Role.MARKER and m.id not in cover_ids]:
            aside = SetAside.of(mk)
            remaining = aside.without(cover_ids | gone)
            if len(remaining) == len(aside):
                continue
            if not remaining:
                cover_ids.add(mk.id)
                continue
            fresh = self._marker(remaining)
            updates.append(
                mk.with_(
                    text=fresh.text,
                    tokens=fresh.tokens,
                    meta=fresh.meta,
                    pos=max(m.pos for m in plan.covered) + 1e-3,
                )
            )
        summary, cover_ids = self._fit(plan, summary, cover_ids, updates)
        # The record goes into the swap's own transaction: one commit (one fsync) instead
        # of two while a turn may be waiting behind them.
        after = self._total_after(cover_ids, updates, summary)
        record = self._record(
            PassResult(plan, Outcome.OK, started, before, tokens_before, after, memories)
        )
        placed = await self.deps.store.swap(
            self.key,
            sorted(cover_ids),
            summary,
            record=record,
            state=self.state((plan, Outcome.OK)),
            updates=updates,
        )
        if plan.kind in (CompactionKind.BACKGROUND, CompactionKind.AGGRESSIVE):
            self.compactor.summary_size = summary.tokens
        self.compactor.finished(plan, Outcome.OK)
        for u in updates:
            self.ctx.update(u)
        self.ctx.replace(cover_ids, placed if summary.state is State.LIVE else None)
        self.log.info(
            "compaction.completed",
            tier=plan.kind.value,
            messages=len(cover_ids),
            tokens_before=tokens_before,
            tokens_after=self.ctx.total,
            duration=round(outcome.duration, 3),
            memories=memories,
        )
        self.deps.events.publish(
            CompactionFinished(
                self.key, plan.kind, outcome.duration, tokens_before, self.ctx.total, memories
            )
        )
        if plan.forced:
            freed = tokens_before - self.ctx.total
            await self.deps.deliver(Outbound(self.key, forced_note(plan, Outcome.OK, freed=freed)))
        elif self.history.settings.compaction.notice and plan.kind is not CompactionKind.META:
            note = (
                f"(I summarized {len(plan.covered)} older messages to keep this conversation "
                "within my context window; nothing is lost, ask me about them.)"
            )
            await self.deps.deliver(Outbound(self.key, note))
        await self.check()

    async def _rescue_gone(self, plan: Plan, missing: Sequence[int], started: float) -> None:
        """A rescue found nothing left to summarise: the set-aside messages it looked at
        were forgotten.  Take them off the markers (a marker left with none goes) so no
        later rescue looks for them again; no summary, no model call."""
        gone = set(missing)
        before, tokens_before = self.history.usage, self.ctx.total
        updates: list[Message] = []
        remove: list[int] = []
        left = 0
        for mk in [m for m in self.ctx.items if m.role is Role.MARKER]:
            aside = SetAside.of(mk)
            remaining = aside.without(gone)
            left += len(remaining)
            if len(remaining) == len(aside):
                continue
            if not remaining:
                remove.append(mk.id)
                continue
            fresh = self._marker(remaining)
            updates.append(mk.with_(text=fresh.text, tokens=fresh.tokens, meta=fresh.meta))
        reason = f"{len(gone)} set-aside messages were forgotten before they were summarized"
        live = {m.id: m for m in self.ctx.items}
        after = tokens_before - sum(live[i].tokens for i in remove)
        after += sum(u.tokens - live[u.id].tokens for u in updates)
        record = self._record(
            PassResult(plan, Outcome.OK, started, before, tokens_before, after, 0, reason)
        )
        await self.deps.store.swap(
            self.key,
            remove,
            None,
            record=record,
            state=self.state((plan, Outcome.OK)),
            updates=updates,
        )
        self.compactor.finished(plan, Outcome.OK)
        for u in updates:
            self.ctx.update(u)
        self.ctx.replace(remove, None)
        self.log.warning(
            "compaction.rescue_missing",
            missing=len(gone),
            still_set_aside=left,
            hint="set-aside messages were forgotten; skipped",
        )
        await self.check()

    def _total_after(
        self, cover_ids: Collection[int], updates: Sequence[Message], summary: Message
    ) -> int:
        """The context's token total once a swap of ``cover_ids`` for ``summary`` (and the
        marker ``updates``) is applied, computed before it is."""
        live = {m.id: m for m in self.ctx.items}
        total = self.ctx.total - sum(live[i].tokens for i in cover_ids if i in live)
        total += sum(u.tokens - live[u.id].tokens for u in updates if u.id in live)
        return total + (summary.tokens if summary.state is State.LIVE else 0)

    def _fit(
        self, plan: Plan, summary: Message, cover_ids: set[int], updates: list[Message]
    ) -> tuple[Message, set[int]]:
        """Keep a summary live only if it shrinks the context or fits under the background
        threshold.

        A summary of messages an emergency already set aside (a rescue, or a worker
        overtaken by a truncation) adds tokens; when that would push usage to the
        background threshold it is stored archived (linked, searchable) instead and
        the marker stays, reworded, so summarizing never pushes usage back up.
        """
        s = self.history.settings
        live = {m.id: m for m in self.ctx.items}
        leaving = sum(live[i].tokens for i in cover_ids if i in live)
        projected = self.ctx.total - leaving + summary.tokens
        grows = summary.tokens > leaving
        if not grows or projected < s.compaction.background_threshold * s.context_window:
            return summary, cover_ids
        marker = plan.marker
        last_chunk = marker is not None and marker.id in cover_ids
        if (
            plan.kind is CompactionKind.RESCUE
            and marker is not None
            and marker.id in live
            and last_chunk
        ):
            n = len(SetAside.of(marker))
            text = (
                f"[{n} earlier messages were set aside and summarized; the summary is archived "
                "and their content can be recalled from memory.]"
            )
            updates.append(
                marker.with_(
                    text=text, tokens=self.deps.counter.count_message(text), meta={"summarized": n}
                )
            )
            cover_ids = cover_ids - {marker.id}
        return summary.with_(state=State.ARCHIVED), cover_ids

    def _summary(self, plan: Plan, text: str, rescued: int = 0) -> Message:
        covered = plan.covered
        if plan.kind is CompactionKind.RESCUE and plan.marker is not None:
            first_pos = plan.marker.pos
            n = rescued or len(SetAside.of(plan.marker))
        else:
            first_pos = min(m.pos for m in covered)
            n = len(covered)
        level = plan.level if plan.kind is CompactionKind.META else 1
        header = f"[Summary of {n} earlier {'summaries' if level > 1 else 'messages'}]"
        body = f"{header}\n{text.strip()}"
        msg = self.history.new(Role.SUMMARY, body, level=level, kind=plan.kind.value, covers=n)
        return msg.with_(pos=first_pos, author_id="", author_name="")

    async def _failed(
        self, plan: Plan, outcome: Outcome, reason: str, started: float, memories: int
    ) -> None:
        cfg = self.deps.config().workers
        backoff = Backoff(cfg.retry_base_seconds, cfg.retry_max_seconds, jitter=0.0)
        self.compactor.finished(plan, outcome, backoff.delay(self.compactor.failures))
        usage, tokens = self.history.usage, self.ctx.total
        try:
            await self.deps.store.record_compaction(
                self._record(
                    PassResult(plan, outcome, started, usage, tokens, tokens, memories, reason)
                )
            )
            await self.save_state()
        except Exception as exc:
            # The store is failing (it may be why the pass failed): the pass is still
            # reported and retried, only its record is missing.
            self.log.error("compaction.record_failed", tier=plan.kind.value, error=str(exc))
        self.log.warning("compaction.failed", tier=plan.kind.value, outcome=outcome, reason=reason)
        self.deps.events.publish(CompactionFailed(self.key, plan.kind, outcome, reason))
        # A failure is retried after the backoff, then looked at again even if no message
        # comes (a quiet channel must not rest over its threshold).  A no-op looks again
        # now: its cut is never retried, a wider one is (see Compactor._next_range).
        if outcome is Outcome.NOOP:
            self._cancel_recheck()
            self._fire_recheck()
        else:
            self._arm_recheck(self.compactor.retry_at)
        if plan.forced:
            wider = not self.compactor.only_noops_left(self.ctx.items, self.history.awaiting)
            note = forced_note(plan, outcome, reason=reason, wider=wider)
            await self.deps.deliver(Outbound(self.key, note))

    def _record(self, result: PassResult) -> CompactionRecord:
        window = self.history.settings.context_window
        elapsed = time.monotonic() - result.started
        return CompactionRecord(
            channel=self.key,
            tier=result.plan.kind,
            outcome=result.outcome,
            started=time.time() - elapsed,
            duration=elapsed,
            usage_before=result.usage_before,
            usage_after=result.tokens_after / window,
            covered=len(result.plan.covered),
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            memories=result.memories,
            reason=result.reason,
        )
