"""``tierbot status`` and ``tierbot channel show``: the operator's views.

``status`` asks a running bot through its ``[ops]`` endpoint (``/status``);
``channel show`` reads the compaction history straight from the SQLite store,
so it works with the bot stopped.  Output goes to stdout, logs to stderr.
Exit codes as in :mod:`bot.cli`: 1 when no bot answers, 2 for bad input
(the endpoint is off, no store at the configured path).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tomllib
import urllib.error
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.cli_config import NotFound, config_and_logging
from bot.commands import usage_bar
from tierbot.config import Config, OpsConfig, apply_env_overrides, default_config_path
from tierbot.errors import ConfigError, TierbotError
from tierbot.store import CompactionRecord
from tierbot.vocab import CompactionKind, Outcome

STATUS_TIMEOUT = 5.0
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class OpsUnavailable(TierbotError):
    """No running bot answered at the ops endpoint (or the endpoint is off)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def _ops_settings(args: argparse.Namespace) -> tuple[OpsConfig, str]:
    """``[ops]`` of the config file, even when another part of the file is invalid.

    An edit the running bot rejected must not hide its status: only ``[ops]``
    has to be valid here, and the other problems are printed as a warning.
    """
    try:
        cfg = config_and_logging(args)
        return cfg.ops, cfg.source
    except ConfigError as exc:
        path = Path(args.config) if args.config else default_config_path()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8")) if path else {}
            apply_env_overrides(data, os.environ)
            ops = OpsConfig.model_validate(data.get("ops", {}))
        except (OSError, ValueError):
            raise exc from None
        first = str(exc).splitlines()[0]
        print(
            f"tierbot: warning: the config file has errors ({first} ...); reading [ops] only",
            file=sys.stderr,
        )
        return ops, exc.source


def _fail(exc: OpsUnavailable) -> int:
    print(f"tierbot: {exc}", file=sys.stderr)
    return EXIT_USAGE if exc.usage else EXIT_FAIL


def _clock(ts: float, with_date: bool = False) -> str:
    fmt = "%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S"
    return datetime.fromtimestamp(ts).strftime(fmt)


# -- status --------------------------------------------------------------------------


