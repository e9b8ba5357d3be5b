"""Whether a context window has room for a conversation once its fixed prompt is in.

Every request carries the system prompt and the tool specs: the *fixed* prompt.  The
compaction thresholds are fractions of the whole window, so a window the fixed prompt
nearly fills leaves the conversation nothing under them: with 934 fixed tokens in a
1,000-token window every message is an emergency and usage passes 100 %.  The runtime
refuses such a window when it starts, naming the key to change and the smallest window
that works.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict

from branches import BRANCH_TOOL, SPAWN_TOOL
from memory_graph import chat_memory_tools
from tierbot.config import ChannelSettings, Config, DefaultsConfig
from tierbot.errors import ConfigProblem
from tierbot.llm.base import ToolSpec
from tierbot.tokens import TokenCounter

__all__ = ["MIN_CONVERSATION_TOKENS", "fixed_tokens", "window_problems"]

#: Tokens the conversation needs under the background threshold, on top of the fixed
#: prompt: room for a few short exchanges and a summary.  A 1,500-token window whose fixed
#: prompt takes ~950 tokens (about 250 left) ran 60 turns without an emergency truncation.
MIN_CONVERSATION_TOKENS = 192


def fixed_tokens(counter: TokenCounter, system_prompt: str, tools: Sequence[ToolSpec]) -> int:
    """Tokens the system prompt and ``tools``' schemas add to every request."""
    schema = json.dumps([asdict(t) for t in tools]) if tools else ""
    return counter.count_message(system_prompt) + counter.count(schema)


def _offered(respond: str, branches: int, task_workers: int, memory: bool) -> list[ToolSpec]:
    """The tools a channel is offered (see channels.turn): none when it only listens (it
    never sends its context to the model)."""
    if respond == "listen":
        return []
    tools = list(chat_memory_tools()) if memory else []
    if branches > 0:
        tools.append(BRANCH_TOOL)
    if task_workers > 0:
        tools.append(SPAWN_TOOL)
    return tools


def _need(
    counter: TokenCounter, s: ChannelSettings | DefaultsConfig, memory: bool
) -> tuple[int, int]:
    """(fixed prompt tokens, smallest window that works) for one channel's settings."""
    tools = _offered(s.respond, s.branches.max_concurrent, s.task_workers.max_concurrent, memory)
    fixed = fixed_tokens(counter, s.system_prompt, tools)
    return fixed, math.ceil((fixed + MIN_CONVERSATION_TOKENS) / s.compaction.background_threshold)


def window_problems(config: Config, counter: TokenCounter) -> list[ConfigProblem]:
    """One problem per ``context_window`` (the default's, and each ``[[channels]]``
    override's) too small for its fixed prompt plus :data:`MIN_CONVERSATION_TOKENS`
    under its background threshold."""
    memory = config.memory.enabled
    d = config.defaults
    default = (d.context_window, *_need(counter, d, memory))
    found = [("defaults.context_window", default)]
    for i, ov in enumerate(config.channels):
        s = config.for_channel(ov.match)
        mine = (s.context_window, *_need(counter, s, memory))
        if mine != default:  # the same window and prompt as the default's: said once
            found.append((f"channels[{i}].context_window", mine))
    return [
        ConfigProblem(
            path,
            f"{window} tokens leave the conversation too little room: the system prompt "
            f"and tool specs take {fixed} of them, and the conversation needs "
            f"{MIN_CONVERSATION_TOKENS} more under the background threshold; set it to at "
            f"least {smallest} (or shorten the system prompt)",
        )
        for path, (window, fixed, smallest) in found
        if window < smallest
    ]
