"""LoCoMo evidence recall of tierbot's memory search (see shared/bench/locomo/README.md).

For each conversation: stream its turns into a channel of its own, then run every
question of categories 1-4 through ``tierbot memory search --queries`` (limit 20) and
score evidence recall@1/5/10/20 over the first k distinct source message ids.

Modes:
  --mode replay  (default) the full pipeline: ``tierbot replay FILE --listen-only`` with
                 context_window = 2048, so the compactor archives nearly everything and
                 feeds the memory graph itself
  --mode direct  feed the turns straight into ``MemoryGraph.add_episodes`` (no compactor):
                 seconds instead of minutes, for tuning retrieval

Usage: python -m benchmarks.locomo PATH_TO_LOCOMO_JSON [--mode replay|direct] [--quick]
       [--only conv-30]
Writes benchmarks/results/locomo.json (rows named after the mode; per-conversation and
per-category figures in meta).  The data set is read in place, never copied.
--quick runs the first conversation only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import Row, machine_meta, print_table, row, write_results  # noqa: E402

KS = (1, 5, 10, 20)
TARGET_R10 = ">= 0.80"
CATEGORIES = (1, 2, 3, 4)


def turns_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn as a replay record {id, author, text, ts}, in conversation order."""
    conv = sample["conversation"]
    out = []
    n = 1
    while f"session_{n}" in conv:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        for turn in conv[f"session_{n}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            out.append(
                {
                    "id": turn["dia_id"],
                    "author": turn["speaker"],
                    "text": text,
                    "ts": when.isoformat(),
                }
            )
        n += 1
    return out


def questions_of(sample: dict[str, Any], ids: set[str]) -> list[dict[str, Any]]:
    """Questions of categories 1-4 with their evidence ids.

    The data holds a few malformed evidence strings ("D8:6; D9:17", "D:11:26"): they
    are split and normalised; questions left without any valid evidence are skipped.
    """
    out = []
    for n, qa in enumerate(sample["qa"]):
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = []
        for raw in qa.get("evidence", []):
            for part in re.split(r"[;,\s]+", raw.replace("D:", "D")):
                if part in ids and part not in evidence:
                    evidence.append(part)
        if evidence:
            out.append(
                {
                    "id": f"q{n}",
                    "query": qa["question"],
                    "evidence": evidence,
                    "cat": qa["category"],
                }
            )
    return out


def write_config(work: Path, context_window: int, backend: str = "sqlite") -> Path:
    cfg = work / "config.toml"
    storage = 'backend = "postgres"\n' if backend == "postgres" else ""
    cfg.write_text(
        f'[defaults]\ncontext_window = {context_window}\nrespond = "listen"\n\n'
        f'[storage]\n{storage}path = "tierbot.db"\nsynchronous = "normal"\n\n'
        '[logging]\nlevel = "warning"\n\n[adapters.console]\nenabled = false\n'
    )
    return cfg


