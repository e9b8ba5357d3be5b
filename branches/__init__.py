"""Branches: forks of a channel's context that think and hand one conclusion back.

Public surface::

    delegation = Delegation(key, config=..., llm=..., counter=..., store=..., pool=...,
                            on_done=lambda outcome: mailbox.put_nowait(...))
    tools = delegation.tools()            # offer `branch` and `spawn_worker`
    result = await delegation.start(call, actor.build_prompt(), origin=user_message_id)
    await delegation.aclose()             # cancel every branch and worker of the channel

A branch compacts its own copy before its first call when it is at or above
``branch_preflight_threshold`` and force-compacts (at most ``[defaults.branches]
max_overflow_retries`` times) on a context-overflow error; task workers are
:mod:`workers.task`'s.

This floor owns forks of a channel's context and the delegation tools. It may import
workers, compactor, memory_graph and the kernel (tierbot); never channels or bot.
"""

from branches.branch import BRANCH_PROMPT, BranchLimits, run_branch
from branches.context import BranchContext, request_tokens
from branches.delegation import BRANCH_TOOL, SPAWN_TOOL, Delegation

__all__ = [
    "BRANCH_PROMPT",
    "BRANCH_TOOL",
    "SPAWN_TOOL",
    "BranchContext",
    "BranchLimits",
    "Delegation",
    "request_tokens",
    "run_branch",
]
