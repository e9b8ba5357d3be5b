"""The ``tierbot`` command line.  Only this module picks exit codes.

Exit codes: 0 success, 1 runtime failure (or nothing found where something specific was
asked for), 2 bad input (config, arguments, files).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import signal
import sqlite3
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from bot.cli_config import config_from
from tierbot.config import Config
from tierbot.errors import (
    AdapterError,
    ConfigError,
    FatalAdapterError,
    StoreError,
    TierbotError,
)
from tierbot.logging import configure_logging
from tierbot.messages import InboundMessage, State
from tierbot.vocab import COUNTER_KEYS

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
REPLAY_CHUNK = 64


class UsageError(TierbotError):
    """Bad command-line input (a file, a line of it, an argument)."""


def _setup_logging(cfg: Config, args: argparse.Namespace, log_file: Path | None = None) -> None:
    level = args.log_level or cfg.logging.level
    fmt = args.log_format or cfg.logging.format
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        configure_logging(level, "json" if fmt == "auto" else fmt, open(log_file, "a"))
    else:
        configure_logging(level, fmt)


# -- run / chat ---------------------------------------------------------------------


async def _start_all(rt: Any, adapters: Sequence[Any]) -> None:
    for adapter in adapters:
        await rt.start_adapter(adapter)


async def _serve(cfg: Config, *, console_channel: str | None, console_only: bool) -> int:
    from bot.adapters.console import ConsoleAdapter
    from bot.ops import OperatorSeat
    from bot.runtime import Runtime, install_signal_handlers

    stop = asyncio.Event()
    # Before the store is opened: a SIGTERM while the runtime starts (taking the writer
    # lock, loading the memory indexes) is a clean stop once it has started, never the
    # default action's kill half-way through.
    install_signal_handlers(stop)
    # The seat watches config.toml (SIGHUP reloads it too) and serves [ops] when enabled.
    async with Runtime.open(cfg) as rt, OperatorSeat(rt, serve=not console_only) as seat:
        install_signal_handlers(stop, reload=seat.request_reload)
        # Everything loaded at startup lives as long as the process: keep it out of the
        # collector's full passes, which otherwise stall a turn now and then.
        gc.freeze()
        waiters: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(stop.wait()),
            # An adapter's reconnects ending in a refused token end the process too.
            asyncio.ensure_future(rt.fatal.wait()),
        ]
        console = None
        if console_only or cfg.adapters.console.enabled:
            console = ConsoleAdapter(cfg.adapters.console, channel=console_channel)
            await rt.start_adapter(console)
        if not console_only:
            # A refused token raises FatalAdapterError (exit 1); an unreachable platform
            # is retried in the background and shown by /health.
            # Started beside the stop signal: a platform that never answers must not make
            # SIGTERM wait until its connection gives up.
            platforms = _platform_adapters(cfg)
            starting = asyncio.ensure_future(_start_all(rt, platforms))
            await asyncio.wait([starting, *waiters], return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                for adapter in platforms:  # the one cut off mid-connect is not registered
                    with contextlib.suppress(Exception):
                        await adapter.stop()
                for w in waiters:
                    w.cancel()
                if rt.fatal_error is not None:
                    raise rt.fatal_error
                return EXIT_OK
            starting.result()  # a refused token: FatalAdapterError, exit 1
        if console is not None and (console_only or len(rt.adapters) == 1):
            waiters.append(asyncio.ensure_future(console.finished.wait()))
        if not rt.adapters and not rt.adapter_problems:
            print("no adapter is running: enable one in config.toml", file=sys.stderr)
            return EXIT_FAIL
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
        if console is not None and stop.is_set():
            console.goodbye()  # Ctrl-C (or SIGTERM) at the prompt
        if rt.fatal_error is not None:
            raise rt.fatal_error
        if console is not None and console.failure is not None:
            why = str(console.failure) or repr(console.failure)
            raise AdapterError(f"the console stopped: {why}", adapter="console") from None
    return EXIT_OK


def _platform_adapters(cfg: Config) -> list[Any]:
    """The Discord and Slack adapters the config enables (when they are installed)."""
    adapters: list[Any] = []
    discord_cfg = getattr(cfg.adapters, "discord", None)
    if discord_cfg is not None and discord_cfg.enabled:
        from bot.adapters.discord import DiscordAdapter

        adapters.append(DiscordAdapter(discord_cfg))
    slack_cfg = getattr(cfg.adapters, "slack", None)
    if slack_cfg is not None and slack_cfg.enabled:
        from bot.adapters.slack import SlackAdapter

        adapters.append(SlackAdapter(slack_cfg))
    return adapters


def _log_file_for(cfg: Config, interactive: bool) -> Path | None:
    return cfg.storage_path().parent / "tierbot.log" if interactive else None


def cmd_run(args: argparse.Namespace) -> int:
    cfg = config_from(args.config)
    interactive = cfg.adapters.console.enabled and sys.stdin.isatty()
    log_file = _log_file_for(cfg, interactive)
    _setup_logging(cfg, args, log_file)
    if log_file is not None:
        print(f"(logs go to {log_file})")
    return asyncio.run(_serve(cfg, console_channel=None, console_only=False))


async def _work(cfg: Config) -> int:
    """``tierbot worker``: run the shared queue's jobs until SIGTERM/SIGINT."""
    from bot.ops import OperatorSeat
    from bot.runtime import Runtime, install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    async with Runtime.open(cfg, jobs_only=True) as rt, OperatorSeat(rt) as seat:
        install_signal_handlers(stop, reload=seat.request_reload)
        gc.freeze()
        await stop.wait()
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    cfg = config_from(args.config)
    if cfg.workers.queue != "shared":
        raise UsageError(
            f'{cfg.source}: [workers] queue is "{cfg.workers.queue}": a worker process runs '
            'the shared queue\'s jobs, set [workers] queue = "shared" (PostgreSQL) first'
        )
    _setup_logging(cfg, args)
    return asyncio.run(_work(cfg))