def tierbot(*args: str) -> subprocess.CompletedProcess[str]:
    exe = ROOT / ".venv" / "bin" / "tierbot"
    cmd = [str(exe) if exe.exists() else "tierbot", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc


async def feed_direct(cfg_path: Path, channel: str, turns: list[dict[str, Any]]) -> None:
    """Direct mode: the turns become episodes at once, as the compactor would archive them."""
    from tierbot.config import load_config
    from tierbot.messages import Message, Role, State

    cfg = load_config(cfg_path)
    messages = [
        Message(
            channel=channel,
            platform_id=t["id"],
            role=Role.USER,
            text=t["text"],
            author_id=t["author"],
            author_name=t["author"],
            ts=datetime.fromisoformat(t["ts"]).timestamp(),
            id=i + 1,
            state=State.ARCHIVED,
        )
        for i, t in enumerate(turns)
    ]
    from memory_graph.backends import open_graph

    async with await open_graph(cfg) as graph:
        await graph.add_episodes(messages)


def feed_replay(cfg_path: Path, channel: str, turns: list[dict[str, Any]], work: Path) -> dict:
    """Replay mode: the real pipeline (channel actor, compactor, workers, memory graph)."""
    path = work / f"{channel.replace(':', '_')}.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    proc = tierbot(
        "replay",
        str(path),
        "--channel",
        channel,
        "--config",
        str(cfg_path),
        "--listen-only",
        "--json",
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def search(cfg_path: Path, channel: str, questions: list[dict[str, Any]], work: Path) -> dict:
    qfile = work / f"{channel.replace(':', '_')}.queries.jsonl"
    qfile.write_text(
        "".join(json.dumps({"id": q["id"], "query": q["query"]}) + "\n" for q in questions)
    )
    proc = tierbot(
        "memory",
        "search",
        "--queries",
        str(qfile),
        "--channel",
        channel,
        "--limit",
        "20",
        "--config",
        str(cfg_path),
    )
    out = {}
    for line in proc.stdout.splitlines():
        obj = json.loads(line)
        out[obj["id"]] = obj["results"]
    return out


def recall_at(results: list[dict[str, Any]], evidence: list[str], k: int) -> float:
    seen: list[str] = []
    for r in results:
        for pid in r["source_message_ids"]:
            if pid not in seen:
                seen.append(pid)
    return len(set(evidence) & set(seen[:k])) / len(evidence)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("path", type=Path)
    ap.add_argument("--mode", choices=["replay", "direct"], default="replay")
    ap.add_argument("--context-window", type=int, default=2048)
    ap.add_argument("--keep", action="store_true", help="keep the work folder and print it")
    ap.add_argument("--quick", action="store_true", help="the first conversation only")
    ap.add_argument(
        "--only", action="append", default=[], metavar="ID", help="only this conversation (repeat)"
    )
    ap.add_argument(
        "--backend",
        choices=["sqlite", "postgres", "both"],
        default="sqlite",
        help="the store under test; postgres runs on a private server (pgserver wheel)",
    )
    args = ap.parse_args()
    from tierbot.logging import configure_logging

    configure_logging("warning")  # direct mode opens the graph in this process
    data = json.loads(args.path.read_text())
    if args.quick:
        data = data[:1]
    if args.only:
        data = [d for d in data if d.get("sample_id") in args.only]
        if not data:
            raise SystemExit(f"no conversation {', '.join(args.only)} in {args.path}")
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    work = Path(tempfile.mkdtemp(prefix="tierbot-locomo-"))
    started = time.monotonic()
    rows: list[Row] = []
    all_meta: dict[str, Any] = {}
    for backend in backends:
        server = None
        if backend == "postgres":
            from tierbot.testing.postgres import PostgresServer

            server = PostgresServer.start()
            os.environ["TIERBOT_DATABASE_URL"] = server.create_database()
        try:
            folder = work / backend
            folder.mkdir()
            summary, per_conv = run_backend(args, data, folder, backend)
        finally:
            if server is not None:
                server.stop()
        name = args.mode if len(backends) == 1 and backend == "sqlite" else f"{args.mode} {backend}"
        rows += [
            row(f"{name} R@{k}", summary[f"R@{k}"], "recall", TARGET_R10 if k == 10 else "")
            for k in KS
        ]
        rows += [
            row(f"{name} cat{c} R@10", summary[f"cat{c}/R@10"], "recall")
            for c in CATEGORIES
            if f"cat{c}/R@10" in summary  # a single conversation may have none of a category
        ]
        all_meta[backend] = {
            "questions": summary.pop("questions"),
            "conversations": per_conv,
            "by_category": {
                f"cat{c}": {f"R@{k}": summary.get(f"cat{c}/R@{k}") for k in KS} for c in CATEGORIES
            },
        }
        print("\n| conversation | R@1 | R@5 | R@10 | R@20 |\n|---|---|---|---|---|")
        for sid, conv in per_conv.items():
            print(f"| {sid} | " + " | ".join(f"{conv[f'R@{k}']:.3f}" for k in KS) + " |")
    meta = machine_meta(
        mode=args.mode,
        context_window=args.context_window,
        backends=all_meta,
        seconds=round(time.monotonic() - started, 1),
    )
    title = f"LoCoMo evidence recall, mode={args.mode}, backends={','.join(backends)}"
    print_table(title, rows)
    out = write_results("locomo", rows, meta)
    print(f"wrote {out.relative_to(ROOT)}" + (f"; work folder {work}" if args.keep else ""))
    if not args.keep:
        for p in sorted(work.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        work.rmdir()
    return 0


def run_backend(
    args: argparse.Namespace, data: list[dict[str, Any]], work: Path, backend: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Feed and question every conversation on one backend: (summary, per conversation)."""
    cfg_path = write_config(work, args.context_window, backend)
    scores: dict[str, list[float]] = defaultdict(list)
    per_conv = {}
    for sample in data:
        channel = f"locomo:{sample['sample_id']}"
        turns = turns_of(sample)
        questions = questions_of(sample, {t["id"] for t in turns})
        t0 = time.monotonic()
        pipeline: dict[str, Any] = {}
        if args.mode == "direct":
            asyncio.run(feed_direct(cfg_path, channel, turns))
        else:
            pipeline = feed_replay(cfg_path, channel, turns, work)
        feed_s = time.monotonic() - t0
        t0 = time.monotonic()
        results = search(cfg_path, channel, questions, work)
        search_s = time.monotonic() - t0
        conv_scores: dict[str, list[float]] = defaultdict(list)
        for q in questions:
            for k in KS:
                r = recall_at(results.get(q["id"], []), q["evidence"], k)
                for bucket in (scores, conv_scores):
                    bucket[f"R@{k}"].append(r)
                scores[f"cat{q['cat']}/R@{k}"].append(r)
        per_conv[sample["sample_id"]] = {
            "turns": len(turns),
            "questions": len(questions),
            "feed_seconds": round(feed_s, 2),
            "search_seconds": round(search_s, 2),
            **{k: round(sum(v) / len(v), 4) for k, v in conv_scores.items()},
            **({"pipeline": pipeline} if pipeline else {}),
        }
    summary: dict[str, Any] = {k: round(sum(v) / len(v), 4) for k, v in sorted(scores.items())}
    summary["questions"] = len(scores["R@1"])
    return summary, per_conv


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
