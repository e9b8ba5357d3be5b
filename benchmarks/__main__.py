"""Run every benchmark (or the named ones), one after another, and print one table of all figures.

    python -m benchmarks [NAME ...] [--quick] [--list] [--strict] [--timeout SECONDS]

Each benchmark ``benchmarks/<name>.py`` runs as ``python -m benchmarks.<name>`` in its own
process, with its default settings (``--quick`` is passed through) and the arguments of
:data:`DEFAULT_ARGS`; the harness then reads ``benchmarks/results/<name>.json``.  A
benchmark that needs an argument the harness does not have is skipped with the reason.

Exit status: 0 when every benchmark that ran wrote its results, 1 when one failed (or,
with ``--strict``, missed a target), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._common import (
    RESULTS_DIR,
    ROOT,
    Row,
    format_table,
    read_results,
    results_path,
    rows_table,
)

HERE = Path(__file__).resolve().parent
LOCOMO_DATA = ROOT / ".." / "shared" / "bench" / "locomo" / "locomo_public5.json"


@dataclass(frozen=True, slots=True)
class Args:
    """Arguments for one benchmark, or (``missing``) why the harness has none to give."""

    argv: tuple[str, ...] = ()
    missing: str = ""


def _locomo() -> Args:
    path = LOCOMO_DATA.resolve()
    if not path.is_file():
        return Args(missing=f"needs PATH, the LoCoMo data set: {path} does not exist")
    return Args((str(path),))


# What the harness passes to benchmarks that take arguments; anything else runs bare.
DEFAULT_ARGS: dict[str, Callable[[], Args]] = {
    "locomo": _locomo,
}


@dataclass
class Outcome:
    name: str
    status: str  # "ran", "skipped" or "failed"
    reason: str = ""
    seconds: float = 0.0
    rows: list[Row] = field(default_factory=list)


def discover() -> list[str]:
    """Every benchmark module: ``benchmarks/<name>.py`` whose name does not start with ``_``."""
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def args_for(name: str) -> Args:
    make = DEFAULT_ARGS.get(name)
    return make() if make is not None else Args()


def run_one(name: str, quick: bool, timeout: float) -> Outcome:
    """Run one benchmark in its own process (its output goes straight through) and read
    back the results file it wrote."""
    args = args_for(name)
    if args.missing:
        return Outcome(name, "skipped", args.missing)
    cmd = [sys.executable, "-m", f"benchmarks.{name}", *args.argv]
    if quick:
        cmd.append("--quick")
    print(f"\n=== {name}: python {' '.join(cmd[1:])}", flush=True)
    started = time.time()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    tail: deque[str] = deque(maxlen=20)

    def forward() -> None:  # show stderr as it comes, keep the end for the verdict
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line.rstrip())

    reader = threading.Thread(target=forward, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return Outcome(name, "failed", f"timed out after {timeout:.0f} s", time.time() - started)
    finally:
        reader.join(timeout=5)
    seconds = time.time() - started
    last = next((line for line in reversed(tail) if line.strip()), "")
    if code == 2 and any(line.startswith("usage:") for line in tail):
        return Outcome(name, "skipped", f"it rejected its arguments: {last}", seconds)
    if code != 0:
        return Outcome(name, "failed", f"exit status {code}: {last}", seconds)
    path = results_path(name)
    if not path.exists() or path.stat().st_mtime < started - 1:
        others = sorted(
            p.name for p in RESULTS_DIR.glob(f"{name}*.json") if p.stat().st_mtime >= started - 1
        )
        hint = f" (it wrote {', '.join(others)}: see benchmarks/README.md)" if others else ""
        return Outcome(name, "failed", f"wrote no fresh results/{name}.json{hint}", seconds)
    try:
        rows, _meta = read_results(name)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        return Outcome(name, "failed", str(exc), seconds)
    return Outcome(name, "ran", "", seconds, rows)


def summary(outcomes: Sequence[Outcome]) -> str:
    body = [cells for o in outcomes for cells in rows_table(o.rows, prefix=[o.name])]
    parts = []
    if body:
        headers = ["benchmark", "metric", "value", "unit", "target", "ok"]
        parts.append(format_table(headers, body, right=[2]))
    for o in outcomes:
        if o.status == "ran":
            parts.append(f"{o.name}: ran in {o.seconds:.0f} s")
        else:
            parts.append(f"{o.name}: {o.status.upper()}: {o.reason}")
    rows = [r for o in outcomes for r in o.rows]
    met = sum(1 for r in rows if r.ok is True)
    missed = [f"{o.name}: {r.metric}" for o in outcomes for r in o.rows if r.ok is False]
    parts.append(
        f"targets: {met} met, {len(missed)} missed" + (f" ({'; '.join(missed)})" if missed else "")
    )
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    names = discover()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run (default: all of {', '.join(names)})",
    )
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument(
        "--list", action="store_true", help="list the benchmarks and their arguments"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds per benchmark (3600)"
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)}; there are: {', '.join(names)}")
    chosen = args.names or names
    if args.list:
        for name in chosen:
            a = args_for(name)
            given = " ".join(a.argv) or "(no arguments)"
            print(f"{name}: {'skipped: ' + a.missing if a.missing else given}")
        return 0

    outcomes = [run_one(name, args.quick, args.timeout) for name in chosen]
    print(f"\n=== all benchmarks{' (--quick)' if args.quick else ''}\n{summary(outcomes)}")
    failed = any(o.status == "failed" for o in outcomes)
    missed = any(r.ok is False for o in outcomes for r in o.rows)
    return 1 if failed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