def cmd_chat(args: argparse.Namespace) -> int:
    cfg = config_from(args.config)
    log_file = _log_file_for(cfg, sys.stdin.isatty())
    _setup_logging(cfg, args, log_file)
    return asyncio.run(_serve(cfg, console_channel=args.channel, console_only=True))


# -- replay -----------------------------------------------------------------------------


#: Replay input limits; a line over them is rejected and reported, never stored cut short.
#: The text's limit is ``[runtime] max_message_chars`` (this is its default).
MAX_TEXT_CHARS = 100_000
MAX_NAME_CHARS = 1_000
MAX_LINE_BYTES = 4 * 1024 * 1024
#: 1970-01-01 .. 9999-12-30 23:59:59 UTC: a time every export can render in any time zone.
TS_MIN, TS_MAX = 0.0, 253_402_214_399.0
REJECTED_LISTED = 100


@dataclass(frozen=True, slots=True)
class Rejected:
    """A replay line that was not stored, and why."""

    line: int
    error: str


class _BadLine(Exception):
    """Why one replay line cannot be stored."""


def _parse_ts(value: Any) -> float:
    if value is None:
        return time.time()
    shown = repr(value)[:60]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _BadLine(f"'ts' must be seconds since 1970 or an ISO-8601 string, got {shown}")
    try:
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                raise _BadLine(f"'ts' must be ISO-8601, got {shown}") from None
            ts = parsed.timestamp()
        else:
            ts = float(value)
    except (OverflowError, ValueError, OSError):
        ts = math.inf
    if not math.isfinite(ts):
        raise _BadLine(f"'ts' must be a finite time between 1970-01-01 and 9999-12-30, got {shown}")
    if not TS_MIN <= ts <= TS_MAX:
        raise _BadLine(f"'ts' must be between 1970-01-01 and 9999-12-30, got {shown}")
    return ts


def _parse_line(raw: bytes, channel: str, max_text: int = MAX_TEXT_CHARS) -> InboundMessage | None:
    """One replay line as a message; None for a blank line; _BadLine says what is wrong."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not valid UTF-8 (byte {exc.start + 1} of the line)") from None
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise _BadLine("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with too many digits
        raise _BadLine(f"invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise _BadLine("expected a JSON object")
    for key in ("id", "author", "text"):
        value = obj.get(key)
        if not isinstance(value, str):
            raise _BadLine(f"{key!r} must be a string")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _BadLine(
                f"{key!r} is not valid Unicode (a lone surrogate at character {exc.start + 1})"
            ) from None
        limit = max_text if key == "text" else MAX_NAME_CHARS
        if len(value) > limit:
            where = " ([runtime] max_message_chars)" if key == "text" else ""
            raise _BadLine(
                f"{key!r} is {len(value):,} characters long; the limit is {limit:,}{where}"
            )
    if not obj["id"]:
        raise _BadLine("'id' must not be empty")
    return InboundMessage(
        channel=channel,
        platform_id=obj["id"],
        author_id=obj["author"],
        author_name=obj["author"],
        text=obj["text"],
        ts=_parse_ts(obj.get("ts")),
        addressed=True,
    )


def _raw_lines(fh: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """The file's lines as bytes; None for a line longer than ``max_bytes`` (skipped)."""
    while True:
        raw = fh.readline(max_bytes + 1)
        if not raw:
            return
        if len(raw) > max_bytes and not raw.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield raw


