"""``tierbot replies``: see and settle the replies kept because their platform did not
take them.  ``list`` only reads (safe beside a running bot); ``retry`` and ``drop`` write
the store, so the bot must be stopped.  Exit codes are picked by bot/cli.py."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.cli_config import config_from
from tierbot.config import Config

__all__ = ["add_replies_commands"]


from bot.cli_config import NotFound

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class _NoSuchReply(Exception):
    """The id names no kept reply, or there is no store: bad input, exit 2."""


def _check_store(cfg: Config) -> None:
    """A SQLite store must exist (a PostgreSQL one says so when it is opened)."""
    path = cfg.storage_path()
    if cfg.storage.backend == "sqlite" and not path.is_file():
        raise _NoSuchReply(f"no store at {path}: check [storage] path in {cfg.source}")


async def _list(cfg: Config) -> list[dict[str, Any]]:
    from tierbot.backends import open_store

    _check_store(cfg)
    async with await open_store(cfg, read_only=True) as store:
        kept = await store.undelivered()
    return [
        {
            "id": r.id,
            "channel": r.channel,
            "reply_to": r.reply_to,
            "state": "kept" if r.sending is None else "uncertain",
            "posting_since": (
                None if r.sending is None else datetime.fromtimestamp(r.sending).isoformat()
            ),
            "attempts": r.attempts,
            "error": r.error,
            "text": r.text,
        }
        for r in kept
    ]


async def _settle(cfg: Config, reply_id: int, *, drop: bool) -> None:
    from tierbot.backends import open_store

    _check_store(cfg)
    async with await open_store(cfg) as store:
        done = await (store.drop_undelivered if drop else store.release_undelivered)(reply_id)
    if not done:
        raise NotFound(f"no kept reply with id {reply_id} ('tierbot replies list' shows them)")


def _command(fn: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            fn(args)
        except _NoSuchReply as exc:
            print(f"tierbot: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except NotFound as exc:
            print(f"tierbot: {exc}", file=sys.stderr)
            return EXIT_FAIL
        return EXIT_OK

    return run


@_command
def cmd_replies_list(args: argparse.Namespace) -> None:
    for row in asyncio.run(_list(config_from(args.config))):
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            since = f" since {row['posting_since']}" if row["posting_since"] else ""
            print(
                f"{row['id']}  {row['state']}{since}  {row['channel']}  reply to "
                f"{row['reply_to']}  ({row['attempts']} attempts): {row['text']}"
            )


@_command
def cmd_replies_retry(args: argparse.Namespace) -> None:
    asyncio.run(_settle(config_from(args.config), args.id, drop=False))
    print(f"reply {args.id} will be posted when its adapter next connects")


@_command
def cmd_replies_drop(args: argparse.Namespace) -> None:
    asyncio.run(_settle(config_from(args.config), args.id, drop=True))
    print(f"reply {args.id} dropped")


def add_replies_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``replies list|retry|drop`` on the top-level subparsers."""
    rep = sub.add_parser("replies", help="replies kept because their platform did not take them")
    rsub = rep.add_subparsers(dest="replies_command", required=True)
    p = rsub.add_parser("list", parents=[common], help="every kept reply (reads only)")
    p.add_argument("--json", action="store_true", help="one JSON object per reply")
    p.set_defaults(func=cmd_replies_list)
    p = rsub.add_parser(
        "retry",
        parents=[common],
        help="post an 'uncertain' reply at the next start (check the channel first)",
    )
    p.add_argument("id", type=int, help="the reply's id, as `tierbot replies list` shows it")
    p.set_defaults(func=cmd_replies_retry)
    p = rsub.add_parser("drop", parents=[common], help="delete a kept reply without posting it")
    p.add_argument("id", type=int, help="the reply's id, as `tierbot replies list` shows it")
    p.set_defaults(func=cmd_replies_drop)
