"""The adapter seam: how a chat platform plugs into tierbot.

An adapter turns platform payloads into :class:`~tierbot.messages.InboundMessage`
at its edge and hands them to a :class:`Dispatcher`; the runtime answers
through :meth:`Adapter.send`.  The core never sees a platform dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tierbot.messages import Delivery, InboundMessage, Outbound, ProgressHandle, too_long_reply


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a platform supports, so the core can adapt its replies."""

    max_message_chars: int
    threads: bool = False
    typing_indicator: bool = False
    reactions: bool = False
    markdown: bool = True


class Dispatcher(Protocol):
    """What an adapter talks to: the runtime.

    ``submit`` returns once the message is durably stored (or was a duplicate),
    so an adapter may acknowledge it to the platform after it returns.
    ``command`` runs a known command (``/status`` ...) and returns its text, or
    None when ``text`` is not one (it is then conversation).
    """

    async def submit(self, message: InboundMessage) -> Delivery: ...

    async def command(self, message: InboundMessage, *, is_admin: bool) -> str | None: ...


@runtime_checkable
class Adapter(Protocol):
    """A chat platform connection.

    ``start`` is idempotent and safe to call again after a disconnect; ``stop``
    disconnects and releases everything ``start`` acquired; ``send`` delivers one
    reply (splitting it to the platform's limit); ``progress`` shows the bot is
    working on ``channel`` until the returned handle's ``done`` is called.
    """

    name: str
    capabilities: Capabilities

    async def start(self, dispatcher: Dispatcher) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> list[str]: ...

    async def progress(self, channel: str, message_id: str | None) -> ProgressHandle: ...

    def connected(self) -> bool: ...


async def route_inbound(
    adapter: Adapter,
    dispatcher: Dispatcher,
    message: InboundMessage,
    *,
    is_admin: bool,
    log: Any,
) -> Delivery | None:
    """The one path every adapter takes once a message passed its allow-lists.

    A message *addressed* to the bot (a mention, a reply to the bot, a DM) goes to
    ``dispatcher.command`` first; when that returns text (a known command), the
    text is sent back as a reply and the message is *not* submitted as
    conversation (returns None).  Everything else is conversation and is
    submitted, stored, and answered per the channel's respond mode: an unknown
    ``/word`` ("/etc/hosts is ...", "/r/python"), and a known command said in a
    channel without addressing the bot (people talk about ``/status`` too).  A
    refusal is logged with the runtime's reason, never dropped silently.  ``log``
    is the adapter's bound structlog logger.
    """
    if message.addressed:
        reply = await dispatcher.command(message, is_admin=is_admin)
        if reply is not None:
            log.info(
                "command.answered",
                channel=message.channel,
                command=message.text.split(maxsplit=1)[0],
                is_admin=is_admin,
            )
            await adapter.send(Outbound(message.channel, reply, reply_to=message.platform_id))
            return None
    delivery = await dispatcher.submit(message)
    if delivery.too_long and message.addressed:
        await adapter.send(
            Outbound(
                message.channel,
                too_long_reply(len(message.text), delivery.limit),
                reply_to=message.platform_id,
            )
        )
    if not delivery.accepted:
        log.info(
            "message.ignored",
            channel=message.channel,
            platform_id=message.platform_id,
            reason=f"runtime refused it: {delivery.reason}",
        )
    return delivery
