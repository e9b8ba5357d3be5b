"""The memory graph: validation, merging, superseding, scoping, forgetting, indexes, upkeep."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_graph import HashingEmbedder, MemoryDraft, MemoryGraph
from tests.helpers import wait_for
from tierbot.config import MemoryConfig
from tierbot.errors import ToolError
from tierbot.messages import Message, Role

GUILD_A = "discord:111:1"
GUILD_A2 = "discord:111:2"
GUILD_B = "discord:222:1"
DAY = 86400.0


def config(**values: Any) -> MemoryConfig:
    return MemoryConfig.model_validate(values)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tierbot.db"


@pytest.fixture
async def graph(db_path: Path) -> AsyncIterator[MemoryGraph]:
    async with await MemoryGraph.open(db_path, config()) as g:
        yield g


def msg(
    channel: str,
    pid: str,
    text: str,
    author: str = "u1",
    name: str = "Alice",
    ts: float = 1e9,
    role: Role = Role.USER,
) -> Message:
    return Message(
        channel=channel,
        platform_id=pid,
        role=role,
        text=text,
        author_id=author,
        author_name=name,
        ts=ts,
    )


# --- validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 50_001}, "content"),
        ({"memory_type": "rumour"}, "memory_type"),
        ({"memory_type": "episode"}, "memory_type"),
        ({"importance": 1.5}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"importance": float("nan")}, "importance"),
        ({"related_to": ["mem_missing"]}, "related_to"),
        ({"supersedes": "mem_missing"}, "supersedes"),
        ({"channel": ""}, "channel"),
    ],
)
async def test_save_rejects_bad_arguments_naming_them(
    graph: MemoryGraph, kwargs: dict[str, Any], argument: str
) -> None:
    """Every invalid save argument raises a ToolError whose .argument names it."""
    args: dict[str, Any] = {"content": "Alice likes tea", "memory_type": "fact", "channel": GUILD_A}
    args.update(kwargs)
    content, memory_type = args.pop("content"), args.pop("memory_type")
    with pytest.raises(ToolError) as err:
        await graph.save(content, memory_type, **args)
    assert err.value.argument == argument
    assert argument in str(err.value)
    assert await graph.count() == 0


async def test_content_limit_is_bytes_not_characters(graph: MemoryGraph) -> None:
    """50,000 bytes is the cap: 25,000 two-byte characters pass, 25,001 do not."""
    assert (await graph.save("é" * 25_000, "fact", channel=GUILD_A)).id
    with pytest.raises(ToolError, match="content"):
        await graph.save("é" * 25_001, "fact", channel=GUILD_A)


async def test_save_many_writes_nothing_when_one_item_is_invalid(graph: MemoryGraph) -> None:
    """A batch is validated whole before one transaction: one bad item saves nothing."""
    items = [
        MemoryDraft("Alice likes tea", "fact", GUILD_A),
        MemoryDraft("Bob likes coffee", "fact", GUILD_A, importance=2.0),
    ]
    with pytest.raises(ToolError, match="importance"):
        await graph.save_many(items)
    assert await graph.count() == 0


async def test_ids_of_another_workspace_count_as_missing(graph: MemoryGraph) -> None:
    """related_to cannot point into a workspace the saving channel cannot see."""
    other = await graph.save("Secret plan of guild B", "decision", channel=GUILD_B)
    with pytest.raises(ToolError) as err:
        await graph.save("Alice likes tea", "fact", channel=GUILD_A, related_to=[other.id])
    assert err.value.argument == "related_to"


async def test_a_memory_dated_when_it_was_said_keeps_that_date_and_a_bad_date_is_named(
    graph: MemoryGraph,
) -> None:
    """A draft may carry when what it says was said (what a forget keeps of a sentence
    does); a date in the future, NaN or not a number is refused naming created_at, and
    nothing of the batch is saved."""
    import math
    import time

    said = time.time() - 3600
    kept = await graph.save_many(
        [MemoryDraft("Ana is a dentist", "fact", GUILD_A, created_at=said)]
    )
    stored = await graph.get(kept[0].id)
    assert stored is not None and stored["created_at"] == pytest.approx(said)
    for bad in (time.time() + 86_400, math.nan, "yesterday", True):
        with pytest.raises(ToolError) as err:
            await graph.save_many(
                [
                    MemoryDraft("Bob is a nurse", "fact", GUILD_A),
                    MemoryDraft("Cy is a pilot", "fact", GUILD_A, created_at=bad),  # type: ignore[arg-type]
                ]
            )
        assert err.value.argument == "created_at"
    assert await graph.count() == 1


# --- dedupe and supersedes -----------------------------------------------------------


async def test_near_duplicate_merges_raising_importance_and_adding_sources(
    graph: MemoryGraph,
) -> None:
    """A near-duplicate in the same scope merges: same id, higher importance, sources joined."""
    first = await graph.save(
        "Alice prefers green tea in the morning", "preference", channel=GUILD_A, sources=["m1"]
    )
    again = await graph.save(
        "alice prefers green tea in the morning!",
        "preference",
        channel=GUILD_A2,
        sources=["m2", "m1"],
    )
    assert again.merged and again.id == first.id
    node = await graph.get(first.id)
    assert node is not None
    assert node["sources"] == ["m1", "m2"]
    assert node["importance"] > 0.7
    assert await graph.count() == 1


async def test_duplicates_in_other_workspaces_and_batches_behave(graph: MemoryGraph) -> None:
    """The same text in another workspace is a new memory; inside one batch it merges."""
    a = await graph.save("The deploy window is Friday", "decision", channel=GUILD_A)
    b = await graph.save("The deploy window is Friday", "decision", channel=GUILD_B)
    assert not b.merged and b.id != a.id
    results = await graph.save_many(
        [
            MemoryDraft("Carol owns the cat Luna", "fact", GUILD_B, sources=["x1"]),
            MemoryDraft("Carol owns the cat Luna.", "fact", GUILD_B, sources=["x2"]),
        ]
    )
    assert results[1].merged and results[1].id == results[0].id
    node = await graph.get(results[0].id)
    assert node is not None and node["sources"] == ["x1", "x2"]


async def test_a_word_no_memory_says_is_found_by_a_word_of_its_family(
    graph: MemoryGraph,
) -> None:
    """ "who's doing the electrics?" found nothing of "the electrician is priya", nor
    "when is the inspection?" of "the building inspector visit is on april 2nd": a
    word no memory holds is looked for by the words of its family that one holds."""
    told = [
        "the electrician is a woman called priya, she quoted 2300 for rewiring",
        "the building inspector visit is on april 2nd",
        "the tiler is marco and he cant start until march 14",
        "the visit from the gas engineer is on monday",
    ]
    for text in told:
        await graph.save(text, "fact", channel=GUILD_A)
    for question, answer in [
        ("who's doing the electrics?", told[0]),
        ("when is the inspection?", told[1]),
    ]:
        hits = await graph.recall(question, channel=GUILD_A, limit=2)
        assert [h.content for h in hits][:1] == [answer], (question, hits)


async def test_superseded_memory_ranks_below_its_successor(graph: MemoryGraph) -> None:
    """supersedes links the new memory to the old with `updates`; the old ranks below."""
    old = await graph.save(
        "Bob lives in Paris in a flat near the river", "fact", channel=GUILD_A, importance=1.0
    )
    new = await graph.save(
        "Bob moved: he lives in Berlin", "fact", channel=GUILD_A, supersedes=old.id, importance=0.2
    )
    hits = await graph.recall("where does Bob live? Paris flat river", channel=GUILD_A)
    ids = [h.id for h in hits]
    assert ids.index(new.id) < ids.index(old.id)
    node = await graph.get(new.id)
    assert node is not None
    assert {"src": new.id, "dst": old.id, "type": "updates"}.items() <= node["edges"][0].items()
    old_node = await graph.get(old.id)
    assert old_node is not None and old_node["superseded_by"] == new.id


async def test_a_linked_memory_is_recalled_through_its_link_after_a_restart(
    db_path: Path,
) -> None:
    """A memory linked to the best match comes back with it, also after a restart (links are
    read from the database, not from what the process saw)."""
    async with await MemoryGraph.open(db_path, config()) as g:
        launch = await g.save(
            "The Falcon launch is set for March third", "event", channel=GUILD_A, importance=1.0
        )
        banners = await g.save(
            "Kim orders blue banners and extra chairs",
            "todo",
            channel=GUILD_A,
            related_to=[launch.id],
        )
        lone = await g.save("Kim orders green banners and spare tables", "todo", channel=GUILD_A)
        before = [h.id for h in await g.recall("when is the Falcon launch?", channel=GUILD_A)]
    async with await MemoryGraph.open(db_path, config()) as g:
        after = [h.id for h in await g.recall("when is the Falcon launch?", channel=GUILD_A)]
        await g.forget(launch.id, channel=GUILD_A)
        node = await g.get(banners.id)
    for ids in (before, after):
        assert ids[0] == launch.id and banners.id in ids and lone.id not in ids
    assert node is not None and node["edges"] == []  # forgetting a node drops its links


# --- concurrent saves -----------------------------------------------------------------


async def _saves_queued_behind_the_lock(
    graph: MemoryGraph, calls: list[dict[str, Any]]
) -> list[asyncio.Task[Any]]:
    """Start one save per call while the write lock is busy; return once all are queued."""
    tasks = [asyncio.create_task(graph.save(**c)) for c in calls]
    await wait_for(lambda: len(graph.pending_saves) == len(calls))
    return tasks


async def test_saves_from_many_channels_at_once_each_get_their_own_results(
    graph: MemoryGraph,
) -> None:
    """Saves that wait together are written together, yet each caller gets its own
    memory back, merged exactly as if they had been saved one after another."""
    calls = [
        dict(content="The deploy window is Tuesday 9:00", memory_type="fact", channel=GUILD_A),
        dict(content="Bob's favourite editor is helix", memory_type="fact", channel=GUILD_B),
        # Same words in the same workspace: merged into the first.
        dict(content="The deploy window is Tuesday 9:00", memory_type="fact", channel=GUILD_A2),
        # Same words in another workspace: its own memory, never merged across.
        dict(content="The deploy window is Tuesday 9:00", memory_type="fact", channel=GUILD_B),
    ]
    async with graph.lock:
        tasks = await _saves_queued_behind_the_lock(graph, calls)
    first, bob, again, other = await asyncio.gather(*tasks)
    assert not first.merged and not bob.merged and not other.merged
    assert again.merged and again.id == first.id
    assert len({first.id, bob.id, other.id}) == 3
    for result, call in [(first, calls[0]), (bob, calls[1]), (other, calls[3])]:
        node = await graph.get(result.id)
        assert node is not None
        assert (node["content"], node["channel"]) == (call["content"], call["channel"])
    assert await graph.count() == 3


async def test_one_refused_save_among_concurrent_ones_fails_only_its_caller(
    graph: MemoryGraph,
) -> None:
    """A forgotten author's save is refused with an error naming author_id; the saves
    that waited beside it are written."""
    await graph.forget_author("u9")
    calls = [
        dict(content="Carol runs the book club", memory_type="fact", channel=GUILD_A),
        dict(content="Dan is vegetarian", memory_type="identity", channel=GUILD_A, author_id="u9"),
        dict(content="Erin moved to Porto", memory_type="fact", channel=GUILD_B),
    ]
    async with graph.lock:
        tasks = await _saves_queued_behind_the_lock(graph, calls)
    carol, dan, erin = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(dan, ToolError) and dan.argument == "author_id"
    for result in (carol, erin):
        assert not isinstance(result, BaseException)
        assert await graph.get(result.id) is not None
    assert await graph.count() == 2


async def test_a_save_cancelled_while_it_waits_is_not_written(graph: MemoryGraph) -> None:
    """A caller that gives up before the write lock comes free leaves nothing behind;
    the save queued beside it is written."""
    calls = [
        dict(content="Frank's birthday is 3 May", memory_type="fact", channel=GUILD_A),
        dict(content="Grace prefers tabs", memory_type="fact", channel=GUILD_A),
    ]
    async with graph.lock:
        kept, dropped = await _saves_queued_behind_the_lock(graph, calls)
        dropped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dropped
    saved = await kept
    assert await graph.count() == 1
    assert (await graph.get(saved.id) or {}).get("content") == "Frank's birthday is 3 May"


# --- scope ----------------------------------------------------------------------------


async def test_one_bot_in_two_discord_servers_does_not_leak(graph: MemoryGraph) -> None:
    """Memories and episodes stay in their Discord server; other channels of it see them."""
    await graph.save("The launch code word is pineapple", "fact", channel=GUILD_A)
    await graph.add_episodes([msg(GUILD_A, "1", "pineapple pizza is great")])
    assert [h.type for h in await graph.recall("pineapple", channel=GUILD_A2)] != []
    assert await graph.recall("pineapple", channel=GUILD_B) == []
    assert await graph.recall("launch code word", channel="discord:dm:999") == []
    assert await graph.count(GUILD_B) == 0 and await graph.count(GUILD_A2) == 1


async def test_dm_memories_are_private_to_that_dm(graph: MemoryGraph) -> None:
    """A DM's memory is invisible from another user's DM and from servers (Slack DMs too)."""
    await graph.save("My diagnosis is private", "fact", channel="discord:dm:u1")
    await graph.save("Salary is 100k", "fact", channel="slack:T1:D123")
    assert await graph.recall("diagnosis", channel="discord:dm:u2") == []
    assert await graph.recall("diagnosis", channel=GUILD_A) == []
    assert len(await graph.recall("diagnosis", channel="discord:dm:u1")) == 1
    assert await graph.recall("salary", channel="slack:T1:C999") == []


async def test_channel_scope_restricts_to_the_channel(db_path: Path) -> None:
    """With scope = "channel", another channel of the same server sees nothing."""
    async with await MemoryGraph.open(db_path, config(scope="channel")) as g:
        await g.save("Standup is at nine", "fact", channel=GUILD_A)
        assert await g.recall("standup", channel=GUILD_A2) == []
        assert len(await g.recall("standup", channel=GUILD_A)) == 1


# --- recall ---------------------------------------------------------------------------


async def test_recall_json_shape_scores_and_access_counts(graph: MemoryGraph) -> None:
    """Hits serialise to the tool's JSON shape, scores lie in 0..1, recall counts accesses."""
    saved = await graph.save(
        "Dana's birthday is on 3 March", "fact", channel=GUILD_A, sources=["p9", "p8"]
    )
    hits = await graph.recall("when is Dana's birthday", channel=GUILD_A)
    assert len(hits) == 1
    obj = json.loads(json.dumps(hits[0].to_json()))
    assert set(obj) == {
        "id",
        "type",
        "content",
        "score",
        "channel",
        "source_message_ids",
        "created_at",
    }
    assert obj["id"] == saved.id and obj["source_message_ids"] == ["p9", "p8"]
    assert 0.0 < obj["score"] <= 1.0 and obj["channel"] == GUILD_A
    await graph.recall("birthday", channel=GUILD_A)
    node = await graph.get(saved.id)
    assert node is not None and node["access_count"] == 2


