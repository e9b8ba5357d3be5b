"""The MemoryStorage contract, second half: what the graph loads at open, recall's text
and vector candidates, access counts and reading nodes out.

Text search is asked for in stemmed terms and a :class:`TextFilter`, never in a
backend's query syntax, so these tests hold for any backend.  The graph's public API
writes the nodes the reads need.
"""

from __future__ import annotations

import numpy as np
import pytest

from memory_graph import MemoryGraph
from memory_graph.storage import TF_SATURATION, NodeScope, TermWeight, TextFilter
from memory_graph.text import TEXT_VERSION, terms
from tierbot.messages import Message, Role

CH = "discord:111:1"
THREAD = "discord:111:1:77"
OTHER = "discord:222:1"


def said(pid: str, text: str, author: str = "u1", channel: str = CH, ts: float = 1e9) -> Message:
    return Message(channel, pid, Role.USER, text, author_id=author, author_name=author, ts=ts)


def stem(word: str) -> str:
    [t] = terms(word)
    return t


async def rowid_of(graph: MemoryGraph, memory_id: str) -> int:
    ref = await graph.storage.node_ref(memory_id)
    assert ref is not None
    return ref.rowid


async def test_state_loaded_at_open_names_scopes_and_the_rowid_high_water(
    graph: MemoryGraph,
) -> None:
    s = graph.storage
    assert await s.max_rowid() == 0
    await graph.add_episodes([said("p1", "hello from ada", author="ada")])
    fact = await graph.save("Kestrel is the build server", "entity", channel=OTHER)
    fact_rowid = await rowid_of(graph, fact.id)
    assert {(n.channel, n.type) for n in await s.node_scopes()} == {
        (CH, "episode"),
        (OTHER, "entity"),
    }
    assert ("discord:111", "ada", "ada") in await s.author_names()
    assert await s.entity_names() == [(fact_rowid, "discord:222", "Kestrel is the build server")]
    assert await graph.forget(fact.id)
    assert await s.max_rowid() == fact_rowid, "a deleted node's rowid is never handed out again"


