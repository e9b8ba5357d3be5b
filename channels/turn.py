"""A channel's turn: the part of the actor that answers, uses tools and delegates.

A turn builds the prompt from the live history, calls the model (tool rounds
included), stores and delivers the reply.  Branches and task workers it starts
come back later as mailbox items; :meth:`Turns.record_outcome` puts their
results into the history and :meth:`Turns.wake` answers when nobody is talking.

Only the channel's actor calls this, from inside its own task: every entry goes
through the actor's ``enter`` (which also lets the compactor look), so the actor
stays the only writer of its history.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from branches import Delegation
from channels.compaction import ChannelCompaction
from channels.deps import ChannelDeps
from channels.history import History
from channels.prompt import build_prompt
from compactor.scheduler import in_flight_ids
from memory_graph import fit_hits
from tierbot.config import RespondMode
from tierbot.errors import ContextOverflowError, LLMError, ToolError
from tierbot.events import ContextOverflow, TurnCompleted, TurnFailed
from tierbot.llm.base import ChatMessage, Completion, ToolCall, ToolSpec
from tierbot.llm.text import Overlap, names, sentences, without_author
from tierbot.messages import Message, Outbound, Role
from tierbot.tokens import MIN_REPLY_TOKENS, reply_cap
from workers.supervisor import TaskOutcome

__all__ = ["MAX_TOOL_ROUNDS", "Turns"]

MAX_TOOL_ROUNDS = 4


#: Fewer recall hits than this fitting in the window makes room first: only none, as
#: making room is an emergency cut (three made a 60-turn chat in a 1,500-token window
#: cut 5 times instead of 3).
_FEW_HITS = 1


def _hits(found: str) -> int:
    """How many hits a search's result brings (its left-out note is none)."""
    try:
        hits = json.loads(found)
    except ValueError:
        return 0
    if not isinstance(hits, list):
        return 0
    return sum(1 for h in hits if not (isinstance(h, dict) and "left_out" in h))


_MEMORY_TOOLS = ("memory_recall", "memory_save", "memory_forget")


