"""One branch: a fork of the channel's context that works on a task and hands back a conclusion.

Order of events, each logged with the branch's id: ``branch.started`` (by the
supervisor), ``branch.compacted`` when the pre-flight compaction had to shrink
the copy, ``branch.overflow`` / ``branch.retried`` for each forced compaction
after a context-overflow error, and ``branch.concluded`` or ``branch.failed``
(by the supervisor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from branches.context import BranchContext
from tierbot.llm.base import ChatMessage, LLMProvider
from tierbot.llm.quoting import quote_tool_result
from tierbot.tokens import TokenCounter
from workers.records import Transcript
from workers.supervisor import TaskFailed, TaskHandle
from workers.task import complete_with_overflow_retry, fit_search, unique_call_ids
from workers.tools import ToolRegistry, message_tokens

log = structlog.get_logger("tierbot.branches")

BRANCH_PROMPT = """You are now a branch of this conversation: a private fork that works on \
one task (the last message) while the channel keeps talking. Look things up with your tools if \
that helps (memory_recall, conversation_search), save durable facts with memory_save, then \
answer without calling a tool: one concise conclusion, with exact names, numbers and dates. \
It goes back to the channel, which answers the people; they never see your work."""


@dataclass(frozen=True, slots=True)
class BranchLimits:
    """The operator's thresholds, as one channel's settings resolve them."""

    context_window: int
    preflight_threshold: float
    max_reply_tokens: int
    max_turns: int
    max_overflow_retries: int


async def run_branch(
    handle: TaskHandle,
    channel_prompt: Sequence[ChatMessage],
    *,
    llm: LLMProvider,
    counter: TokenCounter,
    tools: ToolRegistry,
    limits: BranchLimits,
    transcript: Transcript | None = None,
) -> str:
    """Run the branch of ``handle`` over a copy of ``channel_prompt``; return its conclusion.

    Raises :class:`~workers.supervisor.TaskFailed` when it cannot conclude.
    """
    bound = log.bind(branch=handle.id)
    specs = tools.specs()
    ctx = BranchContext.fork(counter, channel_prompt, BRANCH_PROMPT, handle.task, specs)
    window = limits.context_window
    before = ctx.usage(window)
    dropped = ctx.preflight(limits.preflight_threshold, window, limits.max_reply_tokens)
    if dropped:
        handle.stats["preflight_dropped"] = dropped
        after = ctx.usage(window)
        # Below the threshold unless the last turn, the prompt and the tools alone exceed it.
        fits = after < limits.preflight_threshold
        (bound.info if fits else bound.warning)(
            "branch.compacted",
            dropped=dropped,
            usage_before=round(before, 3),
            usage_after=round(after, 3),
            threshold=limits.preflight_threshold,
            fits=fits,
        )
    record = _Recorder(transcript)
    await record(ctx.own[-1:], "task")

    async def force(attempt: int) -> bool:
        usage = ctx.usage(window)
        bound.warning("branch.overflow", attempt=attempt, usage=round(usage, 3))
        handle.overflowed()
        if not ctx.force():
            return False
        handle.stats["retries"] = attempt
        bound.info(
            "branch.retried",
            attempt=attempt,
            dropped=ctx.dropped,
            usage_after=round(ctx.usage(window), 3),
        )
        await record(ctx.own[-1:], "note")
        return True

    for turn in range(limits.max_turns):
        last = turn == limits.max_turns - 1
        handle.detail = f"turn {turn + 1}/{limits.max_turns}"
        completion = await complete_with_overflow_retry(
            llm,
            ctx.prompt,
            () if last else specs,
            purpose="branch",
            max_tokens=limits.max_reply_tokens,
            window=window,
            prompt_tokens=ctx.tokens,
            retries=limits.max_overflow_retries,
            compact=force,
        )
        if not completion.tool_calls or last:
            conclusion = completion.text.strip()
            await record([ChatMessage("assistant", conclusion)], "result")
            if not conclusion:
                raise TaskFailed("the branch concluded with an empty answer")
            handle.stats["turns"] = turn + 1
            return conclusion
        taken = {c.id for m in ctx.prompt() for c in m.tool_calls}
        calls = unique_call_ids(completion.tool_calls, taken, handle.id)
        turn_messages = [ChatMessage("assistant", completion.text, tool_calls=calls)]
        for call in calls:
            result = await tools.run(call)
            used = ctx.tokens() + sum(message_tokens(counter, m) for m in turn_messages)
            found = fit_search(call.name, result.text, window, used, counter)
            text = quote_tool_result(call.name, found)  # user-derived: quoted material
            turn_messages.append(ChatMessage("tool", text, tool_call_id=call.id))
        ctx.own.extend(turn_messages)
        await record(turn_messages)
    raise TaskFailed("the branch ran out of turns")  # unreachable: the last turn has no tools


class _Recorder:
    """Appends the branch's own messages (never the copied history) to its transcript."""

    def __init__(self, transcript: Transcript | None) -> None:
        self.transcript = transcript

    async def __call__(self, messages: Sequence[ChatMessage], kind: str = "message") -> Any:
        if self.transcript is not None:
            await self.transcript.add(1, messages, kind)
