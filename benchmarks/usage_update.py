"""The per-message cost of updating usage does not grow with history length (1k vs 100k).

When a message enters a channel, the actor appends it to its :class:`LiveContext` and
reads the usage (``ctx.append(msg)`` + ``ctx.usage(window)``); its tokens were counted
once, on entry.  This measures that per-message cost with 1k and with 100k messages of
history, with and without the one token count of a typical message, and their ratio.

For contrast it measures what a bot without a running total does per message: re-sum
the stored counts, or re-count every text, over the whole history (1k and 10k).  And
for honesty it measures the rest of what the actor does per message (the fixed prompt
recount and ``Compactor.check``), which is not part of the usage update.

Figures are medians over repeated batches: each batch appends ``--batch`` fresh messages
to a context of the given size and reports ns per message.

    python -m benchmarks.usage_update [--quick] [--repeats N] [--batch N]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence

from benchmarks._common import Row, machine_meta, median, print_table, row, write_results
from channels import LiveContext
from compactor import Compactor
from tierbot.config import DEFAULT_SYSTEM_PROMPT, CompactionConfig
from tierbot.messages import Message, Role
from tierbot.tokens import TokenCounter, get_counter

NAME = "usage_update"
SIZES = (1_000, 100_000)
NAIVE_SIZES = (1_000, 10_000)
WINDOW = 10_000_000  # large enough that 100k messages stay below every threshold
RATIO_TARGET = "<= 1.5"

_OPENERS = ["hey", "ok so", "quick question:", "fwiw", "btw", "honestly", "right,", "sure,"]
_BODIES = [
    "can someone check whether the deploy of build {n} went out to staging",
    "I moved the standup to {h}:30 tomorrow because of the release review",
    "the flaky test in test_store is back, it failed {n} times on main today",
    "Alice prefers the blue theme for the dashboard, let's keep it",
    "we agreed to ship v{n}.2 on Friday if QA signs off by Thursday noon",
    "what's the link to the design doc for the retry helper again?",
    "lunch at {h} works for me, the usual place near the station",
    "the invoice #{n} was paid, I'll close the ticket",
    "can you summarize what we decided about the migration last week",
    "remind me to renew the certificate before the {n}th",
]
_CLOSERS = ["", "", " thanks!", " :)", " no rush", " please", " (see thread above)"]


def typical_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` chat lines of typical length (about 10 to 30 tokens), deterministic."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        body = rnd.choice(_BODIES).format(n=rnd.randint(2, 999), h=rnd.randint(9, 17))
        out.append(f"{rnd.choice(_OPENERS)} {body}{rnd.choice(_CLOSERS)}")
    return out


def make_messages(
    texts: Sequence[str], tokens: Sequence[int], first_id: int, n: int
) -> list[Message]:
    """``n`` history messages with ids from ``first_id``, alternating user and assistant."""
    out = []
    for k in range(n):
        i = first_id + k
        j = k % len(texts)
        role = Role.USER if k % 2 == 0 else Role.ASSISTANT
        out.append(
            Message(
                "bench",
                f"p{i}",
                role,
                texts[j],
                author_id="u",
                author_name="u",
                ts=float(i),
                tokens=tokens[j],
                id=i,
                pos=float(i),
            )
        )
    return out


Setup = Callable[[], Callable[[], int]]


def paired_medians(setups: Sequence[Setup], repeats: int) -> list[float]:
    """Median ns/message of each setup, batches interleaved so all share the machine's noise.

    ``setup()`` builds a fresh state (untimed) and returns the timed batch, which returns
    how many messages it handled.
    """
    samples: list[list[float]] = [[] for _ in setups]
    for _ in range(repeats):
        for setup, out in zip(setups, samples, strict=True):
            batch = setup()
            t0 = time.perf_counter_ns()
            handled = batch()
            out.append((time.perf_counter_ns() - t0) / handled)
    return [median(s) for s in samples]


def _context(history: Sequence[Message], size: int, warmup: Sequence[Message]) -> LiveContext:
    """A context of ``size`` messages that has already taken ``warmup`` messages (untimed).

    The state of a running channel, not of a context just built: a fresh context's lists
    are exactly full, so its first append copies the whole list (in a running channel that
    copy is amortized over the next ~size/8 appends, lists grow geometrically), and building
    a 100k context evicts the CPU caches the append path then runs in.
    """
    ctx = LiveContext(history[:size])
    for m in warmup:
        ctx.append(m)
    return ctx


def running_total(
    history: Sequence[Message],
    size: int,
    warmup: Sequence[Message],
    fresh: Sequence[Message],
    counter: TokenCounter | None,
) -> Setup:
    """append + usage per message (plus one token count when ``counter`` is given)."""

    def setup() -> Callable[[], int]:
        ctx = _context(history, size, warmup)

        def append_usage() -> int:
            for m in fresh:
                ctx.append(m)
                ctx.usage(WINDOW)
            return len(fresh)

        def count_append_usage() -> int:
            assert counter is not None
            for m in fresh:
                counter.count_message(m.text)
                ctx.append(m)
                ctx.usage(WINDOW)
            return len(fresh)

        return append_usage if counter is None else count_append_usage

    return setup


def actor_path(
    history: Sequence[Message],
    size: int,
    warmup: Sequence[Message],
    fresh: Sequence[Message],
    counter: TokenCounter,
) -> Setup:
    """Everything ``ChannelActor._enter`` does per message below the thresholds: append,
    loop-guard tick, the cached fixed-prompt count, usage, ``Compactor.check`` with the
    context's running summary and marker counts."""
    config = CompactionConfig.model_validate({})  # the defaults

    def setup() -> Callable[[], int]:
        ctx = _context(history, size, warmup)
        comp = Compactor("bench")

        fixed = counter.count_message(DEFAULT_SYSTEM_PROMPT)  # the actor caches this count

        def enter() -> int:
            for m in fresh:
                ctx.append(m)
                comp.on_message()
                ctx.set_fixed(fixed)
                comp.check(
                    ctx.items,
                    ctx.usage(WINDOW),
                    WINDOW,
                    config,
                    markers=ctx.marker_count,
                    summary_tokens=ctx.summary_tokens,
                )
            return len(fresh)

        return enter

    return setup


