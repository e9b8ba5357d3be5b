"""A scriptable fake of Discord's REST API and gateway, on 127.0.0.1.

Enough of Discord for a real :class:`discord.Client` to log in, connect,
receive messages and answer them: point ``api_base`` and ``gateway_url`` of a
:class:`~bot.adapters.discord.DiscordAdapter` at :attr:`FakeDiscord.api_base`
and :attr:`FakeDiscord.gateway_url`.  A test scripts the gateway
(:meth:`FakeDiscord.inject_message`, :meth:`FakeDiscord.send_reconnect`,
:meth:`FakeDiscord.close_gateway`, ``refuse_message_content``), shapes the
REST side (:meth:`FakeDiscord.rate_limit`) and reads back every REST request
in :attr:`FakeDiscord.requests`.

Permissions are modelled only as far as privacy goes: every guild has its
@everyone role (allowed to view channels), a channel added as private denies it
VIEW_CHANNEL, and a thread can be private.  Sharding as Discord does it: a client
that identifies as shard ``[i, n]`` gets the guilds with ``(guild_id >> 22) % n == i``
and their messages; DMs go to shard 0.  Not modelled: zlib
compression (frames are sent as text, which discord.py accepts), other
permissions, and anything a chat bot does not touch.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["FakeDiscord", "RecordedRequest"]

MESSAGE_CONTENT_INTENT = 1 << 15
VIEW_CHANNEL = 1 << 10
#: @everyone's guild permissions: view channels, send messages, read history.
EVERYONE_PERMISSIONS = VIEW_CHANNEL | (1 << 11) | (1 << 16)
_EPOCH_MS = 1_420_070_400_000


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One REST request the fake received."""

    method: str
    path: str
    json: Any
    headers: dict[str, str]
    status: int


@dataclass(slots=True)
class _Guild:
    id: str
    name: str
    channels: dict[str, str] = field(default_factory=dict)  # id -> name
    threads: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (parent, name)
    private: set[str] = field(default_factory=set)  # private channel and thread ids


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py parses a body as JSON only when the content type is exactly
    # "application/json" (aiohttp's json_response appends a charset).
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    return web.Response(body=json.dumps(data).encode(), status=status, headers=hdrs)