class Turns:
    """Answers one channel's turns and records what its branches and workers bring back."""

    def __init__(
        self,
        key: str,
        deps: ChannelDeps,
        history: History,
        compaction: ChannelCompaction,
        enter: Callable[[Message], Awaitable[None]],
        on_delegated: Callable[[TaskOutcome], None],
        log: Any,
    ) -> None:
        self.key = key
        self.deps = deps
        self.history = history
        self.compaction = compaction
        self.log = log
        self.in_turn = False
        self._enter = enter
        self._mode: tuple[object, RespondMode] | None = None
        self._tools: tuple[object, list[ToolSpec]] | None = None
        self.delegation = Delegation(
            key,
            config=deps.config,
            llm=deps.llm,
            counter=deps.counter,
            store=deps.store,
            pool=deps.tasks,
            recall=deps.memory,
            writer=deps.worker.memory,
            on_done=on_delegated,
        )

    def respond_mode(self) -> RespondMode:
        """The channel's respond mode, asked at every message: resolved again only when a
        reload swaps the config in.  (The runtime's own cache keeps a few thousand
        channels, fewer than a busy process has resident; past that it is resolved anew.)"""
        config = self.deps.config()
        cached = self._mode
        if cached is None or cached[0] is not config:
            cached = self._mode = (config, self.deps.respond_mode(self.key))
        return cached[1]

    def tools(self) -> list[ToolSpec]:
        """The tools this channel's model is offered: one list, shared until the config or
        the respond mode changes (asked at every message, as the history counts the tool
        schemas); callers do not change it."""
        mode = self.respond_mode()
        resolved = self._mode  # (config, mode): a new tuple whenever the config changes
        cached = self._tools
        if cached is None or cached[0] is not resolved:
            cached = self._tools = (resolved, self._build_tools(mode))
        return cached[1]

    def _build_tools(self, mode: str) -> list[ToolSpec]:
        # A listen-only channel never calls its model: it could not delegate anything.
        listening = mode == "listen"
        memory = self.deps.memory
        if memory is None:
            return [] if listening else self.delegation.tools()
        if listening:
            return [memory.recall_tool()]
        return memory.chat_tools() + self.delegation.tools()

    def build_prompt(self) -> list[ChatMessage]:
        """The provider-neutral request for the current live context (see channels.prompt)."""
        return build_prompt(self.history.settings.system_prompt, self.history.ctx.items)

    async def append(self, msg: Message) -> Message:
        """Store one of the bot's entries and enter it into the history."""
        stored = await self.history.store(msg)
        await self._enter(stored)
        return stored

    async def answer(self, users: list[Message]) -> None:
        """One turn answering ``users`` (the newest is replied to)."""
        self.in_turn = True
        try:
            await self._turn(users)
        finally:
            self.in_turn = False

    async def _turn(self, users: list[Message]) -> None:
        last = users[-1]
        started = time.monotonic()
        handle = None
        if self.deps.progress is not None:
            handle = await self.deps.progress(self.key, last.platform_id)
        try:
            awaiting = self.history.awaiting
            waiting = set(awaiting)
            text = await self._complete()
            # A reply written while a branch it started still runs is a progress note: the
            # answer comes later, so it is never mined for memories nor indexed.
            note = {"progress": True} if awaiting - waiting else {}
            reply = await self.append(
                self.history.new(Role.ASSISTANT, text, reply_to=last.platform_id, **note)
            )
            await self.deps.deliver(Outbound(self.key, reply.text, reply_to=last.platform_id))
            await self._archive_spent_memory_traffic(reply)
            duration = time.monotonic() - started
            self.log.info(
                "turn.completed",
                messages=len(users),
                duration=round(duration, 4),
                usage=round(self.history.usage, 4),
            )
            self.deps.events.publish(TurnCompleted(self.key, duration))
        finally:
            if handle is not None:
                await handle.done()

    async def _complete(self) -> str:
        overflowed = False
        for _ in range(MAX_TOOL_ROUNDS + 1):
            cap = self._reply_cap()
            completion: Completion | None = None
            # Whom the model is answering, as its prompt shows them: a compaction landing
            # while the request is in flight may swap their messages for a summary, and a
            # memory saved from one of them must still cite it and name its author.
            users = self._turn_users()
            try:
                if cap is not None:
                    completion = await self._call_model(cap)
            except ContextOverflowError:
                self.log.warning("channel.context_overflow", usage=round(self.history.usage, 3))
            except LLMError as exc:
                self.log.error("channel.llm_failed", error=str(exc), kind=type(exc).__name__)
                self.deps.events.publish(
                    TurnFailed(self.key, f"{type(exc).__name__}: {exc}", by_model=True)
                )
                return f"Sorry, I could not reach the model ({type(exc).__name__})."
            if completion is None:  # refused as too long, or no room for a reply: cut, retry once
                self.deps.events.publish(ContextOverflow(self.key, "channel"))
                if overflowed:
                    return "Sorry, this conversation is too long for the model right now."
                overflowed = True
                await self._archive_answered_memory_traffic()
                await self.compaction.overflowed()
                continue
            if completion.usage is not None and completion.usage.input_tokens:
                self.history.ctx.report_input_tokens(completion.usage.input_tokens)
            if not completion.tool_calls:
                return completion.text or "…"
            await self._run_tools(completion.text, completion.tool_calls, users)
        return "Sorry, I got lost using my tools."

    def _reply_cap(self) -> int | None:
        """``max_reply_tokens``, cut to the room the window leaves after the prompt the next
        request sends (the live context's running total, tool specs included): a provider
        rejects a prompt plus reply cap over its window.  None, said in the log, when not
        even :data:`~tierbot.tokens.MIN_REPLY_TOKENS` fit: no request is sent then."""
        s = self.history.settings
        prompt = self.history.ctx.total
        cap = reply_cap(s.max_reply_tokens, s.context_window, prompt)
        if cap is None:
            self.log.warning(
                "channel.no_room_for_reply",
                prompt_tokens=prompt,
                context_window=s.context_window,
                min_reply_tokens=MIN_REPLY_TOKENS,
                hint="no request sent: an emergency cut makes room, or the turn answers that "
                "the conversation is too long (a smaller system prompt or a larger "
                "context_window helps)",
            )
        return cap

    async def _call_model(self, max_tokens: int) -> Completion:
        """One chat request for the current context; a check left due by the messages this
        turn answers runs while the request is in flight.

        That check is never an emergency (those run at once, before the prompt is built),
        so it leaves the live context as it is: planning a background pass (a cut over
        the whole history) overlaps the model call instead of delaying it.
        """
        request = self.deps.llm.complete(self.build_prompt(), self.tools(), max_tokens=max_tokens)
        if not self.compaction.check_due:
            return await request
        call = asyncio.ensure_future(request)
        try:
            await asyncio.sleep(0)  # the request gets under way first
            await self.compaction.check()
        except Exception:
            self.log.exception("channel.item_failed")
        except BaseException:
            call.cancel()
            raise
        return await call

    async def _run_tools(self, text: str, calls: Sequence[ToolCall], users: list[Message]) -> None:
        payload = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        shown = text or "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in calls)
        await self.append(self.history.new(Role.TOOL_CALL, shown, calls=payload))
        askers = _Askers(users)
        for c in calls:
            result = await self._tool(c, askers)
            if c.name == "branch" and result.startswith('{"started"'):
                self.history.awaiting.add(json.loads(result)["started"])
            await self.append(self.history.new(Role.TOOL_RESULT, result, call_id=c.id, tool=c.name))

    async def _tool(self, call: ToolCall, askers: _Askers) -> str:
        items = self.history.ctx.items
        if self.delegation.handles(call.name):
            origin = next((m for m in reversed(items) if m.role is Role.USER), None)
            return await self.delegation.start(
                call, self.build_prompt(), origin=origin.platform_id if origin else None
            )
        memory = self.deps.memory
        if memory is None or call.name not in _MEMORY_TOOLS:
            return json.dumps({"error": f"unknown tool {call.name!r}"})
        asker = askers.of(call)
        try:
            if call.name == "memory_recall":
                # What is in the live context is already in front of the model.
                live = {m.platform_id for m in items}
                found = await memory.recall_from_tool(
                    call.arguments,
                    channel=self.key,
                    exclude=live,
                    asker_id=asker.author_id if asker is not None else "",
                )
                fitted = self._fitted(found)
                if fitted is not found and _hits(fitted) < min(_FEW_HITS, _hits(found)):
                    # The window is nearly full: make room as an overflow would (the
                    # spent recalls of answered turns, then an emergency cut of the
                    # oldest live messages, archived), then fit again.
                    await self._archive_answered_memory_traffic()
                    await self.compaction.overflowed()
                    fitted = self._fitted(found)
                return fitted
            if asker is None:
                return json.dumps({"error": "there is no message of anyone's to save from"})
            if call.name == "memory_save":
                return await memory.save_from_chat(call.arguments, channel=self.key, source=asker)
            result = await memory.forget_from_chat(call.arguments, channel=self.key, source=asker)
            await self._set_aside_forgotten(result, asker)
            return result
        except ToolError as exc:
            return json.dumps({"error": str(exc)})
        except Exception as exc:
            # The memory graph failed (its database, its index): the turn goes on and the
            # model is told, so the person still gets an answer, one that claims nothing.
            self.log.error(
                "channel.memory_tool_failed",
                tool=call.name,
                error=f"{type(exc).__name__}: {exc}",
            )
            kind = type(exc).__name__
            if call.name == "memory_forget":
                # A forget removes its matches one by one: some may be gone already.
                outcome = "part of it may be forgotten, the rest is not: ask again"
            else:
                outcome = "nothing was changed"
            return json.dumps({"error": f"the memory store failed ({kind}); {outcome}"})

    def _fitted(self, found: str) -> str:
        """A recall's hits, as many as the window holds under its emergency threshold
        (see :func:`memory_graph.fit_hits`)."""
        s = self.history.settings
        # Room for the shortest reply too: answering must not itself cross the threshold
        # (a reply of 5 tokens after hits that filled it to the last token did).
        room = (
            int(s.context_window * s.compaction.emergency_threshold)
            - self.history.ctx.total
            - MIN_REPLY_TOKENS
        )
        # (What the last reply showed goes last: "what else?" wants the rest.)
        shown = next(
            (m.text for m in reversed(self.history.ctx.items) if m.role is Role.ASSISTANT),
            "",
        )
        fitted = fit_hits(
            found, room, self.deps.counter.count_message, channel=self.key, shown=shown
        )
        if fitted is not found:
            self.log.info("channel.recall_trimmed", room=room)
        return fitted

    async def _archive_spent_memory_traffic(self, reply: Message) -> None:
        """Move the memory-tool exchanges of earlier turns out of the live context.

        A ``memory_save`` or ``memory_recall`` exchange has done its work once its turn
        is answered: the reply says what was saved or found, the memory graph holds it,
        and the call and its JSON result would otherwise fill the window until a
        compaction (16 messages of a newcomer's chat made 52 live messages, 20 of them
        this traffic).  The newest turn's exchanges stay in view, so the model sees what
        it just did; those of turns answered before it are archived in the store (kept,
        as compacted messages are), a call with its results.  Exchanges that also
        delegate (a branch, a task worker) stay, and so does any exchange an in-flight
        compaction covers: its summary takes it.
        """
        items = self.history.ctx.items
        at = next((i for i in range(len(items) - 1, -1, -1) if items[i].id == reply.id), None)
        if at is None:
            return
        before = next((i for i in range(at - 1, -1, -1) if items[i].role is Role.ASSISTANT), -1)
        if self.history.usage >= self.history.settings.compaction.background_threshold:
            # A window this full needs the room more than the model needs to see what
            # it just did: the reply says it, and a compaction would otherwise take the
            # reply itself first ("what else?" then finds no list to continue).
            before = at
        await self._archive_memory_traffic(before)

    async def _archive_answered_memory_traffic(self) -> None:
        """Move the memory-tool exchanges of every turn already answered out of the live
        context, the newest one's too: the window is too full for this turn, and what
        they found is in the memory graph and in the replies that said it (a "what
        else?" right after "what do you know about me?" found no room for its recall
        beside the list's own, and the emergency cut could not take them: they were the
        newest messages)."""
        items = self.history.ctx.items
        last = next(
            (i for i in range(len(items) - 1, -1, -1) if items[i].role is Role.ASSISTANT), -1
        )
        await self._archive_memory_traffic(last)

    async def _archive_memory_traffic(self, before: int) -> None:
        """Archive the memory-only tool exchanges among the live items up to ``before``."""
        items = self.history.ctx.items
        exchanges: dict[int, set[int]] = {}  # a call message's id -> its and its results' ids
        owner: dict[str, int] = {}  # a call's id -> its message's id
        for m in items[: before + 1]:
            if m.role is Role.TOOL_CALL:
                calls = m.meta.get("calls", [])
                if calls and all(c.get("name") in _MEMORY_TOOLS for c in calls):
                    exchanges[m.id] = {m.id}
                    owner.update((str(c.get("id")), m.id) for c in calls)
            elif m.role is Role.TOOL_RESULT and str(m.meta.get("call_id")) in owner:
                exchanges[owner[str(m.meta.get("call_id"))]].add(m.id)
        busy = in_flight_ids(p.covered for p in self.compaction.compactor.ranges)
        ids = sorted(i for ex in exchanges.values() if not ex & busy for i in ex)
        if not ids:
            return
        try:
            await self.deps.store.swap(self.key, ids, None)
        except Exception as exc:
            # Kept live: a compaction archives them later, with the rest of their turn.
            self.log.warning("channel.tool_traffic_kept", error=f"{type(exc).__name__}: {exc}")
            return
        self.history.ctx.replace(ids, None)

    async def set_aside_repeating(
        self, said: str, author_id: str, *, spare_newest: bool = False
    ) -> list[str]:
        """Take what repeats ``said`` (a forgotten memory of ``author_id``'s) out of the
        live context; return the platform ids of the messages that said it.

        A forget removes a memory, but the message it came from, the bot's "Noted: ..."
        and an answer that quoted it would still be in front of the model, and a summary
        written before the forget still says it.  So:

        - the exchanges that repeat it (what people said since the bot's previous reply,
          the tool traffic, the replies) are archived in the store: kept, as compacted
          messages are, and shown by ``/history --all``, never deleted.  An answer goes
          with its question, so no question is left unanswered;
        - the sentences of live summaries that repeat it are cut from them.

        Something repeats the memory when it names the same thing with every number the
        memory gives (:func:`tierbot.llm.text.names`); a question about it does not.  An
        exchange where someone else spoke stays (theirs is not forgotten, as with a forget
        asked in words), and so does one an in-flight compaction covers (its summary takes
        it), one that started a branch or worker still running, and, with
        ``spare_newest``, the exchange being answered (a forget asked in words).
        """
        movable = self._movable()
        exchanges = _exchanges(self.history.ctx.items)
        if spare_newest and exchanges:
            exchanges.pop()
        gone: list[Message] = []
        said_it: list[str] = []
        cut: list[Message] = []
        for exchange in exchanges:
            if exchange[0].role is Role.SUMMARY:
                if movable(exchange) and (fewer := _without(exchange[0], said)):
                    cut.append(fewer)
                continue
            if any(m.role is Role.USER and m.author_id != author_id for m in exchange):
                continue  # someone else spoke in it: theirs is not forgotten
            repeats = [
                m for m in exchange if m.role in (Role.USER, Role.ASSISTANT) and names(said, m.text)
            ]
            if repeats and movable(exchange):
                gone += exchange
                said_it += [m.platform_id for m in repeats]
        await self._archive(gone, cut)
        return said_it

    async def set_aside_author(self, author_id: str) -> int:
        """Take what ``author_id`` said out of the live context after their messages were
        forgotten (``/forget --author``): their exchanges with the bot whole, and their
        own messages from exchanges where others spoke, and others' exchanges whose answer
        quoted them.  Archived, not deleted; the same exchanges stay as in
        :meth:`set_aside_repeating`.  Returns how many of their messages left."""
        movable = self._movable()
        said = [
            m.text
            for m in self.history.ctx.items
            if m.role is Role.USER and m.author_id == author_id
        ]
        gone: list[Message] = []
        n = 0
        for exchange in _exchanges(self.history.ctx.items):
            people = [m for m in exchange if m.role is Role.USER]
            theirs = [m for m in people if m.author_id == author_id]
            # The bot's answer to someone else that quoted them goes with its question.
            quoted = any(
                m.role is Role.ASSISTANT and any(names(t, m.text) for t in said) for m in exchange
            )
            if (theirs or quoted) and movable(exchange):
                gone += exchange if quoted or len(theirs) == len(people) else theirs
                n += len(theirs)
        await self._archive(gone, [])
        return n

    def _movable(self) -> Callable[[Sequence[Message]], bool]:
        """Whether an exchange may leave the live context now: not while a compaction in
        flight covers it (its summary takes it), nor while a branch or worker it started
        runs (its result comes back to it)."""
        busy = in_flight_ids(p.covered for p in self.compaction.compactor.ranges)
        running = self.delegation.running

        def movable(exchange: Sequence[Message]) -> bool:
            if any(m.id in busy for m in exchange):
                return False
            return not running or not any(
                self.delegation.handles(str(c.get("name")))
                for m in exchange
                for c in m.meta.get("calls", [])
            )

        return movable

    async def _archive(self, gone: Sequence[Message], cut: Sequence[Message]) -> None:
        """Archive ``gone`` out of the live context and rewrite the summaries in ``cut``
        (recounted), in one transaction."""
        if not gone and not cut:
            return
        updates = [m.with_(tokens=self.deps.counter.count_message(m.text)) for m in cut]
        ids = [m.id for m in gone]
        await self.deps.store.swap(self.key, ids, None, updates=updates)
        for m in updates:
            self.history.ctx.update(m)
        self.history.ctx.replace(ids, None)

    async def _set_aside_forgotten(self, result: str, asker: Message) -> None:
        """After a forget asked in words: what it forgot of the asker's leaves the live
        context too (see :meth:`set_aside_repeating`).  A store that refuses leaves it
        in view, with a warning: the forget itself stands."""
        try:
            forgotten = json.loads(result).get("forgotten") or []
        except (ValueError, AttributeError):
            return
        for item in forgotten:
            if not isinstance(item, dict):
                continue
            said = without_author(str(item.get("content", "")))
            try:
                await self.set_aside_repeating(said, asker.author_id, spare_newest=True)
            except Exception as exc:
                self.log.warning(
                    "channel.forgotten_kept_live", error=f"{type(exc).__name__}: {exc}"
                )
                return

    def _turn_users(self) -> list[Message]:
        """The people's messages this turn answers: those since the bot's last reply, else
        the newest one."""
        items = self.history.ctx.items
        last_reply = max((i for i, m in enumerate(items) if m.role is Role.ASSISTANT), default=-1)
        turn = [m for m in items[last_reply + 1 :] if m.role is Role.USER]
        return turn or [m for m in items if m.role is Role.USER][-1:]

    # -- branches and workers -----------------------------------------------------------------

    async def record_outcome(self, outcome: TaskOutcome, *, live: bool) -> bool:
        """Put a finished branch or worker into the history; True if a turn should follow.

        A branch's conclusion (or failure) enters as a tool call/result pair the
        model reads in its next turn; a worker's result is posted to the channel.
        ``live=False`` (the actor has stopped) writes to the store only.
        """
        new = self.history.new
        if outcome.kind == "branch":
            call = {"id": outcome.id, "name": "branch_result", "arguments": {"id": outcome.id}}
            entries = [
                new(Role.TOOL_CALL, f"branch_result({outcome.id})", calls=[call]),
                new(
                    Role.TOOL_RESULT,
                    outcome.as_tool_result(),
                    call_id=outcome.id,
                    tool="branch_result",
                ),
            ]
        else:
            entries = [
                new(
                    Role.ASSISTANT,
                    outcome.report(),
                    reply_to=outcome.origin,
                    worker=outcome.id,
                    status=outcome.status,
                )
            ]
        for entry in entries:
            if live:
                await self.append(entry)
            else:
                await self.deps.store.append(entry)
        self.history.awaiting.discard(outcome.id)  # only now may a cut take the whole exchange
        if outcome.kind == "worker" and live:
            await self.deps.deliver(Outbound(self.key, outcome.report(), reply_to=outcome.origin))
        return live and outcome.kind == "branch" and outcome.status != "cancelled"

    async def wake(self, origin: str | None) -> None:
        """A branch came back while nobody was talking: answer the message that started it."""
        if self.respond_mode() == "listen":
            return
        users = [m for m in self.history.ctx.items if m.role is Role.USER]
        asked = next((m for m in reversed(users) if m.platform_id == origin), None)
        if asked is None and not users:
            return
        await self.answer([asked or users[-1]])


