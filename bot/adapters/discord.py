"""The Discord adapter: discord.py on the gateway, replies over REST.

Channel keys: ``discord:<guild>:<channel>`` for a guild channel,
``discord:<guild>:<channel>:<thread>`` for a thread (each thread is its own
conversation) and ``discord:dm:<user>`` for a direct message.

discord.py reconnects and resumes the gateway by itself (logged here as
``discord.gateway_*`` events) and honours REST rate limits (a 429 waits its
``retry_after`` and retries).  It reads the REST base and the gateway URL from
class attributes, so ``api_base`` and ``gateway_url`` are process-wide: two
adapters with different endpoints cannot run in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import discord
import structlog
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from bot.adapters.base import Capabilities, Dispatcher, Outbound, route_inbound
from bot.adapters.split import split_message
from tierbot.config import DiscordAdapterConfig
from tierbot.errors import AdapterError, FatalAdapterError
from tierbot.keys import ChannelKey
from tierbot.messages import InboundMessage

__all__ = ["INTENT_HELP", "DiscordAdapter"]

log = structlog.get_logger("tierbot.adapters.discord")

MAX_MESSAGE_CHARS = 2000
INTENT_HELP = "Developer Portal -> Bot -> Privileged Gateway Intents -> Message Content Intent"
_TOKEN_HELP = "Developer Portal (https://discord.com/developers/applications) -> Bot -> Reset Token"
# Gateway close codes retrying cannot fix: authentication failed (4004), invalid shard or
# sharding required (4010, 4011), invalid API version (4012), invalid or disallowed intents.
_FATAL_CLOSE_CODES = {4004, 4010, 4011, 4012, 4013, 4014}
_CONVERSATION_TYPES = (discord.MessageType.default, discord.MessageType.reply)
# Model output must never ping @everyone or a role; users and the replied-to author are fine.
_ALLOWED_MENTIONS = discord.AllowedMentions(
    everyone=False, roles=False, users=True, replied_user=True
)
_MENTION = re.compile(r"<@!?(?P<user>\d+)>|<@&(?P<role>\d+)>|<#(?P<channel>\d+)>")

_DEFAULT_ENDPOINTS = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
_endpoint_users: dict[int, tuple[str, str]] = {}
# tierbot never joins voice: spare the log discord.py's hints about voice libraries.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False


class DiscordAdapter:
    """A Discord bot connection (see the module docstring for channel keys).

    ``environ`` supplies the token named by ``config.token_env``.
    ``guild_ready_timeout`` is how long discord.py waits for more guilds after
    the last one before it is ready; ``ready_timeout`` bounds ``start``;
    ``typing_interval`` is how often the typing indicator is refreshed (Discord
    shows it for 10 s).
    """

    name = "discord"
    capabilities = Capabilities(
        max_message_chars=MAX_MESSAGE_CHARS, threads=True, typing_indicator=True, reactions=True
    )

    def __init__(
        self,
        config: DiscordAdapterConfig,
        *,
        environ: Mapping[str, str] = os.environ,
        guild_ready_timeout: float = 2.0,
        ready_timeout: float = 60.0,
        typing_interval: float = 8.0,
    ) -> None:
        self.config = config
        self._environ = environ
        self._guild_ready_timeout = guild_ready_timeout
        self._ready_timeout = ready_timeout
        self._typing_interval = typing_interval
        self._client: _Client | None = None
        self._task: asyncio.Task[BaseException | None] | None = None
        self._dispatcher: Dispatcher | None = None
        self._lifecycle = asyncio.Lock()
        self._gateway_up = False
        self._dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self._typing: dict[str, set[_Typing]] = {}
        self._channel_locks = _KeyedLocks()
        self._log = log.bind(adapter=self.name)

    # --- lifecycle ---------------------------------------------------------

    async def start(self, dispatcher: Dispatcher) -> None:
        """Log in and connect; return once the gateway is ready.

        Idempotent: a second call while connected does nothing, a call after
        the connection died (for example a fatal close) connects afresh.
        Raises FatalAdapterError when Discord refuses the token or the intents
        (naming what to fix), AdapterError when Discord cannot be reached for now.
        """
        async with self._lifecycle:
            self._dispatcher = dispatcher
            if self._task is not None and not self._task.done():
                return
            await self._shutdown()
            token = self._token()
            self._claim_endpoints()
            intents = discord.Intents.none()
            intents.guilds = intents.guild_messages = intents.dm_messages = True
            intents.message_content = True
            shards: dict[str, Any] = {}
            if self.config.shard_count:
                shards["shard_count"] = self.config.shard_count
                shards["shard_ids"] = self.config.shard_ids or None
            client = (_ShardedClient if shards else _Client)(
                self,
                **shards,
                intents=intents,
                guild_ready_timeout=self._guild_ready_timeout,
                max_messages=None,
                allowed_mentions=_ALLOWED_MENTIONS,
            )
            self._client = client
            try:
                # Bounded like the rest of start: an API that accepts the connection and
                # never answers is "unreachable for now", retried, not a start that hangs.
                await asyncio.wait_for(client.login(token), self._ready_timeout)
            except TimeoutError:
                await self._shutdown()
                raise AdapterError(
                    f"cannot log in to Discord at {self.config.api_base}: no answer within "
                    f"{self._ready_timeout:g} s",
                    adapter=self.name,
                ) from None
            except discord.LoginFailure:
                await self._shutdown()
                raise FatalAdapterError(
                    f"Discord rejected the bot token in ${self.config.token_env} "
                    f"(401 Unauthorized): copy a fresh one from {_TOKEN_HELP}",
                    adapter=self.name,
                    setting=self.config.token_env,
                ) from None
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                await self._shutdown()
                raise AdapterError(
                    f"cannot log in to Discord at {self.config.api_base}: {exc}", adapter=self.name
                ) from exc
            self._task = asyncio.create_task(self._run(client), name="discord-gateway")
            await self._wait_ready(client, self._task)
            self._log.info("discord.started", bot_user=str(client.user))

    async def stop(self) -> None:
        """Disconnect and release the client; safe to call twice or before ``start``."""
        async with self._lifecycle:
            await self._shutdown()
            self._log.info("discord.stopped")

    async def __aenter__(self) -> DiscordAdapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def connected(self) -> bool:
        client = self._client
        return (
            client is not None and not client.is_closed() and client.is_ready() and self._gateway_up
        )

    def _token(self) -> str:
        token = self._environ.get(self.config.token_env, "").strip()
        if not token:
            raise FatalAdapterError(
                f"environment variable {self.config.token_env} is not set: put the bot token "
                f"from {_TOKEN_HELP} there",
                adapter=self.name,
                setting=self.config.token_env,
            )
        return token

    def _claim_endpoints(self) -> None:
        endpoints = (self.config.api_base.rstrip("/"), self.config.gateway_url)
        for owner, used in _endpoint_users.items():
            if owner != id(self) and used != endpoints:
                raise FatalAdapterError(
                    "another Discord adapter in this process uses different endpoints "
                    f"{used}; discord.py supports one api_base/gateway_url per process",
                    adapter=self.name,
                    setting="adapters.discord.api_base",
                )
        _endpoint_users[id(self)] = endpoints
        # discord.py reads both from class attributes whenever it builds a request.
        Route.BASE = endpoints[0]
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(endpoints[1])

    def _release_endpoints(self) -> None:
        if _endpoint_users.pop(id(self), None) is not None and not _endpoint_users:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = _DEFAULT_ENDPOINTS

    async def _run(self, client: _Client) -> BaseException | None:
        """The gateway loop; returns why it ended for good (None: stopped).

        discord.py reconnects and resumes inside ``connect``; it gives up only
        on fatal closes (bad intents, bad token, ...).  ``start`` connects anew.
        """
        try:
            await client.connect(reconnect=True)
            return None
        except discord.PrivilegedIntentsRequired as exc:
            self._log.error("discord.intent_refused", help=INTENT_HELP)
            return exc
        except Exception as exc:
            self._log.error("discord.gateway_failed", error=repr(exc))
            return exc
        finally:
            self._gateway_up = False
            with contextlib.suppress(Exception):
                await client.close()

    async def _wait_ready(self, client: _Client, task: asyncio.Task[BaseException | None]) -> None:
        ready = asyncio.create_task(client.wait_until_ready())
        try:
            done, _ = await asyncio.wait(
                {ready, task}, timeout=self._ready_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if ready in done and not ready.cancelled():
            return
        failure = task.result() if task.done() else None
        await self._shutdown()
        if isinstance(failure, discord.PrivilegedIntentsRequired):
            raise FatalAdapterError(
                "Discord refused the Message Content intent (gateway close 4014): enable it in "
                f"the {INTENT_HELP} for this bot's application, then start again",
                adapter=self.name,
                setting=INTENT_HELP,
            ) from failure
        if isinstance(failure, discord.ConnectionClosed) and failure.code in _FATAL_CLOSE_CODES:
            raise FatalAdapterError(
                f"Discord closed the gateway with code {failure.code} "
                f"({failure.reason or 'no reason given'}); check the bot token in "
                f"${self.config.token_env} and the application's intents",
                adapter=self.name,
                setting=self.config.token_env,
            ) from failure
        if isinstance(failure, discord.ConnectionClosed):
            raise AdapterError(
                f"Discord closed the gateway with code {failure.code} "
                f"({failure.reason or 'no reason given'})",
                adapter=self.name,
            ) from failure
        if failure is not None:
            raise AdapterError(
                f"cannot connect to the Discord gateway at {self.config.gateway_url}: {failure!r}",
                adapter=self.name,
            ) from failure
        raise AdapterError(
            f"the Discord gateway at {self.config.gateway_url} was not ready within "
            f"{self._ready_timeout:g} s",
            adapter=self.name,
        )

    async def _shutdown(self) -> None:
        for handles in list(self._typing.values()):
            for handle in list(handles):
                await handle.done()
        client, task = self._client, self._task
        self._client = self._task = None
        self._gateway_up = False
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
        self._release_endpoints()

    # --- inbound -----------------------------------------------------------

    def _gateway_event(self, event: str) -> None:
        self._gateway_up = event in ("connected", "resumed")
        self._log.info(f"discord.gateway_{event}")

    async def _on_message(self, message: discord.Message) -> None:
        # Messages of one channel are handled in arrival order: discord.py runs
        # each event in its own task, and the lock is the first thing taken.
        async with self._channel_locks.hold(message.channel.id):
            try:
                await self._handle(message)
            except Exception:
                self._log.exception(
                    "discord.inbound_failed",
                    message_id=str(message.id),
                    channel_id=str(message.channel.id),
                )

    async def _handle(self, message: discord.Message) -> None:
        client, dispatcher = self._client, self._dispatcher
        if client is None or dispatcher is None or client.user is None:
            return
        ignored = self._log.bind(message_id=str(message.id), author_id=str(message.author.id))
        if message.author.id == client.user.id:
            ignored.debug("message.ignored", reason="the bot's own message")
            return
        if message.author.bot:
            ignored.info("message.ignored", reason="sent by another bot")
            return
        if message.type not in _CONVERSATION_TYPES:
            ignored.info("message.ignored", reason=f"system message ({message.type.name})")
            return
        guild = message.guild
        thread: str | None = None
        if guild is None:
            if (
                self.config.allowed_dm_users
                and str(message.author.id) not in self.config.allowed_dm_users
            ):
                ignored.info("message.ignored", reason="DM from a user not in allowed_dm_users")
                return
            self._dm_channels[message.author.id] = message.channel.id
            key = f"discord:dm:{message.author.id}"
        else:
            if self.config.allowed_guilds and str(guild.id) not in self.config.allowed_guilds:
                ignored.info(
                    "message.ignored", reason="guild not in allowed_guilds", guild_id=str(guild.id)
                )
                return
            channel_id, thread = await self._locate(message.channel)
            allowed = self.config.allowed_channels
            if allowed and channel_id not in allowed and (thread is None or thread not in allowed):
                ignored.info(
                    "message.ignored",
                    reason="channel not in allowed_channels",
                    channel_id=channel_id,
                )
                return
            key = f"discord:{guild.id}:{channel_id}" + (f":{thread}" if thread else "")
        text, mentioned = self._clean(message, client.user.id)
        if not text:
            ignored.info(
                "message.ignored", reason="no text (attachments or mentions only)", channel=key
            )
            return
        reference = message.reference
        resolved = reference.resolved if reference is not None else None
        replied_to_bot = (
            isinstance(resolved, discord.Message) and resolved.author.id == client.user.id
        )
        inbound = InboundMessage(
            channel=key,
            platform_id=str(message.id),
            author_id=str(message.author.id),
            author_name=message.author.display_name,
            text=text,
            ts=message.created_at.timestamp(),
            addressed=guild is None or mentioned or replied_to_bot,
            is_dm=guild is None,
            thread=thread,
            reply_to=str(reference.message_id) if reference and reference.message_id else None,
            private=guild is None or _is_private(message.channel, guild),
        )
        is_admin = str(message.author.id) in self.config.admins
        await route_inbound(self, dispatcher, inbound, is_admin=is_admin, log=self._log)

    async def _locate(self, channel: Any) -> tuple[str, str | None]:
        """(channel id, thread id or None) of a guild message's channel."""
        if isinstance(channel, discord.Thread):
            return str(channel.parent_id), str(channel.id)
        if isinstance(channel, discord.PartialMessageable) and self._client is not None:
            # Not in the cache (a thread discord.py has not seen yet): ask once.
            try:
                fetched = await self._client.fetch_channel(channel.id)
            except discord.HTTPException as exc:
                self._log.warning(
                    "discord.channel_unknown", channel_id=str(channel.id), error=str(exc)
                )
            else:
                if isinstance(fetched, discord.Thread):
                    return str(fetched.parent_id), str(fetched.id)
        return str(channel.id), None

    def _clean(self, message: discord.Message, bot_id: int) -> tuple[str, bool]:
        """The text the model sees: the bot's mention stripped, others resolved to names."""
        users = {u.id: u.display_name for u in message.mentions}
        roles = {r.id: r.name for r in message.role_mentions}
        # The bot's own mention goes, with one space after it, so "<@bot> hi" reads "hi".
        text, hits = re.subn(rf"<@!?{bot_id}>[ \t]?", "", message.content)
        mentioned = hits > 0 or any(u.id == bot_id for u in message.mentions)

        def resolve(m: re.Match[str]) -> str:
            if m.group("user"):
                uid = int(m.group("user"))
                return f"@{users[uid]}" if uid in users else m.group()
            if m.group("role"):
                rid = int(m.group("role"))
                return f"@{roles[rid]}" if rid in roles else m.group()
            found = (
                message.guild.get_channel_or_thread(int(m.group("channel")))
                if message.guild
                else None
            )
            return f"#{found.name}" if found is not None else m.group()

        text = _MENTION.sub(resolve, text)
        names = [f"[attachment: {a.filename}]" for a in message.attachments]
        return "\n".join(filter(None, [text.strip(), *names])), mentioned

    # --- outbound ----------------------------------------------------------

    async def send(self, out: Outbound) -> list[str]:
        """Post ``out.text`` split to 2,000 characters; the first piece replies to ``reply_to``.

        Stops the typing indicator of the channel first.  Returns the new
        message ids.  Raises AdapterError when Discord refuses a piece.
        """
        client = self._require_client()
        for handle in list(self._typing.get(out.channel, ())):
            await handle.done()
        target = await self._target(client, out.channel)
        reference = None
        if out.reply_to and out.reply_to.isdigit():
            reference = discord.MessageReference(
                message_id=int(out.reply_to), channel_id=target.id, fail_if_not_exists=False
            )
        ids: list[str] = []
        for piece in split_message(out.text, MAX_MESSAGE_CHARS):
            try:
                sent = await target.send(piece, reference=reference)  # type: ignore[arg-type]
            except discord.HTTPException as exc:
                raise AdapterError(
                    f"Discord refused a reply in {out.channel}: {exc.status} {exc.text}",
                    adapter=self.name,
                ) from exc
            ids.append(str(sent.id))
            reference = None
        self._log.debug("discord.sent", channel=out.channel, pieces=len(ids))
        return ids

    async def progress(self, channel: str, message_id: str | None) -> _Typing:
        """Show "tierbot is typing..." in ``channel`` until ``done`` or the next ``send`` there."""
        client = self._require_client()
        target = await self._target(client, channel)
        handle = _Typing(self, channel, target, self._typing_interval)
        self._typing.setdefault(channel, set()).add(handle)
        handle.start()
        return handle

    def _require_client(self) -> _Client:
        if self._client is None:
            raise AdapterError("the Discord adapter is not started", adapter=self.name)
        return self._client

    async def _target(self, client: _Client, key: str) -> discord.PartialMessageable:
        k = ChannelKey.parse(key)
        if k.platform != "discord" or not k.well_formed or not k.parts[-1].isdigit():
            raise AdapterError(f"not a Discord channel key: {key!r}", adapter=self.name)
        if k.is_dm:
            user_id = int(k.channel)
            channel_id = self._dm_channels.get(user_id)
            if channel_id is None:
                dm = await client.create_dm(discord.Object(id=user_id))
                channel_id = self._dm_channels[user_id] = dm.id
            return client.get_partial_messageable(channel_id)
        return client.get_partial_messageable(int(k.target), guild_id=int(k.workspace_id))


