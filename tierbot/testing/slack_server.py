"""A scriptable fake of Slack's Web API and Socket Mode, on 127.0.0.1.

Point ``api_base_url`` of a :class:`~bot.adapters.slack.SlackAdapter` at
:attr:`FakeSlack.api_base_url`: ``apps.connections.open`` then hands out this
server's Socket Mode websocket, where :meth:`FakeSlack.send_event` delivers
Events API envelopes (the same event_id twice is a Slack retry) and records
the client's acks.  For HTTP mode, :func:`post_signed_event` plays Slack's
side: it signs a payload like Slack does (or forges / ages the signature) and
POSTs it to the adapter's request URL.

Every Web API call is recorded in :attr:`FakeSlack.calls`;
:meth:`FakeSlack.rate_limit` makes the next ``chat.postMessage`` calls answer
429 with ``Retry-After``; :meth:`FakeSlack.hold_posts` leaves them unanswered (a post
in flight) until :meth:`FakeSlack.release_posts`.  ``users.info`` can be held
unanswered until the test releases it (:meth:`FakeSlack.hold_users_info`) or rate-limited
(:meth:`FakeSlack.rate_limit_users_info`); :attr:`FakeSlack.timeline` orders
acks against users.info requests and answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

__all__ = ["ApiCall", "FakeSlack", "post_signed_event", "sign"]


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One Web API call the fake received: method name, merged arguments, token used."""

    method: str
    args: dict[str, Any]
    token: str
    status: int


def sign(secret: str, timestamp: str, body: str) -> str:
    """Slack's request signature: ``v0=`` + HMAC-SHA256(secret, ``v0:{ts}:{body}``)."""
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256)
    return "v0=" + digest.hexdigest()


async def post_signed_event(
    url: str,
    payload: dict[str, Any],
    signing_secret: str,
    *,
    timestamp: int | str | None = None,
    signature: str | None = None,
    retry_num: int | None = None,
) -> tuple[int, str]:
    """POST ``payload`` to ``url`` as Slack's Events API does; return (status, body).

    ``timestamp`` defaults to now (pass an old one to test staleness, or a string
    that is not a number to test a malformed header);
    ``signature`` overrides the computed one (to test forgery); ``retry_num``
    adds Slack's ``X-Slack-Retry-Num`` header of a redelivery.
    """
    body = json.dumps(payload)
    ts = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature if signature is not None else sign(signing_secret, ts, body),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as r,
    ):
        return r.status, await r.text()