class _Askers:
    """Which message each memory call of one batch acts for: of the people's messages the
    turn answers (a burst may hold several people's), the one the call's words match
    best; else the newest.  Its author is the memory's author, and the only one a forget
    may touch.  The messages are weighed once per batch, not once per call."""

    __slots__ = ("_overlap", "turn")

    def __init__(self, turn: list[Message]) -> None:
        self.turn = turn
        self._overlap: Overlap | None = None

    def of(self, call: ToolCall) -> Message | None:
        turn = self.turn
        if len(turn) <= 1:
            return turn[0] if turn else None
        if self._overlap is None:
            self._overlap = Overlap([m.text for m in turn])
        words = str(call.arguments.get("content") or call.arguments.get("query") or "")
        scores = self._overlap.scores(words)
        # Later wins ties: the newest message is the one most likely being answered.
        return turn[max(range(len(turn)), key=lambda i: (scores[i], i))]


def _exchanges(items: Sequence[Message]) -> list[list[Message]]:
    """The live messages as exchanges: people's messages, then the bot's tool traffic and
    replies, up to the next person's message after a reply (a summary stands alone)."""
    out: list[list[Message]] = []
    for m in items:
        if (
            not out
            or m.role not in _EXCHANGE_ROLES
            or out[-1][-1].role not in _EXCHANGE_ROLES
            or (m.role is Role.USER and any(x.role is Role.ASSISTANT for x in out[-1]))
        ):
            out.append([])
        out[-1].append(m)
    return out


_EXCHANGE_ROLES = (Role.USER, Role.ASSISTANT, Role.TOOL_CALL, Role.TOOL_RESULT)


def _without(summary: Message, said: str) -> Message | None:
    """``summary`` without its sentences that repeat ``said``; None if none does."""
    kept, cut = [], False
    for line in summary.text.split("\n"):
        parts = sentences(line)
        keep = [p for p in parts if not names(said, p)]
        cut = cut or len(keep) < len(parts)
        if keep or not parts:
            kept.append(" ".join(keep))
    return summary.with_(text="\n".join(kept)) if cut else None
