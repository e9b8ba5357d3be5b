"""Hybrid recall: BM25 and vector candidates, fused, expanded through the graph, re-ranked.

Relevance = (1 - w) * (BM25 / best BM25 of the query) + w * cosine, w the embedder's weight,
where BM25 is FTS5's over a node's own terms plus, for episodes, the terms of the
neighbouring turns (columns ``near`` and ``far``, down-weighted): a reply such as
"yes, last week" is found through the question it answers.  Each term's idf blends
the index's counts with English word frequencies (background.py), so a young index
does not mistake "really" for a rare word.  A raw message's or a saved memory's relevance
is scaled by a prior from its shape (short rows and questions rarely hold answers); a "when"
question favours what mentions a time, a "how many" one what holds a number (answers.py).
Candidates authored by, or linked to, a person the query names are boosted; when the
query names absolute dates, candidates from those days (or months) are favoured; graph
neighbours of the best candidates inherit part of their score along typed edges; a
superseded memory always ranks below its successor.  The final score is relevance
times an importance factor and a recency factor, all in 0..1.  Every constant below
was chosen by measurement on LoCoMo (benchmarks/locomo.py) and the speed benchmark.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tierbot.errors import ToolError
from tierbot.keys import workspace_of
from tierbot.llm.text import kin

from . import background
from .answers import expected_answer
from .dates import find_windows
from .storage import NodeRow, TermWeight, TextFilter
from .text import terms
from .types import EDGE_MULTIPLIER, MAX_RECALL_LIMIT, MemoryType, RecallHit

if TYPE_CHECKING:
    from .graph import MemoryGraph

#: Share of relevance given to vector similarity when the embedder does not say
#: (an embedder may set ``recall_weight``: the lexical default sets 0.1, see embedders.py).
VECTOR_WEIGHT = 0.4
#: Cosine below which a vector hit is noise (an embedder may set ``min_similarity``).
MIN_SIMILARITY = 0.2
PERSON_BOOST = 0.5
ANSWER_BOOST = 0.5
DATE_BOOST = 1.0
DATE_CANDIDATES = 30
FTS_CANDIDATES = 60
VECTOR_CANDIDATES = 20
#: At most this many postings are scored per query: the rarest query terms are kept,
#: very common ones (low idf, high cost) dropped once the budget is spent.
POSTINGS_BUDGET = 2_000
EXPAND_SEEDS = 10
SCORE_DIGITS = 9  # scores closer than this are ties (see the final sort)
EXPAND_SHARE = 0.5
SUPERSEDED_FACTOR = 0.5
#: Message prior (see _message_prior): full weight from this many index terms on ...
PRIOR_TERMS = 20
PRIOR_EXPONENT = 0.5
#: The length prior for a saved memory (entities aside): a sentence cut from a message
#: ("Melanie: I love it!") is as short as "haha yes" and BM25 favours it as much.
#: Measured on LoCoMo replay (memories from the offline extractor), exponent 0 / 0.25 /
#: 0.5 / 0.75 / 1: R@10 0.778 / 0.784 / 0.792 / 0.796 / 0.796; 0.5, the messages' own,
#: since a fact worth saving packs more into fewer words than chat does.
MEMORY_PRIOR_EXPONENT = 0.5
QUESTION_FACTOR = 0.8
#: ... and the least a candidate's shape factor can be (an empty message asking a question,
#: under a "when" query that it does not answer).
PRIOR_FLOOR = (
    (math.log(2) / math.log(2 + PRIOR_TERMS)) ** max(PRIOR_EXPONENT, MEMORY_PRIOR_EXPONENT)
    * QUESTION_FACTOR
    / (1 + ANSWER_BOOST)
)
IMPORTANCE_SHARE = 0.2
RECENCY_SHARE = 0.1


@dataclass(slots=True)
class _Cand:
    row: NodeRow
    text: float = 0.0
    vec: float = 0.0
    spread: float = 0.0

    @property
    def rowid(self) -> int:
        return self.row.rowid


def _fail(argument: str, message: str) -> ToolError:
    return ToolError(f"{argument}: {message}", tool="memory_recall", argument=argument)


def check_args(query: Any, limit: Any, types: Any, since: Any) -> None:
    """Validate recall arguments; raises ToolError naming the bad one."""
    if not isinstance(query, str) or not query.strip():
        raise _fail("query", "must be a non-empty string")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECALL_LIMIT:
        raise _fail("limit", f"must be an integer from 1 to {MAX_RECALL_LIMIT}")
    if types is not None:
        allowed = [t.value for t in MemoryType]
        if isinstance(types, str) or not all(isinstance(t, str) and t in allowed for t in types):
            raise _fail("types", f"must be a list drawn from {', '.join(allowed)}")
    if since is not None and (
        isinstance(since, bool) or not isinstance(since, int | float) or math.isnan(since)
    ):
        raise _fail("since", "must be a unix timestamp in seconds")


def hit_of(g: MemoryGraph, row: NodeRow, score: float) -> RecallHit:
    """``row`` as a recall result with ``score``, its author's name as the graph knows it."""
    return RecallHit(
        id=row.id,
        type=row.type,
        content=row.content,
        score=score,
        channel=row.channel,
        source_message_ids=tuple(json.loads(row.sources)),
        created_at=row.created_at,
        author_id=row.author_id,
        author=g.display_names.get(row.author_id, ""),
    )