async def test_private_channels_round_trip_and_their_threads_are_found(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes(
        [said("p1", "in the channel"), said("p2", "in a thread", channel=THREAD)]
    )
    await graph.add_episodes([said("p3", "next door", channel=OTHER)])
    async with s.transaction():
        await s.mark_private(CH, True, 1.0)
        await s.mark_private(CH, True, 2.0)  # marking twice is harmless
    assert await s.private_channels() == {CH}
    tree = await s.channel_tree_scopes(CH)
    assert sorted(n.channel for n in tree) == [CH, THREAD]
    assert all(isinstance(n, NodeScope) and n.workspace == "discord:111" for n in tree)
    async with s.transaction():
        await s.mark_private(CH, False, 3.0)
    assert await s.private_channels() == set()


async def test_term_scores_saturate_weight_and_filter(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes(
        [
            said("p1", "heron heron heron heron heron heron heron heron", ts=1e9),
            said("p2", "a heron flew over the lake", ts=1e9 + 1),
            said("p3", "nothing about birds here", ts=1e9 + 2),
        ]
    )
    await graph.add_episodes([said("p4", "heron in another workspace", channel=OTHER)])
    fact = await graph.save("the heron is a wading bird", "fact", channel=CH)
    heron = stem("heron")
    df = await s.term_frequencies()
    # p3 holds it only in its context (the turn before it says "heron"): it counts too.
    assert df[heron] == 5, "every row holding the term, in any workspace"
    weight = 3.0
    n_rows = graph.n_rows
    scores = dict(await s.term_scores([TermWeight(heron, df[heron], weight)], n_rows, TextFilter()))
    assert len(scores) == 5
    assert all(0 < v <= TF_SATURATION * weight + 1e-9 for v in scores.values())
    episodes = {r.rowid: r.platform_id for r in await s.authored_nodes("u1") if r.platform_id}
    by_pid = {episodes[r]: v for r, v in scores.items() if r in episodes}
    assert by_pid["p1"] > by_pid["p2"], "more occurrences score more (until they saturate)"
    assert by_pid["p2"] > by_pid["p3"], "a word in a neighbouring turn counts less"
    double = dict(
        await s.term_scores([TermWeight(heron, df[heron], 2 * weight)], n_rows, TextFilter())
    )
    assert double[next(iter(double))] == pytest.approx(2 * scores[next(iter(double))])
    in_ws = await s.term_scores(
        [TermWeight(heron, df[heron], weight)], n_rows, TextFilter("workspace", "discord:111")
    )
    assert len(in_ws) == 4
    facts = await s.term_scores(
        [TermWeight(heron, df[heron], weight)], n_rows, TextFilter(types=("fact",))
    )
    assert [r for r, _ in facts] == [await rowid_of(graph, fact.id)]
    lake = stem("lake")
    both = dict(
        await s.term_scores(
            [TermWeight(heron, df[heron], weight), TermWeight(lake, df[lake], weight)],
            n_rows,
            TextFilter(),
        )
    )
    p2 = next(r for r, pid in episodes.items() if pid == "p2")
    assert both[p2] > scores[p2], "a row's score is the sum over the terms it holds"
    assert await s.term_scores([], n_rows, TextFilter()) == []


async def test_newest_matches_are_newest_first_within_limit_and_since(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes(
        [said(f"p{i}", f"the deploy number {i} went fine", ts=1e9 + i) for i in range(6)]
    )
    await graph.add_episodes([said("q1", "deploy elsewhere", channel=OTHER, ts=2e9)])
    where = TextFilter("channel", CH)
    found = await s.newest_matches([TermWeight(stem("deploy"), 7, 1.0)], where, 3, None)
    assert [row.content for _, row in found] == [
        f"the deploy number {i} went fine" for i in (5, 4, 3)
    ]
    assert all(score > 0 for score, _ in found)
    since = await s.newest_matches([TermWeight(stem("deploy"), 7, 1.0)], where, 10, since=1e9 + 4)
    assert sorted(row.created_at for _, row in since) == [1e9 + 4, 1e9 + 5]
    assert await s.newest_matches([TermWeight(stem("zebra"), 0, 1.0)], where, 3, None) == []


async def test_rows_dates_and_vectors_of_rowids(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes([said("p1", "an old message", ts=1e9)])
    fact = await graph.save("a fresh fact", "fact", channel=CH)
    ep = next(n.rowid for n in await s.authored_nodes("u1") if n.platform_id == "p1")
    mem = await rowid_of(graph, fact.id)
    many = [ep, mem, *range(100_000, 101_200)]  # more ids than one IN list takes
    assert {r.rowid for r in await s.node_rows(many, None, None)} == {ep, mem}
    assert [r.rowid for r in await s.node_rows(many, ["fact"], None)] == [mem]
    assert [r.rowid for r in await s.node_rows(many, None, since=1e9 + 1)] == [mem]
    created = await s.created_at(many)
    assert set(created) == {ep, mem} and created[ep] == 1e9
    identity = graph.embedder.identity
    labels, matrix = await s.embedding_matrix(identity, many)
    assert sorted(labels) == sorted([ep, mem]) and matrix.dtype == np.float32
    assert matrix.shape == (2, graph.embedder.dim)
    assert (await s.embedding_matrix("some-other-embedder", many))[0] == []


async def test_stale_embeddings_are_listed_and_replaced(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes([said("p1", "an episode")])
    fact = await graph.save("a memory", "fact", channel=CH)
    mem = await rowid_of(graph, fact.id)
    identity = graph.embedder.identity
    rows = await s.embedding_rows(0, identity, 100)
    assert [r.rowid for r in rows] == [mem], "every memory; episodes only when stale"
    ep = next(n.rowid for n in await s.authored_nodes("u1") if n.platform_id == "p1")
    new = np.full(graph.embedder.dim, 0.5, dtype=np.float32)
    async with s.transaction():
        await s.set_embeddings("another-embedder", [(ep, new)])
    rows = await s.embedding_rows(0, identity, 100)
    assert [r.rowid for r in rows] == [ep, mem]
    assert rows[0].embedder == "another-embedder" and np.array_equal(rows[0].vector, new)
    assert await s.embedding_rows(mem, identity, 100) == []
    assert [r.rowid for r in await s.embedding_rows(0, identity, 1)] == [ep]


async def test_access_counts_add_up_and_accessed_at_only_moves_forward(
    graph: MemoryGraph,
) -> None:
    s = graph.storage
    fact = await graph.save("counted", "fact", channel=CH)
    mem = await rowid_of(graph, fact.id)
    async with s.transaction():
        await s.add_access([(2, 5e9, mem)])
        await s.add_access([(1, 1.0, mem)])
    record = await s.node_record(fact.id)
    assert record is not None
    assert record["access_count"] == 2 + 1 and record["accessed_at"] == 5e9


async def test_records_exports_and_counts(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes([said("p1", "the message", author="ada")])
    a = await graph.save("alpha", "fact", channel=CH, sources=["p1"])
    b = await graph.save("beta", "fact", channel=OTHER, related_to=[])
    async with s.transaction():
        await s.add_links(
            [(await rowid_of(graph, a.id), await rowid_of(graph, b.id), "related_to", 0.7, 3.0)]
        )
    record = await s.node_record(a.id)
    assert record is not None
    assert (record["id"], record["type"], record["content"]) == (a.id, "fact", "alpha")
    assert record["scope"] == "discord:111" and record["sources"] == ["p1"]
    assert await s.node_record("mem_missing") is None
    nodes = [n async for n in s.export_nodes()]
    assert [n["type"] for n in nodes] == ["episode", "fact", "fact"], "rowid order"
    ep = nodes[0]["id"]
    edges = [(e["src"], e["dst"], e["type"]) async for e in s.export_edges()]
    assert edges == [(a.id, ep, "derived_from"), (a.id, b.id, "related_to")], "creation order"
    assert [(e["src"], e["dst"]) async for e in s.export_edges(b.id)] == [(a.id, b.id)]
    assert [e async for e in s.export_edges("mem_missing")] == []
    assert await s.memory_counts() == {CH: 1, OTHER: 1}


async def test_the_text_index_reports_its_state_and_rebuilds(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes([said("p1", "rebuild keeps the kestrel findable")])
    assert await s.text_index_state(TEXT_VERSION, verify=True) == "ok"
    assert await s.text_index_state("some-other-version", verify=False) == "stale"
    await s.rebuild_text_index(TEXT_VERSION)
    assert await s.text_index_state(TEXT_VERSION, verify=True) == "ok"
    assert (await s.term_frequencies())[stem("kestrel")] == 1
    hits = await graph.recall("kestrel", channel=CH)
    assert hits and "kestrel" in hits[0].content


async def test_nearest_finds_memories_never_episodes_within_the_filter(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes([said("p1", "the kestrel hovers over the motorway verge")])
    kestrel = await graph.save("the kestrel hovers over the motorway verge", "fact", channel=CH)
    await graph.save("the kestrel hovers above the motorway", "fact", channel=OTHER)
    await graph.save("invoices are due on the first monday", "fact", channel=CH)
    await s.prepare_vector_index(graph.embedder.dim)
    identity = graph.embedder.identity
    [qv] = graph.embedder.embed(["the kestrel hovers over the motorway verge"])
    mine = await rowid_of(graph, kestrel.id)
    for exact in (False, True):
        [hits] = await s.nearest(qv[None, :], 5, identity, TextFilter(), exact=exact, ef=40)
        assert hits[0][0] == mine and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert len(hits) == 3, "the three memories; the identical episode is not one"
        assert [c for _, c in hits] == sorted((c for _, c in hits), reverse=True)
        [scoped] = await s.nearest(
            qv[None, :], 5, identity, TextFilter("workspace", "discord:111"), exact=exact
        )
        assert len(scoped) == 2 and scoped[0][0] == mine
    [none] = await s.nearest(qv[None, :], 5, "another-embedder", TextFilter(), exact=True)
    assert none == []
    labels, _sims = await graph.nearest(qv, 5, CH)
    assert labels.tolist()[0] == mine and len(labels) == 2, "what the channel's scope may see"


async def test_text_of_scripts_without_spaces_is_found_by_part_of_a_run(
    graph: MemoryGraph,
) -> None:
    """A few characters of a Japanese or Chinese run find the message on every backend
    (the index holds character pairs, see ``split_unspaced``)."""
    await graph.add_episodes(
        [
            said("j1", "私のロッカー番号は4411です。"),
            said("j2", "明日は大阪に出張します。"),
            said("j3", "我的自行车是绿色的。"),
        ]
    )
    for query, pid in (("ロッカー番号", "j1"), ("大阪", "j2"), ("自行车", "j3")):
        hits = await graph.recall(query, channel=CH, limit=1)
        assert [h.source_message_ids for h in hits] == [(pid,)], (query, hits)


async def test_an_authors_memories_are_listed_newest_first_within_scope(
    graph: MemoryGraph,
) -> None:
    """What "what do you know about me?" lists when its words match nothing: the
    author's memories this channel may see, who they are first, then the newest, without
    episodes, without
    what a newer memory replaced, without other people's or another workspace's."""
    await graph.add_episodes([said("m1", "my locker code is 4411", author="you")])
    first = await graph.save("you: I live in Porto", "identity", channel=CH, author_id="you")
    await graph.save("you: I play the cello", "identity", channel=CH, author_id="you")
    await graph.save("you: I prefer tea", "preference", channel=THREAD, author_id="you")
    await graph.save("ann: I prefer coffee", "preference", channel=CH, author_id="ann")
    await graph.save("you: I live in Oslo", "identity", channel=OTHER, author_id="you")
    await graph.save(
        "you: I moved to Lisbon", "identity", channel=CH, author_id="you", supersedes=first.id
    )
    listed = await graph.memories_of("you", channel=CH)
    assert [h.content for h in listed] == [
        "you: I moved to Lisbon",
        "you: I play the cello",
        "you: I prefer tea",
    ]
    assert [h.content for h in await graph.memories_of("you", channel=CH, limit=1)] == [
        "you: I moved to Lisbon"
    ]
    typed = await graph.memories_of("you", channel=CH, types=["preference"])
    assert [h.content for h in typed] == ["you: I prefer tea"]