class FakeDiscord:
    """Discord's REST API under ``/api/v10`` and its gateway under ``/gateway``.

    Use as an async context manager (or ``start``/``close``).  ``token`` is the
    only bot token accepted; ``heartbeat_ms`` is the interval sent in HELLO.
    """

    def __init__(
        self,
        *,
        token: str = "fake-discord-token",
        bot_id: str = "900000000000000001",
        bot_name: str = "tierbot",
        heartbeat_ms: int = 1000,
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.heartbeat_ms = heartbeat_ms
        self.refuse_message_content = False
        self.requests: list[RecordedRequest] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.guilds: dict[str, _Guild] = {}
        self.messages: dict[str, list[dict[str, Any]]] = {}  # channel id -> created messages
        self._ids = itertools.count(1)
        #: The gateway connection of each shard (0 when the client does not shard).
        self._shards: dict[int, web.WebSocketResponse] = {}
        self._seqs: dict[int, int] = {}
        self.shard_count = 1
        self._ready = asyncio.Event()
        self._rate_limited = 0
        self._retry_after = 0.0
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1; after :meth:`close`, on the same port again,
        so a connected client can find the server back (an outage and its end)."""
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]

    @property
    def _ws(self) -> web.WebSocketResponse | None:
        """The first shard's connection (the only one of a client that does not shard)."""
        return self._shards[min(self._shards)] if self._shards else None

    def shard_of(self, guild_id: str | None) -> int:
        """The shard that receives ``guild_id``'s events (DMs: shard 0)."""
        return 0 if guild_id is None else (int(guild_id) >> 22) % self.shard_count

    async def close(self) -> None:
        for ws in list(self._shards.values()):
            if not ws.closed:
                await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # --- scripting ---------------------------------------------------------

    def new_id(self) -> str:
        """A fresh snowflake, increasing with every call."""
        ms = int(datetime.now(UTC).timestamp() * 1000) - _EPOCH_MS
        return str((ms << 22) + next(self._ids))

    def add_guild(
        self,
        guild_id: str,
        name: str = "guild",
        channels: dict[str, str] | None = None,
        *,
        private: tuple[str, ...] = (),
    ) -> None:
        """A guild the bot is in, with text channels ``{id: name}``; sent on IDENTIFY.

        The ``private`` channels deny @everyone the VIEW_CHANNEL permission.
        """
        self.guilds[guild_id] = _Guild(guild_id, name, dict(channels or {}), private=set(private))

    def add_thread(
        self,
        guild_id: str,
        parent_id: str,
        thread_id: str,
        name: str = "thread",
        *,
        private: bool = False,
    ) -> None:
        """An active thread under ``parent_id`` (public unless ``private``); sent in
        GUILD_CREATE."""
        self.guilds[guild_id].threads[thread_id] = (parent_id, name)
        if private:
            self.guilds[guild_id].private.add(thread_id)

    def rate_limit(self, count: int, retry_after: float = 0.2) -> None:
        """Answer the next ``count`` message posts with 429 (with ``Via``, as Discord does)."""
        self._rate_limited = count
        self._retry_after = retry_after

    def user(self, user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
        """A user payload."""
        return {
            "id": user_id,
            "username": name,
            "global_name": name,
            "discriminator": "0",
            "avatar": None,
            "bot": bot,
        }

    @property
    def bot_user(self) -> dict[str, Any]:
        return self.user(self.bot_id, self.bot_name, bot=True)

    async def wait_ready(self, within: float = 5.0) -> None:
        """Wait until a client has identified or resumed on the gateway."""
        await asyncio.wait_for(self._ready.wait(), within)

    async def inject_message(
        self,
        channel_id: str,
        content: str,
        *,
        guild_id: str | None = None,
        author: dict[str, Any] | None = None,
        mentions: list[dict[str, Any]] | None = None,
        reply_to: dict[str, Any] | None = None,
        message_type: int = 0,
    ) -> dict[str, Any]:
        """Dispatch MESSAGE_CREATE (a DM when ``guild_id`` is None); return its payload.

        ``reply_to`` is a message payload the new message replies to (for
        example one the bot posted, from :attr:`messages`).
        """
        await self.wait_ready()
        data: dict[str, Any] = {
            "id": self.new_id(),
            "channel_id": channel_id,
            "author": author or self.user("100", "alice"),
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions or [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 19 if reply_to and message_type == 0 else message_type,
            "flags": 0,
        }
        if guild_id is not None:
            data["guild_id"] = guild_id
        if reply_to is not None:
            data["message_reference"] = {
                "type": 0,
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                **({"guild_id": guild_id} if guild_id else {}),
            }
            data["referenced_message"] = reply_to
        await self._wait_shard(self.shard_of(guild_id))
        await self._dispatch("MESSAGE_CREATE", data, shard=self.shard_of(guild_id))
        return data

    async def _wait_shard(self, shard: int, within: float = 5.0) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while shard not in self._shards or self._shards[shard].closed:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"shard {shard} never connected")
            await asyncio.sleep(0.01)

    async def send_reconnect(self) -> None:
        """Send op 7 RECONNECT: the client should come back with RESUME."""
        self._ready.clear()
        ws = self._ws
        assert ws is not None, "no gateway connection"
        await ws.send_str(json.dumps({"op": 7, "d": None}))

    async def close_gateway(self, code: int) -> None:
        """Close the gateway connection with ``code`` (4004: authentication failed, ...)."""
        self._ready.clear()
        ws = self._ws
        assert ws is not None, "no gateway connection"
        await ws.close(code=code, message=b"closed by the fake")

    async def wait_for(self, predicate: Callable[[], object], within: float = 5.0) -> None:
        """Wait until ``predicate()`` is truthy; it is re-checked after every REST request."""

        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(wait(), within)

    def posted(self, channel_id: str) -> list[str]:
        """The contents of the messages the bot posted in ``channel_id``, in order."""
        return [m["content"] for m in self.messages.get(channel_id, [])]

    def calls(self, method: str, path_suffix: str) -> list[RecordedRequest]:
        """Recorded requests with ``method`` whose path ends with ``path_suffix``."""
        return [r for r in self.requests if r.method == method and r.path.endswith(path_suffix)]

    # --- gateway -----------------------------------------------------------

    async def _send(self, op: int, d: Any, t: str | None = None, *, shard: int = 0) -> None:
        ws = self._shards.get(shard) if self._shards else None
        if ws is None or ws.closed:
            raise RuntimeError(f"no gateway connection for shard {shard}")
        payload: dict[str, Any] = {"op": op, "d": d, "s": None, "t": t}
        if op == 0:
            self._seqs[shard] = self._seqs.get(shard, 0) + 1
            payload["s"] = self._seqs[shard]
        await ws.send_str(json.dumps(payload))

    async def _dispatch(self, event: str, data: Any, *, shard: int | None = None) -> None:
        await self._send(0, data, event, shard=min(self._shards) if shard is None else shard)

    def _take(self, shard: int, ws: web.WebSocketResponse) -> None:
        """``ws`` is now ``shard``'s connection (a reconnect replaces the old one)."""
        self._shards[shard] = ws

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        if self.shard_count == 1 and 0 in self._shards and not self._shards[0].closed:
            await self._shards[0].close()  # one connection per (unsharded) client
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}}))
        mine: int | None = None
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            payload = json.loads(msg.data)
            op, d = payload.get("op"), payload.get("d")
            if op == 1:
                await ws.send_str(json.dumps({"op": 11, "d": None}))
            elif op == 2:
                shard, count = (d.get("shard") or [0, 1])[:2]
                mine = int(shard)
                self.shard_count = int(count)
                await self._identify(ws, d, mine)
            elif op == 6:
                self.resumes.append(d)
                session = str(d.get("session_id", ""))
                # Session ids are "fake-session-<shard + 1>" (see _identify).
                known = session.startswith("fake-session-")
                mine = int(session.rsplit("-", 1)[1]) - 1 if known else 0
                self._take(mine, ws)
                await self._dispatch("RESUMED", {}, shard=mine)
                self._ready.set()
        if mine is not None and self._shards.get(mine) is ws:
            self._ready.clear()
        return ws

    async def _identify(self, ws: web.WebSocketResponse, d: dict[str, Any], shard: int) -> None:
        self.identifies.append(d)
        if self.refuse_message_content and d.get("intents", 0) & MESSAGE_CONTENT_INTENT:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self._take(shard, ws)
        self._seqs[shard] = 0
        guilds = [g for g in self.guilds.values() if self.shard_of(g.id) == shard]
        await self._dispatch(
            "READY",
            {
                "v": 10,
                "user": self.bot_user,
                "guilds": [{"id": g.id, "unavailable": True} for g in guilds],
                "session_id": f"fake-session-{shard + 1}",
                "resume_gateway_url": self.gateway_url,
                "application": {"id": self.bot_id, "flags": 0},
                "shard": [shard, self.shard_count],
            },
            shard=shard,
        )
        for guild in guilds:
            await self._dispatch("GUILD_CREATE", self._guild_payload(guild), shard=shard)
        self._ready.set()

    def _guild_payload(self, guild: _Guild) -> dict[str, Any]:
        return {
            "id": guild.id,
            "name": guild.name,
            "unavailable": False,
            "member_count": 2,
            "owner_id": "100",
            "roles": [
                {
                    "id": guild.id,  # @everyone's role id is the guild's
                    "name": "@everyone",
                    "permissions": str(EVERYONE_PERMISSIONS),
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "members": [],
            "presences": [],
            "voice_states": [],
            "channels": [self._channel_payload(guild, cid) for cid in guild.channels],
            "threads": [self._channel_payload(guild, tid) for tid in guild.threads],
        }

    def _channel_payload(self, guild: _Guild, channel_id: str) -> dict[str, Any]:
        if channel_id in guild.threads:
            parent, name = guild.threads[channel_id]
            return {
                "id": channel_id,
                "guild_id": guild.id,
                "parent_id": parent,
                "owner_id": "100",
                "name": name,
                "type": 12 if channel_id in guild.private else 11,
                "member_count": 2,
                "message_count": 1,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": datetime.now(UTC).isoformat(),
                    "locked": False,
                },
            }
        return {
            "id": channel_id,
            "guild_id": guild.id,
            "name": guild.channels[channel_id],
            "type": 0,
            "position": 0,
            "permission_overwrites": (
                [{"id": guild.id, "type": 0, "allow": "0", "deny": str(VIEW_CHANNEL)}]
                if channel_id in guild.private
                else []
            ),
            "nsfw": False,
            "parent_id": None,
        }

    # --- REST --------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        path = "/" + request.match_info["tail"]
        response = self._route(request.method, path, body, request.headers.get("Authorization"))
        self.requests.append(
            RecordedRequest(request.method, path, body, dict(request.headers), response.status)
        )
        async with self._changed:
            self._changed.notify_all()
        return response

    def _route(self, method: str, path: str, body: Any, auth: str | None) -> web.Response:
        if auth != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        parts = path.strip("/").split("/")
        match method, parts:
            case "GET", ["users", "@me"]:
                return _json(self.bot_user)
            case "GET", ["oauth2", "applications", "@me"]:
                return _json(self._app_info())
            case "GET", ["gateway"] | ["gateway", "bot"]:
                return _json(
                    {
                        "url": self.gateway_url,
                        "shards": 1,
                        "session_start_limit": {
                            "total": 1000,
                            "remaining": 1000,
                            "reset_after": 0,
                            "max_concurrency": 16,
                        },
                    }
                )
            case "POST", ["channels", channel_id, "messages"]:
                return self._create_message(channel_id, body or {})
            case "POST", ["channels", _, "typing"]:
                return web.Response(status=204)
            case "GET", ["channels", channel_id]:
                return self._get_channel(channel_id)
            case "POST", ["users", "@me", "channels"]:
                user_id = str((body or {}).get("recipient_id"))
                dm = {"id": f"{user_id}0", "type": 1, "recipients": [self.user(user_id, "dm-user")]}
                return _json(dm)
            case "PUT" | "DELETE", ["channels", _, "messages", _, "reactions", _, "@me"]:
                return web.Response(status=204)
        return _json({"message": "404: Not Found", "code": 0}, 404)

    def _create_message(self, channel_id: str, body: dict[str, Any]) -> web.Response:
        if self._rate_limited > 0:
            self._rate_limited -= 1
            limited = {
                "message": "You are being rate limited.",
                "retry_after": self._retry_after,
                "global": False,
            }
            return _json(limited, 429, {"Via": "1.1 google", "Retry-After": "1"})
        content = body.get("content") or ""
        if len(content) > 2000:
            error = {
                "message": "Invalid Form Body",
                "code": 50035,
                "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
            }
            return _json(error, 400)
        message: dict[str, Any] = {
            "id": self.new_id(),
            "channel_id": channel_id,
            "author": self.bot_user,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 19 if body.get("message_reference") else 0,
            "flags": 0,
        }
        if body.get("message_reference"):
            message["message_reference"] = body["message_reference"]
        self.messages.setdefault(channel_id, []).append(message)
        return _json(message)

    def _get_channel(self, channel_id: str) -> web.Response:
        for guild in self.guilds.values():
            if channel_id in guild.channels or channel_id in guild.threads:
                return _json(self._channel_payload(guild, channel_id))
        return _json({"message": "Unknown Channel", "code": 10003}, 404)

    def _app_info(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "name": self.bot_name,
            "description": "",
            "icon": None,
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": self.user("100", "owner"),
            "verify_key": "0" * 64,
            "flags": 0,
        }
