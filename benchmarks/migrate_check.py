"""``tierbot db migrate`` on a real store: LoCoMo conversations replayed into SQLite.

For each conversation: ``tierbot replay`` its turns into a SQLite store (context window
2,048, so the compactor archives nearly everything and the memory graph is fed by the
real pipeline), ask every question through ``tierbot memory search --queries``, move the
store with ``tierbot db migrate --from sqlite:PATH --to postgres`` into a private
PostgreSQL (the pgserver wheel), ask the same questions there, and compare:

* the row counts the migration printed (its own check; it exits 1 on a difference);
* ``tierbot history export`` before and after: the same messages, in the same order;
* the memory search results, asked of the source again beside the target (recall weighs
  recency against the clock): the share of questions with the same top 10, and the
  evidence recall@10 of both (within 0.01, as the backends' own rankings must be).
  Full top-20 order is reported too: near-ties deep in the list may swap, since FTS5
  computes bm25 in C and PostgreSQL in SQL, and the rebuilt in-RAM ANN index may offer
  a different vector-only candidate.

Usage: python -m benchmarks.migrate_check PATH_TO_LOCOMO_JSON [--quick]
Exit 0 when everything matches, 1 otherwise; writes benchmarks/results/migrate_check.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine_meta, print_table, row, write_results  # noqa: E402
from benchmarks.locomo import (  # noqa: E402
    feed_replay,
    questions_of,
    recall_at,
    search,
    tierbot,
    turns_of,
    write_config,
)


def history(cfg: Path, channel: str) -> list[dict[str, Any]]:
    proc = tierbot("history", "export", "--channel", channel, "--config", str(cfg))
    return [json.loads(line) for line in proc.stdout.splitlines()]


def ids_of(results: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    if os.environ.get("MIGRATE_CHECK_DEBUG"):
        return {
            q: [(r["id"], round(r.get("score", 0), 4)) for r in hits] for q, hits in results.items()
        }  # type: ignore
    return {q: [r["id"] for r in hits] for q, hits in results.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("path", type=Path)
    ap.add_argument("--quick", action="store_true", help="the first conversation only")
    args = ap.parse_args()
    data = json.loads(args.path.read_text())
    if args.quick:
        data = data[:1]
    work = Path(tempfile.mkdtemp(prefix="tierbot-migrate-check-"))
    from tierbot.testing.postgres import PostgresServer

    server = PostgresServer.start()
    os.environ["TIERBOT_DATABASE_URL"] = server.create_database()
    started = time.monotonic()
    try:
        lite = write_config(work, 2048, "sqlite")
        channels, before_hist, before_search = [], {}, {}
        for sample in data:
            channel = f"locomo:{sample['sample_id']}"
            turns = turns_of(sample)
            questions = questions_of(sample, {t["id"] for t in turns})
            feed_replay(lite, channel, turns, work)
            channels.append((channel, questions))
            before_hist[channel] = history(lite, channel)
            before_search[channel] = ids_of(search(lite, channel, questions, work))
        pg_dir = work / "pg"
        pg_dir.mkdir()
        pg = write_config(pg_dir, 2048, "postgres")
        t0 = time.monotonic()
        proc = tierbot(
            "db", "migrate", "--from", f"sqlite:{work / 'tierbot.db'}", "--to", "postgres",
            "--config", str(pg),
        )  # fmt: skip
        migrate_s = time.monotonic() - t0
        # The report is the last line (a warning logged before it may precede it).
        counts = json.loads(proc.stdout.strip().splitlines()[-1])
        warnings = [line for line in proc.stdout.splitlines()[:-1] if line.strip()]
        same_hist = same_q = same_top10 = drift = questions_total = 0
        r10_lite = r10_pg = 0.0
        messages = 0
        for channel, questions in channels:
            after = history(pg, channel)
            messages += len(after)
            same_hist += after == before_hist[channel]
            # Recall weighs recency against the clock, and these memories were saved minutes
            # ago: the source is asked again beside the target, so both see the same time.
            again_raw = search(lite, channel, questions, work)
            got_raw = search(pg, channel, questions, work)
            again, got = ids_of(again_raw), ids_of(got_raw)
            questions_total += len(questions)
            for q in questions:
                r10_lite += recall_at(again_raw.get(q["id"], []), q["evidence"], 10)
                r10_pg += recall_at(got_raw.get(q["id"], []), q["evidence"], 10)
                a, b = again.get(q["id"], []), got.get(q["id"], [])
                same_q += a == b
                same_top10 += set(a[:10]) == set(b[:10])
                drift += a != before_search[channel].get(q["id"], [])
                if os.environ.get("MIGRATE_CHECK_DEBUG") and a != b:
                    print(q["query"])
                    print(" sqlite  ", a[:6])
                    print(" postgres", b[:6])
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        row("conversations", len(channels), "", ""),
        row("messages moved", messages, "", ""),
        row("migrate seconds", round(migrate_s, 2), "s", ""),
        row("histories identical", same_hist / len(channels), "share", "== 1"),
        row("search results identical (20, in order)", same_q / questions_total, "share", ""),
        row("search top-10 sets identical", same_top10 / questions_total, "share", ">= 0.95"),
        row("evidence R@10 before (sqlite)", r10_lite / questions_total, "recall", ""),
        row("evidence R@10 after (postgres)", r10_pg / questions_total, "recall", ""),
        row("R@10 difference", abs(r10_lite - r10_pg) / questions_total, "recall", "<= 0.01"),
        row("results changed by the clock alone", drift / questions_total, "share", ""),
    ]
    print(json.dumps(counts))
    for line in warnings:
        print(f"migrate said: {line}")
    print_table("db migrate on replayed LoCoMo stores", rows)
    meta = machine_meta(counts=counts, seconds=round(time.monotonic() - started, 1))
    out = write_results("migrate_check", rows, meta)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
