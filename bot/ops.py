"""The operator's HTTP endpoint: ``/health``, ``/metrics`` and ``/status`` of one runtime.

* ``/health``: 200 when the store takes a write and every expected adapter is
  connected, else 503; the JSON body names each check and what is failing.
* ``/metrics``: the runtime's Prometheus registry (:mod:`bot.metrics`).
* ``/status``: a JSON snapshot for ``tierbot status``: channels by usage with
  their thresholds, running compactions, worker pools, adapters, recent
  failures and the config reload state.

Off unless ``[ops] enabled = true``; binds ``127.0.0.1`` by default.  Every request
must name this server in its ``Host`` header (the bind address, ``localhost``,
``127.0.0.1``, ``[::1]``, or a name in ``[ops] allowed_hosts``; any port): a web page
whose DNS name was rebound to 127.0.0.1 sends its own name and gets 403, so a
browser cannot be used to read ``/status``.  ``/status`` leaves out branch and
worker task text (words from conversations) unless ``[ops] status_task_text``.
:class:`OperatorSeat` is what ``tierbot run`` wraps a runtime in: the config
watcher (SIGHUP included) and, when enabled, this server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.metrics import ProcessLabelled
from bot.reload import ConfigWatcher
from tierbot.pg.jobs import queue_depths
from tierbot.store import Store

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = structlog.get_logger("tierbot.ops")

STATUS_CHANNELS = 50
STORE_PROBE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Health:
    """The outcome of the health checks: each check's state and the failing ones."""

    ready: bool
    checks: dict[str, str] = field(default_factory=dict)
    failing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ready else "unhealthy",
            "checks": self.checks,
            "failing": list(self.failing),
        }


async def _noop(conn: Any) -> None:
    return None


async def store_check(rt: Runtime, within: float = STORE_PROBE_SECONDS) -> str:
    """``ok``, or why the store cannot take a write (a transaction round trip + file access)."""
    if isinstance(rt.store, Store):
        path = rt.store.path
        for p in (path, path.parent):
            if p.exists() and not os.access(p, os.W_OK):
                return f"not writable: {p}"
    try:
        await asyncio.wait_for(rt.store.write(_noop), within)
    except TimeoutError:
        return f"a write did not commit within {within:g} s"
    except Exception as exc:
        return f"cannot write: {exc}"
    return "ok"


def expected_adapters(rt: Runtime) -> list[str]:
    """Adapters health waits for: the platform adapters the config enables, plus any started."""
    names = set(rt.adapters)
    for name in ("discord", "slack"):
        section = getattr(rt.config.adapters, name, None)
        if section is not None and section.enabled:
            names.add(name)
    return sorted(names)


async def check_health(rt: Runtime, adapters: Iterable[str] | None = None) -> Health:
    """Run every check; ``adapters`` overrides :func:`expected_adapters`."""
    checks = {"store": await store_check(rt)}
    for name in expected_adapters(rt) if adapters is None else adapters:
        adapter = rt.adapters.get(name)
        if adapter is None:
            checks[f"adapter:{name}"] = rt.adapter_problems.get(name, "not started")
        else:
            checks[f"adapter:{name}"] = "ok" if adapter.connected() else "not connected"
    if rt.job_runner is not None:
        problems = rt.job_runner.problems
        checks["jobs"] = "; ".join(problems.values()) if problems else "ok"
    failing = tuple(f"{k}: {v}" for k, v in checks.items() if v != "ok")
    return Health(not failing, checks, failing)


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """What ``/status`` serves: the runtime at one instant.

    ``channels`` are the fullest live channels (each a ``ChannelSnapshot`` as JSON plus its
    ``mailbox`` depth); ``health`` is filled in by the endpoint, which alone checks it.
    """

    time: float
    uptime_seconds: float
    channels_live: int
    channels: tuple[dict[str, Any], ...]
    compactions_running: tuple[dict[str, str], ...]
    pools: dict[str, dict[str, int]]
    adapters: dict[str, dict[str, Any]]
    messages: dict[str, int]
    memory_index: dict[str, int] | None
    recent_failures: tuple[dict[str, Any], ...]
    config: dict[str, Any]

    def to_json(self, health: Health | None = None) -> dict[str, Any]:
        """The JSON body of ``/status`` (keys in field order, ``health`` last when given)."""
        out: dict[str, Any] = {
            "time": self.time,
            "uptime_seconds": self.uptime_seconds,
            "channels_live": self.channels_live,
            "channels": list(self.channels),
            "compactions_running": list(self.compactions_running),
            "pools": self.pools,
            "adapters": self.adapters,
            "messages": self.messages,
            "memory_index": self.memory_index,
            "recent_failures": list(self.recent_failures),
            "config": self.config,
        }
        if health is not None:
            out["health"] = health.to_json()
        return out


