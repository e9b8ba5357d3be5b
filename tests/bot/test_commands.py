"""Admin commands shared by every platform and the console."""

from __future__ import annotations

from bot.commands import usage_bar
from bot.runtime import Runtime
from tests.helpers import inbound


def test_usage_bar_marks_every_threshold() -> None:
    """The /status bar fills to the usage and marks each threshold with a bar."""
    bar = usage_bar(0.5, {"background": 0.8, "aggressive": 0.85, "emergency": 0.95}, width=20)
    assert bar.startswith("[##########......||.|]")
    assert bar.endswith("50.0%")


async def test_status_shows_usage_and_compactions(runtime: Runtime) -> None:
    """/status reports the channel's usage, thresholds and compaction counters."""
    await runtime.submit(inbound(text="hello there"))
    await runtime.drain()
    out = await runtime.command(inbound(text="/status"), is_admin=False)
    assert out is not None
    assert "channel test:1" in out and "thresholds: background 80%" in out
    assert "compactions: background 0" in out


async def test_mutating_commands_need_an_admin(runtime: Runtime) -> None:
    """/compact and /forget are refused to non-admins and allowed to admins."""
    assert await runtime.command(inbound(text="/compact"), is_admin=False) == (
        "/compact is for admins only."
    )
    answer = await runtime.command(inbound(text="/compact"), is_admin=True)
    assert answer == "Nothing to compact yet."


async def test_history_and_unknown_commands(runtime: Runtime) -> None:
    """/history lists recent messages; an unknown /word and plain text are not commands."""
    await runtime.submit(inbound(text="first words"))
    await runtime.drain()
    history = await runtime.command(inbound(text="/history 5"), is_admin=False)
    assert history is not None and "alice: first words" in history
    for text in ("/nope", "/etc/hosts is where names live", "/r/python", "/shrug"):
        assert await runtime.command(inbound(text=text), is_admin=True) is None, text
    assert await runtime.command(inbound(text="/STATUS"), is_admin=False) is not None
    assert await runtime.command(inbound(text="just chatting"), is_admin=False) is None
