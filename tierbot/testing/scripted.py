"""A scripted fake LLM for tests and benchmarks: controllable replies, latency and failures.

Shipped in the package (like httpx's MockTransport) so every test drives the
real channel and compaction code through the ordinary provider seam.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tierbot.llm.base import ChatMessage, Completion, Purpose, ToolSpec, Usage
from tierbot.llm.quoting import unquote
from tierbot.llm.transcript import parse_transcript

Step = Completion | BaseException | Callable[[Sequence[ChatMessage]], Completion]


@dataclass(slots=True)
class Call:
    """One recorded request."""

    purpose: Purpose
    messages: list[ChatMessage]
    tools: list[str]
    max_tokens: int


def default_summary(messages: Sequence[ChatMessage]) -> Completion:
    """A tiny deterministic summary naming how many transcript entries it covers."""
    transcript = next((m.content for m in reversed(messages) if m.role == "user"), "")
    entries = parse_transcript(unquote(transcript))
    span = f"[{entries[0].id}] to [{entries[-1].id}]" if entries else "nothing"
    return Completion(text=f"Summary of {len(entries)} messages ({span}).")


@dataclass
class ScriptedLLM:
    """Replies from per-purpose scripts; falls back to a default reply when a script is empty.

    ``latency[purpose]`` delays every call of that purpose; ``gate[purpose]``, when
    set, makes calls of that purpose wait until the event is set; ``tickets[purpose]``,
    when set, makes each call of that purpose take one ticket (calls wait in order until
    the test releases one), so a test can finish calls one at a time; ``hold[n]`` makes
    the n-th call (counting from 0, any purpose) wait until that event is set, so a test
    can finish a later call before an earlier one.
    """

    chat_reply: str = "ok"
    latency: dict[str, float] = field(default_factory=dict)
    gate: dict[str, asyncio.Event] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    tickets: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    hold: dict[int, asyncio.Event] = field(default_factory=dict)
    name: str = "scripted"
    _scripts: dict[str, deque[Step]] = field(default_factory=dict)

    def push(self, purpose: Purpose, *steps: Step) -> None:
        """Queue ``steps`` for calls of ``purpose``: a Completion, an exception to raise,
        or a function of the messages returning a Completion."""
        self._scripts.setdefault(purpose, deque()).extend(steps)

    def count(self, purpose: Purpose) -> int:
        return sum(1 for c in self.calls if c.purpose == purpose)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        self.calls.append(Call(purpose, list(messages), [t.name for t in tools], max_tokens))
        held = self.hold.get(len(self.calls) - 1)
        delay = self.latency.get(purpose, 0.0)
        if delay:
            await asyncio.sleep(delay)
        gate = self.gate.get(purpose)
        if gate is not None:
            await gate.wait()
        tickets = self.tickets.get(purpose)
        if tickets is not None:
            await tickets.acquire()
        if held is not None:
            await held.wait()
        script = self._scripts.get(purpose)
        step: Step
        if script:
            step = script.popleft()
        elif purpose == "summary":
            step = default_summary
        else:
            step = Completion(text=self.chat_reply)
        if isinstance(step, BaseException):
            raise step
        result = step(messages) if callable(step) else step
        if result.usage is None:
            result = Completion(result.text, result.tool_calls, Usage(0, 0), result.stop_reason)
        return result

    async def aclose(self) -> None:
        return None
