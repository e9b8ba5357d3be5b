"""The request a channel sends its model, built from its live context.

Roles, and why:

* the operator's system prompt is the only ``system`` message;
* a summary, a truncation marker or a stored note is quoted material: a
  ``user`` message holding one escaped ``<quoted>`` block (summaries repeat what
  people said, so they must never speak with the operator's voice);
* people's messages are ``user`` messages with their speaker's name;
* the bot's replies and tool calls are ``assistant`` messages; a tool result is a
  ``tool`` message whose text is quoted too (``<memory>`` for recalled memories,
  ``<quoted>`` for anything else, branch conclusions included).

Every tool call is followed by its results and nothing else, whatever order the
store holds them in; a call without a stored result, or a result without its
call, is left out: providers reject both.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierbot.llm.base import ChatMessage, ToolCall
from tierbot.llm.quoting import quote, quote_tool_result
from tierbot.messages import Message, Role

__all__ = ["build_prompt"]

_MATERIAL = {Role.SUMMARY: "summary", Role.MARKER: "note", Role.SYSTEM: "note"}


def _result(m: Message) -> ChatMessage:
    text = quote_tool_result(str(m.meta.get("tool", "tool")), m.text)
    return ChatMessage("tool", text, tool_call_id=m.meta.get("call_id"))


def build_prompt(system_prompt: str, items: Sequence[Message]) -> list[ChatMessage]:
    """The provider-neutral request for the live context ``items`` (in context order)."""
    # Each result belongs to the nearest call before it with its id (ids repeat across turns).
    owner: dict[str, int] = {}
    results: dict[int, list[Message]] = {}
    for i, m in enumerate(items):
        if m.role is Role.TOOL_CALL:
            owner.update((str(c.get("id")), i) for c in m.meta.get("calls", []))
        elif m.role is Role.TOOL_RESULT and str(m.meta.get("call_id")) in owner:
            results.setdefault(owner[str(m.meta["call_id"])], []).append(m)
    out = [ChatMessage("system", system_prompt)]
    for i, m in enumerate(items):
        if m.role in _MATERIAL:
            out.append(ChatMessage("user", quote(m.text, source=_MATERIAL[m.role])))
        elif m.role is Role.USER:
            out.append(
                ChatMessage(
                    "user", m.text, name=m.author_name or None, sent_at=m.ts, tokens=m.tokens
                )
            )
        elif m.role is Role.ASSISTANT:
            out.append(ChatMessage("assistant", m.text, tokens=m.tokens))
        elif m.role is Role.TOOL_CALL:
            mine = results.get(i, [])
            ids = {str(r.meta["call_id"]) for r in mine}
            calls = tuple(ToolCall(**c) for c in m.meta.get("calls", []) if str(c.get("id")) in ids)
            if calls:
                out.append(ChatMessage("assistant", m.text, tool_calls=calls))
                out.extend(_result(r) for r in mine)
        # A TOOL_RESULT is sent right after its call above; one whose call is gone is dropped.
    return out