async def test_recall_filters_by_type_since_and_limit(graph: MemoryGraph) -> None:
    """types, since and limit narrow the results; limit above 20 is refused."""
    for i in range(8):
        await graph.save(f"Project falcon milestone {i} reached", "event", channel=GUILD_A)
    await graph.save("Project falcon is the top goal", "goal", channel=GUILD_A)
    assert len(await graph.recall("falcon", channel=GUILD_A, limit=3)) == 3
    goals = await graph.recall("falcon", channel=GUILD_A, types=["goal"], limit=20)
    assert [h.type for h in goals] == ["goal"]
    assert await graph.recall("falcon", channel=GUILD_A, since=4e9) == []
    with pytest.raises(ToolError, match="limit"):
        await graph.recall("falcon", channel=GUILD_A, limit=21)


async def test_episodes_answer_what_no_memory_covers(graph: MemoryGraph) -> None:
    """Archived raw messages are recalled as episodes citing their own platform id."""
    await graph.save("Alice prefers tea", "preference", channel=GUILD_A)
    n = await graph.add_episodes(
        [
            msg(GUILD_A, "100", "what did you do this weekend?", "u2", "Bob"),
            msg(GUILD_A, "101", "I repaired my grandfather's old sailboat"),
            msg(GUILD_A, "102", "summary of old stuff", role=Role.SUMMARY),
            msg(GUILD_A, "103", "system note", role=Role.SYSTEM),
        ]
    )
    assert n == 2
    hits = await graph.recall("Who repaired a sailboat?", channel=GUILD_A)
    assert hits[0].type == "episode" and hits[0].source_message_ids == ("101",)
    assert await graph.add_episodes([msg(GUILD_A, "101", "I repaired ...")]) == 0
    assert await graph.count(GUILD_A) == 1


