"""A small real Dispatcher for adapter tests: records submissions, answers addressed ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bot.adapters.base import Adapter, Delivery, Outbound
from tierbot.messages import InboundMessage


class RecordingDispatcher:
    """A small real Dispatcher: records what it gets and answers addressed messages.

    Each answer shows progress while it "works" for ``work_seconds``, then
    replies through ``adapter.send`` with ``reply(message)``.  ``/status`` is
    an admin command; other text starting with ``/`` is not a command.
    """

    def __init__(
        self, reply: Callable[[InboundMessage], str] | None = None, work_seconds: float = 0.0
    ):
        self.adapter: Adapter | None = None
        self.reply = reply or (lambda m: f"echo: {m.text}")
        self.work_seconds = work_seconds
        self.submitted: list[InboundMessage] = []
        self.commands: list[tuple[InboundMessage, bool]] = []
        self.replies: list[list[str]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, message: InboundMessage) -> Delivery:
        self.submitted.append(message)
        if message.addressed:
            task = asyncio.create_task(self._answer(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return Delivery(accepted=True)

    async def _answer(self, message: InboundMessage) -> None:
        assert self.adapter is not None
        handle = await self.adapter.progress(message.channel, message.platform_id)
        try:
            await asyncio.sleep(self.work_seconds)
            out = Outbound(message.channel, self.reply(message), reply_to=message.platform_id)
            self.replies.append(await self.adapter.send(out))
        finally:
            await handle.done()

    async def command(self, message: InboundMessage, *, is_admin: bool) -> str | None:
        if not message.text.startswith("/status"):
            return None
        self.commands.append((message, is_admin))
        return "status: all good" if is_admin else "only admins may run /status"

    async def settle(self) -> None:
        """Wait for every answer in flight."""
        while self._tasks:
            await asyncio.gather(*self._tasks)