def read_replay(
    path: Path, channel: str, max_text: int = MAX_TEXT_CHARS
) -> Iterator[InboundMessage | Rejected]:
    """Parse a replay file lazily: a message per good line, a Rejected per bad one.

    Every line is checked on its own (bytes decoded per line), so one bad line never
    takes the good lines around it down; an unreadable file raises UsageError.
    """
    for _, item in _read_numbered(path, channel, max_text):
        yield item


def _read_numbered(
    path: Path, channel: str, max_text: int = MAX_TEXT_CHARS
) -> Generator[tuple[int, InboundMessage | Rejected], None, None]:
    """:func:`read_replay` with each item's input line number."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    # A line holds the text (up to 4 bytes a character in UTF-8, 6 as a JSON escape).
    max_bytes = max(MAX_LINE_BYTES, 6 * max_text + 65_536)
    with fh:
        for n, raw in enumerate(_raw_lines(fh, max_bytes), 1):
            if raw is None:
                yield n, Rejected(n, f"line longer than {max_bytes:,} bytes")
                continue
            if n == 1:
                # Editors on Windows start UTF-8 files with a byte order mark; it is not data.
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                msg = _parse_line(raw, channel, max_text)
            except _BadLine as exc:
                yield n, Rejected(n, str(exc))
                continue
            if msg is not None:
                yield n, msg


class _Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the replay was waiting on its input."""


class _StopSignals:
    """SIGINT/SIGTERM ask the replay to stop taking lines (``received`` names the signal).

    A Python-level handler, not the event loop's: the input may be a pipe or a FIFO
    whose read blocks the loop, and the request must still be seen at once.  While
    ``reading`` is set (only the synchronous read and parse of the next line runs), the
    handler raises :class:`_Interrupted` to end a read that may never return; at any
    other moment it only records the request, so a batch being stored is never cut
    in half.
    """

    def __init__(self) -> None:
        self.received: str | None = None
        self.reading = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signal.Signals(signum).name
        if self.reading:
            self.reading = False
            raise _Interrupted


async def replay(
    cfg: Config, path: Path, channel: str, *, listen_only: bool, progress: bool = False
) -> dict[str, Any]:
    """Feed ``path`` into ``channel`` like inbound platform messages; return the report.

    SIGINT or SIGTERM stops it between two batches: the lines read but not yet stored
    are dropped, what was stored is drained (within ``[runtime] drain_seconds``), and
    the report says ``interrupted`` with the last input line stored, so every line
    before ``resume_from_line`` is in the store.
    """
    from bot.runtime import Runtime

    started = time.monotonic()
    lines = duplicates = 0
    stored_lines, last_stored = 0, 0
    rejected: list[Rejected] = []
    rejected_total = 0

    async def submit(chunk: list[InboundMessage]) -> None:
        nonlocal duplicates
        deliveries = await rt.registry.submit_many(chunk)
        duplicates += sum(1 for d in deliveries if not d.accepted)

    with _StopSignals() as stop:
        async with Runtime.open(cfg, respond_override="listen" if listen_only else None) as rt:
            # Backpressure: nobody waits for a reply during an import, so each chunk waits
            # until the channel's compaction has room for it (ChannelActor.make_room).
            settings = cfg.for_channel(channel)
            gap = settings.compaction.emergency_threshold - settings.compaction.aggressive_threshold
            budget = max(1, int(gap / 2 * settings.context_window))
            chunk: list[InboundMessage] = []
            chunk_last = 0  # the input line of the chunk's last message
            tokens = 0

            async def flush() -> None:
                nonlocal stored_lines, last_stored
                await (await rt.registry.actor(channel)).make_room(tokens)
                await submit(chunk)
                stored_lines += len(chunk)
                last_stored = chunk_last

            items = _read_numbered(path, channel, cfg.runtime.max_message_chars)
            while stop.received is None:
                try:
                    stop.reading = True
                    entry = next(items, None)
                    stop.reading = False
                except _Interrupted:
                    break
                if entry is None:
                    break
                n, item = entry
                if isinstance(item, Rejected):
                    rejected_total += 1
                    if len(rejected) < REJECTED_LISTED:
                        rejected.append(item)
                    print(f"tierbot: {path}:{item.line}: {item.error} (skipped)", file=sys.stderr)
                    continue
                cost = rt.counter.count_message(item.text)
                if chunk and (len(chunk) >= REPLAY_CHUNK or tokens + cost > budget):
                    await flush()
                    chunk, tokens = [], 0
                    if progress:
                        print(f"\rreplayed {lines} messages", end="", file=sys.stderr, flush=True)
                    if stop.received is not None:
                        break
                chunk.append(item)
                chunk_last = n
                tokens += cost
                lines += 1
            items.close()
            if stop.received is None:
                if chunk:
                    await flush()
                await rt.drain()
                await (await rt.registry.actor(channel)).settle()
                await rt.drain()
            else:
                # What was stored is kept and compacted as far as the shutdown limit allows;
                # the lines not stored yet are the operator's to feed again.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(cfg.runtime.drain_seconds):
                        await rt.drain()
                        await (await rt.registry.actor(channel)).settle()
            if progress:
                print(f"\rreplayed {stored_lines} messages", file=sys.stderr)
            snap = (await rt.registry.actor(channel)).snapshot()
            memories = await rt.memory.count(channel) if rt.memory is not None else 0
            archived = await rt.store.count(channel, state=State.ARCHIVED)
    if rt.store.refused is not None and stop.received is None:
        # Every line was stored, but what came after (summaries, the channel's state)
        # was refused: no success.  The store's own error first, as when an append fails.
        raise StoreError(
            f"{rt.store.refused}; all {stored_lines} messages were stored, the writes after "
            "them were refused (compaction resumes at the next start)"
        )
    comp = snap.compactions
    report: dict[str, Any] = {
        "channel": channel,
        "messages_in": stored_lines,
        "duplicates": duplicates,
        "rejected": [{"line": r.line, "error": r.error} for r in rejected],
        "rejected_total": rejected_total,
        "live_messages": snap.live_messages,
        "live_tokens": snap.live_tokens,
        "context_window": snap.context_window,
        "peak_usage": round(snap.peak_usage, 4),
        "final_usage": round(snap.usage, 4),
        "compactions": {k: comp.get(k, 0) for k in COUNTER_KEYS},
        "archived_messages": archived,
        "memories": memories,
        "seconds": round(time.monotonic() - started, 3),
        "interrupted": stop.received is not None,
    }
    if stop.received is not None:
        report["signal"] = stop.received
        report["last_line_stored"] = last_stored
        report["resume_from_line"] = last_stored + 1
    return report