async def test_neighbouring_turns_lead_to_a_terse_answer(graph: MemoryGraph) -> None:
    """An episode is found through its neighbours' words ("yes, last week" answers a question)."""
    await graph.add_episodes(
        [
            msg(GUILD_A, "1", "Did you finally visit the aquarium in Lisbon?", "u2", "Bob"),
            msg(GUILD_A, "2", "Yes! Last week, it was wonderful."),
            msg(GUILD_A, "3", "Anyway, how is work going?", "u2", "Bob"),
        ]
    )
    hits = await graph.recall("When did Alice go to the aquarium?", channel=GUILD_A, limit=2)
    assert "2" in {pid for h in hits for pid in h.source_message_ids}


# --- forgetting -----------------------------------------------------------------------


async def test_forget_deletes_and_tombstones_refuse_the_memory_coming_back(
    graph: MemoryGraph,
) -> None:
    """forget removes the node; a queued save derived from the same messages is refused."""
    saved = await graph.save(
        "Eve's phone number is 555-0100", "fact", channel=GUILD_A, author_id="u5", sources=["m7"]
    )
    queued_check = await graph.is_forgotten(author_id="u5", platform_ids=["m7"])
    assert await graph.forget(saved.id)
    assert not await graph.forget(saved.id)
    assert await graph.get(saved.id) is None
    assert await graph.recall("Eve phone number", channel=GUILD_A) == []
    assert not queued_check and await graph.is_forgotten(platform_ids=["m7"])
    with pytest.raises(ToolError) as err:  # the worker's job, queued before the forget
        await graph.save(
            "Eve's phone number is 555-0100",
            "fact",
            channel=GUILD_A,
            author_id="u5",
            sources=["m7"],
        )
    assert err.value.argument == "sources"
    kept = await graph.save("Eve likes jazz", "fact", channel=GUILD_A, sources=["m7", "m8"])
    node = await graph.get(kept.id)
    assert node is not None and node["sources"] == ["m8"]