def fetch_status(url: str, limit: int, timeout: float = STATUS_TIMEOUT) -> dict[str, Any]:
    """GET ``url``/status; raises OpsUnavailable naming the URL when nothing answers."""
    try:
        with urllib.request.urlopen(f"{url}/status?limit={limit}", timeout=timeout) as resp:
            data: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise OpsUnavailable(f"{url}/status answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OpsUnavailable(
            f"no tierbot answers at {url} ({reason}): is it running, with [ops] enabled = true?"
        ) from None
    except ValueError as exc:  # not JSON: another program holds the port
        raise OpsUnavailable(f"{url}/status did not answer with tierbot's status: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("channels"), list):
        raise OpsUnavailable(f"{url}/status did not answer with tierbot's status")
    return data


def render_status_view(snap: dict[str, Any], url: str, width: int = 30) -> str:
    """``tierbot status`` for a terminal: health, config, pools, channels by usage, failures."""
    health = snap.get("health") or {}
    lines = [
        f"tierbot at {url}: "
        + (
            "healthy"
            if health.get("status") == "ok"
            else "UNHEALTHY: " + "; ".join(health.get("failing", []))
        )
    ]
    cfg = snap.get("config") or {}
    cfg_line = f"config {cfg.get('source', '?')}"
    applied = cfg.get("last_applied")
    if applied:
        n = len(applied["live"])
        cfg_line += f", last applied {_clock(applied['at'])} ({n} key{'s' if n != 1 else ''})"
    last = cfg.get("last_reload")
    if last and last.get("outcome") == "rejected":
        cfg_line += f"\n  last edit REJECTED at {_clock(last['at'])}, still running the old config:"
        cfg_line += "".join(f"\n    {line}" for line in last["error"].splitlines())
    if cfg.get("restart_required"):
        cfg_line += "\n  restart required for: " + ", ".join(cfg["restart_required"])
    lines.append(cfg_line)
    pools = snap.get("pools") or {}
    lines.append(
        "pools: "
        + (
            ", ".join(
                f"{name} {p['running']} running / {p['queued']} queued (of {p['concurrency']})"
                for name, p in pools.items()
            )
            or "none"
        )
    )
    adapters = snap.get("adapters") or {}
    if adapters:
        lines.append(
            "adapters: "
            + ", ".join(
                f"{n} {'connected' if a['connected'] else 'DISCONNECTED'}"
                for n, a in adapters.items()
            )
        )
    cluster = snap.get("cluster")
    if cluster:
        problem = cluster.get("error")
        lines.append(
            f"cluster: this is {cluster['process']}, owning {cluster['leases_held']} channels"
            + (f" (cannot read the lease table: {problem})" if problem else "")
        )
        for p in cluster.get("processes", []):
            state = "alive" if p.get("alive") else "SILENT"
            lines.append(
                f"  {p['id']:<24} {state:<6} pid {p['pid']} on {p['host']}, "
                f"{p['leases']} leases, heartbeat {p['heartbeat_age_seconds']:.1f} s ago"
            )
    jobs = snap.get("jobs")
    if jobs:
        queues = jobs.get("queues") or {}
        depth = ", ".join(
            f"{q} {d['todo']} waiting / {d['doing']} running" for q, d in queues.items()
        )
        lines.append(
            f"job queue: {depth or 'empty'}; {jobs.get('workers', 0)} queue workers alive "
            "(two per process that runs jobs)"
            + (f" (cannot read the queue: {jobs['error']})" if jobs.get("error") else "")
        )
        here = "runs jobs" if jobs.get("runs_jobs") else "runs no jobs"
        lines.append(
            f"  this process {here} (ran {jobs.get('ran_here', 0)}, put back "
            f"{jobs.get('requeued_here', 0)} stalled) and waits for {jobs.get('waiting_here', 0)}"
        )
    channels = snap.get("channels") or []
    total = snap.get("channels_live", len(channels))
    lines.append("")
    lines.append(
        f"channels: {total} live" + (f", the {len(channels)} fullest:" if channels else "")
    )
    key_width = min(40, max((len(c["channel"]) for c in channels), default=0))
    for c in channels:
        extra = f"  compacting: {c['compaction_running']}" if c.get("compaction_running") else ""
        if c.get("mailbox"):
            extra += f"  queued {c['mailbox']}"
        lines.append(
            f"  {c['channel']:<{key_width}} {usage_bar(c['usage'], c['thresholds'], width)}"
            f"  {c['live_tokens']}/{c['context_window']}{extra}"
        )
    if channels:
        lines.append(
            f"  {'':<{key_width}} (| marks each channel's background, aggressive and "
            "emergency thresholds)"
        )
    running = snap.get("compactions_running") or []
    lines.append("")
    lines.append(
        "running compactions: "
        + (", ".join(f"{r['channel']} ({r['tier']})" for r in running) or "none")
    )
    failures = snap.get("recent_failures") or []
    lines.append("recent failures:" + ("" if failures else " none"))
    for f in failures[-10:]:
        what = " ".join(filter(None, [f.get("tier"), f.get("outcome")]))
        lines.append(
            f"  {_clock(f['time'])} {f['event']} {f.get('channel') or ''} {what}: "
            f"{f.get('reason') or ''}".rstrip(": ")
        )
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    try:
        if args.url:
            url = args.url.rstrip("/")
        else:
            ops, source = _ops_settings(args)
            if not ops.enabled:
                raise OpsUnavailable(
                    f"the ops endpoint is off in {source}: set [ops] enabled = true and "
                    "restart tierbot (or pass --url)",
                    usage=True,
                )
            from bot.ops import ops_url

            url = ops_url(ops.host, ops.port)
        snap = fetch_status(url, args.limit)
    except OpsUnavailable as exc:
        return _fail(exc)
    print(json.dumps(snap, indent=2) if args.json else render_status_view(snap, url))
    return EXIT_OK


# -- channel show ------------------------------------------------------------------------


async def compaction_history(cfg: Config, channel: str, limit: int) -> list[CompactionRecord]:
    """The newest ``limit`` compactions of ``channel``, oldest first, read from the store."""
    from tierbot.backends import open_store

    path = cfg.storage_path()
    if cfg.storage.backend == "sqlite" and not path.exists():
        raise OpsUnavailable(
            f"no store at {path}: check [storage] path in {cfg.source}", usage=True
        )
    async with await open_store(cfg, read_only=True) as store:
        if channel not in await store.channel_keys():
            raise NotFound(
                f"no channel {channel!r} in the store at {store_name(cfg)} "
                "(`tierbot status` lists the channels of a running bot)"
            )
        records = await store.compactions(channel, limit)
    return list(reversed(records))


def store_name(cfg: Config) -> str:
    return str(cfg.storage_path()) if cfg.storage.backend == "sqlite" else "$" + cfg.storage.dsn_env


def window_of(r: CompactionRecord) -> int | None:
    """The context window a compaction ran under (usage is tokens over the window)."""
    if r.usage_before > 0 and r.tokens_before > 0:
        return round(r.tokens_before / r.usage_before)
    return None


def record_json(r: CompactionRecord) -> dict[str, Any]:
    return {
        "time": datetime.fromtimestamp(r.started).astimezone().isoformat(),
        "tier": r.tier,
        "outcome": Outcome.of(r.outcome),
        "usage_before": round(r.usage_before, 4),
        "usage_after": round(r.usage_after, 4),
        "messages": r.covered,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "memories": r.memories,
        "duration": round(r.duration, 3),
        "reason": r.reason,
        "context_window": window_of(r),
    }


def advice(records: list[CompactionRecord], cfg: Config, channel: str) -> list[str]:
    """What the history suggests changing (see docs/tuning.md)."""
    c = cfg.for_channel(channel).compaction
    tiers = Counter(r.tier for r in records if r.outcome is Outcome.OK)
    failed = sum(1 for r in records if r.outcome is Outcome.FAILED)
    noop = sum(1 for r in records if r.outcome is Outcome.NOOP)
    out = []
    emergencies = tiers[CompactionKind.EMERGENCY]
    if emergencies:
        lower = max(0.05, round(c.background_threshold - 0.10, 2))
        out.append(
            f"{emergencies} emergency truncation(s): background compaction does not keep "
            f"up. Lower background_threshold ({c.background_threshold:.2f} -> {lower:.2f}) so it "
            "starts earlier, or raise [workers] compaction_concurrency if workers are queued."
        )
    if tiers[CompactionKind.AGGRESSIVE] > tiers[CompactionKind.BACKGROUND]:
        out.append(
            "aggressive compactions outnumber background ones: messages arrive faster than a "
            "summary takes; lower background_threshold or raise background_fraction."
        )
    if failed:
        out.append(
            f"{failed} failed compaction(s): see the reasons above and the logs "
            "(compaction.failed)."
        )
    if noop:
        out.append(
            f"{noop} compaction(s) freed nothing (noop): the summaries were not smaller than "
            "the messages; lower max_summary_tokens or raise background_fraction."
        )
    return out


def render_history(records: list[CompactionRecord], cfg: Config, channel: str) -> str:
    s = cfg.for_channel(channel)
    c = s.compaction
    ran = next((w for r in reversed(records) if (w := window_of(r)) is not None), None)
    window = f"{s.context_window} tokens"
    if ran is not None and ran != s.context_window:
        window += f" (the last compaction ran at {ran} tokens: the config has changed since)"
    counts = Counter(r.tier if r.outcome == "ok" else Outcome.of(r.outcome) for r in records)
    lines = [
        f"channel {channel}: {len(records)} compactions"
        + (
            " (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")" if records else ""
        ),
        f"thresholds now: background {c.background_threshold:.0%}, aggressive "
        f"{c.aggressive_threshold:.0%}, emergency {c.emergency_threshold:.0%} of {window}",
    ]
    if not records:
        lines.append("no compaction recorded yet")
        return "\n".join(lines)
    lines.append("")
    lines.append(
        f"{'time':<19}  {'tier':<10} {'outcome':<7} {'usage before->after':>19} "
        f"{'msgs':>5} {'tokens before->after':>21} {'mem':>4} {'secs':>7}"
    )
    for r in records:
        usage = f"{r.usage_before:6.1%} -> {r.usage_after:6.1%}"
        tokens = f"{r.tokens_before} -> {r.tokens_after}"
        outcome = Outcome.of(r.outcome)
        lines.append(
            f"{_clock(r.started, True):<19}  {r.tier:<10} {outcome:<7} {usage:>19} "
            f"{r.covered:>5} {tokens:>21} {r.memories:>4} {r.duration:>7.2f}"
            + (f"  {r.reason}" if r.reason else "")
        )
    tips = advice(records, cfg, channel)
    if tips:
        lines.append("")
        lines.extend(f"advice: {t}" for t in tips)
    return "\n".join(lines)


