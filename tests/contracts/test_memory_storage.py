"""The MemoryStorage contract, run against every implementation of memory_graph.storage.

Each backend opens a memory graph whose ``storage`` is the implementation under test; the
graph's public API writes the nodes the reads need.  SQLite is the one backend today.
"""

from __future__ import annotations

import numpy as np
import pytest

from memory_graph import MemoryGraph
from memory_graph.storage import EpisodeRow, MemoryRow, TombstoneRow
from tierbot.messages import Message, Role

CH = "discord:111:1"
OTHER = "discord:222:1"


def said(pid: str, text: str, author: str = "u1", channel: str = CH) -> Message:
    return Message(channel, pid, Role.USER, text, author_id=author, author_name=author, ts=1e9)


async def test_meta_values_round_trip(graph: MemoryGraph) -> None:
    s = graph.storage
    assert await s.get_meta("contract.key") is None
    async with s.transaction():
        await s.set_meta("contract.key", "one")
        await s.set_meta("contract.key", "two")
    assert await s.get_meta("contract.key") == "two"


async def test_tombstones_are_found_by_author_scope_and_message(graph: MemoryGraph) -> None:
    s = graph.storage
    async with s.transaction():
        await s.add_tombstones("author", ["u1", ""], 10.0)
        await s.add_tombstones("author_in", [f"u2\n{CH}"], 11.0)
        await s.add_tombstones("message", ["p1", "p1", "p2"], 12.0)
    found = await s.find_tombstones(["u1", "u2", "u3"], ["p1", "p9"])
    assert sorted(found, key=lambda t: (t.kind, t.key)) == [
        TombstoneRow("author", "u1", 10.0),
        TombstoneRow("author_in", f"u2\n{CH}", 11.0),
        TombstoneRow("message", "p1", 12.0),
    ]
    async with s.transaction():
        await s.add_tombstones("author", ["u1"], 20.0)
    assert await s.find_tombstones(["u1"], []) == [TombstoneRow("author", "u1", 20.0)], (
        "forgetting again moves the tombstone forward"
    )


async def test_a_failed_transaction_leaves_nothing_behind(graph: MemoryGraph) -> None:
    s = graph.storage
    with pytest.raises(RuntimeError, match="midway"):
        async with s.transaction():
            await s.add_tombstones("message", ["p1"], 1.0)
            await s.set_meta("contract.key", "half")
            raise RuntimeError("midway")
    assert await s.find_tombstones([], ["p1"]) == []
    assert await s.get_meta("contract.key") is None
    async with s.transaction():  # and the storage takes the next write
        await s.add_tombstones("message", ["p2"], 2.0)
    assert [t.key for t in await s.find_tombstones([], ["p2"])] == ["p2"]


async def test_node_refs_and_what_an_author_left(graph: MemoryGraph) -> None:
    s = graph.storage
    assert await graph.add_episodes([said("p1", "I moved to Lisbon", "u1")]) == 1
    assert await graph.add_episodes([said("p2", "nice", "u2")]) == 1
    own = await graph.save("u1 prefers tea", "preference", channel=CH, author_id="u1")
    derived = await graph.save(
        "someone moved to Lisbon", "fact", channel=CH, author_id="u2", sources=["p1"]
    )
    ref = await s.node_ref(own.id)
    assert ref is not None and (ref.id, ref.type, ref.channel) == (own.id, "preference", CH)
    assert await s.node_ref("mem_nonexistent") is None
    nodes = {n.id: n for n in await s.authored_nodes("u1")}
    episode = next(n for n in nodes.values() if n.platform_id == "p1")
    assert episode.own and episode.channel == CH
    assert nodes[own.id].own and nodes[own.id].platform_id is None
    assert not nodes[derived.id].own, "derived from u1's words, in u2's name"
    assert len(nodes) == 3
    assert await s.author_workspaces("u1") == {"discord:111"}
    assert await s.author_workspaces("nobody") == set()


async def test_deleting_a_successor_makes_its_predecessor_current_again(
    graph: MemoryGraph,
) -> None:
    s = graph.storage
    old = await graph.save("the deploy is on friday", "fact", channel=CH)
    new = await graph.save("the deploy moved to monday", "fact", channel=CH, supersedes=old.id)
    new_ref = await s.node_ref(new.id)
    before = await graph.get(old.id)
    assert new_ref is not None and before is not None and before["superseded_by"] == new.id
    async with s.transaction():
        await s.delete_nodes([new_ref.rowid], [new.id])
    assert await s.node_ref(new.id) is None
    after = await graph.get(old.id)
    assert after is not None and after["superseded_by"] is None
    assert after["edges"] == [], "the deleted node's edges went with it"