async def recall(
    g: MemoryGraph,
    query: str,
    *,
    channel: str,
    limit: int,
    types: Sequence[str] | None,
    since: float | None,
    exclude: Collection[str] = (),
    exclude_authors: Collection[str] = (),
) -> list[RecallHit]:
    check_args(query, limit, types, since)
    not_by = set(exclude_authors)
    windows, text_query = find_windows(query)
    q_terms = terms(text_query)
    q_terms += kin_terms(g.df, q_terms)
    cands: dict[int, _Cand] = {}
    search_terms, affordable = _affordable(g.df, q_terms)

    def vector_search() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        qv = g.embedder.embed([query])[0]
        return (qv, *g.vector_search(qv, VECTOR_CANDIDATES, channel))

    async def stored_vector_search() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        qv = await asyncio.to_thread(g.embedder.embed, [query])
        return (qv[0], *await g.nearest(qv[0], VECTOR_CANDIDATES, channel))

    vec_task = asyncio.create_task(
        stored_vector_search() if g.vectors_in_storage else asyncio.to_thread(vector_search)
    )
    text_scores: dict[int, float] = {}
    if search_terms:
        type_filter = TextFilter(types=tuple(types or ()))
        if affordable:
            await _scored_in_scope(
                g, channel, search_terms, type_filter, since, windows, text_scores, cands
            )
        else:
            # Ranking every posting of a very common term costs O(postings): when even
            # the rarest term is that common, score only its newest postings in scope.
            where = replace(g.text_scope(channel), types=type_filter.types)
            n_rows = max(g.n_rows, 1)
            idf = [
                TermWeight(t, g.df.get(t, 0), background.fts_idf(n_rows, g.df.get(t, 0)))
                for t in search_terms
            ]
            found = await g.storage.newest_matches(idf, where, FTS_CANDIDATES * 2, since)
            for score, row in found:
                text_scores[row.rowid] = score
                cands[row.rowid] = _Cand(row)
            # The clause is the workspace's: a private scope is narrower, as the codes say.
            arr, code = g.scope_codes(channel)
            for r in [r for r in cands if r >= len(arr) or arr[r] != code]:
                del cands[r], text_scores[r]
    qv, labels, sims = await vec_task
    best = max(text_scores.values(), default=0.0)
    floor = float(getattr(g.embedder, "min_similarity", MIN_SIMILARITY))
    vec_scores = {int(lb): float(s) for lb, s in zip(labels, sims, strict=True) if s >= floor}
    # Episodes are not in the in-RAM index: as the index did, the text candidates among
    # the VECTOR_CANDIDATES nearest (exact cosines from their stored vectors) get a score.
    near = await _cosines(g, qv, [r for r in cands if r not in vec_scores])
    near.sort(key=lambda rc: (-rc[1], -rc[0]))
    for rowid, cos in near[:VECTOR_CANDIDATES]:
        if cos >= floor:
            vec_scores[rowid] = cos
    answer = expected_answer(text_query)
    shape = {r: _shape(g, c.row, answer) for r, c in cands.items()}
    rows: list[NodeRow] = [c.row for c in cands.values()]
    more = _vector_only(g, text_scores, best, vec_scores, limit, shape)
    rows += await _rows(g, more, types, since)
    for row in rows:
        c = _Cand(row)
        c.text = text_scores.get(c.rowid, 0.0) / best if best > 0 else 0.0
        c.vec = vec_scores.get(c.rowid, 0.0)
        cands[c.rowid] = c
        if c.rowid not in shape:
            shape[c.rowid] = _shape(g, row, answer)
    persons = _persons(g, channel, q_terms)
    mentions: dict[int, set[int]] = {}
    if any(p.startswith("#") for p in persons):  # entity names: follow "mentions" links
        mentions = await g.storage.link_targets(cands, "mentions")
    rel = {r: _relevance(g, c, persons, mentions, shape[r]) for r, c in cands.items()}
    if windows:  # outside the dates the query names, a candidate counts for less
        for r, c in cands.items():
            if not any(lo <= c.row.created_at <= hi for lo, hi in windows):
                rel[r] /= 1.0 + DATE_BOOST
    await _expand(g, channel, cands, rel, types, since)
    now = time.time()
    half_life = g.config.decay_half_life_days * 86400.0
    scored = []
    skip = set(exclude)
    for r, c in cands.items():
        if not_by and c.row.type == "episode" and c.row.author_id in not_by:
            continue
        # Platform ids are unique per channel only (Slack's ts): exclude in this channel.
        if (
            skip
            and c.row.type == "episode"
            and c.row.channel == channel
            and json.loads(c.row.sources)[0] in skip
        ):
            continue
        updated, imp, sup = c.row.updated_at, c.row.current_importance, c.row.superseded_by
        s = rel[r] * (1.0 - IMPORTANCE_SHARE + IMPORTANCE_SHARE * float(imp))
        # Recency of the information itself; being recalled only slows its decay
        # (current_importance), so recall does not feed on its own results.
        age = max(0.0, now - float(updated))
        s *= 1.0 - RECENCY_SHARE + RECENCY_SHARE * 0.5 ** (age / half_life)
        if sup:
            s *= SUPERSEDED_FACTOR
        scored.append([min(1.0, max(0.0, s)), r, c])
    _successors_first(scored)
    # Scores equal but for rounding (recency moves with the clock by a few ulps) rank as
    # ties, and ties go to the newest row: the same order on every backend, every time.
    scored.sort(key=lambda x: (-round(x[0], SCORE_DIGITS), -x[1]))
    hits = [hit_of(g, c.row, float(s)) for s, _, c in scored[:limit]]
    if g.note_access([c.rowid for _, _, c in scored[:limit]], now) and not g.lock.locked():
        # Never wait behind a writer for bookkeeping: the next recall flushes instead.
        async with g.lock:
            await g.flush_access()
    return hits


