"""The one way every ``tierbot`` subcommand finds and loads its config (and sets up logs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tierbot.config import Config, default_config_path, load_config
from tierbot.errors import ConfigError, ConfigProblem
from tierbot.logging import configure_logging

__all__ = ["NO_CONFIG", "NotFound", "config_and_logging", "config_from"]


class NotFound(Exception):
    """What the operator named (a channel, a memory, a reply, an author) is not there:
    exit 1, with this message.  Usage errors (bad input) exit 2 instead."""


NO_CONFIG = (
    "no config file: ./config.toml does not exist here; create one with "
    "`tierbot init`, or name one with --config PATH"
)


def config_from(path: str | None) -> Config:
    """``path``, or ``./config.toml`` when it exists; with neither, a ConfigError (exit 2).

    Never the embedded defaults silently: they keep the store in ``./data``, and a
    command run in the wrong directory would create an empty bot there.
    """
    found = Path(path) if path else default_config_path()
    if found is None:
        raise ConfigError("tierbot", [ConfigProblem("", NO_CONFIG)])
    return load_config(found)


def config_and_logging(args: argparse.Namespace) -> Config:
    """The config ``--config`` names, with logging set up from it and the log flags."""
    cfg = config_from(getattr(args, "config", None))
    configure_logging(
        getattr(args, "log_level", None) or cfg.logging.level,
        getattr(args, "log_format", None) or cfg.logging.format,
    )
    return cfg
