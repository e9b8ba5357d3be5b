"""Text processing shared by full-text search, the offline embedder and prompt formatting.

Every indexed text goes through :func:`terms`: lowercase words, English stop words
dropped, Snowball-stemmed.  The FTS5 table stores these terms pre-stemmed (its own
tokenizer only splits on spaces), so the index and the queries agree by construction;
``TEXT_VERSION`` is stored with the index and a change rebuilds it.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

from tierbot.llm.text import split_unspaced

TEXT_VERSION = "terms-v3"

_STOP = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's
    when when's where where's which while who who's whom why why's will with won't would
    wouldn't you you'd you'll you're you've your yours yourself yourselves also just s t
    """.split()
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # PyStemmer objects are not thread-safe; embedding runs in worker threads.
    st = getattr(_local, "stemmer", None)
    if st is None:
        st = _local.stemmer = Stemmer.Stemmer("english")
    return st


# Bounded small: the vocabulary of a long-lived bot keeps growing, each entry costs ~250
# bytes, and the few thousand most recent words take nearly every hit (Zipf).
@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


def words(text: str) -> list[str]:
    """Lowercased words of ``text`` minus stop words, possessives cut ("mel's" -> "mel");
    text of scripts without spaces as character pairs (:func:`split_unspaced`)."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP:
            continue
        w = w.split("'", 1)[0]
        if w and w not in _STOP:
            if w.isascii():
                out.append(w)
            else:
                out += split_unspaced(w)
    return out


def terms(text: str) -> list[str]:
    """The stemmed index terms of ``text``, in order, duplicates kept."""
    return [_stem(w) for w in words(text)]


def term_string(text: str) -> str:
    """``terms`` joined by spaces: what goes into an FTS5 column."""
    return " ".join(terms(text))


def tag(kind: str, value: str) -> str:
    """A single FTS token standing for a scope or type value (filtering inside FTS5)."""
    digest = hashlib.blake2b(value.encode(), digest_size=8).hexdigest()
    return f"{kind}{digest}"


def fts_query(query_terms: Iterable[str], *, max_terms: int = 24) -> str:
    """An FTS5 OR query over distinct terms (each quoted, so no term is an operator)."""
    uniq = list(dict.fromkeys(t for t in query_terms if t))[:max_terms]
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in uniq)


def fts_tags(
    ws: str, ch: str, typ: str, content: str, author_name: str
) -> tuple[str, str, str, str]:
    """(terms, ws tag, channel tag, type tag) of a node's FTS row; episodes index their author."""
    text = f"{author_name} {content}" if typ == "episode" and author_name else content
    return term_string(text), tag("w", ws), tag("c", ch), tag("t", typ)


def embed_text(typ: str, content: str, author_name: str) -> str:
    """What a node's vector is computed from; episodes include their author's name."""
    return f"{author_name}: {content}" if typ == "episode" and author_name else content


def content_hash(content: str) -> str:
    """Hash of the normalised content: exact duplicates (case, spacing) share it."""
    norm = " ".join(content.lower().split())
    return hashlib.blake2b(norm.encode(), digest_size=16).hexdigest()


_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def escape(text: str) -> str:
    """Escape ``text`` so it cannot open or close a tag in a prompt."""
    return "".join(_ESCAPES.get(ch, ch) for ch in text)