def _vector_only(
    g: MemoryGraph,
    text: dict[int, float],
    best: float,
    vec: dict[int, float],
    limit: int,
    shape: dict[int, float],
) -> set[int]:
    """Vector candidates without a text match that could still reach the top ``limit``.

    A vector-only candidate scores at most ``w * cosine``; a text candidate at least its
    text share times its shape factor with every other factor at its worst.  Skipping
    the hopeless ones saves a round trip on most queries when the embedder's weight is
    small.
    """
    w = float(getattr(g.embedder, "recall_weight", VECTOR_WEIGHT))
    floor = (1 - IMPORTANCE_SHARE) * (1 - RECENCY_SHARE) * SUPERSEDED_FACTOR / (1 + PERSON_BOOST)
    if best <= 0:
        return {r for r in vec if r not in text}
    sure = sorted(
        ((1 - w) * s / best * floor * shape.get(r, PRIOR_FLOOR) for r, s in text.items()),
        reverse=True,
    )
    bar = sure[limit - 1] if len(sure) >= limit else 0.0
    return {r for r, s in vec.items() if r not in text and w * s > bar}


#: A query term no memory holds is looked for by the terms of its family that some do
#: ("electrics" by "electrician", "inspection" by "inspector": see
#: :func:`tierbot.llm.text.kin`); the ``KIN_MOST`` most frequent are asked for.
KIN_MIN, KIN_MOST = 5, 3