async def test_forget_from_a_channel_reaches_only_what_it_can_see(graph: MemoryGraph) -> None:
    """forget(id, channel=...) refuses a memory of another workspace; the operator's works."""
    saved = await graph.save("Guild A's secret recipe", "fact", channel=GUILD_A)
    assert not await graph.forget(saved.id, channel=GUILD_B)
    assert await graph.get(saved.id) is not None
    assert await graph.forget(saved.id, channel=GUILD_A2)


async def test_forget_author_removes_everything_derived_from_their_messages(
    graph: MemoryGraph,
) -> None:
    """Episodes and memories of one author go; others stay; the report lists their messages."""
    await graph.add_episodes(
        [
            msg(GUILD_A, "1", "I live at 12 Elm Street", "u1", "Alice"),
            msg(GUILD_A, "2", "Nice! I live downtown", "u2", "Bob"),
        ]
    )
    derived = await graph.save(
        "Alice lives at 12 Elm Street", "fact", channel=GUILD_A, sources=["1"]
    )
    own = await graph.save(
        "Alice is vegetarian", "identity", channel=GUILD_A, author_id="u1", sources=["9"]
    )
    bobs = await graph.save(
        "Bob lives downtown", "fact", channel=GUILD_A, author_id="u2", sources=["2"]
    )
    report = await graph.forget_author("u1")
    assert (report.memories_deleted, report.episodes_deleted) == (2, 1)
    assert set(report.messages) == {(GUILD_A, "1"), (GUILD_A, "9")}
    assert set(report.platform_ids) == {"1", "9"}
    assert await graph.get(derived.id) is None and await graph.get(own.id) is None
    assert await graph.get(bobs.id) is not None
    left = await graph.recall("Elm Street", channel=GUILD_A)
    assert not [h for h in left if "Elm" in h.content or "1" in h.source_message_ids]
    assert await graph.is_forgotten(author_id="u1")
    assert not await graph.is_forgotten(author_id="u2", platform_ids=["2"])
    assert await graph.add_episodes([msg(GUILD_A, "1", "I live at 12 Elm Street")]) == 0
    with pytest.raises(ToolError) as err:
        await graph.save("Alice has a cat", "fact", channel=GUILD_A, author_id="u1")
    assert err.value.argument == "author_id"


