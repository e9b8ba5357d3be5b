"""Memory extraction quality: per-type precision and recall of the memories the offline
provider saves from a labelled set of chat lines.

``benchmarks/data/extraction_lines.tsv`` holds 1,068 chat lines (135 speakers in 49 domains:
a software team, a family, a gaming server, a football team, a fire brigade, a choir, …),
each labelled with the memory type it should give (identity, preference, decision, goal,
todo, event, fact) or ``none`` for what must not be saved (chit-chat, passing states,
"back in 10").  The set was written for this purpose; how the labels are meant is in
benchmarks/README.md.

The lines go through the compaction path a real pass uses: the transcript of a chunk
of lines is sent to :class:`~tierbot.llm.offline.OfflineProvider` as a summary request
with the ``memory_save`` tool offered, and each ``memory_save`` call it makes is read
back by the message it cites.  A line's prediction is the type of the memory saved from
it (its most important one, when it gave several), or ``none``.

Figures: per-type precision, recall and F1, macro-F1 over the seven types (target
>= 0.80), and the share of saved memories that came from ``none`` lines (chit-chat,
target <= 5 %).  The rules were tuned on that set, so the same figures follow for
``extraction_heldout.tsv`` (206 lines in ten other domains, written by an author who had
not seen the rules, and never tuned on): what to expect of chat the rules have not seen.

    python -m benchmarks.extraction [--quick] [--data PATH] [--show-errors]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from benchmarks._common import Row, machine_meta, print_table, write_results
from benchmarks._common import row as _row
from tierbot.llm.base import ChatMessage
from tierbot.llm.offline import OfflineProvider
from tierbot.llm.quoting import quote
from tierbot.llm.transcript import TranscriptEntry, format_transcript

NAME = "extraction"
DATA = Path(__file__).resolve().parent / "data" / "extraction_lines.tsv"
#: Written after the rules were tuned on DATA, and never tuned on: how well they generalise.
HELDOUT = DATA.with_name("extraction_heldout.tsv")
TYPES = ("identity", "preference", "decision", "goal", "todo", "event", "fact")
CHUNK = 25  # lines per summary request, about one small compaction pass


def load(path: Path) -> list[tuple[str, str, str]]:
    """(speaker, label, text) per line; a malformed line is an error naming it."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in (*TYPES, "none"):
            raise SystemExit(f"{path}:{n}: expected 'speaker<TAB>label<TAB>text', got {line!r}")
        out.append((parts[0], parts[1], parts[2]))
    return out


async def predict(lines: Sequence[tuple[str, str, str]]) -> list[str]:
    """The type saved from each line by the offline provider's compaction path."""
    from memory_graph import memory_tools

    provider = OfflineProvider()
    save = memory_tools()[0]
    predicted = ["none"] * len(lines)
    for start in range(0, len(lines), CHUNK):
        chunk = lines[start : start + CHUNK]
        entries = [
            TranscriptEntry(f"m{start + i}", speaker, text)
            for i, (speaker, _, text) in enumerate(chunk)
        ]
        request = [
            ChatMessage("system", "Summarize the transcript; save durable memories."),
            ChatMessage("user", quote(format_transcript(entries), source="transcript")),
        ]
        completion = await provider.complete(request, [save], purpose="summary")
        best: dict[int, float] = {}
        for call in completion.tool_calls:
            for source in call.arguments.get("source_ids", []):
                i = int(str(source)[1:])
                importance = float(call.arguments.get("importance", 0.0))
                if importance > best.get(i, -1.0):
                    best[i] = importance
                    predicted[i] = str(call.arguments["memory_type"])
    return predicted


def score(
    gold: Sequence[str], predicted: Sequence[str], prefix: str = "", targets: bool = True
) -> tuple[list[Row], dict[str, float]]:
    rows: list[Row] = []

    def row(metric: str, value: float, unit: str, target: str = "") -> Row:
        return _row(prefix + metric, value, unit, target if targets else "")

    f1s = []
    for t in TYPES:
        tp = sum(g == t and p == t for g, p in zip(gold, predicted, strict=True))
        fp = sum(g != t and p == t for g, p in zip(gold, predicted, strict=True))
        fn = sum(g == t and p != t for g, p in zip(gold, predicted, strict=True))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        f1s.append(f1)
        rows.append(row(f"{t} precision", precision, "ratio"))
        rows.append(row(f"{t} recall", recall, "ratio"))
        rows.append(row(f"{t} F1", f1, "ratio"))
    macro = sum(f1s) / len(f1s)
    saved = [g for g, p in zip(gold, predicted, strict=True) if p != "none"]
    chitchat = sum(g == "none" for g in saved) / len(saved) if saved else 0.0
    missed = sum(g != "none" and p == "none" for g, p in zip(gold, predicted, strict=True))
    rows.insert(0, row("macro-F1 over the seven types", macro, "ratio", ">= 0.80"))
    rows.insert(1, row("saved memories that are chit-chat", chitchat * 100, "%", "<= 5"))
    rows.insert(2, row("durable lines not saved", missed, "lines"))
    return rows, {"macro_f1": macro, "chitchat": chitchat}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.extraction", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="accepted; the run is already quick")
    parser.add_argument("--data", type=Path, default=DATA, help="the labelled lines (TSV)")
    parser.add_argument(
        "--heldout", type=Path, default=HELDOUT, help="lines never tuned on (TSV); '' for none"
    )
    parser.add_argument("--show-errors", action="store_true", help="print each wrong line")
    args = parser.parse_args(argv)
    lines = load(args.data)
    predicted = asyncio.run(predict(lines))
    gold = [label for _, label, _ in lines]
    rows, _ = score(gold, predicted)
    held: list[tuple[str, str, str]] = []
    if str(args.heldout) not in ("", "."):
        held = load(args.heldout)
        held_predicted = asyncio.run(predict(held))
        held_rows, _ = score(
            [label for _, label, _ in held], held_predicted, "held-out ", targets=False
        )
        rows += held_rows
        predicted_all = [*predicted, *held_predicted]
    else:
        predicted_all = predicted
    if args.show_errors:
        for (speaker, label, text), p in zip([*lines, *held], predicted_all, strict=True):
            if p != label:
                print(f"{label:>10} -> {p:<10} {speaker}: {text}")
    counts = Counter(gold)
    print_table(
        f"{NAME}: memory types saved from {len(lines)} labelled lines "
        f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})",
        rows,
    )
    meta = machine_meta(lines=len(lines), data=args.data.name, heldout_lines=len(held))
    path = write_results(NAME, rows, meta)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