def kin_terms(df: dict[str, int], q_terms: Sequence[str]) -> list[str]:
    """The terms of the families of the query terms ``df`` does not hold."""
    out: list[str] = []
    for t in dict.fromkeys(q_terms):
        if len(t) < KIN_MIN or df.get(t):
            continue
        family = [u for u in df if df[u] and kin(t, u)]
        out += sorted(family, key=lambda u: (-df[u], u))[:KIN_MOST]
    return out


def _affordable(df: dict[str, int], q_terms: list[str]) -> tuple[list[str], bool]:
    """(query terms present in the index, rarest first, within the postings budget;
    whether ranking all their postings fits the budget)."""
    present = sorted((df[t], t) for t in set(q_terms) if df.get(t, 0) > 0)
    keep: list[str] = []
    spent = 0
    for n, t in present:
        if keep and spent + n > POSTINGS_BUDGET:
            break
        keep.append(t)
        spent += n
    return keep, spent <= POSTINGS_BUDGET


async def _scored_in_scope(
    g: MemoryGraph,
    channel: str,
    search_terms: list[str],
    type_filter: TextFilter,
    since: float | None,
    windows: list[tuple[float, float]],
    text_scores: dict[int, float],
    cands: dict[int, _Cand],
) -> None:
    """Score every posting of the (budgeted) terms, keep the caller's scope, fetch the best.

    The storage scores each term apart (its saturating tf part times our weight), so
    each term's weight is the idf blended with English word frequencies (background.py)
    rather than the text index's own; a multi-term BM25 is the sum of such per-term
    scores, so nothing else changes.  Scope is checked against the in-memory scope
    codes rather than in the text search: intersecting with a workspace costs
    O(size of the workspace) per query.
    """
    n_rows = max(g.n_rows, 1)
    weighted = [
        TermWeight(
            t,
            g.df.get(t, 0),
            background.blended_idf(n_rows, g.df.get(t, 0), t, g.config.background_rows),
        )
        for t in search_terms
    ]
    hits = await g.storage.term_scores(weighted, n_rows, type_filter)
    if not hits:
        return
    labels = np.fromiter((r for r, _ in hits), dtype=np.int64, count=len(hits))
    scores = np.fromiter((s for _, s in hits), dtype=np.float64, count=len(hits))
    arr, code = g.scope_codes(channel)
    inside = labels < len(arr)
    inside[inside] = arr[labels[inside]] == code
    labels, scores = labels[inside], scores[inside]
    # Ties (often: many rows of one template) go to the newest row, not to the order the
    # storage returned them in, which differs between backends and after a migration.
    best = np.lexsort((-labels, -np.round(scores, SCORE_DIGITS)))
    chosen = {int(x) for x in labels[best[:FTS_CANDIDATES]]}
    if windows and len(labels):  # the best matches inside the dates the query names, too
        created = await g.storage.created_at(labels.tolist())
        dated = {r for r, ts in created.items() if any(lo <= ts <= hi for lo, hi in windows)}
        chosen.update([int(x) for x in labels[best] if int(x) in dated][:DATE_CANDIDATES])
    score_of = dict(zip(labels.tolist(), scores.tolist(), strict=True))
    for row in await _rows(g, chosen, None, since):
        text_scores[row.rowid] = score_of[row.rowid]
        cands[row.rowid] = _Cand(row)


async def _cosines(g: MemoryGraph, qv: np.ndarray, rowids: list[int]) -> list[tuple[int, float]]:
    """(rowid, cosine with ``qv``) from the stored vectors of the current embedder."""
    if not rowids:
        return []
    found, matrix = await g.storage.embedding_matrix(g.embedder.identity, rowids)
    if not found:
        return []
    sims = matrix @ qv.astype(np.float32)
    return [(r, float(s)) for r, s in zip(found, sims.tolist(), strict=True)]


async def _rows(
    g: MemoryGraph, rowids: set[int], types: Sequence[str] | None, since: float | None
) -> list[NodeRow]:
    """Rows of ``rowids`` still present, of the wanted types and not older than ``since``."""
    if not rowids:
        return []
    return await g.storage.node_rows(rowids, types, since)


def _persons(g: MemoryGraph, channel: str, q_terms: list[str]) -> set[str]:
    """Author ids and ``#rowid`` entity keys whose names the query mentions."""
    table = g.names.get(workspace_of(channel), {})
    return {key for t in q_terms for key in table.get(t, ())}