class FakeSlack:
    """Slack's Web API under ``/api/`` and Socket Mode under ``/link``.

    Use as an async context manager (or ``start``/``close``).  ``bot_token``
    and ``app_token`` are the only tokens accepted.
    """

    def __init__(
        self,
        *,
        team_id: str = "T0001",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        bot_token: str = "xoxb-fake",
        app_token: str = "xapp-fake",
    ) -> None:
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_token = bot_token
        self.app_token = app_token
        self.users: dict[str, str] = {}  # user id -> display name, for users.info
        self.calls: list[ApiCall] = []
        self.acks: list[str] = []
        self.ack_payloads: dict[str, Any] = {}
        # In arrival order: ("ack", envelope id), ("users.info", user) when a request comes
        # in, then ("users.info 429", user) or ("users.info answered", user) when it is answered.
        self.timeline: list[tuple[str, str]] = []
        self._users_info_gate: asyncio.Event | None = None
        self._posts_gate: asyncio.Event | None = None
        #: chat.postMessage arguments in arrival order, answered or not (see hold_posts).
        self.post_requests: list[dict[str, Any]] = []
        self._users_info_limited = 0
        self._users_info_retry_after = 1
        self.connections = 0
        self._ts = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._connected = asyncio.Event()
        self._changed = asyncio.Condition()
        self._rate_limited = 0
        self._retry_after = 1
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Listen on 127.0.0.1: on :attr:`port` when set (before the first start, or to come
        back after :meth:`close` where clients expect it), else on a free port."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        self.release_users_info()  # a held request would keep the server from shutting down
        for ws in self._sockets:
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # --- scripting ---------------------------------------------------------

    def new_ts(self) -> str:
        """A fresh, increasing Slack timestamp (``seconds.micros``)."""
        return f"{int(time.time())}.{next(self._ts):06d}"

    def rate_limit(self, count: int, retry_after: int = 1) -> None:
        """Answer the next ``count`` chat.postMessage calls with 429 and ``Retry-After``."""
        self._rate_limited = count
        self._retry_after = retry_after

    def hold_users_info(self) -> None:
        """Leave every users.info request unanswered until :meth:`release_users_info`."""
        self._users_info_gate = asyncio.Event()

    def release_users_info(self) -> None:
        """Answer the held users.info requests (and later ones at once)."""
        if self._users_info_gate is not None:
            self._users_info_gate.set()
            self._users_info_gate = None

    def hold_posts(self) -> None:
        """Leave every chat.postMessage unanswered until :meth:`release_posts` (each is
        recorded in :attr:`post_requests` when it arrives)."""
        self._posts_gate = asyncio.Event()

    def release_posts(self) -> None:
        """Answer the held chat.postMessage calls (and later ones at once)."""
        if self._posts_gate is not None:
            self._posts_gate.set()
            self._posts_gate = None

    def rate_limit_users_info(self, count: int, retry_after: int = 5) -> None:
        """Answer the next ``count`` users.info calls with 429 and ``Retry-After``."""
        self._users_info_limited = count
        self._users_info_retry_after = retry_after

    def pending_users_info(self) -> int:
        """users.info requests received and not answered yet."""
        asked = sum(1 for kind, _ in self.timeline if kind == "users.info")
        done = ("users.info answered", "users.info 429")
        return asked - sum(1 for kind, _ in self.timeline if kind in done)

    def message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U100",
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: str = "channel",
        type: str = "message",
        **extra: Any,
    ) -> dict[str, Any]:
        """A ``message`` (or, with ``type="app_mention"``, an ``app_mention``) event."""
        event: dict[str, Any] = {
            "type": type,
            "user": user,
            "text": text,
            "ts": ts or self.new_ts(),
            "channel": channel,
            "team": self.team_id,
            "event_ts": ts,
        }
        if type == "message":
            event["channel_type"] = channel_type
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        event.update(extra)
        event["event_ts"] = event["ts"]
        return event

    def event_callback(
        self, event: dict[str, Any], *, event_id: str | None = None, team_id: str | None = None
    ) -> dict[str, Any]:
        """The Events API payload wrapping ``event`` (from ``team_id``, default the fake's team)."""
        team_id = team_id or self.team_id
        return {
            "token": "verification-token-unused",
            "team_id": team_id,
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": team_id, "user_id": self.bot_user_id, "is_bot": True}],
        }

    async def wait_connected(self, within: float = 5.0) -> None:
        """Wait until a Socket Mode client is connected."""
        await asyncio.wait_for(self._connected.wait(), within)

    async def send_event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_attempt: int = 0,
        team_id: str | None = None,
    ) -> str:
        """Deliver ``event`` over Socket Mode; return the envelope id (acked into ``acks``).

        The same ``event_id`` again with ``retry_attempt > 0`` is Slack's redelivery.
        """
        await self.wait_connected()
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
            "payload": self.event_callback(event, event_id=event_id, team_id=team_id),
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def send_slash_command(
        self,
        text: str,
        *,
        command: str = "/tierbot",
        user: str = "U100",
        channel: str = "C0001",
        team_id: str | None = None,
    ) -> str:
        """Deliver a slash command over Socket Mode; return the envelope id.

        The client's acknowledgement (with the ephemeral reply Slack shows the
        user, if any) lands in ``ack_payloads[envelope_id]``.
        """
        await self.wait_connected()
        envelope_id = str(uuid.uuid4())
        team_id = team_id or self.team_id
        payload = {
            "token": "verification-token-unused",
            "team_id": team_id,
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": "general",
            "user_id": user,
            "user_name": self.users.get(user, user),
            "command": command,
            "text": text,
            "api_app_id": "A0001",
            "is_enterprise_install": "false",
            "response_url": f"http://127.0.0.1:{self.port}/respond/{envelope_id}",
            "trigger_id": f"trig-{envelope_id}",
        }
        envelope = {
            "envelope_id": envelope_id,
            "type": "slash_commands",
            "accepts_response_payload": True,
            "payload": payload,
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def send_disconnect(self) -> None:
        """Ask the client to reconnect, as Slack does before rotating a connection."""
        self._connected.clear()
        ws = self._sockets[-1]
        await ws.send_str(json.dumps({"type": "disconnect", "reason": "refresh_requested"}))

    async def wait_for(self, predicate: Callable[[], object], within: float = 5.0) -> None:
        """Wait until ``predicate()`` is truthy; it is re-checked after every call and ack."""

        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(wait(), within)

    def called(self, method: str) -> list[ApiCall]:
        """Recorded calls of ``method`` (``chat.postMessage`` ...) that succeeded or failed."""
        return [c for c in self.calls if c.method == method]

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Arguments of the successful chat.postMessage calls, optionally in one channel."""
        return [
            c.args
            for c in self.called("chat.postMessage")
            if c.status == 200 and (channel is None or c.args.get("channel") == channel)
        ]

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # --- Socket Mode -------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.connections += 1
        hello = {
            "type": "hello",
            "num_connections": 1,
            "connection_info": {"app_id": "A0001"},
            "debug_info": {"host": "fake", "approximate_connection_time": 3600},
        }
        await ws.send_str(json.dumps(hello))
        self._connected.set()
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                data = json.loads(msg.data)
                if "envelope_id" in data:
                    self.acks.append(data["envelope_id"])
                    self.timeline.append(("ack", data["envelope_id"]))
                    self.ack_payloads[data["envelope_id"]] = data.get("payload")
                    await self._notify()
        self._sockets.remove(ws)
        return ws

    # --- Web API -----------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            args.update(await request.json())
        elif request.can_read_body:
            args.update(await request.post())
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth else str(args.pop("token", ""))
        if method == "users.info":
            user = str(args.get("user"))
            self.timeline.append(("users.info", user))
            await self._notify()
            gate = self._users_info_gate
            if gate is not None:
                await gate.wait()
            if self._users_info_limited > 0 and token == self.bot_token:
                self._users_info_limited -= 1
                self.timeline.append(("users.info 429", user))
                retry = {"Retry-After": str(self._users_info_retry_after)}
                self.calls.append(ApiCall(method, args, token, 429))
                await self._notify()
                body = {"ok": False, "error": "ratelimited"}
                return web.json_response(body, status=429, headers=retry)
        if method == "chat.postMessage":
            self.post_requests.append(args)
            await self._notify()
            if self._posts_gate is not None:
                await self._posts_gate.wait()
        status, data, headers = self._route(method, args, token)
        if method == "users.info":
            self.timeline.append(("users.info answered", str(args.get("user"))))
        self.calls.append(ApiCall(method, args, token, status))
        await self._notify()
        return web.json_response(data, status=status, headers=headers)

    def _route(
        self, method: str, args: dict[str, Any], token: str
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            error = (
                "not_allowed_token_type"
                if token in (self.app_token, self.bot_token)
                else "invalid_auth"
            )
            return 200, {"ok": False, "error": error}, {}
        match method:
            case "auth.test":
                return 200, self._auth_test(), {}
            case "apps.connections.open":
                return 200, {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"}, {}
            case "chat.postMessage":
                return self._post_message(args)
            case "reactions.add" | "reactions.remove":
                return 200, {"ok": True}, {}
            case "users.info":
                user = str(args.get("user"))
                name = self.users.get(user, f"user-{user}")
                profile = {"display_name": name, "real_name": name}
                return 200, {"ok": True, "user": {"id": user, "name": name, "profile": profile}}, {}
        return 200, {"ok": False, "error": "unknown_method"}, {}

    def _auth_test(self) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.com/",
            "team": "Fake Team",
            "user": "tierbot",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _post_message(self, args: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if self._rate_limited > 0:
            self._rate_limited -= 1
            return (
                429,
                {"ok": False, "error": "ratelimited"},
                {"Retry-After": str(self._retry_after)},
            )
        if not args.get("channel"):
            return 200, {"ok": False, "error": "channel_not_found"}, {}
        ts = self.new_ts()
        message = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "text": args.get("text", ""),
            "ts": ts,
        }
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        return 200, {"ok": True, "channel": args["channel"], "ts": ts, "message": message}, {}