async def test_links_are_read_from_both_ends_and_added_once(graph: MemoryGraph) -> None:
    s = graph.storage
    a = await s.node_ref((await graph.save("alpha fact", "fact", channel=CH)).id)
    b = await s.node_ref((await graph.save("beta fact about rust", "fact", channel=CH)).id)
    assert a is not None and b is not None
    async with s.transaction():
        await s.add_links([(a.rowid, b.rowid, "related_to", 0.9, 1.0)])
        await s.add_links([(a.rowid, b.rowid, "related_to", 0.1, 2.0)])  # already there
    assert [(x.node, x.other, x.type, x.weight) for x in await s.links_of([b.rowid])] == [
        (b.rowid, a.rowid, "related_to", 0.9)
    ]
    assert await s.link_targets([a.rowid, b.rowid], "related_to") == {a.rowid: {b.rowid}}
    assert await s.link_targets([a.rowid], "mentions") == {}


async def test_upkeep_reads_memories_never_episodes(graph: MemoryGraph) -> None:
    s = graph.storage
    await graph.add_episodes([said("p1", "raw words stay")])
    pref = await graph.save("u1 likes green tea", "preference", channel=CH)
    ident = await graph.save("I am the deploy bot", "identity", channel=CH)
    pref_ref, ident_ref = await s.node_ref(pref.id), await s.node_ref(ident.id)
    assert pref_ref is not None and ident_ref is not None
    rows = await s.importance_rows(("episode", "identity", "entity"))
    assert [r.rowid for r in rows] == [pref_ref.rowid]
    async with s.transaction():
        await s.set_current_importance([(0.01, pref_ref.rowid)])
    [after] = await s.importance_rows(("episode", "identity", "entity"))
    assert after.current_importance == 0.01
    assert await s.prunable(("episode", "identity", "entity"), 0.05, idle_before=1.0) == []
    far_future = 1e12
    assert await s.prunable(("episode", "identity", "entity"), 0.05, far_future) == [
        (pref_ref.rowid, pref.id)
    ]
    vectors = await s.memory_vectors_since(0.0)
    assert {v.rowid for v in vectors} == {pref_ref.rowid, ident_ref.rowid}
    assert all(v.vector.dtype.name == "float32" and v.vector.size > 0 for v in vectors)
    assert await s.memory_vectors_since(far_future) == []
    episode = next(n for n in await s.authored_nodes("u1") if n.platform_id == "p1")
    assert await s.memory_rowids([episode.rowid, pref_ref.rowid]) == {pref_ref.rowid}


def episode(rowid: int, pid: str, text: str, ts: float, channel: str = CH) -> EpisodeRow:
    return EpisodeRow(
        rowid=rowid,
        id=f"ep_{channel}_{pid}",
        content=text,
        content_hash=f"h{rowid}",
        created_at=ts,
        indexed_at=ts,
        channel=channel,
        workspace="discord:111",
        author_id="u1",
        author_name="ada",
        platform_id=pid,
        near="",
        far="",
        vector=np.ones(4, dtype=np.float32),
        embedder="test",
        terms=text,
        workspace_tag="w",
        channel_tag="c",
        type_tag="episode",
    )


async def test_episodes_are_stored_found_and_their_contexts_rewritten(graph: MemoryGraph) -> None:
    s = graph.storage
    async with s.transaction():
        await s.insert_episodes(
            [episode(9001, "p1", "first", 1.0), episode(9002, "p2", "second", 2.0)]
        )
        await s.insert_episodes([episode(9003, "p3", "elsewhere", 3.0, channel=OTHER)])
    asked = [(CH, "p1"), (CH, "p2"), (CH, "p3"), (CH, "p4"), (OTHER, "p3"), (OTHER, "p1")]
    assert await s.episode_platform_ids(asked) == {(CH, "p1"), (CH, "p2"), (OTHER, "p3")}
    latest = await s.latest_episodes([CH, OTHER, "discord:1:empty"], 1)
    assert {ch: [e.content for e in eps] for ch, eps in latest.items()} == {
        CH: ["second"],
        OTHER: ["elsewhere"],
    }, "each channel's newest, channels without episodes absent"
    both = await s.latest_episodes([CH], 5)
    assert [e.content for e in both[CH]] == ["first", "second"], "oldest first"
    assert [e.rowid for e in await s.channel_episodes(CH)] == [9001, 9002], "oldest first"
    async with s.transaction():
        await s.set_contexts([("near words", "far words", 9001)])
    first = (await s.channel_episodes(CH))[0]
    assert (first.near, first.far) == ("near words", "far words")
    cited = await graph.save("a fact from p2", "fact", channel=CH, sources=["p2"])
    ref = await s.node_ref(cited.id)
    assert ref is not None
    assert await s.sources_citing([(CH, "p1"), (CH, "p2"), (OTHER, "p2")]) == [
        (ref.rowid, CH, "p2")
    ], "the other channel's p2 is another message"