def cmd_replay(args: argparse.Namespace) -> int:
    cfg = config_from(args.config)
    _setup_logging(cfg, args)
    report = asyncio.run(
        replay(
            cfg,
            Path(args.file),
            args.channel,
            listen_only=args.listen_only,
            progress=sys.stderr.isatty(),
        )
    )
    if report["interrupted"]:
        # Every line up to last_line_stored is stored (or was rejected); feeding them again
        # is harmless, since a redelivered (channel, id) is ignored.
        nxt = report["resume_from_line"]
        print(
            f"tierbot: replay interrupted by {report['signal']}: {report['messages_in']} "
            f"messages stored, through line {report['last_line_stored']} of {args.file}; "
            f"resume with: tail -n +{nxt} {args.file}",
            file=sys.stderr,
        )
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    if report["interrupted"]:
        return EXIT_FAIL
    # Bad lines were skipped and reported; every good line is stored.
    return EXIT_USAGE if report["rejected_total"] else EXIT_OK


# -- history ------------------------------------------------------------------------------


async def export_history(cfg: Config, channel: str) -> list[dict[str, Any]]:
    from tierbot.backends import open_store

    path = cfg.storage_path()
    if cfg.storage.backend == "sqlite" and not path.is_file():
        raise UsageError(f"no store at {path}: check [storage] path in {cfg.source}")
    rows = []
    async with await open_store(cfg, read_only=True) as store:
        async for m in store.export(channel):
            rows.append(
                {
                    "id": m.platform_id,
                    "author": m.author_name or m.author_id,
                    "role": m.role.value,
                    "text": m.text,
                    "ts": _render_ts(m.ts),
                    "state": m.state.value,
                }
            )
    return rows


def _render_ts(ts: float) -> str | float:
    """ISO-8601 local time; a time no calendar can show (stored by an older tierbot) as is."""
    try:
        return datetime.fromtimestamp(ts).astimezone().isoformat()
    except (OverflowError, ValueError, OSError):
        return ts


def cmd_history_export(args: argparse.Namespace) -> int:
    cfg = config_from(args.config)
    _setup_logging(cfg, args)
    for row in asyncio.run(export_history(cfg, args.channel)):
        print(json.dumps(row, ensure_ascii=False))
    return EXIT_OK


# -- entry --------------------------------------------------------------------------------------


