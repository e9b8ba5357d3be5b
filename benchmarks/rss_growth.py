"""Peak memory of a long-lived channel: does a bot's RSS grow with the history it has seen?

Target: the peak RSS of a ``tierbot replay --listen-only`` process that has taken 80,000
messages is within 15 % of the peak of one that has taken 5,000 (ratio <= 1.15), with the
memory graph on (live indexing, the offline embedder) and an 8k-token context window, so
the compactor archives nearly everything and the graph holds every message.

Usage: python -m benchmarks.rss_growth [--sizes 5000,40000,80000] [--quick] [--no-memory]

Each size is one fresh store and one ``tierbot replay`` subprocess fed a generated chat
log (see :class:`ChatLog`: 20-40 word messages from a dozen authors, a Zipf vocabulary
whose long tail keeps growing, as names, numbers and jargon do in a real channel); the
peak RSS is the child's ``ru_maxrss`` (``os.wait4``), so it counts everything the
process ever held, including SQLite's page cache and mapped pages.  The run takes about
as long as replaying every size once (roughly 15-25 minutes on the 2-core reference
machine for the default sizes; ``--quick`` replays 2,000 and 16,000 in about 3 minutes).
The figure is one measurement per size, not a median: peak RSS barely varies between runs
(a few MB), while the growth it checks for was hundreds of MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import Row, machine_meta, print_table, row, write_results  # noqa: E402

COMMON = (
    "the a to and of i you it is that in we for this on be have with was not but just so "
    "can do what are if at my me about think like get would they there know one all will "
    "should maybe yeah ok need time out up going now from by some more no when how also "
    "make see because did our any then still been really right good new want work week "
    "today tomorrow yesterday meeting release build test deploy server database issue bug "
    "fix review branch merge config logs error latency cache query index ticket customer "
    "team plan idea lunch coffee weekend trip doc draft slides budget call update status"
).split()
SYLLABLES = "ka lo mi ne ru sa te vo zi pa do fe gu hi ja bor tel min".split()
AUTHORS = [f"user{i:02d}" for i in range(12)]


class ChatLog:
    """Deterministic chat lines: common words plus a long tail that keeps growing.

    About 75 % of the words come from a small list of common chat words, the rest from a
    Zipf-distributed invented vocabulary (names, jargon) and occasional numbers or ids,
    so, as in real chat, new words keep appearing (Heaps' law) rather than saturating.
    """

    def __init__(self, seed: int = 11, tail_vocab: int = 50_000) -> None:
        self.rng = np.random.default_rng(seed)
        ranks = np.arange(1, tail_vocab + 1, dtype=np.float64)
        p = 1.0 / ranks**1.05
        self.tail_p = p / p.sum()
        self.tail_size = tail_vocab
        self._words: dict[int, str] = {}

    def _tail_word(self, k: int) -> str:
        word = self._words.get(k)
        if word is None:
            rng = np.random.default_rng(k)
            word = "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 4)))).capitalize()
            self._words[k] = word
        return word

    def line(self, n: int) -> dict[str, object]:
        rng = self.rng
        length = int(rng.integers(20, 41))
        common = rng.random(length) < 0.75
        tail = rng.choice(self.tail_size, size=length, p=self.tail_p)
        words = []
        for i in range(length):
            if common[i]:
                words.append(COMMON[int(rng.integers(len(COMMON)))])
            elif rng.random() < 0.05:
                words.append(f"#{int(rng.integers(100, 100_000))}")
            else:
                words.append(self._tail_word(int(tail[i])))
        return {
            "id": f"m{n}",
            "author": AUTHORS[int(rng.integers(len(AUTHORS)))],
            "text": " ".join(words).capitalize() + ".",
            "ts": 1_700_000_000 + n * 20.0,
        }


def write_log(path: Path, n: int) -> None:
    log = ChatLog()
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(log.line(i)) + "\n")


def write_config(directory: Path, memory: bool) -> Path:
    cfg = directory / "config.toml"
    cfg.write_text(
        "[defaults]\ncontext_window = 8000\n"
        f'[storage]\npath = "{directory / "tierbot.db"}"\nsynchronous = "normal"\n'
        f'[logging]\nlevel = "warning"\nformat = "json"\n'
        f"[memory]\nenabled = {'true' if memory else 'false'}\n",
        encoding="utf-8",
    )
    return cfg


def replay_peak(n: int, memory: bool, workdir: Path) -> tuple[float, float, dict[str, object]]:
    """(peak RSS in MB, seconds, the replay report) of one fresh replay of ``n`` messages."""
    run = workdir / f"n{n}"
    run.mkdir()
    data = run / "chat.jsonl"
    write_log(data, n)
    cfg = write_config(run, memory)
    cmd = [sys.executable, "-c", "import sys; from bot.cli import main; sys.exit(main())"]
    cmd += ["replay", str(data), "--channel", "bench:rss", "--listen-only", "--json"]
    cmd += ["--config", str(cfg)]
    started = time.monotonic()
    with (run / "stdout").open("w") as out, (run / "stderr").open("w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        tail = (run / "stderr").read_text()[-2000:]
        raise SystemExit(f"replay of {n} messages exited {proc.returncode}:\n{tail}")
    report = json.loads((run / "stdout").read_text().strip().splitlines()[-1])
    return usage.ru_maxrss / 1024.0, seconds, report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rss_growth")
    parser.add_argument("--sizes", default="5000,40000,80000")
    parser.add_argument("--quick", action="store_true", help="sizes 2000,16000")
    parser.add_argument("--no-memory", action="store_true", help="memory graph off (contrast)")
    args = parser.parse_args()
    sizes = [2000, 16000] if args.quick else [int(s) for s in args.sizes.split(",")]
    memory = not args.no_memory
    rows: list[Row] = []
    peaks: dict[int, float] = {}
    reports: dict[int, dict[str, object]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="tierbot-rss-"))
    try:
        for n in sizes:
            peak, seconds, report = replay_peak(n, memory, workdir)
            peaks[n] = peak
            reports[n] = report
            print(f"{n} messages: peak RSS {peak:.0f} MB, {seconds:.0f} s", file=sys.stderr)
            rows.append(row(f"peak RSS after {n:,} messages", round(peak, 1), "MB"))
            rows.append(row(f"replay time for {n:,} messages", round(seconds, 1), "s"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    first, last = sizes[0], sizes[-1]
    ratio = peaks[last] / peaks[first]
    rows.append(row(f"peak RSS ratio {last:,}/{first:,}", round(ratio, 3), "x", "<= 1.15"))
    print_table("rss_growth: peak RSS of tierbot replay --listen-only", rows)
    write_results(
        "rss_growth",
        rows,
        machine_meta(sizes=sizes, memory_graph=memory, context_window=8000, reports=reports),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
