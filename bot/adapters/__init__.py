"""Chat platform adapters behind one protocol (console built in; Discord and Slack opt-in)."""

from bot.adapters.base import (
    Adapter,
    Capabilities,
    Delivery,
    Dispatcher,
    Outbound,
    ProgressHandle,
    route_inbound,
)
from bot.adapters.split import split_message

__all__ = [
    "Adapter",
    "Capabilities",
    "Delivery",
    "Dispatcher",
    "Outbound",
    "ProgressHandle",
    "route_inbound",
    "split_message",
]
