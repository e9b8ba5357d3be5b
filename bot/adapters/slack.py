"""The Slack adapter: slack-bolt over Socket Mode (default) or the HTTP Events API.

Channel keys: ``slack:<team>:<channel>`` for a channel or DM (DM channel ids
start with ``D``) and ``slack:<team>:<channel>:<thread_ts>`` for a thread;
each thread is its own conversation and replies to it go into the thread.

Slack delivers some messages more than once: a mention arrives as
``app_mention`` *and* ``message`` when both are subscribed (same channel and
ts), and an event not acknowledged within 3 s is redelivered with the same
``event_id``.  Both are answered once.  Bolt runs the listener before it
acknowledges (``process_before_response``), so a message is acknowledged only
once the runtime has stored it; a failure leaves it unacknowledged and Slack's
redelivery gets another chance.  Nothing on that path waits on the Web API (Slack
redelivers what is not acknowledged within 3 s): a user's display name comes from
a cache, and an unknown one is looked up in the background, so the first message
of a user the adapter has not seen yet is stored with the user id as its author
name and later ones with the name.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import re
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.base import Capabilities, Dispatcher, Outbound, route_inbound
from bot.adapters.split import split_message
from tierbot.config import SlackAdapterConfig
from tierbot.errors import AdapterError, FatalAdapterError
from tierbot.keys import ChannelKey
from tierbot.messages import InboundMessage

__all__ = ["SlackAdapter"]

log = structlog.get_logger("tierbot.adapters.slack")

MAX_MESSAGE_CHARS = 4000
#: Slack shows an error unless a slash command is acknowledged within 3 s.
COMMAND_ACK_SECONDS = 2.5
PROGRESS_REACTION = "hourglass_flowing_sand"
#: users.info requests in flight at once (a burst of new users must not hit the rate limit).
_LOOKUPS = 4
# Subtypes that are still someone talking; every other subtype (edits, joins,
# deletions, bot_message ...) is not conversation.
_CONVERSATION_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}
#: Slack's channel_type of conversations not everyone in the workspace can read.
_PRIVATE_TYPES = frozenset({"group", "mpim", "im"})
# Unix seconds, ASCII digits only: int() would also take "+1", " 1", "1_0" and other digits.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
# Slack's answers to a token it will never accept: retrying cannot help, the operator must act.
_REFUSED_TOKEN = {
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "no_permission",
    "missing_scope",
}
_SPECIAL = re.compile(r"<([@#!])([^>|]+)(?:\|([^>]*))?>|<([^>|]+)(?:\|([^>]*))?>")


class SlackAdapter:
    """A Slack app connection (see the module docstring for channel keys).

    ``environ`` supplies the tokens and signing secret named in ``config``.
    ``ping_interval`` is the Socket Mode keep-alive; ``connect_timeout`` bounds
    ``start``; ``rate_limit_retries`` is how many 429s one Web API call waits out.
    """

    name = "slack"
    capabilities = Capabilities(
        max_message_chars=MAX_MESSAGE_CHARS,
        threads=True,
        typing_indicator=False,
        reactions=True,
        markdown=False,
    )

    def __init__(
        self,
        config: SlackAdapterConfig,
        *,
        environ: Mapping[str, str] = os.environ,
        ping_interval: float = 10.0,
        connect_timeout: float = 30.0,
        rate_limit_retries: int = 3,
        dedupe_size: int = 10_000,
    ) -> None:
        self.config = config
        self._environ = environ
        self._ping_interval = ping_interval
        self._connect_timeout = connect_timeout
        self._rate_limit_retries = rate_limit_retries
        self._dispatcher: Dispatcher | None = None
        self._client: AsyncWebClient | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._bot_user_id = ""
        self._bot_id = ""
        self._lifecycle = asyncio.Lock()
        self._events = _Recent(dedupe_size)  # event_id: Slack's redeliveries
        self._messages = _Recent(dedupe_size)  # (channel, ts): app_mention + message
        self._late: set[asyncio.Task[None]] = set()  # slash commands answered after the ack
        self._names = _Recent(dedupe_size)  # user id -> display name
        self._private = _Recent(dedupe_size)  # channel id -> private (from channel_type)
        self._looking_up: set[str] = set()  # users whose users.info is in flight
        self._lookup_slots = asyncio.Semaphore(_LOOKUPS)
        self._log = log.bind(adapter=self.name)

    # --- lifecycle ---------------------------------------------------------

    async def start(self, dispatcher: Dispatcher) -> None:
        """Check the tokens, then connect (Socket Mode) or listen (HTTP mode).

        Idempotent: a second call while running does nothing; after ``stop`` or
        a failed start it starts afresh.  Socket Mode reconnects by itself.
        Raises FatalAdapterError when Slack refuses a token (naming the variable
        to fix), AdapterError when Slack cannot be reached for now.
        """
        async with self._lifecycle:
            self._dispatcher = dispatcher
            if self._client is not None:
                return
            try:
                await self._start()
            except BaseException:
                await self._shutdown()
                raise
            self._log.info("slack.started", mode=self.config.mode, bot_user_id=self._bot_user_id)

    async def _start(self) -> None:
        config = self.config
        bot_token = self._secret(
            config.bot_token_env, "the bot token (xoxb-...) from OAuth & Permissions"
        )
        client = AsyncWebClient(
            token=bot_token,
            base_url=config.api_base_url,
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(),
                AsyncRateLimitErrorRetryHandler(max_retry_count=self._rate_limit_retries),
            ],
        )
        self._client = client
        try:
            auth = await client.auth_test()
        except SlackApiError as exc:
            if _error(exc) not in _REFUSED_TOKEN:
                raise AdapterError(
                    f"the Slack Web API at {config.api_base_url} answered auth.test with "
                    f"{_error(exc)}",
                    adapter=self.name,
                ) from None
            raise FatalAdapterError(
                f"Slack rejected the bot token in ${config.bot_token_env} "
                f"({_error(exc)}): reinstall the app and copy the Bot User OAuth "
                "Token from OAuth & Permissions",
                adapter=self.name,
                setting=config.bot_token_env,
            ) from None
        except Exception as exc:
            raise AdapterError(
                f"cannot reach the Slack Web API at {config.api_base_url}: {exc!r}",
                adapter=self.name,
            ) from exc
        self._bot_user_id = str(auth.get("user_id") or "")
        self._bot_id = str(auth.get("bot_id") or "")
        http = config.mode == "http"
        secret = (
            self._secret(config.signing_secret_env, "the Signing Secret from Basic Information")
            if http
            else ""
        )
        app = AsyncApp(
            name="tierbot",
            client=client,
            signing_secret=secret,
            process_before_response=True,
            request_verification_enabled=http,
            # Our own messages are dropped (and logged) in _handle, not silently by Bolt.
            ignoring_self_events_enabled=False,
            ignoring_self_assistant_message_events_enabled=False,
        )

        async def on_event(body: dict[str, Any], event: dict[str, Any]) -> None:
            await self._on_event(body, event)

        app.event("app_mention")(on_event)
        app.event("message")(on_event)
        if config.slash_command:

            async def on_command(ack: Any, command: dict[str, Any]) -> None:
                await self._on_command(ack, command)

            app.command(config.slash_command)(on_command)
        if http:
            await self._listen(app)
        else:
            await self._connect(app, client)

    async def _connect(self, app: AsyncApp, client: AsyncWebClient) -> None:
        config = self.config
        app_token = self._secret(
            config.app_token_env,
            "an app-level token (xapp-...) with the connections:write scope, from "
            "Basic Information -> App-Level Tokens",
        )
        try:
            opened = await client.apps_connections_open(app_token=app_token)
        except SlackApiError as exc:
            if _error(exc) not in _REFUSED_TOKEN:
                raise AdapterError(
                    f"the Slack Web API at {config.api_base_url} answered "
                    f"apps.connections.open with {_error(exc)}",
                    adapter=self.name,
                ) from None
            raise FatalAdapterError(
                f"Slack refused Socket Mode with the app-level token in ${config.app_token_env} "
                f"({_error(exc)}): enable Socket Mode and create a token with the "
                "connections:write scope under Basic Information -> App-Level Tokens",
                adapter=self.name,
                setting=config.app_token_env,
            ) from None
        handler = AsyncSocketModeHandler(app, app_token, ping_interval=self._ping_interval)
        self._socket = handler
        # The URL just issued is good for one connection: use it rather than ask again.
        handler.client.wss_uri = opened["url"]
        try:
            await asyncio.wait_for(handler.connect_async(), self._connect_timeout)
        except TimeoutError:
            raise AdapterError(
                f"Slack Socket Mode did not connect within {self._connect_timeout:g} s",
                adapter=self.name,
            ) from None

    async def _listen(self, app: AsyncApp) -> None:
        config = self.config
        web_app = app.web_app(path=config.path, port=config.port)
        web_app.middlewares.insert(0, self._refuse_malformed_timestamp)
        runner = web.AppRunner(web_app, handle_signals=False)
        await runner.setup()
        self._runner = runner
        try:
            await web.TCPSite(runner, config.host, config.port).start()
        except OSError as exc:
            raise FatalAdapterError(
                f"cannot listen for Slack events on {config.host}:{config.port}: {exc}; "
                "free the port or change [adapters.slack] port",
                adapter=self.name,
                setting="adapters.slack.port",
            ) from exc

    @web.middleware
    async def _refuse_malformed_timestamp(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        """401 for a request whose ``X-Slack-Request-Timestamp`` is not a plain integer.

        Slack's signature verifier calls ``int()`` on the header and would answer a
        malformed one with a 500 and a traceback; such a request cannot be Slack's,
        so it is refused like any other unsigned request, before Bolt sees it.
        """
        stamp = request.headers.get("X-Slack-Request-Timestamp")
        if stamp is not None and not _TIMESTAMP.fullmatch(stamp):
            self._log.info(
                "slack.request_refused",
                reason="X-Slack-Request-Timestamp is not an integer",
                remote=request.remote,
            )
            return web.json_response({"error": "invalid request"}, status=401)
        return await handler(request)

    async def stop(self) -> None:
        """Disconnect (or stop listening) and close the Web API client; safe to call twice."""
        async with self._lifecycle:
            await self._shutdown()
            self._log.info("slack.stopped")

    async def __aenter__(self) -> SlackAdapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _shutdown(self) -> None:
        socket, runner, client = self._socket, self._runner, self._client
        self._socket = self._runner = self._client = None
        for late in list(self._late):
            late.cancel()
        if socket is not None:
            with contextlib.suppress(Exception):
                await socket.close_async()
        if runner is not None:
            await runner.cleanup()
        if client is not None and client.session is not None:
            await client.session.close()

    def connected(self) -> bool:
        if self._client is None:
            return False
        if self._socket is not None:
            session = self._socket.client.current_session
            return session is not None and not session.closed
        return self._runner is not None

    @property
    def http_addresses(self) -> list[Any]:
        """Where HTTP mode listens (host, port), e.g. to learn the port when ``port = 0``."""
        return list(self._runner.addresses) if self._runner is not None else []

    def _secret(self, env: str, what: str) -> str:
        value = self._environ.get(env, "").strip()
        if not value:
            raise FatalAdapterError(
                f"environment variable {env} is not set: put {what} there",
                adapter=self.name,
                setting=env,
            )
        return value

    # --- inbound -----------------------------------------------------------

    async def _on_event(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        event_id = body.get("event_id")
        if event_id and not self._events.claim(event_id):
            self._log.info(
                "message.ignored", reason="Slack redelivered this event", event_id=event_id
            )
            return
        try:
            await self._handle(str(body.get("team_id") or event.get("team") or ""), event)
        except BaseException:
            # Not acknowledged: let Slack's redelivery of this event through.
            if event_id:
                self._events.release(event_id)
            raise

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        """``/tierbot status`` and friends: Slack's own slash command, answered ephemerally.

        Slack wants the acknowledgement within 3 s; a command that takes longer is
        acknowledged at once and its answer posted in the channel when it is ready.
        """
        team = str(command.get("team_id") or "")
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        bound = self._log.bind(team=team, slack_channel=channel, user=user)
        dispatcher = self._dispatcher
        if dispatcher is None:
            await ack(text="tierbot is starting; try again in a moment.")
            return
        is_dm = channel.startswith("D")
        refusal = ""
        if self.config.allowed_teams and team not in self.config.allowed_teams:
            refusal = "team not in allowed_teams"
        elif (
            not is_dm
            and self.config.allowed_channels
            and channel not in self.config.allowed_channels
        ):
            refusal = "channel not in allowed_channels"
        if refusal:
            bound.info("command.ignored", reason=refusal)
            await ack(text="tierbot is not enabled here.")
            return
        words = str(command.get("text") or "").strip()
        message = InboundMessage(
            channel=f"slack:{team}:{channel}",
            platform_id=f"command:{command.get('trigger_id') or time.time()}",
            author_id=user,
            author_name=self._known_name(user),
            text=words if words.startswith("/") else f"/{words or 'help'}",
            addressed=True,
            is_dm=is_dm,
        )
        name = message.text.split(maxsplit=1)[0]
        is_admin = user in self.config.admins
        task = asyncio.ensure_future(dispatcher.command(message, is_admin=is_admin))
        done, _ = await asyncio.wait({task}, timeout=COMMAND_ACK_SECONDS)
        if task in done:
            reply = task.result() or f"{name} is not a command; {self.config.slash_command} help"
            if len(reply) <= MAX_MESSAGE_CHARS:
                await ack(text=reply)
                bound.info("command.answered", command=name, is_admin=is_admin)
                return
        # Bolt sends the acknowledgement when this listener returns: finish in the background.
        await ack(text=f"Working on {name}; the answer will follow here.")
        late = asyncio.create_task(self._answer_late(task, message.channel, name, bound))
        self._late.add(late)
        late.add_done_callback(self._late.discard)

    async def _answer_late(
        self, task: asyncio.Future[str | None], channel: str, name: str, bound: Any
    ) -> None:
        try:
            reply = await task
            if reply:
                await self.send(Outbound(channel, reply))
            bound.info("command.answered", command=name, late=True)
        except Exception as exc:
            bound.warning("command.failed", command=name, error=repr(exc))

    async def _handle(self, team: str, event: dict[str, Any]) -> None:
        dispatcher, client = self._dispatcher, self._client
        if dispatcher is None or client is None:
            return
        channel = str(event.get("channel", ""))
        ts = str(event.get("ts", ""))
        user = str(event.get("user", ""))
        ignored = self._log.bind(team=team, slack_channel=channel, ts=ts, user=user)
        self._learn_privacy(channel, event)
        subtype = event.get("subtype")
        if user == self._bot_user_id or (self._bot_id and event.get("bot_id") == self._bot_id):
            ignored.debug("message.ignored", reason="the bot's own message")
            return
        if event.get("bot_id") or subtype == "bot_message":
            ignored.info("message.ignored", reason="sent by another bot")
            return
        if subtype not in _CONVERSATION_SUBTYPES:
            ignored.info("message.ignored", reason=f"not conversation (subtype {subtype})")
            return
        if not channel or not ts or not user:
            ignored.info("message.ignored", reason="event without channel, ts or user")
            return
        if self.config.allowed_teams and team not in self.config.allowed_teams:
            ignored.info("message.ignored", reason="team not in allowed_teams")
            return
        is_dm = event.get("channel_type") == "im" or channel.startswith("D")
        if (
            not is_dm
            and self.config.allowed_channels
            and channel not in self.config.allowed_channels
        ):
            ignored.info("message.ignored", reason="channel not in allowed_channels")
            return
        if not self._messages.claim((channel, ts)):
            ignored.info(
                "message.ignored",
                reason="already received (a mention comes as app_mention and message)",
            )
            return
        try:
            await self._deliver(dispatcher, team, channel, ts, user, is_dm, event, ignored)
        except BaseException:
            self._messages.release((channel, ts))
            raise

    async def _deliver(
        self,
        dispatcher: Dispatcher,
        team: str,
        channel: str,
        ts: str,
        user: str,
        is_dm: bool,
        event: dict[str, Any],
        ignored: Any,
    ) -> None:
        thread_ts = event.get("thread_ts")
        thread = str(thread_ts) if thread_ts and thread_ts != ts else None
        key = f"slack:{team}:{channel}" + (f":{thread}" if thread else "")
        text, mentioned = await self._clean(str(event.get("text") or ""))
        files = [f"[attachment: {f.get('name', 'file')}]" for f in event.get("files") or []]
        text = "\n".join(filter(None, [text, *files]))
        if not text:
            ignored.info("message.ignored", reason="no text", channel=key)
            return
        inbound = InboundMessage(
            channel=key,
            platform_id=ts,
            author_id=user,
            author_name=self._known_name(user),
            text=text,
            ts=float(ts),
            addressed=(
                is_dm
                or mentioned
                or event.get("type") == "app_mention"
                or event.get("parent_user_id") == self._bot_user_id
            ),
            is_dm=is_dm,
            thread=thread,
            reply_to=thread,
            private=self._is_private(channel),
        )
        await route_inbound(
            self, dispatcher, inbound, is_admin=user in self.config.admins, log=self._log
        )

    def _learn_privacy(self, channel: str, event: dict[str, Any]) -> None:
        """Remember what a ``message`` event's ``channel_type`` says of ``channel``
        (duplicates included: an ``app_mention`` carries no channel_type)."""
        kind = event.get("channel_type")
        if channel and kind in _PRIVATE_TYPES | {"channel"}:
            self._private.put(channel, kind in _PRIVATE_TYPES)

    def _is_private(self, channel: str) -> bool:
        """Whether not everyone in the workspace can read ``channel``.

        Known from the last ``channel_type`` seen on this channel.  A channel never
        seen with one (an ``app_mention`` came first: it carries none, and a ``C`` id
        may be public or private) counts as private until a message event says
        otherwise: a public channel's memories are kept to it for a while rather
        than a private channel's shared.
        """
        known = self._private.get(channel)
        return True if known is None else bool(known)

    async def _clean(self, raw: str) -> tuple[str, bool]:
        """Slack markup to plain text: the bot's mention stripped, others resolved to names."""
        bot = self._bot_user_id
        text, hits = (
            re.subn(rf"<@{re.escape(bot)}(?:\|[^>]*)?>[ \t]?", "", raw) if bot else (raw, 0)
        )
        ids = {m.group(2) for m in _SPECIAL.finditer(text) if m.group(1) == "@" and not m.group(3)}
        names = {uid: self._known_name(uid) for uid in ids}

        def resolve(m: re.Match[str]) -> str:
            sigil, target, label = m.group(1), m.group(2), m.group(3)
            if sigil == "@":
                return f"@{label or names.get(target, target)}"
            if sigil == "#":
                return f"#{label or target}"
            if sigil == "!":
                # <!here>, <!channel>, <!subteam^ID|@team>, <!date^...|fallback>
                return label or f"@{target.split('^')[0]}"
            url, url_label = m.group(4), m.group(5)
            return f"{url_label} ({url})" if url_label and url_label != url else url

        return html.unescape(_SPECIAL.sub(resolve, text)).strip(), hits > 0

    def _known_name(self, user: str) -> str:
        """The display name of ``user`` if known, else the id itself; never waits.

        An unknown user is looked up in the background (one request per user at a
        time, at most ``_LOOKUPS`` at once), so acknowledging a message never waits
        on users.info, however slow or rate-limited it is.
        """
        cached = self._names.get(user)
        if cached is not None:
            return str(cached)
        if self._client is not None and user not in self._looking_up:
            self._looking_up.add(user)
            task = asyncio.create_task(self._look_up(user), name=f"slack-users-info-{user}")
            self._late.add(task)  # cancelled by stop() like a late command answer
            task.add_done_callback(self._late.discard)
        return user

    async def _look_up(self, user: str) -> None:
        """Fill the name cache for ``user`` (the id itself when Slack refuses to say)."""
        try:
            async with self._lookup_slots:
                client = self._client
                if client is None:
                    return
                info = (await client.users_info(user=user)).get("user") or {}
        except Exception as exc:
            # A name is nice to have: never lose the message over it.  Slack's own
            # answer (missing_scope, user_not_found) is remembered; a network error
            # or a 429 beyond the retries is not, so the next message asks again.
            self._log.warning("slack.users_info_failed", user=user, error=_error(exc))
            if isinstance(exc, SlackApiError) and exc.response.status_code != 429:
                self._names.put(user, user)
            return
        finally:
            self._looking_up.discard(user)
        profile = info.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or info.get("name") or user
        self._names.put(user, str(name))
        self._log.debug("slack.user_named", user=user)

    # --- outbound ----------------------------------------------------------

    async def send(self, out: Outbound) -> list[str]:
        """Post ``out.text`` split to about 4,000 characters, into the thread of a thread key.

        Returns the new messages' ts.  429s wait ``Retry-After`` and retry;
        raises AdapterError when Slack refuses a piece.
        """
        client = self._require_client()
        channel, thread_ts = _parse_key(out.channel)
        ids: list[str] = []
        for piece in split_message(out.text, MAX_MESSAGE_CHARS):
            try:
                resp = await client.chat_postMessage(
                    channel=channel, text=_escape(piece), thread_ts=thread_ts, unfurl_links=False
                )
            except SlackApiError as exc:
                raise AdapterError(
                    f"Slack refused a reply in {out.channel}: {_error(exc)}",
                    adapter=self.name,
                ) from exc
            ids.append(str(resp["ts"]))
        self._log.debug("slack.sent", channel=out.channel, pieces=len(ids))
        return ids

    async def progress(self, channel: str, message_id: str | None) -> _Reaction:
        """Put :hourglass_flowing_sand: on the triggering message until ``done``."""
        client = self._require_client()
        handle = _Reaction(client, _parse_key(channel)[0], message_id, self._log)
        await handle.add()
        return handle

    def _require_client(self) -> AsyncWebClient:
        if self._client is None:
            raise AdapterError("the Slack adapter is not started", adapter=self.name)
        return self._client


