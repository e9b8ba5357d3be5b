"""The live context's running token total."""

from __future__ import annotations

from channels.context import LiveContext
from tierbot.messages import Message, Role


def m(i: int, tokens: int = 10, role: Role = Role.USER) -> Message:
    return Message("c", f"p{i}", role, "x", tokens=tokens, id=i, pos=float(i))


def test_running_total_tracks_appends_and_replacements() -> None:
    """Usage is the running sum of message tokens plus the fixed prompt, kept exact."""
    ctx = LiveContext([m(1), m(2)], fixed_tokens=5)
    assert ctx.total == 25
    ctx.append(m(3, 7))
    assert ctx.total == 32
    removed = ctx.replace([1, 2], m(0, 4, Role.SUMMARY).with_(id=10, pos=1.0))
    assert [x.id for x in removed] == [1, 2]
    assert ctx.total == 5 + 7 + 4
    assert [x.id for x in ctx.items] == [10, 3]
    assert ctx.usage(100) == 0.16


def test_provider_reported_tokens_raise_usage_until_compaction() -> None:
    """When the provider counts more than we do, usage follows the larger number."""
    ctx = LiveContext([m(1, 50)])
    ctx.report_input_tokens(80)
    assert ctx.total == 80
    ctx.append(m(2, 10))
    assert ctx.total == 90
    ctx.replace([1], None)
    assert ctx.total == 10