def status_snapshot(
    rt: Runtime, watcher: ConfigWatcher | None = None, limit: int = STATUS_CHANNELS
) -> StatusSnapshot:
    """The fullest ``limit`` live channels and everything running."""
    actors = sorted(rt.registry.actors.values(), key=lambda a: a.usage, reverse=True)
    channels = []
    for a in actors[:limit]:
        snap = a.snapshot().to_json()
        snap["mailbox"] = a.mailbox_depth
        channels.append(snap)
    running = tuple(
        {"channel": a.key, "tier": a.compactor.running.kind.value}
        for a in actors
        if a.compactor.running is not None
    )
    cfg = rt.config
    if not cfg.ops.status_task_text:
        for snap in channels:
            snap["background"] = [_without_task_text(run) for run in snap.get("background", [])]
    config: dict[str, Any] = {"source": cfg.source, "watching": watcher is not None}
    if watcher is not None:
        config["last_reload"] = watcher.last.to_json() if watcher.last else None
        config["last_applied"] = watcher.last_applied.to_json() if watcher.last_applied else None
        config["restart_required"] = list(watcher.restart_required)
    now = time.time()
    return StatusSnapshot(
        time=now,
        uptime_seconds=round(now - rt.metrics.started, 3),
        channels_live=len(actors),
        channels=tuple(channels),
        compactions_running=running,
        pools=rt.metrics.pool_counts(rt),
        adapters={
            **{name: {"connected": False, "problem": p} for name, p in rt.adapter_problems.items()},
            **{name: {"connected": a.connected()} for name, a in rt.adapters.items()},
        },
        messages={"stored": rt.registry.messages_in, "duplicates": rt.registry.duplicates},
        memory_index=(
            {"backlog": rt.memory.indexer.backlog, "indexed_upto": rt.memory.indexer.mark}
            if rt.memory is not None
            else None
        ),
        recent_failures=tuple(list(rt.metrics.recent_failures)[-20:]),
        config=config,
    )


async def jobs_view(rt: Runtime) -> dict[str, Any]:
    """The shared job queue as this process sees it: its own waits and runs, the queue's
    depth and the job workers alive (``[workers] queue = "shared"``)."""
    jobs = rt.jobs
    assert jobs is not None
    runner = rt.job_runner
    view: dict[str, Any] = {
        "waiting_here": jobs.waiting,
        "runs_jobs": runner is not None,
        "ran_here": runner.ran if runner is not None else 0,
        "requeued_here": jobs.requeued,
        "runner_problems": list(runner.problems.values()) if runner is not None else [],
    }
    try:
        view.update(await queue_depths(jobs.pool, where=jobs.where))
    except Exception as exc:  # the view must show even when the database does not answer
        view["error"] = str(exc)
    return view


async def cluster_view(rt: Runtime) -> dict[str, Any]:
    """This process's place in its cluster and every process the lease table lists."""
    member = rt.cluster
    assert member is not None
    view: dict[str, Any] = {
        "process": member.id,
        "leases_held": len(member.leases.held),
        "woken_owners": member.woken,
        "takeovers": member.takeovers,
        "processes": [],
    }
    try:
        rows = await member.leases.processes()
    except Exception as exc:  # the view must show even when the database does not answer
        view["error"] = str(exc)
        return view
    view["processes"] = [
        {
            "id": p.id,
            "host": p.host,
            "pid": p.pid,
            "heartbeat_age_seconds": round(p.heartbeat_age, 2),
            "alive": p.heartbeat_age < member.config.lease_seconds,
            "leases": p.leases,
            **p.info,
        }
        for p in rows
    ]
    return view


def _without_task_text(run: dict[str, Any]) -> dict[str, Any]:
    """A branch or worker view with its task text replaced by its length."""
    out = {k: v for k, v in run.items() if k != "task"}
    out["task_chars"] = len(str(run.get("task", "")))
    return out


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARD = frozenset({"", "0.0.0.0", "::"})


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header without its port (IPv6 unbracketed, lower case),
    or None when the header is malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return None
        name, rest = header[1:end], header[end + 1 :]
    elif header.count(":") > 1:
        return None  # an IPv6 address must be bracketed in a Host header
    else:
        name, colon, port = header.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    name = name.rstrip(".")
    return name or None


def host_allowed(header: str | None, bind_host: str, extra: Iterable[str] = ()) -> bool:
    """Whether a request naming ``header`` in its Host header may be served.

    Accepted: the bind address, the loopback names, the ``extra`` names, and (when
    bound to every interface) any IP address, which no DNS rebinding can produce.
    A request without a Host header cannot come from a browser and is served.
    """
    if header is None:
        return True
    name = host_name(header)
    if name is None:
        return False
    bind = bind_host.strip("[]").lower()
    allowed = LOOPBACK_NAMES | {bind} | {h.strip("[]").lower().rstrip(".") for h in extra}
    if name in allowed:
        return True
    if bind in _WILDCARD:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True
    return False