def _parse_key(key: str) -> tuple[str, str | None]:
    """(channel id, thread ts or None) of a ``slack:`` channel key."""
    k = ChannelKey.parse(key)
    if k.platform != "slack" or not k.well_formed:
        raise AdapterError(f"not a Slack channel key: {key!r}", adapter="slack")
    return k.channel, k.thread


def _error(exc: Exception) -> str:
    """Slack's error code (``invalid_auth`` ...) or the HTTP status when there is none."""
    if isinstance(exc, SlackApiError):
        data = exc.response.data
        if isinstance(data, dict) and data.get("error"):
            return str(data["error"])
        return f"HTTP {exc.response.status_code}"
    return repr(exc)


def _escape(text: str) -> str:
    """Slack's required escaping: model output can then never ping <!channel> or a user id."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Reaction:
    """The progress reaction on one message; ``done`` removes it (idempotent)."""

    def __init__(self, client: AsyncWebClient, channel: str, ts: str | None, log: Any) -> None:
        self._client = client
        self._channel = channel
        self._ts = ts
        self._log = log
        self._added = False

    async def add(self) -> None:
        if self._ts is None:
            return
        try:
            await self._client.reactions_add(
                channel=self._channel, timestamp=self._ts, name=PROGRESS_REACTION
            )
            self._added = True
        except SlackApiError as exc:
            error = _error(exc)
            self._added = error == "already_reacted"
            if not self._added:
                self._log.warning(
                    "slack.reaction_failed", error=error, hint="needs the reactions:write scope"
                )

    async def done(self) -> None:
        if not self._added:
            return
        self._added = False
        try:
            await self._client.reactions_remove(
                channel=self._channel, timestamp=self._ts, name=PROGRESS_REACTION
            )
        except SlackApiError as exc:
            self._log.warning("slack.reaction_remove_failed", error=_error(exc))


class _Recent:
    """A bounded insertion-ordered map: remembers the last ``size`` keys."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def claim(self, key: Hashable) -> bool:
        """True the first time ``key`` is seen (and remembers it), False after."""
        if key in self._items:
            return False
        self.put(key, True)
        return True

    def release(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def get(self, key: Hashable) -> Any:
        return self._items.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)