async def test_the_indexing_mark_only_moves_up(graph: MemoryGraph) -> None:
    s = graph.storage
    assert await s.indexed_upto() == 0
    async with s.transaction():
        await s.raise_indexed_upto(40)
        await s.raise_indexed_upto(12)
    assert await s.indexed_upto() == 40


async def test_an_indexing_batch_commits_whole_or_not_at_all(graph: MemoryGraph) -> None:
    """write_episodes is one transaction: a failing row (here a rowid used twice) leaves
    no episode of the batch and the mark where it was, and the next batch commits."""
    s = graph.storage
    bad = [episode(9201, "p1", "one", 1.0), episode(9201, "p2", "two", 2.0)]
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        await s.write_episodes(bad, [], [], 70)
    assert await s.episode_platform_ids([(CH, "p1"), (CH, "p2")]) == set()
    assert await s.indexed_upto() == 0
    good = [episode(9201, "p1", "one", 1.0), episode(9202, "p2", "two", 2.0)]
    await s.write_episodes(good, [("near", "far", 9201)], [], 70)
    assert await s.episode_platform_ids([(CH, "p1"), (CH, "p2")]) == {(CH, "p1"), (CH, "p2")}
    assert (await s.channel_episodes(CH))[0].near == "near"
    assert await s.indexed_upto() == 70


def memory(rowid: int, id_: str, content: str, sources: tuple[str, ...] = ()) -> MemoryRow:
    return MemoryRow(
        rowid=rowid,
        id=id_,
        type="fact",
        content=content,
        content_hash=f"hash:{content}",
        importance=0.4,
        created_at=5.0,
        channel=CH,
        workspace="discord:111",
        author_id="u1",
        sources=sources,
        vector=np.ones(4, dtype=np.float32),
        embedder="test",
        terms=content,
        workspace_tag="w",
        channel_tag="c",
        type_tag="fact",
    )


async def test_saved_memories_are_found_by_id_rowid_and_hash(graph: MemoryGraph) -> None:
    s = graph.storage
    async with s.transaction():
        await s.insert_memories(
            [memory(8001, "mem_a", "alpha", ("p1", "p2")), memory(8002, "mem_b", "beta")]
        )
    by_id = await s.briefs_by_id(["mem_a", "mem_missing"])
    assert list(by_id) == ["mem_a"] and by_id["mem_a"].rowid == 8001
    assert (await s.briefs_by_rowid([8002]))[8002].id == "mem_b"
    assert [b.id for b in await s.current_memories_by_hash(["hash:alpha", "hash:zeta"])] == [
        "mem_a"
    ]
    async with s.transaction():
        await s.supersede([("mem_b", 8001)])
    assert await s.current_memories_by_hash(["hash:alpha"]) == [], "superseded: not current"
    assert (await s.briefs_by_id(["mem_a"]))["mem_a"].superseded_by == "mem_b"
    ref = await s.node_ref("mem_a")
    assert ref is not None and ref.sources == ("p1", "p2")


async def test_a_merge_raises_importance_and_appends_only_new_sources(graph: MemoryGraph) -> None:
    s = graph.storage
    async with s.transaction():
        await s.insert_memories([memory(8101, "mem_m", "merge target", ("p1",))])
        await s.merge_into(8101, lambda stored: stored + 0.25, ["p1", "p2", "p2"], 9.0)
    ref = await s.node_ref("mem_m")
    assert ref is not None and ref.sources == ("p1", "p2")
    [row] = [r for r in await s.importance_rows(()) if r.rowid == 8101]
    assert row.importance == pytest.approx(0.65) and row.current_importance == pytest.approx(0.65)


async def test_episode_rowids_map_platform_ids_of_one_channel(graph: MemoryGraph) -> None:
    s = graph.storage
    async with s.transaction():
        await s.insert_episodes([episode(9101, "p7", "seven", 1.0)])
        await s.insert_episodes([episode(9102, "p7", "seven elsewhere", 1.0, channel=OTHER)])
    assert await s.episode_rowids(CH, ["p7", "p8"]) == {"p7": 9101}
