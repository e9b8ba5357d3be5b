"""How common each index term is in English at large: a prior for BM25's idf.

FTS5 weighs a term by how rare it is *in the index*.  A young index is a poor
judge: in a channel where two people talk, each one's name is in half the rows,
so FTS5 gives it no weight at all, while "great" or "really" may look rare
because few messages exist yet.  Recall therefore blends the index's document
frequencies with English word frequencies (the ``wordfreq`` package, data
packaged with it, no download) as if ``memory.background_rows`` rows of ordinary
English were indexed too.  The blend fades as the index grows: at a million
rows a prior of a few thousand rows hardly moves anything.

Terms are Snowball stems, so the table maps a stem to the summed frequency of
the words sharing it ("activ" <- active, activity, activities ...).  The table
holds wordfreq's small English list (the ~30k most frequent words); a word
outside it is rare, which is what a missing entry means here too.
"""

from __future__ import annotations

import math
import threading

import Stemmer

#: Distinct terms a row spans with its neighbouring turns (columns terms, near, far),
#: roughly: turns a word's frequency into the chance that a row holds it.
ROW_TERMS = 60.0

_lock = threading.Lock()
_table: dict[str, float] | None = None


def _load() -> dict[str, float]:
    from wordfreq import get_frequency_dict

    freqs = get_frequency_dict("en", wordlist="small")
    words = list(freqs)
    stems = Stemmer.Stemmer("english").stemWords(words)
    table: dict[str, float] = {}
    for word, stem in zip(words, stems, strict=True):
        table[stem] = table.get(stem, 0.0) + freqs[word]
    return table


def table() -> dict[str, float]:
    """stem -> frequency in English text (loaded once per process, ~0.1 s)."""
    global _table
    if _table is None:
        with _lock:
            if _table is None:
                _table = _load()
    return _table


def row_share(term: str) -> float:
    """The share of ordinary English rows that would hold ``term`` (0 for unknown words)."""
    return 1.0 - math.exp(-ROW_TERMS * table().get(term, 0.0))


def fts_idf(rows: int, hits: int) -> float:
    """FTS5's own idf (fts5_aux.c): log((N - n + 0.5) / (n + 0.5)), floored at 1e-6."""
    hits = min(hits, rows)  # a df counted before deletions may exceed the rows left
    return max(1e-6, math.log((rows - hits + 0.5) / (hits + 0.5)))


def blended_idf(rows: int, hits: int, term: str, background_rows: int) -> float:
    """idf as if ``background_rows`` rows of ordinary English were indexed too."""
    if background_rows <= 0:
        return fts_idf(rows, hits)
    hits = min(hits, rows)
    extra = background_rows * row_share(term)
    return max(1e-6, math.log((rows + background_rows - hits - extra + 0.5) / (hits + extra + 0.5)))