def naive(
    history: Sequence[Message], size: int, fresh: Sequence[Message], counter: TokenCounter | None
) -> Setup:
    """A bot that recomputes its total over the whole history each message: re-summing the
    stored counts, or (with ``counter``) re-counting every text."""

    def setup() -> Callable[[], int]:
        items = list(history[:size])
        fixed = counter.count_message(DEFAULT_SYSTEM_PROMPT) if counter else 0

        def resum() -> int:
            for m in fresh:
                items.append(m)
                _ = (fixed + sum(x.tokens for x in items)) / WINDOW
            return len(fresh)

        def recount() -> int:
            assert counter is not None
            for m in fresh:
                items.append(m)
                _ = (fixed + sum(counter.count_message(x.text) for x in items)) / WINDOW
            return len(fresh)

        return resum if counter is None else recount

    return setup


def run(repeats: int, batch: int) -> tuple[list[Row], dict[str, object]]:
    counter = get_counter("o200k_base")
    texts = typical_texts(256)
    tokens = [counter.count_message(t) for t in texts]
    history = make_messages(texts, tokens, 1, max(SIZES))
    fresh = make_messages(list(reversed(texts)), list(reversed(tokens)), 10_000_000, batch)
    slow_batch = fresh[: max(2, batch // 20)]  # O(history) variants: fewer messages per batch
    slow_repeats = max(3, repeats // 4)

    warmup = make_messages(texts, tokens, 9_000_000, batch)
    rows: list[Row] = []
    small, big = SIZES
    for label, ctr in (("append+usage", None), ("count+append+usage", counter)):
        a, b = paired_medians(
            [running_total(history, n, warmup, fresh, ctr) for n in SIZES], repeats
        )
        rows += [
            row(f"{label} @{small // 1000}k", a, "ns/msg"),
            row(f"{label} @{big // 1000}k", b, "ns/msg"),
            row(f"{label} ratio {big // 1000}k/{small // 1000}k", b / a, "x", RATIO_TARGET),
        ]
    n_small, n_big = NAIVE_SIZES
    for label, ctr in (("naive re-sum", None), ("naive re-count", counter)):
        a, b = paired_medians(
            [naive(history, n, slow_batch, ctr) for n in NAIVE_SIZES], slow_repeats
        )
        rows += [
            row(f"{label} @{n_small // 1000}k (contrast)", a, "ns/msg"),
            row(f"{label} @{n_big // 1000}k (contrast)", b, "ns/msg"),
            row(f"{label} ratio {n_big // 1000}k/{n_small // 1000}k (contrast)", b / a, "x"),
        ]
    a, b = paired_medians(
        [actor_path(history, n, warmup, slow_batch, counter) for n in SIZES], slow_repeats
    )
    rows += [
        row(f"actor enter path @{small // 1000}k", a, "ns/msg"),
        row(f"actor enter path @{big // 1000}k", b, "ns/msg"),
        row(f"actor enter path ratio {big // 1000}k/{small // 1000}k", b / a, "x", "<= 1.5"),
    ]
    meta = machine_meta(
        sizes=list(SIZES),
        naive_sizes=list(NAIVE_SIZES),
        repeats=repeats,
        batch=batch,
        slow_repeats=slow_repeats,
        slow_batch=len(slow_batch),
        encoding=counter.encoding_name,
        mean_message_tokens=sum(tokens) / len(tokens),
        statistic="median over batches of ns per message",
    )
    return rows, meta


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.usage_update", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--repeats", type=int, default=None, help="batches per figure (31)")
    parser.add_argument("--batch", type=int, default=200, help="messages per batch (200)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (9 if args.quick else 31)
    rows, meta = run(repeats, args.batch)
    print_table(f"{NAME}: per-message cost of a usage update (median ns/message)", rows)
    print(
        "\n'actor enter path' is everything ChannelActor._enter does per message below the"
        "\nthresholds (append, loop guard, usage, Compactor.check on running counts)."
    )
    path = write_results(NAME, rows, meta)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
