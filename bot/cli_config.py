"""The one way every ``tierbot`` subcommand finds and loads its config (and sets up logs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tierbot.config import Config, default_config_path, load_config
from tierbot.logging import configure_logging

__all__ = ["config_and_logging", "config_from"]


def config_from(path: str | None) -> Config:
    """``path``, or ``./config.toml`` when it exists, or the embedded defaults."""
    return load_config(Path(path) if path else default_config_path())


def config_and_logging(args: argparse.Namespace) -> Config:
    """The config ``--config`` names, with logging set up from it and the log flags."""
    cfg = config_from(getattr(args, "config", None))
    configure_logging(
        getattr(args, "log_level", None) or cfg.logging.level,
        getattr(args, "log_format", None) or cfg.logging.format,
    )
    return cfg