class _Client(discord.Client):
    """discord.py's client with its events routed to the adapter."""

    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(**options)
        self._adapter = adapter

    async def on_message(self, message: discord.Message) -> None:
        await self._adapter._on_message(message)

    async def on_connect(self) -> None:
        self._adapter._gateway_event("connected")

    async def on_resumed(self) -> None:
        self._adapter._gateway_event("resumed")

    async def on_disconnect(self) -> None:
        self._adapter._gateway_event("disconnected")


class _ShardedClient(_Client, discord.AutoShardedClient):
    """The sharded client (``shard_count``): one gateway connection per shard it runs,
    each receiving its own guilds' events; DMs arrive on shard 0."""

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        # Discord allows max_concurrency identifies per 5 s; the gateway says how many.
        if initial:
            return
        limits = await self.fetch_session_start_limits()
        await asyncio.sleep(5.0 / max(1, limits.max_concurrency))


class _Typing:
    """A typing indicator refreshed every ``interval`` seconds until ``done`` (at most 10 min)."""

    MAX_SECONDS = 600.0

    def __init__(
        self, adapter: DiscordAdapter, key: str, target: discord.abc.Messageable, interval: float
    ) -> None:
        self._adapter = adapter
        self._key = key
        self._target = target
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"discord-typing-{self._key}")

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.MAX_SECONDS
        while loop.time() < deadline:
            try:
                await self._target.typing()
            except discord.HTTPException as exc:
                log.warning("discord.typing_failed", channel=self._key, status=exc.status)
                return
            await asyncio.sleep(self._interval)

    async def done(self) -> None:
        """Stop refreshing; idempotent."""
        handles = self._adapter._typing.get(self._key)
        if handles is not None:
            handles.discard(self)
            if not handles:
                del self._adapter._typing[self._key]
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _KeyedLocks:
    """One FIFO lock per key, forgotten once nobody holds or awaits it."""

    def __init__(self) -> None:
        self._locks: dict[Any, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: Any) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def _is_private(channel: Any, guild: discord.Guild) -> bool:
    """Whether not everyone in ``guild`` can read ``channel``: a private thread, or a
    channel (a thread's parent) @everyone may not view.  A channel discord.py has not
    cached (or a guild without its @everyone role) counts as private: better a public
    channel's memories kept to it for a while than a private channel's shared."""
    if isinstance(channel, discord.Thread) and channel.is_private():
        return True
    everyone = guild.default_role
    if everyone is None or not hasattr(channel, "permissions_for"):
        return True
    try:
        return not channel.permissions_for(everyone).view_channel
    except discord.ClientException:  # a thread whose parent is not cached
        return True