DESCRIPTION = """\
tierbot: a chat bot for Discord, Slack and the terminal that remembers for months.

Start with `tierbot init` (writes a commented config.toml here), check it with
`tierbot config check`, then `tierbot run`. Every command reads --config PATH, or
./config.toml; a channel is always named with --channel KEY (e.g. discord:GUILD:CHANNEL).
"""

EPILOG = """\
exit codes: 0 success; 1 a runtime failure, or nothing found where something specific
was asked for; 2 bad input (a config problem, a bad argument or input file).
Operations guide: docs/operations.md in the source distribution.
"""


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("tierbot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config", metavar="PATH", help="path of config.toml (default: ./config.toml)"
    )
    common.add_argument("--log-format", choices=["auto", "pretty", "json"], help="log lines")
    common.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="least log level"
    )
    parser = argparse.ArgumentParser(
        prog="tierbot",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tierbot {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", parents=[common], help="start every enabled adapter")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser(
        "worker",
        parents=[common],
        help="run shared summaries and task workers only (no adapter, no channel)",
        description='Take jobs from the shared queue ([workers] queue = "shared", PostgreSQL): '
        "summaries, with the memories they save, and task workers' tool loops; the channels' "
        "owners apply the results. Stops cleanly on SIGTERM/SIGINT.",
    )
    p.set_defaults(func=cmd_worker)
    p = sub.add_parser("chat", parents=[common], help="chat in the terminal")
    p.add_argument("--channel", default=None, help="channel key (default console:local)")
    p.set_defaults(func=cmd_chat)
    p = sub.add_parser(
        "replay",
        parents=[common],
        help="feed a JSON Lines file into a channel",
        description='Feed a JSON Lines file ({"id", "author", "text", "ts"} per line) '
        "into a channel as inbound messages and print a JSON report. Every line is checked: "
        "a bad line (not UTF-8, not a JSON object, a missing or non-string id/author/text, "
        "text over [runtime] max_message_chars (100,000 by default), a ts that is not a "
        "finite time between 1970-01-01 and 9999-12-30) is skipped, named on stderr as "
        "FILE:LINE: reason, and "
        'listed in the report\'s "rejected"; every good line is stored. Exit 0 when every '
        "line was stored, 2 when some were skipped, 1 when the store failed or SIGINT/SIGTERM "
        "stopped it (stderr then names the last line stored, to resume from). Only one "
        "process may write a store: replay is refused while a bot runs on it.",
    )
    p.add_argument("file", help="JSON Lines file to feed, one message per line")
    p.add_argument("--channel", required=True, help="channel key the messages go to")
    p.add_argument("--listen-only", action="store_true", help="record only, never reply")
    p.add_argument("--json", action="store_true", help="print the report on one line")
    p.set_defaults(func=cmd_replay)

    hist = sub.add_parser("history", help="a channel's message log")
    hsub = hist.add_subparsers(dest="history_command", required=True)
    p = hsub.add_parser("export", parents=[common], help="every message as JSON Lines")
    p.add_argument("--channel", required=True, help="channel key, e.g. discord:GUILD:CHANNEL")
    p.set_defaults(func=cmd_history_export)

    from bot.cli_setup import add_setup_commands

    add_setup_commands(sub, common)
    from bot.cli_memory import add_memory_commands

    add_memory_commands(sub, common)
    from bot.cli_ops import add_ops_commands

    add_ops_commands(sub, common)
    from bot.cli_replies import add_replies_commands

    add_replies_commands(sub, common)
    from bot.cli_db import add_db_commands

    add_db_commands(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"tierbot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FatalAdapterError as exc:
        structlog.get_logger("tierbot.cli").error("fatal", adapter=exc.adapter, error=str(exc))
        print(f"tierbot: [adapters.{exc.adapter}] {exc}", file=sys.stderr)
        return EXIT_FAIL
    except TierbotError as exc:
        structlog.get_logger("tierbot.cli").error("fatal", error=str(exc))
        # One line, even when a server's message brings its own (PostgreSQL's HINT: ...).
        print(f"tierbot: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAIL
    except sqlite3.DatabaseError as exc:
        # A read deep inside a command hit a damaged file: one line, not a traceback.
        structlog.get_logger("tierbot.cli").error("fatal", error=str(exc))
        print(
            f"tierbot: the database cannot be read: {exc} (see 'corrupt database' in "
            "docs/operations.md)",
            file=sys.stderr,
        )
        return EXIT_FAIL
    except KeyboardInterrupt:
        # `run` and `chat` turn Ctrl-C into a clean stop themselves; reaching here means a
        # command was cut short (a replay with lines not yet stored), which is no success.
        print("tierbot: interrupted before the command finished", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