async def test_scoped_forget_author_holds_in_its_workspace_only(graph: MemoryGraph) -> None:
    """A dry run deletes nothing; a forget scoped to guild A deletes and blocks the author
    there (guild A's other channels included) while guild B keeps and still indexes them."""
    await graph.add_episodes(
        [
            msg(GUILD_A, "1", "I live at 12 Elm Street"),
            msg(GUILD_B, "2", "I live at 12 Elm Street too"),
        ]
    )
    preview = await graph.forget_author("u1", channel=GUILD_A2, dry_run=True)
    assert (preview.episodes_deleted, preview.per_channel) == (1, ((GUILD_A, 0, 1, 1),))
    assert len(await graph.recall("Elm Street", channel=GUILD_A)) == 1
    report = await graph.forget_author("u1", channel=GUILD_A2)
    assert (report.episodes_deleted, report.messages) == (1, ((GUILD_A, "1"),))
    assert await graph.recall("Elm Street", channel=GUILD_A) == []
    assert len(await graph.recall("Elm Street", channel=GUILD_B)) == 1
    older = [
        msg(GUILD_A2, "3", "old words about Elm Street", ts=1.5e9),
        msg(GUILD_B, "4", "old words about Elm Street", ts=1.5e9),
    ]
    assert await graph.add_episodes(older) == 1
    assert await graph.is_forgotten(author_id="u1", channel=GUILD_A)
    assert not await graph.is_forgotten(author_id="u1", channel=GUILD_B)
    # Said after that forget, not yet indexed when the author is forgotten again: indexed
    # later (a restart catching up), it must stay forgotten.
    later = msg(GUILD_A, "5", "new words about Elm Street", ts=time.time())
    await wait_for(lambda: time.time() > later.ts)  # the next forget comes after it was said
    await graph.forget_author("u1", channel=GUILD_A2)
    assert await graph.add_episodes([later]) == 0


# --- indexes --------------------------------------------------------------------------


async def test_indexes_rebuild_after_their_files_are_deleted(db_path: Path) -> None:
    """Deleting the vector files and dropping the FTS table loses nothing: both rebuild."""
    async with await MemoryGraph.open(db_path, config()) as g:
        saved = await g.save("The wifi password is hunter2", "fact", channel=GUILD_A)
        index_dir = g.index_dir
    shutil.rmtree(index_dir)
    with sqlite3.connect(db_path) as con:
        con.execute("DROP TABLE memory_fts")
    async with await MemoryGraph.open(db_path, config()) as g:
        assert len(g.vectors) == 1
        hits = await g.recall("wifi password", channel=GUILD_A)
        assert [h.id for h in hits] == [saved.id]
    assert (index_dir / "vectors.hnsw").exists()


async def test_corrupt_vector_file_is_rebuilt(db_path: Path) -> None:
    """A truncated index file is detected on open and rebuilt from SQLite."""
    async with await MemoryGraph.open(db_path, config()) as g:
        await g.save("Backups run nightly at two", "fact", channel=GUILD_A)
        index_file = g.index_dir / "vectors.hnsw"
    index_file.write_bytes(index_file.read_bytes()[:100])
    async with await MemoryGraph.open(db_path, config()) as g:
        assert len(g.vectors) == 1
        assert len(await g.recall("backups nightly", channel=GUILD_A)) == 1


async def test_changing_the_embedder_rebuilds_the_vectors(db_path: Path) -> None:
    """Opening with another embedder re-embeds every node and records its identity."""
    small, large = HashingEmbedder(dim=32), HashingEmbedder(dim=64)
    async with await MemoryGraph.open(db_path, config(), embedder=small) as g:
        await g.save("Quarterly review moved to June", "decision", channel=GUILD_A)
    async with await MemoryGraph.open(db_path, config(), embedder=large) as g:
        assert g.vectors.dim == 64 and len(g.vectors) == 1
        assert len(await g.recall("quarterly review", channel=GUILD_A)) == 1
    meta = json.loads((g.index_dir / "vectors.json").read_text())
    assert meta["identity"] == large.identity
    with sqlite3.connect(db_path) as con:
        assert con.execute("SELECT DISTINCT embedder FROM memory_nodes").fetchall() == [
            (large.identity,)
        ]


async def test_nodes_saved_after_the_last_index_save_are_caught_up(db_path: Path) -> None:
    """A crash between commit and index save loses no vector: reopening catches up."""
    async with await MemoryGraph.open(db_path, config()) as g:
        await g.save("first memory about llamas", "fact", channel=GUILD_A)
    g = await MemoryGraph.open(db_path, config())
    await g.save("second memory about alpacas", "fact", channel=GUILD_A)
    await g.storage.close()  # dies without aclose: the index file still holds one vector
    async with await MemoryGraph.open(db_path, config()) as g2:
        assert len(g2.vectors) == 2
        hits = await g2.recall("alpacas", channel=GUILD_A, types=["fact"])
        assert hits and "alpacas" in hits[0].content


