"""deploy/: the Dockerfile, the compose example and the systemd unit say what the code
does: files they copy exist, the settings they pass validate (and mean a service with
no terminal, its store on the volume, /health reachable), and the unit restarts on
failure, reloads with SIGHUP and keeps secrets in an environment file."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tierbot.config import load_config
from tierbot.config_template import render

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def _dockerfile() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_image_runs_a_headless_bot_with_its_store_on_the_volume(tmp_path: Path) -> None:
    steps = _dockerfile()
    for word, rest in steps:
        if word == "COPY":
            *sources, _ = shlex.split(rest)
            for s in sources:
                assert (ROOT / s).exists(), f"COPY {s}: no such file"
    env = {}
    for word, rest in steps:
        if word == "ENV":
            env.update(dict(re.findall(r"(\w+)=(\S+)", rest)))
    users = [rest for word, rest in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    cfg_path = tmp_path / "config.toml"
    cfg_path.write_text(render())  # what `tierbot init /etc/tierbot` writes in the image
    cfg = load_config(cfg_path, environ=env)
    assert str(cfg.storage_path()) == "/data/tierbot.db"
    assert not cfg.adapters.console.enabled
    assert cfg.ops.enabled and cfg.ops.host == "0.0.0.0"
    [health] = [rest for word, rest in steps if word == "HEALTHCHECK"]
    assert f"127.0.0.1:{cfg.ops.port}/health" in health
    [cmd] = [rest for word, rest in steps if word == "CMD"]
    assert '"run", "--config", "/etc/tierbot/config.toml"' in cmd
    assert any(w == "RUN" and "tierbot init /etc/tierbot" in r for w, r in steps)


def test_the_compose_example_passes_settings_that_validate(tmp_path: Path) -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    env = dict(re.findall(r"^\s+(TIERBOT__\w+):\s*\"?([^\"\n]+)\"?$", text, re.M))
    assert env, "no TIERBOT__ settings found"
    env["TIERBOT_DATABASE_URL"] = "postgresql://u:p@postgres/tierbot"
    cfg_path = tmp_path / "config.toml"
    cfg_path.write_text(render())
    cfg = load_config(cfg_path, environ=env)
    assert cfg.storage.backend == "postgres"
    dockerfile = re.search(r"dockerfile:\s*(\S+)", text)
    assert dockerfile and (ROOT / dockerfile.group(1)).is_file()
    example = (DEPLOY / "tierbot.env.example").read_text()
    assert "TIERBOT_DATABASE_URL=" in example and "POSTGRES_PASSWORD=" in example


def test_the_systemd_unit_restarts_on_failure_and_reloads_with_sighup() -> None:
    unit = (DEPLOY / "tierbot.service").read_text()
    directives = [
        tuple(line.split("=", 1))
        for line in unit.splitlines()
        if "=" in line and not line.startswith("#")
    ]
    d = {k: v for k, v in directives}
    assert d["Restart"] == "on-failure"
    assert d["RestartPreventExitStatus"] == "2"  # a bad config fails again: stay down
    assert d["ExecReload"].endswith("kill -HUP $MAINPID")
    assert d["EnvironmentFile"].startswith("/etc/")
    assert "tierbot run --config" in d["ExecStart"]
    assert "config check --config" in d["ExecStartPre"]
    assert d["User"] != "root"
