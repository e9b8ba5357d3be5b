"""``tierbot init`` and ``tierbot config check``: a new bot's first two commands.

``init`` writes the commented ``config.toml`` generated from the config models
(:mod:`tierbot.config_template`) and says what to do next.  ``config check`` validates
a file and then the environment a ``run`` would need, naming each problem by its key
path; what only the network could tell (does Discord accept this token?) is listed as
not checked.  ``--offline`` skips the one check that connects anywhere: reaching the
PostgreSQL server ``[storage] dsn_env`` names.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.cli_config import NO_CONFIG
from tierbot.config import Config, default_config_path, load_config
from tierbot.errors import ConfigError, ConfigProblem

__all__ = ["add_setup_commands", "environment_problems"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


# -- init ----------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    from tierbot.config_template import render

    folder = Path(args.dir)
    target = folder / "config.toml"
    if target.exists() and not args.force:
        print(
            f"tierbot: {target} already exists; it was left as it is "
            "(--force replaces it with the defaults)",
            file=sys.stderr,
        )
        return EXIT_FAIL
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(render(), encoding="utf-8")
    except OSError as exc:
        print(f"tierbot: cannot write {target}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAIL
    shown = target if folder != Path(".") else Path("config.toml")
    print(
        f"wrote {shown}: every setting at its default, with a note on each.\n"
        "next:\n"
        f"  tierbot config check --config {shown}   # the file and the environment it needs\n"
        f"  tierbot run --config {shown}            # chat in this terminal (offline model)\n"
        "To serve Discord or Slack, set [adapters.discord] or [adapters.slack] enabled = true\n"
        "and put the token in the environment variable its token_env names. The store goes\n"
        f"to {(folder / 'data' / 'tierbot.db')} ([storage] path)."
    )
    return EXIT_OK


# -- config check ------------------------------------------------------------------------------


def _writable_dir(path: Path) -> str | None:
    """Why ``path`` (a folder) cannot be used for writing, or None when it can be (or can
    be created: its nearest existing ancestor is a writable folder)."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return f"{path} cannot be created"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "is not writable" if probe == path else f"cannot be created ({probe} is read-only)"
        return f"{path} {what}"
    # os.access says yes to root everywhere; the filesystem itself may still refuse.
    try:
        fs = os.statvfs(probe)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        why = "on a read-only filesystem"
    elif fs.f_blocks == 0:  # proc, sysfs: no file can be created there
        why = "on a virtual filesystem (such as /proc or /sys) that holds no files"
    else:
        return None
    return f"{path} is {why}" if probe == path else f"{path} cannot be created ({probe} is {why})"


#: The first bytes of every SQLite database file (an empty file becomes one when opened).
SQLITE_HEADER = b"SQLite format 3\x00"


def _not_sqlite(db: Path) -> str | None:
    """Why the existing file ``db`` cannot be a store, read from its header (nothing written)."""
    try:
        with db.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"{db} cannot be read: {exc.strerror}"
    if head and head != SQLITE_HEADER:
        return (
            f"{db} is not a SQLite database: point it at a tierbot store or a file that does "
            "not exist yet"
        )
    return None


def _env_set(environ: Mapping[str, str], name: str) -> bool:
    return bool(name) and bool(environ.get(name, "").strip())