# --- maintenance -----------------------------------------------------------------------


async def test_a_bounded_vector_index_keeps_the_newest_and_still_recalls_the_oldest(
    db_path: Path,
) -> None:
    """With vector_index_limit, the in-RAM index stops growing at the limit (the newest
    memories), across restarts and a lowered limit, while older memories are still recalled."""
    topics = [
        "sailing boats",
        "sourdough bread",
        "chess openings",
        "jazz piano",
        "mountain trails",
        "tax forms",
    ]
    async with await MemoryGraph.open(db_path, config(vector_index_limit=3)) as g:
        saved = [
            await g.save(f"Dana talks about {t} every week", "fact", channel=GUILD_A)
            for t in topics
        ]
        assert g.vectors.live == 3 and len(g.vectors) == 3  # evicted slots were reused
        oldest = [h.id for h in await g.recall("sailing boats", channel=GUILD_A)]
    async with await MemoryGraph.open(db_path, config(vector_index_limit=3)) as g:
        assert g.vectors.live == 3
        again = await g.recall("sailing boats", channel=GUILD_A)
        await g.save("Dana started learning Welsh", "fact", channel=GUILD_A)
        assert g.vectors.live == 3 and len(g.vectors) == 3
    async with await MemoryGraph.open(db_path, config(vector_index_limit=2)) as g:
        assert g.vectors.live == 2
        hits = await g.recall("tax forms", channel=GUILD_A)
    assert oldest[0] == saved[0].id and again[0].id == saved[0].id and hits[0].id == saved[-1].id


async def test_decay_does_not_compound_and_spares_identity(graph: MemoryGraph) -> None:
    """Decay depends only on idle time: two runs at the same moment give the same value."""
    fact = await graph.save("The office plant is a fern", "fact", channel=GUILD_A, importance=0.8)
    ident = await graph.save("I am the team's release manager", "identity", channel=GUILD_A)
    node = await graph.get(fact.id)
    assert node is not None
    later = node["accessed_at"] + 30 * DAY  # one half-life
    await graph.maintenance(now=later)
    await graph.maintenance(now=later)
    after = await graph.get(fact.id)
    assert after is not None and after["current_importance"] == pytest.approx(0.4, rel=1e-6)
    assert after["importance"] == 0.8
    ident_node = await graph.get(ident.id)
    assert ident_node is not None and ident_node["current_importance"] == 1.0


async def test_prune_removes_faded_memories_but_never_identity(graph: MemoryGraph) -> None:
    """Old, unused, low-importance memories are pruned; identity and episodes survive."""
    faded = await graph.save("Someone mentioned rain once", "observation", channel=GUILD_A)
    ident = await graph.save("I am a night owl", "identity", channel=GUILD_A, importance=0.05)
    await graph.add_episodes([msg(GUILD_A, "1", "it rained")])
    report = await graph.maintenance(now=2e10)
    assert report.pruned == 1 and report.pruned_ids == (faded.id,)
    assert await graph.get(faded.id) is None and await graph.get(ident.id) is not None
    assert len(await graph.recall("rained", channel=GUILD_A)) == 1


async def test_maintenance_links_highly_similar_memories(graph: MemoryGraph) -> None:
    """Association adds a related_to edge between near-identical memories, once."""
    a = await graph.save(
        "The team meets every Monday at nine in room four", "fact", channel=GUILD_A
    )
    b = await graph.save(
        "The team meets every Monday at nine in room four, bring coffee",
        "decision",
        channel=GUILD_A,
    )
    first = await graph.maintenance()
    second = await graph.maintenance()
    assert first.associated == 1 and second.associated == 0
    node = await graph.get(a.id)
    assert node is not None
    assert any(e["type"] == "related_to" and b.id in (e["src"], e["dst"]) for e in node["edges"])


async def test_export_yields_nodes_then_edges(graph: MemoryGraph) -> None:
    """export gives every node, then every edge, all JSON-serialisable."""
    a = await graph.save("Ferris is the mascot", "entity", channel=GUILD_A)
    await graph.save("Ferris wears a red hat", "fact", channel=GUILD_A, related_to=[a.id])
    items = [x async for x in graph.export()]
    kinds = [x["kind"] for x in items]
    assert kinds == sorted(kinds, key=lambda k: k != "node")
    assert {x["type"] for x in items if x["kind"] == "edge"} == {"related_to", "mentions"}
    json.dumps(items)


async def test_a_date_in_the_query_favours_that_days_messages(graph: MemoryGraph) -> None:
    """ "on 3 June, 2023" ranks the messages written that day above the same words on others."""
    from datetime import datetime

    days = {"a": datetime(2023, 5, 1), "b": datetime(2023, 6, 3, 15), "c": datetime(2023, 7, 9)}
    await graph.add_episodes(
        [
            msg(GUILD_A, pid, "I baked bread for the shelter", ts=day.timestamp())
            for pid, day in days.items()
        ]
    )
    hits = await graph.recall("What did Alice bake on 3 June, 2023?", channel=GUILD_A)
    assert hits[0].source_message_ids == ("b",)
    month = await graph.recall("What did Alice bake in July 2023?", channel=GUILD_A)
    assert month[0].source_message_ids == ("c",)


