"""What every benchmark shares: result rows, the results file, percentiles and tables.

A benchmark builds :class:`Row` values, prints them with :func:`print_table` and saves
them with :func:`write_results` to ``benchmarks/results/<name>.json``, the file the
harness (``python -m benchmarks``) reads back with :func:`read_results`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"

_TARGET = re.compile(r"^\s*(<=|>=|==|<|>)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: ``ok`` is None when the row has no target (context, contrast, noise)."""

    metric: str
    value: float
    unit: str
    target: str = ""
    ok: bool | None = None


def row(metric: str, value: float, unit: str, target: str = "") -> Row:
    """A row whose ``ok`` is ``value`` checked against ``target`` (e.g. ``"<= 1.2"``)."""
    return Row(metric, float(value), unit, target, meets(value, target))


def meets(value: float, target: str) -> bool | None:
    """Whether ``value`` meets ``target`` (``<=``, ``>=``, ``<``, ``>`` or ``==`` a number);
    None for an empty target.  A target that does not parse is a bug in the benchmark."""
    if not target.strip():
        return None
    m = _TARGET.match(target)
    if m is None:
        raise ValueError(f"cannot read target {target!r}: write e.g. '<= 1.2'")
    op, bound = m[1], float(m[2])
    return {
        "<=": value <= bound,
        ">=": value >= bound,
        "==": value == bound,
        "<": value < bound,
        ">": value > bound,
    }[op]


# -- statistics -------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between closest ranks (numpy's default)."""
    data = sorted(values)
    if not data:
        raise ValueError("percentile of no values")
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


# -- results files ------------------------------------------------------------------------


def results_path(name: str) -> Path:
    return RESULTS_DIR / f"{name}.json"


def write_results(name: str, rows: Sequence[Row], meta: dict[str, Any]) -> Path:
    """Write ``results/<name>.json`` (the harness reads it); return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = results_path(name)
    payload = {"name": name, "rows": [asdict(r) for r in rows], "meta": meta}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_results(name: str) -> tuple[list[Row], dict[str, Any]]:
    """Rows and meta of ``results/<name>.json``; ValueError if it does not follow the format."""
    data = json.loads(results_path(name).read_text(encoding="utf-8"))
    try:
        rows = [
            Row(
                str(r["metric"]),
                float(r["value"]),
                str(r["unit"]),
                str(r.get("target", "")),
                None if r.get("ok") is None else bool(r["ok"]),
            )
            for r in data["rows"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{results_path(name)} does not follow the results format: {exc}") from exc
    return rows, dict(data.get("meta", {}))


def machine_meta(**params: Any) -> dict[str, Any]:
    """What the figures depend on: interpreter, machine, load, commit, plus ``params``."""
    meta: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "commit": _git_commit(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv[1:],
    }
    meta.update(params)
    return meta


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


# -- tables ------------------------------------------------------------------------------------


def fmt_value(value: float) -> str:
    """A figure for a table: thousands separators for big numbers, 3 significant digits else."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def fmt_ok(ok: bool | None) -> str:
    return "-" if ok is None else ("ok" if ok else "MISS")


def format_table(
    headers: Sequence[str], body: Sequence[Sequence[str]], right: Iterable[int] = ()
) -> str:
    """A plain-text table; columns whose index is in ``right`` are right-aligned."""
    right = set(right)
    widths = [len(h) for h in headers]
    for line in body:
        widths = [max(w, len(c)) for w, c in zip(widths, line, strict=True)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(line) for line in body)])


def rows_table(rows: Sequence[Row], prefix: Sequence[str] = ()) -> list[list[str]]:
    """Table cells of ``rows``: metric, value, unit, target, ok (after ``prefix`` cells)."""
    return [[*prefix, r.metric, fmt_value(r.value), r.unit, r.target, fmt_ok(r.ok)] for r in rows]


def print_table(title: str, rows: Sequence[Row]) -> None:
    """Print one benchmark's rows under ``title``."""
    print(f"\n{title}")
    print(format_table(["metric", "value", "unit", "target", "ok"], rows_table(rows), right=[1]))