class OpsServer:
    """Serves /health, /metrics and /status of ``runtime``; an async context manager.

    ``port = 0`` picks a free port (see :attr:`url`).  ``adapters`` names the
    adapters /health waits for (default: :func:`expected_adapters`).
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        host: str = "127.0.0.1",
        port: int = 8686,
        watcher: ConfigWatcher | None = None,
        adapters: Iterable[str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.host = host
        self.port = port
        self.watcher = watcher
        self.adapters = list(adapters) if adapters is not None else None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{_client_host(self.host)}:{self.port}"

    async def start(self) -> None:
        """Listen on ``host:port``; raises OSError when the port is taken."""
        app = web.Application(middlewares=[self._check_host])
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/status", self._status)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        if not _is_loopback(self.host):
            log.warning(
                "ops.exposed",
                host=self.host,
                port=self.port,
                hint="/status names channels: firewall this port",
            )
        log.info("ops.started", url=self.url)

    async def aclose(self) -> None:
        """Stop serving. Safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> OpsServer:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @web.middleware
    async def _check_host(self, request: web.Request, handler: Any) -> web.StreamResponse:
        header = request.headers.get("Host")
        if host_allowed(header, self.host, self.runtime.config.ops.allowed_hosts):
            response: web.StreamResponse = await handler(request)
            return response
        log.warning("ops.host_refused", host=header, path=request.path)
        error = (
            f"Host {header!r} is not this server: use {self.url}, or add the name to "
            "[ops] allowed_hosts"
        )
        return web.json_response({"error": error}, status=403)

    async def _health(self, request: web.Request) -> web.Response:
        health = await check_health(self.runtime, self.adapters)
        return web.json_response(health.to_json(), status=200 if health.ready else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        registry = self.runtime.metrics.registry
        cluster = self.runtime.cluster
        # A cluster's processes are told apart by a process label on every sample.
        body = generate_latest(
            registry if cluster is None else ProcessLabelled(registry, cluster.id)  # type: ignore[arg-type]
        )
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _status(self, request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", STATUS_CHANNELS))
        except ValueError:
            return web.json_response({"error": "limit must be an integer"}, status=400)
        snap = status_snapshot(self.runtime, self.watcher, max(0, limit))
        health = await check_health(self.runtime, self.adapters)
        body = snap.to_json(health)
        if self.runtime.cluster is not None:
            body["cluster"] = await cluster_view(self.runtime)
        if self.runtime.jobs is not None:
            body["jobs"] = await jobs_view(self.runtime)
        return web.json_response(body)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _client_host(host: str) -> str:
    """Where a local client reaches a server bound to ``host`` (an IPv6 address bracketed)."""
    if host in _WILDCARD:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def ops_url(host: str, port: int) -> str:
    """The URL ``tierbot status`` uses for an ``[ops]`` host and port."""
    return f"http://{_client_host(host)}:{port}"


class OperatorSeat:
    """Config watching (plus SIGHUP) and the ops server around one runtime, for ``tierbot run``.

    The watcher runs when the config came from a file; the server when
    ``[ops] enabled`` and ``serve`` are true.  A server that cannot bind is
    logged and skipped: the bot keeps answering without it.
    """

    def __init__(self, runtime: Runtime, *, serve: bool = True, interval: float = 1.0) -> None:
        self.runtime = runtime
        source = Path(runtime.config.source)
        self.watcher = (
            ConfigWatcher(runtime, source, interval=interval) if source.is_file() else None
        )
        self.server: OpsServer | None = None
        self._serve = serve

    async def __aenter__(self) -> OperatorSeat:
        if self.watcher is not None:
            self.watcher.start()
        ops = self.runtime.config.ops
        if self._serve and ops.enabled:
            server = OpsServer(self.runtime, host=ops.host, port=ops.port, watcher=self.watcher)
            try:
                await server.start()
            except OSError as exc:
                log.error(
                    "ops.start_failed",
                    host=ops.host,
                    port=ops.port,
                    error=str(exc),
                    hint="another process holds the port; change [ops] port",
                )
            else:
                self.server = server
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.server is not None:
            await self.server.aclose()
        if self.watcher is not None:
            await self.watcher.aclose()

    def request_reload(self) -> None:
        """The SIGHUP handler: reload the config file now."""
        if self.watcher is None:
            log.warning("config.reload_skipped", reason="no config file: running on defaults")
            return
        self.watcher.request_reload()