@pytest.mark.parametrize(
    ("query", "days"),
    [
        ("on 16 November, 2023", [("2023-11-15", "2023-11-18")]),
        ("on December 1,2023", [("2023-11-30", "2023-12-03")]),
        ("read on 8th December, 2023", [("2023-12-07", "2023-12-10")]),
        ("in January 2024", [("2024-01-01", "2024-02-01")]),
        ("on 2023-07-31", [("2023-07-30", "2023-08-02")]),
        (
            "between Aug 11 and Aug 15 2023",
            [("2023-08-10", "2023-08-13"), ("2023-08-14", "2023-08-17")],
        ),
        ("I may go in May", []),
        ("on 31 February 2023", [("2023-02-01", "2023-03-01")]),  # no such day: the month
    ],
)
def test_absolute_dates_are_read_from_queries(query: str, days: list[tuple[str, str]]) -> None:
    """Day, month and ISO dates become time windows (a day gets a day of slack each side)."""
    from datetime import datetime

    from memory_graph.dates import find_windows

    windows, _ = find_windows(query)
    as_days = [
        (datetime.fromtimestamp(a).date().isoformat(), datetime.fromtimestamp(b).date().isoformat())
        for a, b in windows
    ]
    assert as_days == days


async def test_exclude_leaves_out_only_the_calling_channels_messages(graph: MemoryGraph) -> None:
    """Slack ids (ts) repeat across channels: excluding a channel's live message must not
    hide another channel's message that happens to share its id."""
    here, there = "slack:T1:C1", "slack:T1:C2"
    await graph.add_episodes(
        [
            msg(here, "1700.1", "the deploy key rotates on fridays"),
            msg(there, "1700.1", "the deploy key lives in the vault"),
        ]
    )
    hits = await graph.recall("deploy key", channel=here, limit=5, exclude={"1700.1"})
    assert [h.channel for h in hits] == [there]


# --- ranking in a young index ------------------------------------------------------------


async def test_a_young_index_still_knows_which_words_are_rare(db_path: Path) -> None:
    """With a few messages, FTS5 alone rates "great" as rare as "kundalini"; English word
    frequencies (memory.background_rows) put the rare word first, as people expect."""
    said = [  # days apart: no message is the others' context
        msg(GUILD_A, "1", "great great stretching class, great teacher", ts=1e9),
        msg(GUILD_A, "2", "I tried kundalini this morning", ts=1e9 + DAY),
        msg(GUILD_A, "3", "the weather was grey all day", ts=1e9 + 2 * DAY),
    ]
    query = "great kundalini"
    async with await MemoryGraph.open(db_path, config()) as g:
        await g.add_episodes(said)
        assert (await g.recall(query, channel=GUILD_A))[0].source_message_ids == ("2",)
    async with await MemoryGraph.open(db_path, config(background_rows=0)) as g:
        assert (await g.recall(query, channel=GUILD_A))[0].source_message_ids == ("1",)


async def test_an_informative_message_outranks_a_bare_question(graph: MemoryGraph) -> None:
    """ "what kind of yoga?" matches as well as the answer does, but the answer is what
    a question about yoga is after."""
    await graph.add_episodes(
        [
            msg(GUILD_A, "1", "Yoga?", ts=1e9),
            msg(GUILD_A, "2", "yoga, aerial classes at the studio near the harbour", ts=1e9 + DAY),
        ]
    )
    hits = await graph.recall("What kind of yoga does Alice do?", channel=GUILD_A, limit=2)
    assert [h.source_message_ids for h in hits] == [("2",), ("1",)]