def _relevance(
    g: MemoryGraph, c: _Cand, persons: set[str], mentions: dict[int, set[int]], shape: float
) -> float:
    w = float(getattr(g.embedder, "recall_weight", VECTOR_WEIGHT))
    rel = ((1.0 - w) * c.text + w * c.vec) * shape
    if persons and _about(c, persons, mentions):
        rel *= 1.0 + PERSON_BOOST
    return rel / (1.0 + PERSON_BOOST)


def _shape(g: MemoryGraph, row: NodeRow, answer: re.Pattern[str] | None) -> float:
    """What a candidate's form says (0..1]: a raw message's prior, and whether it carries
    the kind of words the question asks for ("When ...?" and nothing placed in time)."""
    if row.type == "episode":
        factor = _message_prior(g, row.rowid, row.content, PRIOR_EXPONENT)
    elif row.type != "entity" and MEMORY_PRIOR_EXPONENT > 0:
        factor = _message_prior(g, row.rowid, row.content, MEMORY_PRIOR_EXPONENT)
    else:
        factor = 1.0  # an entity is a name: short by nature
    if answer is not None and answer.search(row.content) is None:
        factor /= 1.0 + ANSWER_BOOST
    return factor


def _message_prior(g: MemoryGraph, rowid: int, content: str, exponent: float) -> float:
    """How likely a raw message (or memory) is to hold an answer, from its shape alone (0..1].

    BM25 favours short rows, but "haha yes!" or "what kind of yoga?" rarely is what a
    question is after: the prior grows with the message's index terms up to
    PRIOR_TERMS (raised to ``exponent``), and a message that ends in a question mark
    (an attachment's ``[...]`` caption aside) counts QUESTION_FACTOR as much.
    """
    n = int(g.term_counts[rowid]) if rowid < len(g.term_counts) else -1
    if n < 0:
        n = len(terms(content))
        g.note_term_count(rowid, n)
    prior = min(1.0, math.log(2 + n) / math.log(2 + PRIOR_TERMS)) ** exponent
    if _asks(content):
        prior *= QUESTION_FACTOR
    return prior


def _asks(content: str) -> bool:
    """Whether ``content`` ends in a question mark, trailing ``[attachment]`` notes aside."""
    text = content.rstrip()
    for _ in range(4):
        if not text.endswith("]") or (start := text.rfind("[")) < 0:
            break
        text = text[:start].rstrip()
    return text.endswith("?")


def _about(c: _Cand, persons: set[str], mentions: dict[int, set[int]]) -> bool:
    """Whether ``c`` was said by, or mentions (an entity link), one of ``persons``."""
    if c.row.author_id in persons:
        return True
    return any(f"#{dst}" in persons for dst in mentions.get(c.rowid, ()))


async def _expand(
    g: MemoryGraph,
    channel: str,
    cands: dict[int, _Cand],
    rel: dict[int, float],
    types: Sequence[str] | None,
    since: float | None,
) -> None:
    """Let the best candidates' graph neighbours (both directions) inherit part of their score."""
    seeds = sorted(rel, key=lambda r: (-rel[r], -r))[:EXPAND_SEEDS]
    gained: dict[int, float] = {}
    for link in await g.storage.links_of(seeds):
        flow = rel[link.node] * EXPAND_SHARE * EDGE_MULTIPLIER.get(link.type, 1.0) * link.weight
        if flow > gained.get(link.other, 0.0):
            gained[link.other] = flow
    missing = {r for r in gained if r not in cands}
    for row in await _rows(g, missing, types, since):
        if g.visible(channel, row.channel):  # an edge never leaks across scopes
            cands[row.rowid] = _Cand(row)
            rel[row.rowid] = 0.0
    for r, flow in gained.items():
        if r in cands and flow > rel[r]:
            cands[r].spread = flow
            rel[r] = min(1.0, flow)


def _successors_first(scored: list[list[Any]]) -> None:
    """A superseded memory never outranks the memory that replaced it."""
    by_id = {item[2].row.id: item for item in scored}
    for item in scored:
        successor = by_id.get(item[2].row.superseded_by)
        if successor is not None and item[0] >= successor[0]:
            item[0] = successor[0] * 0.99
