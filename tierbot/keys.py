"""Channel keys: the one place that knows how a conversation's key is spelled.

A key names one conversation (a channel actor)::

    discord:<guild>:<channel>            a Discord guild channel
    discord:<guild>:<channel>:<thread>   a thread in it
    discord:dm:<user>                    a Discord DM
    slack:<team>:<channel>               a Slack channel (ids starting with D are DMs)
    slack:<team>:<channel>:<thread_ts>   a thread in it
    console:<name>, replay:<name>, ...   anything else: its own workspace

:class:`ChannelKey` parses a key once; code asks it for the platform, the
workspace memories are shared in, whether it is a DM, the thread, and its
prefixes, instead of splitting strings on ``":"`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ChannelKey", "workspace_of"]

_PLATFORMS = ("discord", "slack")


@dataclass(frozen=True, slots=True)
class ChannelKey:
    """A parsed channel key; ``str(key)`` gives back exactly the text it was parsed from."""

    raw: str
    parts: tuple[str, ...]

    @classmethod
    def parse(cls, key: str) -> ChannelKey:
        """Any string is a key; only ``discord:`` and ``slack:`` keys have structure."""
        return cls(key, tuple(key.split(":")))

    def __str__(self) -> str:
        return self.raw

    @property
    def platform(self) -> str:
        """``discord``, ``slack``, ``console`` ...: the text before the first colon."""
        return self.parts[0]

    @property
    def structured(self) -> bool:
        """A Discord or Slack key with at least a workspace and a channel."""
        return len(self.parts) >= 3 and self.platform in _PLATFORMS

    @property
    def is_dm(self) -> bool:
        """A direct message: ``discord:dm:<user>``, or a Slack channel id starting with D."""
        if not self.structured:
            return False
        return self.parts[1] == "dm" or (self.platform == "slack" and self.parts[2].startswith("D"))

    @property
    def workspace(self) -> str:
        """The key memories are shared under: the guild or team; a DM, or an
        unstructured key, is its own workspace (never shared with others)."""
        if not self.structured:
            return self.raw
        if self.is_dm:
            return ":".join(self.parts[:3])
        return ":".join(self.parts[:2])

    @property
    def well_formed(self) -> bool:
        """A Discord or Slack key with a workspace, a channel id and at most a thread."""
        return self.structured and len(self.parts) in (3, 4) and self.parts[2] != ""

    @property
    def workspace_id(self) -> str:
        """The guild or team id (``dm`` for a Discord DM); empty for an unstructured key."""
        return self.parts[1] if self.structured else ""

    @property
    def target(self) -> str:
        """Where a reply is posted: the thread when there is one, else the channel."""
        return self.thread or self.channel

    @property
    def channel(self) -> str:
        """The platform's channel id (the user id of a Discord DM); the raw key otherwise."""
        return self.parts[2] if self.structured else self.raw

    @property
    def thread(self) -> str | None:
        """The thread id (Discord) or thread ts (Slack), or None outside a thread."""
        return self.parts[3] if self.structured and len(self.parts) == 4 else None

    def prefixes(self) -> tuple[str, ...]:
        """The key's colon-prefixes, shortest first (``a``, ``a:b``, ``a:b:c``)."""
        return tuple(":".join(self.parts[:n]) for n in range(1, len(self.parts) + 1))


def workspace_of(channel_key: str) -> str:
    """The workspace ``channel_key`` belongs to, for memory scoping (see :class:`ChannelKey`)."""
    return ChannelKey.parse(channel_key).workspace