def cmd_channel_show(args: argparse.Namespace) -> int:
    cfg = config_and_logging(args)
    try:
        records = asyncio.run(compaction_history(cfg, args.channel, args.limit))
    except OpsUnavailable as exc:
        return _fail(exc)
    except NotFound as exc:
        print(f"tierbot: {exc}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        for r in records:
            print(json.dumps(record_json(r)))
    else:
        print(render_history(records, cfg, args.channel))
    return EXIT_OK


def add_ops_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``status`` and ``channel show`` on the top-level subparsers."""
    p = sub.add_parser("status", parents=[common], help="snapshot of the running bot")
    p.add_argument("--json", action="store_true", help="the raw /status JSON, for scripts")
    p.add_argument("--url", help="the ops endpoint (default: from [ops] in the config)")
    p.add_argument("--limit", type=int, default=20, help="channels to show (fullest first)")
    p.set_defaults(func=cmd_status)

    chan = sub.add_parser("channel", help="one channel's history")
    csub = chan.add_subparsers(dest="channel_command", required=True)
    p = csub.add_parser("show", parents=[common], help="compaction history of a channel")
    p.add_argument("--channel", required=True, help="channel key, e.g. discord:GUILD:CHANNEL")
    p.add_argument("--limit", type=int, default=50, help="newest N compactions (default 50)")
    p.add_argument("--json", action="store_true", help="one JSON object per compaction")
    p.set_defaults(func=cmd_channel_show)
