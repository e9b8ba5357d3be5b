"""The floors of the code hold: imports run one way down, and no two modules import each other.

The contracts live in pyproject.toml under ``[tool.importlinter]``; this test runs
them as ``lint-imports`` would, so a change that makes the kernel import the
application, or two modules import each other at run time, fails ``make test``.
"""

from __future__ import annotations

from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


def test_imports_run_one_way_down_the_floors_and_never_in_a_circle(monkeypatch, capsys):
    """Every import-linter contract in pyproject.toml is kept."""
    monkeypatch.chdir(ROOT)
    exit_code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    out = capsys.readouterr().out
    assert exit_code == 0, out