async def test_a_sentence_fragment_saved_as_a_memory_gets_the_length_prior(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory cut from chat ("Yoga, wow!") is short, and BM25 favours short rows: the
    length prior that tempers short messages tempers it too, so it leads a memory that
    says something about yoga by less than it would without; an entity, a name and
    short by nature, is left alone."""
    from memory_graph import recall as recall_module

    async def scores(exponent: float, path: Path) -> dict[str, float]:
        monkeypatch.setattr(recall_module, "MEMORY_PRIOR_EXPONENT", exponent)
        async with await MemoryGraph.open(path, config()) as g:
            if not await g.recall("yoga", channel=GUILD_A):
                await g.save("Yoga, wow!", "fact", channel=GUILD_A)
                await g.save(
                    "Takes aerial yoga classes at the old studio near the harbour on Tuesday "
                    "evenings, with two friends from work, and headstands before breakfast",
                    "fact",
                    channel=GUILD_A,
                )
                await g.save("Yoga", "entity", channel=GUILD_A)
            hits = await g.recall("What kind of yoga does Alice do?", channel=GUILD_A, limit=3)
            return {h.type + ":" + h.content[:5]: h.score for h in hits}

    default = recall_module.MEMORY_PRIOR_EXPONENT
    without = await scores(0.0, db_path)
    with_prior = await scores(default, db_path)
    fragment, full = "fact:Yoga,", "fact:Takes"
    assert with_prior[fragment] / with_prior[full] < without[fragment] / without[full]
    assert with_prior["entity:Yoga"] == pytest.approx(without["entity:Yoga"], rel=1e-6)


async def test_a_when_question_favours_messages_that_place_things_in_time(
    graph: MemoryGraph,
) -> None:
    """ "When did ...?" ranks the message saying *when* above one that only mentions it."""
    await graph.add_episodes(
        [
            msg(GUILD_A, "1", "camping with the kids by the lake is the best thing ever"),
            msg(GUILD_A, "2", "went camping with the kids by the lake last weekend"),
        ]
    )
    what = await graph.recall("Where does Alice go camping with the kids?", channel=GUILD_A)
    when = await graph.recall("When did Alice go camping with the kids?", channel=GUILD_A)
    where_scores = {h.source_message_ids[0]: h.score for h in what}
    when_scores = {h.source_message_ids[0]: h.score for h in when}
    assert where_scores["1"] >= where_scores["2"] - 1e-9  # "where" favours neither
    assert when_scores["2"] > when_scores["1"] + 0.1


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Yoga?", True),
        ("what is it? [image: a dog]", True),
        ("fine. [file: a.pdf]", False),
        ("is it? no, it is not.", False),
    ],
)
def test_a_question_is_recognised_past_trailing_attachments(text: str, asks: bool) -> None:
    from memory_graph.recall import _asks

    assert _asks(text) is asks


@pytest.mark.parametrize(
    ("query", "answer", "matches"),
    [
        ("When did Mel go camping?", "we went camping last weekend", True),
        ("When did Mel go camping?", "camping is the best", False),
        ("What year did she move?", "she moved in 2019", True),
        ("How many kids does Mel have?", "she has three kids", True),
        ("How many kids does Mel have?", "her kids love the lake", False),
        ("How long has Nate had turtles?", "for 3 years now", True),
        ("What does Nate like?", "anything at all", None),
    ],
)
def test_questions_say_what_their_answers_look_like(
    query: str, answer: str, matches: bool | None
) -> None:
    from memory_graph.answers import expected_answer

    pattern = expected_answer(query)
    if matches is None:
        assert pattern is None
    else:
        assert pattern is not None and (pattern.search(answer) is not None) is matches


async def test_equal_matches_rank_newest_first_whatever_the_clock(
    graph: MemoryGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of one template score the same but for a few ulps of recency, which move
    with the clock: the order a user sees must not change from one search to the next
    (nor between backends, as after ``db migrate``)."""
    import types

    from memory_graph import recall as recall_module

    await graph.add_episodes(
        [
            msg(
                GUILD_A,
                f"p{i}",
                f"line {i}: the osprey build 9 passed under zebra{i}",
                ts=1.7e9 + i,
            )
            for i in range(29, 12_000, 120)
        ]
    )
    orders = set()
    for k in range(12):
        clock = types.SimpleNamespace(time=lambda k=k: 1.8e9 + k * 3607.3)
        monkeypatch.setattr(recall_module, "time", clock)
        hits = await graph.recall("osprey build 9", channel=GUILD_A, limit=10)
        orders.add(tuple((int(h.content.split(":")[0][5:]), round(h.score, 9)) for h in hits))
    assert len(orders) == 1, orders
    (order,) = orders
    ties = [(a, b) for a, b in itertools.pairwise(order) if a[1] == b[1]]
    assert ties, "the case needs equal scores"
    assert all(a[0] > b[0] for a, b in ties), order


class _SlowRemoteEmbedder:
    """Stands for a model server or a local model: declares no ``inline_chars``."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.threads: list[int] = []

    @property
    def identity(self) -> str:
        return "remote-like"

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Any) -> Any:
        import threading

        self.threads.append(threading.get_ident())
        return self.inner.embed(texts)


async def test_a_slow_embedder_is_never_called_on_the_event_loop(db_path: Path) -> None:
    """An embedder that may be slow (it declares nothing) embeds every save in a worker
    thread, so the bot keeps answering meanwhile; the offline one embeds a short memory
    on the loop, where that is cheaper, and a long one in a thread."""
    import threading

    loop_thread = threading.get_ident()
    remote = _SlowRemoteEmbedder()
    async with await MemoryGraph.open(db_path, config(), embedder=remote) as g:
        remote.threads.clear()
        await g.save("Deploys freeze on Fridays", "decision", channel=GUILD_A)
        assert remote.threads and loop_thread not in remote.threads
        assert len(await g.recall("deploys friday", channel=GUILD_A)) == 1

    class Recording(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.threads: list[int] = []

        def embed(self, texts: Any) -> Any:
            self.threads.append(threading.get_ident())
            return super().embed(texts)

    local = Recording()
    async with await MemoryGraph.open(db_path.with_name("b.db"), config(), embedder=local) as g:
        local.threads.clear()
        await g.save("Deploys freeze on Fridays", "decision", channel=GUILD_A)
        assert local.threads == [loop_thread]
        local.threads.clear()
        await g.save("The runbook says: " + "check the dashboards; " * 40, "fact", channel=GUILD_A)
        assert local.threads and loop_thread not in local.threads