def environment_problems(
    cfg: Config, environ: Mapping[str, str]
) -> tuple[list[ConfigProblem], list[str]]:
    """What ``run`` would fail on in this environment, and what cannot be checked offline."""
    problems: list[ConfigProblem] = []
    unchecked: list[str] = []

    def need(path: str, var: str, what: str) -> None:
        if not var:
            problems.append(ConfigProblem(path, f"names no environment variable for {what}"))
        elif not _env_set(environ, var):
            problems.append(ConfigProblem(path, f"environment variable {var} ({what}) is not set"))

    a = cfg.adapters
    if a.discord.enabled:
        need("adapters.discord.token_env", a.discord.token_env, "the Discord bot token")
        unchecked.append("whether Discord accepts the token (only connecting can tell)")
    if a.slack.enabled:
        need("adapters.slack.bot_token_env", a.slack.bot_token_env, "the Slack bot token")
        if a.slack.mode == "socket":
            need("adapters.slack.app_token_env", a.slack.app_token_env, "the app-level token")
        else:
            need(
                "adapters.slack.signing_secret_env",
                a.slack.signing_secret_env,
                "the signing secret",
            )
        unchecked.append("whether Slack accepts the tokens (only connecting can tell)")
    if not (a.console.enabled or a.discord.enabled or a.slack.enabled):
        problems.append(
            ConfigProblem("adapters", "no adapter is enabled: `run` would have nothing to serve")
        )
    llm = cfg.llm
    if llm.provider != "offline":
        if llm.api_key_env:
            need("llm.api_key_env", llm.api_key_env, f"the {llm.provider} API key")
        elif llm.provider == "anthropic":
            problems.append(
                ConfigProblem("llm.api_key_env", "the anthropic provider needs an API key")
            )
        if not llm.model:
            problems.append(ConfigProblem("llm.model", f"the {llm.provider} provider needs one"))
        unchecked.append(f"whether the {llm.provider} server accepts the key and the model")
    mem = cfg.memory
    if mem.enabled and mem.embedder == "openai":
        if mem.embedder_api_key_env:
            need("memory.embedder_api_key_env", mem.embedder_api_key_env, "the embedder's key")
        unchecked.append("whether the embedding server accepts the key and the model")
    if mem.enabled and mem.embedder == "sentence-transformers":
        if not mem.embedder_model or not Path(mem.embedder_model).expanduser().exists():
            problems.append(
                ConfigProblem("memory.embedder_model", "must be the path of a local model folder")
            )
    if cfg.storage.backend == "sqlite":
        db = cfg.storage_path()
        why = _writable_dir(db.parent)
        if why is None and db.exists():
            if db.is_dir():
                why = f"{db} is a folder, not a database file"
            elif not os.access(db, os.R_OK | os.W_OK):
                why = f"{db} is not readable and writable by this user"
            else:
                why = _not_sqlite(db)
        if why:
            problems.append(ConfigProblem("storage.path", why))
    else:
        need("storage.dsn_env", cfg.storage.dsn_env, "the PostgreSQL connection string")
    from channels import window_problems
    from tierbot.tokens import encoding_for_model, get_counter

    counter = get_counter(cfg.llm.encoding or encoding_for_model(cfg.llm.model))
    problems += window_problems(cfg, counter)
    from memory_graph import embedder_problems
    from memory_graph.backends import index_base

    problems += embedder_problems(mem)

    index = index_base(cfg)
    if mem.enabled and index is not None:
        why = _writable_dir(index)
        if why:
            problems.append(ConfigProblem("memory.index_dir", why))
    return problems, unchecked


async def _reach_postgres(cfg: Config, environ: Mapping[str, str]) -> list[ConfigProblem]:
    """Connect once, as ``run`` would, and see that pgvector can be used there."""
    from tierbot.pg.connect import dsn_from_env, open_pool

    try:
        dsn = dsn_from_env(cfg.storage, environ)
        pool = await open_pool(cfg.storage, dsn, name=cfg.storage.dsn_env)
    except ConfigError as exc:
        return list(exc.problems)
    except Exception as exc:
        return [ConfigProblem("storage.dsn_env", " ".join(str(exc).split()))]
    await pool.close()
    return []


def cmd_config_check(args: argparse.Namespace) -> int:
    path = args.config or default_config_path()
    if path is None:
        print(f"tierbot: {NO_CONFIG}", file=sys.stderr)
        return EXIT_USAGE
    cfg = load_config(path)  # a ConfigError is printed by main, exit 2
    for line in cfg.deprecations:
        print(f"warning: {line}", file=sys.stderr)
    environ: Mapping[str, Any] = os.environ
    problems, unchecked = environment_problems(cfg, environ)
    if cfg.storage.backend == "postgres":
        if args.offline:
            unchecked.append("whether the PostgreSQL server is reachable (--offline)")
        elif not any(p.path == "storage.dsn_env" for p in problems):
            problems += asyncio.run(_reach_postgres(cfg, environ))
    for p in problems:
        print(f"{cfg.source}: {p}", file=sys.stderr)
    for what in unchecked:
        print(f"not checked: {what}")
    if problems:
        print(
            f"{len(problems)} problem(s): `tierbot run` would fail with this file here",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(f"ok: {cfg.source}")
    return EXIT_OK


def add_setup_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "init",
        help="write a commented config.toml to start from",
        description="Write DIR/config.toml: every setting at its default, each with a note, "
        "generated from the same models that validate it. An existing file is left alone "
        "(exit 1) unless --force.",
    )
    p.add_argument("dir", nargs="?", default=".", help="folder to write config.toml in (default .)")
    p.add_argument("--force", action="store_true", help="replace an existing config.toml")
    p.set_defaults(func=cmd_init)

    conf = sub.add_parser("config", help="configuration")
    csub = conf.add_subparsers(dest="config_command", required=True)
    p = csub.add_parser(
        "check",
        parents=[common],
        help="validate a config file and the environment it needs",
        description="Validate the config (every problem named by its key path), then what "
        "`run` needs from this machine: the token and key variables of what is enabled, a "
        "writable store and index folder (an existing store file must be SQLite), and "
        "(unless --offline) a reachable PostgreSQL with pgvector. What only the platforms "
        "could tell (is this token accepted?) is listed as not checked. Exit 0 when all is "
        "well, 2 on any problem.",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="connect to nothing (skips reaching PostgreSQL); check the file and this machine",
    )
    p.set_defaults(func=cmd_config_check)
