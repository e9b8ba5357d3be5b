"""``tierbot memory ...``: search, show, forget and export the memory graph.

Output is JSON (one array, or JSON Lines for many queries and exports) on stdout;
logs go to stderr.  Bad input (an unknown id, an unreadable queries file) prints
one line to stderr and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.cli_config import NotFound, config_and_logging
from tierbot.config import Config
from tierbot.errors import ConfigError, ToolError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class _BadInput(Exception):
    """One-line complaint about the command's input."""


@asynccontextmanager
async def _graph(cfg: Config, *, write: bool = False) -> AsyncIterator[Any]:
    """The memory graph: read-only (safe beside a running bot), or under the store's
    writer lock (refused while a bot or another writer runs)."""
    from memory_graph import MemoryGraph
    from memory_graph.backends import open_graph
    from tierbot.storelock import WriterLock

    if cfg.storage.backend != "sqlite":
        # The database serialises writers itself; there is no file lock to take.
        async with await open_graph(cfg, read_only=not write) as graph:
            yield graph
        return
    path = cfg.storage_path()
    if not path.is_file():
        raise _BadInput(f"no store at {path}: check [storage] path in {cfg.source}")
    if not write:
        async with await MemoryGraph.open(path, cfg.memory, read_only=True) as graph:
            yield graph
        return
    with WriterLock(path):
        async with await MemoryGraph.open(path, cfg.memory) as graph:
            yield graph


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _read_queries(path: str) -> list[tuple[Any, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise _BadInput(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise _BadInput(f"{path}: not UTF-8 (byte {exc.start + 1} of the file)") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _BadInput(f"{path}:{n}: invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
            raise _BadInput(f"{path}:{n}: expected an object with a string 'query'")
        out.append((obj.get("id"), obj["query"]))
    return out


async def _search(cfg: Config, args: argparse.Namespace) -> None:
    if (args.query is None) == (args.queries is None):
        raise _BadInput("give either QUERY or --queries FILE")
    batch = _read_queries(args.queries) if args.queries else [(None, args.query)]
    async with _graph(cfg) as graph:
        for qid, query in batch:
            hits = await graph.recall(query, channel=args.channel, limit=args.limit)
            results = [h.to_json() for h in hits]
            _emit({"id": qid, "results": results} if args.queries else results)


async def _show(cfg: Config, args: argparse.Namespace) -> None:
    async with _graph(cfg) as graph:
        node = await graph.get(args.id)
        if node is None:
            raise NotFound(f"no memory with id {args.id!r}")
        _emit(node)


def _footprint(report: Any) -> dict[str, Any]:
    return {
        "author": report.author_id,
        "memories": report.memories_deleted,
        "indexed_messages": report.episodes_deleted,
        "channels": [
            {"channel": ch, "memories": m, "indexed_messages": e, "messages": n}
            for ch, m, e, n in report.per_channel
        ],
    }


async def _forget(cfg: Config, args: argparse.Namespace) -> None:
    if (args.id is None) == (args.author is None):
        raise _BadInput("give either ID or --author USER")
    if args.author is not None:
        await _forget_author(cfg, args.author, yes=args.yes)
        return
    async with _graph(cfg, write=True) as graph:
        if not await graph.forget(args.id):
            raise NotFound(f"no memory with id {args.id!r}")
        _emit({"forgotten": args.id})


async def _forget_author(cfg: Config, author: str, *, yes: bool) -> None:
    """Forget ``author`` in every workspace: a preview without ``yes``, the deletion with it.

    Raw messages go too when ``[memory] keep_messages_on_forget = false``, as with
    ``/forget``.
    """
    keep = cfg.memory.keep_messages_on_forget
    if not yes:
        async with _graph(cfg) as graph:  # a preview reads only: safe beside a running bot
            report = await graph.forget_author(author, dry_run=True)
        raw = sum(n for *_, n in report.per_channel) if not keep else 0
        if not keep:
            from tierbot.backends import open_store

            # Stored messages not indexed yet go too: count them in the log itself.
            async with await open_store(cfg, read_only=True) as st:
                raw = max(raw, await st.count_author_messages(author))
        if not (report.memories_deleted or report.episodes_deleted or raw):
            from tierbot.backends import open_store

            async with await open_store(cfg, read_only=True) as st:
                if not await st.count_author_messages(author):
                    raise NotFound(_nothing_by(author))
        _emit(_footprint(report) | {"keep_messages": keep, "deleted": False})
        raise _BadInput(
            f"nothing deleted: {author} has {report.memories_deleted} memories and "
            f"{report.episodes_deleted} indexed messages in {len(report.per_channel)} channels"
            + (f" ({raw} raw messages would be deleted too)" if raw else "")
            + "; re-run with --yes to delete them everywhere"
        )
    from memory_graph.backends import open_graph
    from tierbot.backends import open_store

    if cfg.storage.backend == "sqlite" and not cfg.storage_path().is_file():
        raise _BadInput(f"no store at {cfg.storage_path()}: check [storage] path in {cfg.source}")
    # On SQLite, opening the store as a writer takes its lock: the graph and the raw
    # messages are changed under one lock, refused while a bot runs.
    async with await open_store(cfg) as st:
        async with await open_graph(
            cfg, pool=getattr(st, "pool", None), where=getattr(st, "where", "")
        ) as graph:
            report = await graph.forget_author(author)
            if not (report.memories_deleted or report.episodes_deleted) and (
                not await st.count_author_messages(author)
            ):
                # Stored but unindexed messages still count: the tombstone keeps them out.
                raise NotFound(_nothing_by(author))
        deleted = await st.delete_messages(report.messages) if not keep and report.messages else 0
        if not keep:
            # Also the messages the graph has not indexed yet (its provenance misses them).
            deleted += await st.delete_author_messages(author)
    out = _footprint(report) | {"keep_messages": keep}
    _emit(
        out
        | {
            "deleted": True,
            "memories_deleted": report.memories_deleted,
            "episodes_deleted": report.episodes_deleted,
            "messages": [{"channel": c, "id": p} for c, p in report.messages],
            "messages_deleted": deleted,
        }
    )


def _nothing_by(author: str) -> str:
    return (
        f"nothing to forget: no memories or messages by author {author!r} "
        "(ids are platform user ids)"
    )


async def _export(cfg: Config, args: argparse.Namespace) -> None:
    async with _graph(cfg) as graph:
        async for item in graph.export():
            _emit(item)


def _command(
    fn: Callable[[Config, argparse.Namespace], Coroutine[Any, Any, None]],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            cfg = config_and_logging(args)
            asyncio.run(fn(cfg, args))
        except (_BadInput, ToolError) as exc:
            print(f"tierbot memory: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except NotFound as exc:
            print(f"tierbot memory: {exc}", file=sys.stderr)
            return EXIT_FAIL
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK

    return run


def add_memory_commands(
    subparsers: argparse._SubParsersAction,  # type: ignore[type-arg]
    common_parent: argparse.ArgumentParser,
) -> None:
    """Register ``tierbot memory search|show|forget|export``."""
    mem = subparsers.add_parser("memory", help="search, inspect and forget memories")
    msub = mem.add_subparsers(dest="memory_command", required=True)

    p = msub.add_parser("search", parents=[common_parent], help="recall, as memory_recall does")
    p.add_argument("query", nargs="?", help="what to look for")
    p.add_argument("--queries", help="JSON Lines file of {id, query}: one result line each")
    p.add_argument("--channel", required=True, help="the channel key the search runs from")
    p.add_argument("--limit", type=int, default=5, help="results per query (1..20)")
    p.set_defaults(func=_command(_search))

    p = msub.add_parser("show", parents=[common_parent], help="one memory with its edges")
    p.add_argument("id", help="the memory's id (mem_... or ep_...), as search shows it")
    p.set_defaults(func=_command(_show))

    p = msub.add_parser("forget", parents=[common_parent], help="delete a memory, or an author's")
    p.add_argument("id", nargs="?", help="the memory's id to delete (or use --author)")
    p.add_argument(
        "--author",
        help="forget everything derived from this user's messages, in every workspace "
        "(prints what it would delete and exits 2 unless --yes)",
    )
    p.add_argument("--yes", action="store_true", help="with --author: really delete")
    p.set_defaults(func=_command(_forget))

    p = msub.add_parser("export", parents=[common_parent], help="nodes then edges, JSON Lines")
    p.set_defaults(func=_command(_export))
