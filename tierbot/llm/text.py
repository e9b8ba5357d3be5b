"""Small text utilities shared by the offline provider: words, stems, sentences, overlap."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_\-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    i'm it's that's don't didn't what's let's i've i'd i'll you're we're they're""".split()
)

_stemmer = Stemmer.Stemmer("english")


# Bounded small: chat vocabulary keeps growing (names, ids, typos) and each entry costs
# ~250 bytes; the few thousand most recent words take nearly every hit (Zipf).
@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return [w.lower().strip("'-_") for w in _WORD.findall(text)]


def stems(text: str) -> list[str]:
    """Stemmed content words (stopwords dropped)."""
    return [_stem(w) for w in words(text) if w and w not in STOPWORDS]


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (and lines); empty pieces dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


#: Of a request's content words, the share a text must hold to be what it names.
NAMES_SHARE = 0.6


def names(request: str, text: str) -> bool:
    """Whether ``text`` is what ``request`` ("forget that my locker code is 4411") names:
    it holds at least :data:`NAMES_SHARE` of the request's stemmed content words, and
    every number or code the request gives ("my locker code is 5522" shares the words
    but is another value)."""
    wanted = set(stems(request))
    have = set(stems(text))
    if any(ch.isdigit() for ch in "".join(wanted - have)):
        return False
    return bool(wanted) and len(wanted & have) >= NAMES_SHARE * len(wanted)


class Overlap:
    """IDF-weighted stem overlap between a query and a set of documents."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.doc_stems = [set(stems(d)) for d in documents]
        df: Counter[str] = Counter()
        for s in self.doc_stems:
            df.update(s)
        n = max(len(documents), 1)
        self.idf = {t: math.log(1 + n / c) for t, c in df.items()}

    def scores(self, query: str) -> list[float]:
        return [self.score(query, d) for d in self.doc_stems]

    def score(self, query: str, doc: str | set[str]) -> float:
        """``query``'s overlap with one text (or its stems), weighted by these documents'
        idf: a part of a document scores what the document scores when it holds every
        query word the document holds."""
        q = set(stems(query))
        if not q:
            return 0.0
        d = set(stems(doc)) if isinstance(doc, str) else doc
        norm = sum(self.idf.get(t, math.log(1 + len(self.doc_stems))) for t in q)
        return sum(self.idf.get(t, 0.0) for t in q & d) / norm
