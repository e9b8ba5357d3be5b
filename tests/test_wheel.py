"""The built wheel on its own: installed into a fresh virtual environment outside the
repository, ``tierbot init`` in an empty folder, ``config check`` and a short ``replay``
there work with nothing from the source tree.

Dependencies are not downloaded again: the fresh environment sees the test
environment's third-party packages through a folder of links that leaves out tierbot
itself (its editable install), so every tierbot module must come from the wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tierbot", "bot", "channels", "compactor", "workers", "branches", "memory_graph")


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TIERBOT"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _third_party_view(into: Path) -> Path:
    """Links to this environment's installed packages, tierbot's own left out."""
    site = Path(sysconfig.get_paths()["purelib"])
    into.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("tierbot", "__editable__", "_tierbot")) or name.endswith(".pth"):
            continue
        if entry.name.split(".")[0] in PACKAGES:
            continue
        (into / entry.name).symlink_to(entry)
    return into


def test_the_wheel_installs_and_runs_a_new_bot_outside_the_repository(tmp_path: Path) -> None:
    # Build from a copy of the tracked files: the build writes nothing into the repository.
    src = tmp_path / "src"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for rel in filter(None, files):
        target = src / rel.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        source = ROOT / rel.decode()
        if source.is_file():
            target.write_bytes(source.read_bytes())
    dist = tmp_path / "dist"
    build = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(src), "-w", str(dist)],
        cwd=tmp_path,
    )
    assert "warning" not in (build.stdout + build.stderr).lower(), build.stderr
    [wheel] = list(dist.glob("tierbot-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "data/"))]

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    py = venv / "bin" / "python"
    fresh_site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=tmp_path,
        ).stdout.strip()
    )
    view = _third_party_view(tmp_path / "deps")
    (fresh_site / "deps.pth").write_text(f"{view}\n")
    _run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        cwd=tmp_path,
    )
    where = _run([str(py), "-c", "import bot, tierbot; print(bot.__file__)"], cwd=tmp_path)
    assert where.stdout.strip().startswith(str(fresh_site)), where.stdout

    home = tmp_path / "newbot"
    home.mkdir()
    exe = str(venv / "bin" / "tierbot")
    assert _run([exe, "--version"], cwd=home).stdout.startswith("tierbot 0.")
    init = _run([exe, "init"], cwd=home)
    assert "config.toml" in init.stdout and (home / "config.toml").is_file()
    check = _run([exe, "config", "check"], cwd=home)
    assert check.stdout.strip().endswith("ok: config.toml")
    lines = [
        {"id": f"m{i}", "author": "dana", "text": f"Dana's build {i} of the kestrel app passed."}
        for i in range(40)
    ]
    (home / "chat.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    replay = _run(
        [exe, "replay", "chat.jsonl", "--channel", "console:local", "--listen-only", "--json"],
        cwd=home,
    )
    report = json.loads(replay.stdout.strip().splitlines()[-1])
    assert report["messages_in"] == 40 and report["rejected_total"] == 0
    search = _run(
        [exe, "memory", "search", "kestrel build", "--channel", "console:local"], cwd=home
    )
    assert "kestrel" in search.stdout
    assert (home / "data" / "tierbot.db").is_file()
