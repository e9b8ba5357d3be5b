"""Memory during a conversation: memory_save and memory_forget in a channel's turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.runtime import Runtime
from tests.helpers import SMALL_TALK, inbound
from tierbot.config import Config
from tierbot.llm.base import Completion, ToolCall
from tierbot.llm.offline import OfflineProvider
from tierbot.messages import Role
from tierbot.testing.scripted import ScriptedLLM

CH = "chat:1"
MEMORY = {"memory": {"enabled": True}}


async def _nodes(rt: Runtime) -> list[dict[str, object]]:
    assert rt.memory is not None
    return [n async for n in rt.memory.graph.export() if n["kind"] == "node"]


async def _memories(rt: Runtime) -> list[dict[str, object]]:
    return [n for n in await _nodes(rt) if n["type"] != "episode"]


async def test_remember_that_is_saved_at_once_with_its_author_and_source(
    make_config: Callable[..., Config],
) -> None:
    """ "Remember that…" is saved before any compaction, typed, in the author's name, citing
    the message; the reply says what was saved."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await rt.submit(
            inbound(CH, "Remember that my locker code is 4411.", pid="r1", author="ann")
        )
        await rt.drain()
        assert [o.text for o in rt.outbox.sent] == ["Noted: your locker code is 4411."]
        (memory,) = await _memories(rt)
        assert memory["content"] == "ann: my locker code is 4411."
        assert memory["type"] == "fact"
        assert memory["author_id"] == "ann"
        assert memory["sources"] == [[CH, "r1"]] or "r1" in json.dumps(memory["sources"])


async def test_someone_else_cannot_make_the_bot_forget_your_memory(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget that…" from another person deletes nothing of the first person's, and says
    it had nothing of theirs to forget; the first person's own request does forget."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await rt.submit(
            inbound(CH, "Remember that my locker code is 4411.", pid="a1", author="ann")
        )
        await rt.drain()
        await rt.submit(inbound(CH, "Forget that my locker code is 4411.", pid="b1", author="bob"))
        await rt.drain()
        assert rt.outbox.sent[-1].text.startswith("I had nothing of yours about that to forget")
        assert [m["content"] for m in await _memories(rt)] == ["ann: my locker code is 4411."]
        # bob's request does not hide ann's words from the answer either.
        await rt.submit(inbound(CH, "What is ann's locker code?", pid="b2", author="bob"))
        await rt.drain()
        assert "4411" in rt.outbox.sent[-1].text

        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        await rt.submit(inbound(CH, "Forget that my locker code is 4411.", pid="a2", author="ann"))
        await rt.drain()
        assert rt.outbox.sent[-1].text == "Done: I forgot what you told me about your locker code."
        assert await _memories(rt) == []
        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        # Neither the message it came from, nor the request, nor the bot's "Noted: your
        # locker code is 4411." is searchable any more.
        hits = await rt.memory.search("locker code 4411", channel=CH)  # type: ignore[union-attr]
        assert not [h for h in hits if {"a1", "a2"} & set(h["source_message_ids"])], hits
        # Nothing indexed says it any more (each forget request goes with its forget).
        left = [n for n in await _nodes(rt) if "4411" in str(n["content"])]
        assert left == [], left
        await rt.submit(inbound(CH, "What is my locker code?", pid="a3", author="ann"))
        await rt.drain()
        assert "4411" not in rt.outbox.sent[-1].text


async def test_a_save_the_store_refuses_is_not_acknowledged_as_saved(
    make_config: Callable[..., Config],
) -> None:
    """An author who asked to be forgotten: nothing is saved, and the reply says so
    instead of "Noted"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await rt.memory.graph.forget_author("cy")
        await rt.submit(inbound(CH, "Remember that my bike lock is 1234.", pid="c1", author="cy"))
        await rt.drain()
        reply = rt.outbox.sent[-1].text
        assert reply == "I could not save that: its author asked to be forgotten."
        assert await _memories(rt) == []


async def test_chat_memory_tools_name_a_bad_argument_to_the_model(
    make_config: Callable[..., Config],
) -> None:
    """A model's memory_save without content, memory_forget without a query and recall with
    a non-boolean from_asker each get an error naming the argument; nothing is saved."""
    llm = ScriptedLLM(chat_reply="done")
    calls = (
        ToolCall("s1", "memory_save", {"memory_type": "fact"}),
        ToolCall("f1", "memory_forget", {}),
        ToolCall("r1", "memory_recall", {"query": "x", "from_asker": "yes"}),
        ToolCall("s2", "memory_save", {"content": "ok", "memory_type": "feeling"}),
    )
    llm.push("chat", Completion("", tool_calls=calls))
    async with Runtime.open(make_config(MEMORY), llm=llm) as rt:
        await rt.submit(inbound(CH, "hello there", pid="h1"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        results = {
            m.meta["call_id"]: json.loads(m.text)
            for m in actor.ctx.items
            if m.role is Role.TOOL_RESULT
        }
        assert "content" in results["s1"]["error"]
        assert "query" in results["f1"]["error"]
        assert "from_asker" in results["r1"]["error"]
        assert "memory_type" in results["s2"]["error"]
        assert await _memories(rt) == []
        offered = llm.calls[0].tools
        assert {"memory_save", "memory_recall", "memory_forget"} <= set(offered)


async def test_memory_search_never_shows_the_bots_own_replies(
    make_config: Callable[..., Config],
) -> None:
    """/memory finds what people said and what was saved, never the bot quoting them."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await rt.submit(inbound(CH, "I really love bouldering on weekends.", pid="d1"))
        await rt.drain()
        await rt.submit(inbound(CH, "What do I love doing on weekends?", pid="d2"))
        await rt.drain()
        assert "bouldering" in rt.outbox.sent[-1].text
        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        hits = await rt.memory.search("bouldering weekends", channel=CH, limit=10)  # type: ignore[union-attr]
        assert hits
        assert all(not h["content"].startswith(("alice said", "Noted")) for h in hits), hits
        assert all(h.get("author") != "tierbot" for h in hits), hits
        # Nor the questions people asked: "/memory weekends" listed "What do I love doing
        # on weekends?" as something remembered.
        assert any(h["content"].endswith("?") for h in hits), hits  # indexed all the same
        shown = await rt.command(inbound(CH, "/memory weekends"), is_admin=True)
        assert "bouldering" in shown and "?" not in shown, shown


async def test_memory_search_lists_what_is_about_the_words_not_five_of_anything(
    make_config: Callable[..., Config],
) -> None:
    """ "/memory florist" listed the florist's deadline, then the message it was saved
    from, then the cat's name and two other lines, to fill five places."""
    lines = [
        "My client Kindred Trails is a charity.",
        "The Bloom Florist deadline is 2 May.",
        "Northpoint contact is Raj.",
        "My cat is called Miso.",
        "I like green tea.",
        "I cancelled the hotel, staying at Hotel Nikko instead.",
    ]
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"m{i}"))
            await rt.drain()
        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        shown = await rt.command(inbound(CH, "/memory florist"), is_admin=True)
        cats = await rt.command(inbound(CH, "/memory cats"), is_admin=True)
        none = await rt.command(inbound(CH, "/memory dentist"), is_admin=True)
        # ("instead" holds "tea": parts of words are no word)
        tea = await rt.command(inbound(CH, "/memory tea"), is_admin=True)
    assert shown is not None and cats is not None
    listed = [line for line in shown.splitlines() if line.startswith("- ")]
    assert len(listed) == 1 and "Bloom Florist deadline" in listed[0], shown
    assert "Miso" in cats and "Kindred" not in cats and "florist" not in cats.lower(), cats
    assert none == "I remember nothing about that.", none
    assert tea is not None and "green tea" in tea and "Nikko" not in tea, tea


async def test_a_burst_of_two_people_saves_each_fact_in_its_own_authors_name(
    make_config: Callable[..., Config],
) -> None:
    """Two people speak before the bot answers: each memory cites its own speaker's message
    and is in that speaker's name, not the newest speaker's."""
    llm = ScriptedLLM(chat_reply="ok")
    llm.push(
        "chat",
        Completion("ok"),  # the turn for "first", held while the other two arrive
        Completion(
            "",
            tool_calls=(
                ToolCall(
                    "a", "memory_save", {"content": "ann: I'm a nurse", "memory_type": "identity"}
                ),
                ToolCall(
                    "b", "memory_save", {"content": "bob: I'm a pilot", "memory_type": "identity"}
                ),
            ),
        ),
    )
    gate = asyncio.Event()
    llm.gate["chat"] = gate
    async with Runtime.open(make_config(MEMORY), llm=llm) as rt:
        await rt.submit(inbound(CH, "first", pid="x0", author="cy"))
        # Started: "first" has its turn alone (messages stored before the channel has
        # loaded its history would share one turn).
        await rt.registry.actor(CH)
        await rt.submit(inbound(CH, "I'm a nurse at St Mary's.", pid="a1", author="ann"))
        await rt.submit(inbound(CH, "And I'm a pilot.", pid="b1", author="bob"))
        gate.set()
        await rt.drain()
        by_author = {m["author_id"]: json.dumps(m["sources"]) for m in await _memories(rt)}
        assert set(by_author) == {"ann", "bob"}, by_author
        assert "a1" in by_author["ann"] and "b1" in by_author["bob"]


async def test_a_memory_graph_that_fails_mid_turn_still_gets_the_person_an_answer(
    make_config: Callable[..., Config],
) -> None:
    """The memory graph's database connection dies: "Remember that…" is still stored and
    answered, and the answer says the memory was not saved instead of "Noted"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await rt.submit(inbound(CH, "hello there", pid="h0"))
        await rt.drain()
        await rt.memory.graph.storage.connection.close()  # type: ignore[attr-defined]
        await rt.submit(inbound(CH, "Remember that my locker code is 4411.", pid="r1"))
        await rt.drain()
        reply = rt.outbox.sent[-1].text
        assert reply.startswith("I could not save that: the memory store failed"), reply
        assert "Noted" not in reply
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["h0", "r1"]


async def _say(rt: Runtime, text: str, pid: str, author: str = "ann") -> str:
    await rt.submit(inbound(CH, text, pid=pid, author=author))
    await rt.drain()
    return rt.outbox.sent[-1].text


@contextlib.contextmanager
def _forgets_failing(graph: Any) -> Iterator[None]:
    """The memory graph's ``forget`` raising ``OSError`` within the block, as a store
    failing on every delete would."""
    real_forget = graph.forget

    async def failing_forget(memory_id: str, *, channel: str | None = None) -> bool:
        raise OSError("disk I/O error")

    graph.forget = failing_forget
    try:
        yield
    finally:
        graph.forget = real_forget


async def _said_while_forgets_fail(rt: Runtime, text: str, pid: str, author: str = "ann") -> str:
    """The reply to ``text``, said once what came before is indexed, while the memory
    graph's ``forget`` fails (see :func:`_forgets_failing`)."""
    assert rt.memory is not None
    await rt.memory.indexer.flush()
    with _forgets_failing(rt.memory.graph):
        return await _say(rt, text, pid, author)


async def _tell(rt: Runtime, lines: list[str]) -> None:
    """Say each of ``lines`` in turn, as ann."""
    for i, line in enumerate(lines):
        await _say(rt, line, f"t{i}")


async def test_a_polite_request_to_remember_is_saved_not_taken_as_a_question(
    make_config: Callable[..., Config],
) -> None:
    """ "Can you remember that…?" asks for a save, as "Remember that…" does; "Can you
    remember what…?" still asks."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "can you remember that my flight is BA117 on 2025-12-03?", "p1")
        assert said == "Noted: your flight is BA117 on 2025-12-03."
        said = await _say(rt, "Would you please note that the taxi is booked for 6am?", "p2")
        assert said == "Noted: the taxi is booked for 6am."
        contents = sorted(str(m["content"]) for m in await _memories(rt))
        assert contents == [
            "ann: my flight is BA117 on 2025-12-03",
            "ann: the taxi is booked for 6am",
        ]
        said = await _say(rt, "Can you remember what my flight is?", "p3")
        assert "BA117" in said and not said.startswith("Noted"), said


async def test_please_dont_remember_saves_nothing_and_says_so(
    make_config: Callable[..., Config],
) -> None:
    """A secret told with "don't remember" is not saved, and the reply says what is kept
    (the message, in the history) and what is not.  (A compaction's extraction skips it
    too: tests/tierbot/test_extraction_patterns.py.)"""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "Please don't remember my PIN, it is 1234.", "s1")
        assert said.startswith("OK: I won't save that as a memory."), said
        assert await _memories(rt) == []


async def test_forgetting_an_old_value_keeps_the_new_one(
    make_config: Callable[..., Config],
) -> None:
    """After a correction, "forget that my locker code is 4411" forgets 4411 only: the
    words are shared, the number is not."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Remember that my locker code is 4411.", "c1")
        assert await _say(rt, "actually my locker code is 5522", "c2") == (
            "Noted: your locker code is 5522."
        )
        said = await _say(rt, "Forget that my locker code is 4411.", "c3")
        assert said == "Done: I forgot what you told me about your locker code."
        assert [m["content"] for m in await _memories(rt)] == [
            "ann: actually my locker code is 5522"
        ]
        said = await _say(rt, "What is my locker code?", "c4")
        assert "5522" in said and "4411" not in said, said


async def test_forgetting_a_topic_says_so_and_leaves_questions_alone(
    make_config: Callable[..., Config],
) -> None:
    """ "forget my locker code" forgets what was told about it, and says so in a
    sentence; the question asked about it earlier is not what was told."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Remember that my locker code is 4411.", "t1")
        await _say(rt, "What is my locker code?", "t2")
        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        said = await _say(rt, "forget my locker code", "t3")
        assert said == "Done: I forgot what you told me about your locker code.", said
        assert await _memories(rt) == []
        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        hits = await rt.memory.search("what is my locker code", channel=CH)  # type: ignore[union-attr]
        assert any("t2" in h["source_message_ids"] for h in hits), hits


async def test_to_dos_can_be_listed(make_config: Callable[..., Config]) -> None:
    """ "Remind me to…" says back the to-do without the request around it, and "what's on
    my to-do list?" lists every one the asker gave, and nobody else's."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "Remind me to renew my passport before June 15.", "d1")
        assert said.startswith("Noted as a to-do: renew your passport before June 15."), said
        await _say(rt, "Remind me to call the plumber.", "d2")
        await _say(rt, "Remind me to feed the cat.", "d3", author="bob")
        for question in ("what's on my to-do list?", "what do I need to do?"):
            said = await _say(rt, question, f"q-{len(question)}")
            assert said.startswith("Your to-dos: "), said
            assert "renew your passport before June 15" in said and "call the plumber" in said
            assert "cat" not in said


async def test_an_answer_quotes_the_sentence_that_answers_not_the_whole_message(
    make_config: Callable[..., Config],
) -> None:
    """Asked for the door code, the bot quotes "My door code is 9876.", not the message
    that also holds the PIN; a question whose words span two sentences gets both."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My PIN is 1234. My door code is 9876. My parking spot is B12.", "m1")
        said = await _say(rt, "what is my door code?", "m2")
        assert "9876" in said and "1234" not in said and "B12" not in said, said
        said = await _say(rt, "what is my parking spot?", "m2b")
        assert "B12" in said and "9876" not in said, said
        await _say(rt, "My bike lock is 3030; my gym locker is 61.", "m2c")
        said = await _say(rt, "what is my gym locker?", "m2d")
        assert "61" in said and "3030" not in said, said  # a semicolon parts them too
        await _say(rt, "The boiler is in the cellar. Its service code is 77-A.", "m3")
        said = await _say(rt, "what is the boiler's service code?", "m4")
        assert "cellar" in said and "77-A" in said, said


async def test_two_requests_in_one_message_are_two_memories(
    make_config: Callable[..., Config],
) -> None:
    """ "Remember that…. Also remember that…" saves each, typed on its own, and "what do
    you know about me" tells both."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(
            rt, "Remember that Sam's birthday is May 3. Also remember that Sam likes jazz.", "j1"
        )
        assert said == "Noted: Sam's birthday is May 3; and Sam likes jazz."
        contents = sorted(str(m["content"]) for m in await _memories(rt))
        assert contents == ["ann: Sam likes jazz.", "ann: Sam's birthday is May 3."]
        said = await _say(rt, "What do you know about me?", "j2")
        assert "Sam likes jazz" in said and "May 3" in said, said


async def test_a_value_told_again_after_a_forget_is_answered(
    make_config: Callable[..., Config],
) -> None:
    """A forget covers what was said before it: "my locker code is now 7777", said after
    "forget my locker code", is the answer, and is in "what do you know about me"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Remember that my locker code is 4411.", "f1")
        await _say(rt, "Forget my locker code.", "f2")
        await _say(rt, "My locker code is now 7777.", "f3")
        said = await _say(rt, "What is my locker code?", "f4")
        assert "7777" in said and "4411" not in said, said
        await _say(rt, "Remember that my seat is 14C.", "f5")
        said = await _say(rt, "What do you know about me?", "f6")
        assert "7777" in said and "14C" in said, said


async def test_two_reminders_are_two_to_dos_and_one_can_go(
    make_config: Callable[..., Config],
) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "Remind me to call the plumber. Remind me to buy milk.", "r1")
        assert said.startswith("Noted as a to-do: call the plumber; and buy milk."), said
        await _say(rt, "Forget the plumber.", "r2")
        said = await _say(rt, "what's on my to-do list?", "r3")
        assert said == "Your to-dos: buy milk.", said


async def test_a_forget_the_store_fails_half_way_is_not_reported_done(
    make_config: Callable[..., Config],
) -> None:
    """The memory store fails after the first of several removals a forget makes (the
    memory, the message it came from, the bot's echo): the reply says it could not
    forget, never "Done", and does not claim nothing changed; the request is stored, and
    asking again finishes the job."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        graph = rt.memory.graph
        await _say(rt, "Remember that my locker code is 4411.", "k1")
        await rt.memory.indexer.flush()
        real_forget = graph.forget
        [memory] = await _memories(rt)

        async def failing_forget(memory_id: str, *, channel: str | None = None) -> bool:
            # The store fails on the memory itself, whatever went before it.
            if memory_id == memory["id"]:
                raise OSError("disk I/O error")
            return await real_forget(memory_id, channel=channel)

        graph.forget = failing_forget  # type: ignore[method-assign]
        said = await _say(rt, "forget my locker code", "k2")
        assert said.startswith("I could not forget that: the memory store failed (OSError)")
        assert "Done" not in said and "nothing was changed" not in said, said
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["k1", "k2"]
        graph.forget = real_forget  # type: ignore[method-assign]
        said = await _say(rt, "forget my locker code", "k3")
        assert said == "Done: I forgot what you told me about your locker code.", said
        assert await _memories(rt) == []
        left = [n["content"] for n in await _nodes(rt) if "4411" in str(n["content"])]
        assert left == [], left


async def test_a_question_typed_without_its_apostrophe_or_mark_is_answered(
    make_config: Callable[..., Config],
) -> None:
    """ "whats my door code" asks: it is answered with the code, and never saved as a fact
    ("Noted: whats your door code") nor quoted as the answer to a later question."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My door code is 5521.", "w1")
        said = await _say(rt, "whats my door code", "w2")
        assert "5521" in said and not said.startswith("Noted"), said
        again = await _say(rt, "what's my door code?", "w3")
        assert "«My door code is 5521.»" in again, again
        assert [m["content"] for m in await _memories(rt)] == ["ann: My door code is 5521."]


async def test_remember_that_said_after_the_fact_saves_it_typos_and_all(
    make_config: Callable[..., Config],
) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "i'm alergic to penicilin, pls remeber that", "t1")
        assert said == "Noted: you're alergic to penicilin.", said
        (memory,) = await _memories(rt)
        assert memory["type"] == "identity"
        assert "penicilin" in await _say(rt, "what am i alergic to?", "t2")


async def test_how_are_you_is_small_talk_not_a_search(make_config: Callable[..., Config]) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "hey how are you doing today?", "h1")
        assert said.startswith("I'm well, thanks for asking!"), said
        assert not [o for o in rt.outbox.sent if "look further back" in o.text]


async def test_a_nationality_or_a_mood_is_not_a_name(make_config: Callable[..., Config]) -> None:
    """ "I'm British" and "I'm Exhausted" give nobody a name, nor does a question quoting
    someone's "I'm Jo"; the name given ("I'm Kim") stays."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Hi, I'm Kim.", "n1", author="kim")
        await _say(rt, "I'm British, by the way.", "n2", author="kim")
        await _say(rt, "Honestly I'm Exhausted.", "n3", author="kim")
        await _say(rt, "who said Hello, I'm Jo?", "n4", author="kim")
        assert (await _say(rt, "hi", "n5", author="kim")).startswith("Hi, Kim!")
        said = await _say(rt, "What's my name?", "n6", author="kim")
        assert said.startswith("Your name is Kim: ") and "I'm Kim" in said, said


async def test_what_do_you_know_about_me_says_when_there_is_more(
    make_config: Callable[..., Config],
) -> None:
    """Twelve things told: the answer lists nine and says three more are known, rather
    than stopping at a few without a word; "what else" lists the three, asked again it
    says that was all (it repeated the whole list); "everything" lists all twelve."""
    facts = [f"My locker number {i} is in corridor {chr(65 + i)}." for i in range(12)]
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, fact in enumerate(facts):
            await _say(rt, fact, f"f{i}")
        said = await _say(rt, "What do you know about me?", "q1")
        assert said.count("corridor") == 9, said
        assert said.endswith(
            "and 3 more things (ask me about any of them, or what else I know about you)."
        ), said
        rest = await _say(rt, "What else do you know about me?", "q2")
        assert rest.startswith("You also told me: "), rest
        assert sorted(re.findall(r"corridor (\w)", rest)) == ["A", "B", "C"], rest
        assert await _say(rt, "what else?", "q3") == "That is everything you told me that I kept."
        everything = await _say(rt, "Tell me everything you know about me", "q4")
        assert everything.count("corridor") == 12, everything


RAMBLE = (
    "So here is the thing, I have been thinking a lot about my career lately and whether I"
    " should move on from the agency before the end of the year, because my manager Janet"
    " keeps promising a promotion that never arrives, and the commute is eating two hours a"
    " day, and with Mia starting school the mornings are going to get even more hectic, so I"
    " am weighing up a remote role against staying put and hoping things change"
)


async def test_a_long_ramble_does_not_answer_what_a_plain_message_answers(
    make_config: Callable[..., Config],
) -> None:
    """A paragraph mentioning "Mia starting school" in passing, said after "Mia starts
    school on September 3rd": the plain message answers; and the reply to the paragraph
    says back only its first words, marked as cut."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My daughter Mia starts school on September 3rd.", "r1")
        noted = await _say(rt, RAMBLE, "r2")
        assert "(…)" in noted and "hoping things change" not in noted, noted
        said = await _say(rt, "When does Mia start school?", "r3")
        assert "September 3rd" in said, said


async def test_a_to_do_done_is_crossed_off_not_added(make_config: Callable[..., Config]) -> None:
    """ "I watered the plants, please cross it off my to-do list" removes the to-do (said
    in the past tense, irregular verbs too) instead of noting a new one; a to-do that was
    never asked for is said not to be there."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Remind me to water the plants.", "d1")
        await _say(rt, "Remind me to buy milk.", "d2")
        said = await _say(rt, "I watered the plants, please cross it off my to-do list.", "d3")
        assert said == "Done: I crossed it off your to-dos (water the plants).", said
        assert await _say(rt, "What's on my to-do list?", "d4") == "Your to-dos: buy milk."
        said = await _say(rt, "I bought the milk, you can take it off my list.", "d5")
        assert said == "Done: I crossed it off your to-dos (buy milk).", said
        await _say(rt, "Remind me to buy stamps.", "d7")
        await _say(rt, "Remind me to book flights.", "d8")
        said = await _say(rt, "Done with the stamps, tick it off.", "d9")
        assert said == "Done: I crossed it off your to-dos (buy stamps).", said
        said = await _say(rt, "Remove book flights from my to-do list.", "d10")
        assert said == "Done: I crossed it off your to-dos (book flights).", said
        said = await _say(rt, "tick the dentist off my list", "d6")
        assert said == "I had no to-do of yours like that to cross off (the dentist).", said
        assert [m for m in await _memories(rt) if m["type"] == "todo"] == []


async def test_forgetting_an_old_value_by_its_words_keeps_the_new_one(
    make_config: Callable[..., Config],
) -> None:
    """Two values that share their numbers ("on Tuesday at 3pm", "on Thursday at 3pm"):
    forgetting the old one keeps the corrected one, and it is the answer."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My dentist appointment is on Tuesday at 3pm.", "v1")
        await _say(rt, "Actually my dentist appointment is on Thursday at 3pm.", "v2")
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        done = await _say(rt, "Forget that my dentist appointment is on Tuesday at 3pm.", "v3")
        assert done.startswith("Done: I forgot"), done
        said = await _say(rt, "When is my dentist appointment?", "v4")
        assert "Thursday" in said and "Tuesday" not in said, said
        kept = [m["content"] for m in await _memories(rt)]
        assert kept == ["ann: Actually my dentist appointment is on Thursday at 3pm."], kept


async def test_my_questions_are_answered_by_what_the_asker_said(
    make_config: Callable[..., Config],
) -> None:
    """Sam and Alex each have a favourite colour: "my" means the asker's; Sam forgetting
    Alex's value forgets nothing of Sam's; asking about Alex by name gets Alex's."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My favourite colour is green.", "c1", author="sam")
        await _say(rt, "My favourite colour is purple.", "c2", author="alex")
        assert "green" in await _say(rt, "What is my favourite colour?", "c3", author="sam")
        assert "purple" in await _say(rt, "What is my favourite colour?", "c4", author="alex")
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        said = await _say(rt, "Forget that my favourite colour is purple.", "c5", author="sam")
        assert said.startswith("I had nothing of yours about that to forget"), said
        assert "green" in await _say(rt, "What is my favourite colour?", "c6", author="sam")
        assert "purple" in await _say(rt, "What is alex's favourite colour?", "c7", author="sam")


async def test_compacting_a_short_chat_frees_room(make_config: Callable[..., Config]) -> None:
    """A newcomer's /compact after twenty short lines: the offline summary is smaller than
    what it replaces (it was as long as the cap allowed, and the pass freed nothing)."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i in range(20):
            await _say(rt, f"Short note {i}: the {i}th crate of apples went to stall {i}.", f"s{i}")
        said = await rt.command(inbound(CH, "/compact"), is_admin=True)
        assert said is not None and said.startswith("Compacting the oldest"), said
        await rt.drain()
        report = rt.outbox.sent[-1].text
        assert report.startswith("/compact done"), report


async def test_compact_of_small_talk_frees_room_despite_the_bots_long_message_ids(
    make_config: Callable[..., Config],
) -> None:
    """/compact over an ordinary chat of a few words a line frees tokens: the offline
    summary's cap was half the transcript, whose "[assistant:<uuid>] tierbot (bot):"
    prefixes made it twice what the messages cost, so the summary was never smaller."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(SMALL_TALK):
            await _say(rt, line, f"console-{1_700_000_000_000_000_000 + i}-{i}", author="you")
        said = await rt.command(inbound(CH, "/compact"), is_admin=True)
        assert said is not None and said.startswith("Compacting the oldest"), said
        await rt.drain()
        report = rt.outbox.sent[-1].text
        assert report.startswith("/compact done") and "freed" in report, report
        freed = int(report.split("freed ")[1].split()[0])
        assert freed > 0, report


async def test_compact_again_after_a_noop_takes_more_messages_or_says_to_wait(
    make_config: Callable[..., Config],
) -> None:
    """/compact of a chat too short to shrink says what to do next; asked again it takes a
    longer stretch, then, with none left, says to keep talking: it never runs the same
    pass again to fail the same way."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(("hi", "ok", "cool")):
            await _say(rt, line, f"t{i}", author="you")
        replies = []
        for _ in range(3):
            replies.append(await rt.command(inbound(CH, "/compact"), is_admin=True))
            await rt.drain()
        notes = [o.text for o in rt.outbox.sent if o.text.startswith("/compact")]
        assert str(replies[0]).startswith("Compacting the oldest 2 messages"), replies
        assert str(replies[1]).startswith("Compacting the oldest 4 messages"), replies
        assert "Run /compact again" in notes[0], notes
        assert "Keep talking" in notes[1], notes
        assert replies[2] is not None and replies[2].startswith("Nothing more to compact yet")
        assert len(notes) == 2, "the third /compact ran no pass"
        records = await rt.store.compactions(CH)
        assert sorted(r.covered for r in records) == [2, 4], records


async def test_a_short_correction_replaces_what_was_just_said(
    make_config: Callable[..., Config],
) -> None:
    """ "Sorry, I meant Thursday, not Tuesday" and "no wait, it's 4412" correct the
    sentence they follow: the corrected one is saved and answered, the old value is
    forgotten and no longer answered, and the correction is not a memory of its own."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "My dentist appointment is on Tuesday at 3pm.", "d1")
        await rt.memory.indexer.flush()
        said = await _say(rt, "Sorry, I meant Thursday, not Tuesday", "d2")
        assert said == "Corrected: your dentist appointment is on Thursday at 3pm.", said
        await _say(rt, "Remember that my locker code is 4411.", "d3")
        await rt.memory.indexer.flush()
        said = await _say(rt, "no wait, it's 4412", "d4")
        assert said == "Corrected: your locker code is 4412.", said
        contents = sorted(str(m["content"]) for m in await _memories(rt))
        assert contents == [
            "ann: My dentist appointment is on Thursday at 3pm.",
            "ann: my locker code is 4412.",
        ], contents
        said = await _say(rt, "When is my dentist appointment?", "d5")
        assert "Thursday" in said and "Tuesday" not in said, said
        said = await _say(rt, "What is my locker code?", "d6")
        assert "4412" in said and "4411" not in said, said


async def test_a_correction_of_a_correction_corrects_what_the_first_one_made(
    make_config: Callable[..., Config],
) -> None:
    """ "Actually, make that Friday" after "Sorry, I meant Thursday, not Tuesday": the
    sentence the first correction made (its old form forgotten with the old value) is
    corrected again, and so is that one by "no wait, make that 4pm"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "My dentist appointment is on Tuesday at 3pm.", "d1")
        await rt.memory.indexer.flush()
        said = await _say(rt, "Sorry, I meant Thursday, not Tuesday", "d2")
        assert said == "Corrected: your dentist appointment is on Thursday at 3pm.", said
        await rt.memory.indexer.flush()
        said = await _say(rt, "Actually, make that Friday.", "d3")
        assert said == "Corrected: your dentist appointment is on Friday at 3pm.", said
        await rt.memory.indexer.flush()
        said = await _say(rt, "no wait, make that 4pm", "d4")
        assert said == "Corrected: your dentist appointment is on Friday at 4pm.", said
        contents = [str(m["content"]) for m in await _memories(rt)]
        assert contents == ["ann: My dentist appointment is on Friday at 4pm."], contents
        said = await _say(rt, "When is my dentist appointment?", "d5")
        assert "Friday at 4pm" in said and "Thursday" not in said, said


async def test_dates_restatements_and_full_names_are_kept_whole(
    make_config: Callable[..., Config],
) -> None:
    """What a newcomer's session found garbled or lost: "oops no, it's Oct 16" made the
    midterm "on Oct 16 14"; "sorry, the flight number is JL 8" was answered "OK" and the
    list kept JL 7; "Hello, I'm Omar Haddad." was greeted and not kept."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said = await _say(rt, "Hello, I'm Omar Haddad.", "n1")
        assert said == "Hello, Omar! Noted: you're Omar Haddad.", said
        await _say(rt, "My organic chem midterm is on Oct 14.", "d1")
        said = await _say(rt, "oops no, it's Oct 16", "d2")
        assert said == "Corrected: your organic chem midterm is on Oct 16.", said
        await _say(rt, "Our flight number is JL 7.", "f1")
        said = await _say(rt, "sorry, the flight number is JL 8", "f2")
        assert said == "Noted: the flight number is JL 8.", said
        said = await _say(rt, "what do you know about me?", "q1")
        assert "JL 8" in said and "JL 7" not in said, said
        assert "midterm is on Oct 16;" in said, said
        assert "you're Omar Haddad" in said, said


async def test_what_a_correction_cannot_place_is_said_and_nothing_changes(
    make_config: Callable[..., Config],
) -> None:
    """A correction with nothing of its kind to correct says so and changes nothing;
    one person's correction never touches another's words; "Thanks, not now" and
    "No, not really" are no corrections."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "My locker code is 4411.", "n1", author="ann")
        await rt.memory.indexer.flush()
        said = await _say(rt, "sorry, I meant 4412", "n2", author="bob")
        assert said.startswith("I can't tell what that corrects"), said
        said = await _say(rt, "sorry, I meant Lisbon", "n3", author="ann")
        assert said.startswith("I can't tell what that corrects"), said
        assert await _say(rt, "Thanks, not now", "n4", author="ann") == "You're welcome."
        assert await _say(rt, "No, not really", "n5", author="ann") == "OK, ann."
        assert [m["content"] for m in await _memories(rt)] == ["ann: My locker code is 4411."]


async def test_a_correction_whose_old_value_the_store_cannot_forget_says_so(
    make_config: Callable[..., Config],
) -> None:
    """The memory store fails to forget the old value: the reply says so (never that
    the old value is gone), the corrected one is still saved, and asking again about
    the code names the failure's outcome honestly."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Remember that my locker code is 4411.", "f1")
        said = await _said_while_forgets_fail(rt, "oops, 4412 not 4411", "f2")
        assert said.startswith("I could not forget the old value: the memory store failed"), said
        assert said.endswith("Corrected: your locker code is 4412."), said
        contents = sorted(str(m["content"]) for m in await _memories(rt))
        assert contents == ["ann: my locker code is 4411.", "ann: my locker code is 4412."]


async def test_what_do_you_know_about_me_lists_memories_no_longer_in_view(
    make_config: Callable[..., Config],
) -> None:
    """The console's user is called "you", a word a search drops: once the facts left
    the conversation in view (here: asked in another channel of the same server),
    "what do you know about me?" still lists them, not "You haven't told me"."""
    told = "discord:9:1"
    asked = "discord:9:2"
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        for i, line in enumerate(
            ["I live in Porto.", "I play the cello.", "My favourite band is Radiohead."]
        ):
            await rt.submit(inbound(told, line, pid=f"t{i}", author="you"))
            await rt.drain()
        await rt.submit(inbound(told, "lol nice", pid="o1", author="ann"))
        await rt.drain()
        await rt.memory.indexer.flush()
        await rt.submit(inbound(asked, "what do you know about me?", pid="q1", author="you"))
        await rt.drain()
        said = rt.outbox.sent[-1].text
        assert said.startswith("Here is what you told me:"), said
        for fact in ("you live in Porto", "you play the cello", "Radiohead"):
            assert fact in said, (fact, said)


async def test_a_memory_store_that_fails_a_listing_is_not_taken_for_an_empty_one(
    make_config: Callable[..., Config],
) -> None:
    """The store fails while listing what someone told: the answer says the lookup
    failed and why, never "You haven't told me about yourself"; with the store back,
    the same question lists the fact."""
    told = "discord:9:1"
    asked = "discord:9:2"
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        graph = rt.memory.graph
        await rt.submit(inbound(told, "I play the cello.", pid="t1", author="you"))
        await rt.drain()
        await rt.memory.indexer.flush()
        real = graph.memories_of

        async def failing(*args: object, **kwargs: object) -> list[object]:
            raise OSError("disk I/O error")

        graph.memories_of = failing  # type: ignore[method-assign]
        await rt.submit(inbound(asked, "what do you know about me?", pid="q1", author="you"))
        await rt.drain()
        said = rt.outbox.sent[-1].text
        assert said.startswith("I could not look further back: the memory store failed"), said
        assert "haven't told me" not in said
        graph.memories_of = real  # type: ignore[method-assign]
        await rt.submit(inbound(asked, "what do you know about me?", pid="q2", author="you"))
        await rt.drain()
        assert "you play the cello" in rt.outbox.sent[-1].text


async def test_deleting_or_unremembering_what_was_told_forgets_it(
    make_config: Callable[..., Config],
) -> None:
    """ "Please delete the cabin wifi password" and "Don't remember my bike lock
    combination" (said after it was told) forget what was told, and the answers stop
    quoting it; "forget everything" says what to do instead and forgets nothing."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "The wifi password at the cabin is pinecone42.", "w1")
        await _say(rt, "My bike lock combination is 3-7-1-9.", "w2")
        await _say(rt, "My locker code is 4411.", "w3")
        await rt.memory.indexer.flush()
        said = await _say(rt, "please delete the cabin wifi password", "w4")
        assert said == "Done: I forgot what you told me about the cabin wifi password.", said
        assert "pinecone42" not in await _say(rt, "What's the cabin wifi password?", "w5")
        said = await _say(rt, "Don't remember my bike lock combination", "w6")
        assert said == (
            "OK: I won't keep that, and I forgot what you had told me about your bike lock "
            "combination."
        ), said
        assert "3-7-1-9" not in await _say(rt, "What's my bike lock combination?", "w7")
        said = await _say(rt, "forget everything", "w8")
        assert said.startswith("I can't forget everything at once from a message"), said
        assert [m["content"] for m in await _memories(rt)] == ["ann: My locker code is 4411."]
        said = await _say(rt, "Could you forget my locker code?", "w9")
        assert said == "Done: I forgot what you told me about your locker code.", said
        assert await _memories(rt) == []


async def test_every_question_of_a_message_is_answered(
    make_config: Callable[..., Config],
) -> None:
    """ "What is my locker code and where do I live?" and "Where does Ana live? When is
    my birthday?" get an answer each; "remind me my locker code" asks, saves nothing."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(
            ["My locker code is 4411.", "I live in Porto.", "My sister Ana lives in Madrid."]
        ):
            await _say(rt, line, f"f{i}")
        await _say(rt, "My birthday is on May 3.", "f3")
        said = await _say(rt, "what is my locker code and where do I live?", "q1")
        first, second = said.splitlines()
        assert first.startswith("«what is my locker code»") and "4411" in first, said
        assert second.startswith("«where do I live?»") and "Porto" in second, said
        said = await _say(rt, "Where does Ana live? When is my birthday?", "q2")
        first, second = said.splitlines()
        assert "Madrid" in first and "May 3" in second, said
        saved = len(await _memories(rt))
        said = await _say(rt, "remind me my locker code", "q3")
        assert "«My locker code is 4411.»" in said, said
        assert len(await _memories(rt)) == saved


async def test_answers_follow_who_is_asked_about_and_what_changed_since(
    make_config: Callable[..., Config],
) -> None:
    """ "How old is Sofia?" is answered about Sofia, not by another thing that is old;
    "my landlord's number" by the landlord's; "Where do I live?" by the asker's own
    words, with the move said after; "Is my locker code 4411?" with the newer code."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(
            [
                "I live in Porto.",
                "My sister Ana lives in Madrid.",
                "My wife Sofia turns 40 on 2025-09-14.",
                "My dog Rex is 7 years old.",
                "My landlord's phone is 555-0123.",
                "My library card number is LIB-88231.",
                "My locker code is 4411.",
                "I moved to Lisbon last week.",
                "My locker code changed to 5521.",
            ]
        ):
            await _say(rt, line, f"f{i}")
        said = await _say(rt, "How old is Sofia?", "q1")
        assert "Sofia turns 40" in said and "Rex" not in said, said
        said = await _say(rt, "What is my landlord's number?", "q2")
        assert "555-0123" in said and "LIB" not in said, said
        said = await _say(rt, "where do I live?", "q3")
        assert "«I live in Porto.»" in said and said.endswith("«I moved to Lisbon last week.»")
        said = await _say(rt, "Is my locker code 4411?", "q4")
        assert "4411" in said and said.endswith("«My locker code changed to 5521.»"), said
        said = await _say(rt, "Where does Ana live?", "q5")
        assert "Madrid" in said and "Lisbon" not in said, said


async def test_questions_typed_with_a_typo_or_shorthand_are_answered(
    make_config: Callable[..., Config],
) -> None:
    """ "wat is my lokcer code" and "when's my bday" find what was said; a word two
    typos away, or one typo from two words, is not guessed."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My locker code is 4411.", "f1")
        await _say(rt, "My birthday is on May 3.", "f2")
        await _say(rt, "The wifi password at the cabin is pinecone42.", "f3")
        assert "4411" in await _say(rt, "wat is my lokcer code", "q1")
        assert "May 3" in await _say(rt, "when's my bday", "q2")
        assert "pinecone42" in await _say(rt, "Whats the wifi pasword", "q3")
        assert "4411" not in await _say(rt, "what is my lkocre?", "q4")


async def test_a_question_about_something_never_said_is_not_answered_with_its_neighbour(
    make_config: Callable[..., Config],
) -> None:
    """ "What is my garage code?" after only a gym code, "my docker password" (a word,
    not a typo of "locker"), "how old is Max?" after only Rex's age: nothing answers, and
    the bot says so rather than quoting a neighbouring secret."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My locker code is 4411.", "f1")
        await _say(rt, "My gym code is 9090.", "f2")
        await _say(rt, "My dog Rex is 7 years old.", "f3")
        for i, question in enumerate(
            ["what is my garage code?", "what is my docker password?", "how old is Max?"]
        ):
            said = await _say(rt, question, f"q{i}")
            assert said == "Nothing I could find covers that.", (question, said)
        assert "9090" in await _say(rt, "what is my gym code?", "q4")
        assert "Rex" in await _say(rt, "how old is Rex?", "q5")


async def test_corrections_hold_after_the_old_value_left_the_conversation(
    make_config: Callable[..., Config],
) -> None:
    """A bare "no wait, it's 4412" corrects the locker code, not the 3 of "March 3" said
    after it; "Correction: my locker code is 7777." then "no wait, it's 1234" answers
    1234, not the first code; "sorry, I meant 9091" of a gym code answers 9091; a
    restated value corrected answers the correction, not the value first said."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My locker code is 4411.", "c1")
        await _say(rt, "My birthday is March 3.", "c2")
        said = await _say(rt, "no wait, it's 4412", "c3")
        assert said == "Corrected: your locker code is 4412.", said
        assert "March 3" in await _say(rt, "when is my birthday?", "c4")
        await _say(rt, "Correction: my locker code is 7777.", "c5")
        said = await _say(rt, "no wait, it's 1234", "c6")
        assert said == "Corrected: your locker code is 1234.", said
        said = await _say(rt, "what is my locker code?", "c7")
        assert "1234" in said and "4411" not in said and "7777" not in said, said
        await _say(rt, "My gym code is 9090.", "c8")
        await _say(rt, "sorry, I meant 9091", "c9")
        said = await _say(rt, "what is my gym code?", "c10")
        assert "9091" in said and "4411" not in said, said
        # The first door code is never corrected, only restated; the restated one is.
        await _say(rt, "My door code is 1111.", "d1")
        await _say(rt, "Correction: my door code is 2222.", "d2")
        await _say(rt, "no wait, it's 3333", "d3")
        said = await _say(rt, "what is my door code?", "d4")
        assert "3333" in said and "1111" not in said, said


async def test_forget_it_and_forgetting_a_topic_forget_what_was_said(
    make_config: Callable[..., Config],
) -> None:
    """ "forget it" right after a statement, "forget my bike lock" of a bike lock
    combination, "please don't remember the cabin wifi" of its password: each forgets,
    and someone else's thing of the same name ("my sister's locker code") stays."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My sister's locker code is 5555.", "t0")
        await _say(rt, "My locker code is 4411.", "t1")
        said = await _say(rt, "forget it", "t2")
        assert said == "Done: I forgot what you told me about your locker code.", said
        await _say(rt, "My bike lock combination is 3719.", "t3")
        said = await _say(rt, "forget my bike lock", "t4")
        assert said == "Done: I forgot what you told me about your bike lock.", said
        await _say(rt, "The wifi password at the cabin is pinecone42.", "t5")
        said = await _say(rt, "please don't remember the cabin wifi", "t6")
        assert said.startswith("OK: I won't keep that, and I forgot"), said
        left = [str(m["content"]) for m in await _memories(rt)]
        assert left == ["ann: My sister's locker code is 5555."], left


async def test_deleting_what_was_told_forgets_it_and_a_skip_finding_nothing_says_so(
    make_config: Callable[..., Config],
) -> None:
    """ "Please delete the sandbox API token", after telling it, was answered "OK." and
    the token stayed answerable: it is forgotten now (the prod token stays); "delete
    the staging bucket", nothing told of it, is no forget. "Don't remember Elif's
    dietary stuff" names nothing told ("Elif is vegetarian"): the reply says so, not a
    plain "OK" that let the person believe it was gone."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "The sandbox API token is sk-test-9981.", "t1")
        await _say(rt, "The prod API token is sk-live-1234.", "t2")
        await rt.memory.indexer.flush()
        said = await _say(rt, "Please delete the sandbox API token.", "t3")
        assert said == "Done: I forgot what you told me about the sandbox API token.", said
        said = await _say(rt, "What's the sandbox API token?", "t4")
        assert said == "Nothing I could find covers that.", said  # not the request either
        assert "sk-live-1234" in await _say(rt, "What's the prod API token?", "t5")
        contents = [str(m["content"]) for m in await _memories(rt)]
        assert contents == ["ann: The prod API token is sk-live-1234."], contents
        assert await _say(rt, "delete the staging bucket", "t6") == "OK, ann."
        await _say(rt, "The wifi password at grandma's house is bluebird7.", "w1")
        await rt.memory.indexer.flush()
        said = await _say(rt, "Forget the wifi password at grandma's house.", "w2")
        # (It said "Done: I forgot that the wifi password at grandma's house.")
        assert said == (
            "Done: I forgot what you told me about the wifi password at grandma's house."
        ), said
        await _say(rt, "Elif is vegetarian and doesn't eat fish.", "e1")
        said = await _say(rt, "Don't remember Elif's dietary stuff, she wants it private.", "e2")
        assert said.startswith(
            "OK: I won't save that. I found nothing you had told me about Elif's dietary "
            "stuff to forget"
        ), said


async def test_what_someone_says_holds_no_more_is_not_told_as_theirs(
    make_config: Callable[..., Config],
) -> None:
    """ "I don't work at the bank anymore" and "I don't live in Porto anymore, I moved to
    Lisbon" are kept, and what they undo is no longer said back: not in "what do you
    know about me?", not as the answer to "where do I work?" (the wife's job stays
    hers), and added when the old sentence answers best; also once all of it was
    compacted into a summary, whose line "I live in Porto" carries no date and is
    checked against the memories."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        told = [
            "I live in Porto.",
            "I work at the bank on Mondays.",
            "My wife works at the bank.",
            "My locker code is 4411.",
            "I drink coffee every morning.",
            *SMALL_TALK[:4],
            "I don't work at the bank anymore.",
            "I don't live in Porto anymore, I moved to Lisbon.",
            "I no longer drink coffee.",
        ]
        await _tell(rt, told)

        async def check(stage: str) -> None:
            said = await _say(rt, "what do you know about me?", f"{stage}1")
            assert "you don't work at the bank anymore" in said, said
            assert "you don't live in Porto anymore, you moved to Lisbon" in said, said
            assert "your wife works at the bank" in said, said
            assert "you work at the bank on Mondays" not in said, said
            assert "you live in Porto;" not in said and "you live in Porto." not in said
            said = await _say(rt, "where do I work?", f"{stage}2")
            assert said.endswith("«I don't work at the bank anymore.»"), said
            said = await _say(rt, "where do I live?", f"{stage}3")
            assert said.endswith("«I don't live in Porto anymore, I moved to Lisbon.»"), said
            assert "summary" not in said, said
            said = await _say(rt, "do I drink coffee?", f"{stage}4")
            assert "no longer" in said, said
            if stage == "a":  # (after compaction, a recall of five may not hold both)
                # The old sentence fits best: it is quoted, and what was said after it.
                said = await _say(rt, "where do I work on Mondays?", f"{stage}5")
                assert "Mondays.» Later, ann said on " in said, said
                assert said.endswith("«I don't work at the bank anymore.»"), said

        await check("a")
        for _ in range(3):
            await rt.command(inbound(CH, "/compact"), is_admin=True)
            await rt.drain()
        assert len(await rt.store.compactions(CH)) >= 2
        await check("b")


async def test_what_changed_since_is_kept_and_added_to_the_answer(
    make_config: Callable[..., Config],
) -> None:
    """ "We sold the Honda", "I quit the library job", "Tariq moved from Glasgow to
    Edinburgh" and "We migrated the ledger from Postgres 16 to CockroachDB" were
    answered "OK." (not kept) or ignored: the old sentence kept being the whole answer.
    Each is kept now and added after the sentence it changes; "My locker code changed
    to 7720" no longer answers "What's my garage code?"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        pairs = [
            ("I drive a grey Honda Civic.", "We sold the Honda.", "What car do I drive?"),
            (
                "I work part time at the campus library.",
                "I quit the library job.",
                "Where do I work?",
            ),
            (
                "Tariq lives in Glasgow.",
                "Tariq moved from Glasgow to Edinburgh.",
                "Where does Tariq live?",
            ),
            (
                "We decided to use Postgres 16 for the ledger service.",
                "We migrated the ledger from Postgres 16 to CockroachDB.",
                "What database does the ledger use?",
            ),
            (
                "Our head baker Rui is allergic to sesame.",
                "Rui doesnt work for us anymore.",
                "Who is our head baker?",
            ),
            (
                "George takes his blood pressure pills at 8am.",
                "George's pills are at 9am now, the doctor changed it.",
                "When does George take his pills?",
            ),
            (
                "My sister Claire lives in Cardiff.",
                "Claire moved to Swansea last month.",
                "Where does Claire live?",
            ),
        ]
        await _say(rt, "I live in Leeds.", "m1")
        for i, (before, change, _) in enumerate(pairs):
            await _say(rt, before, f"b{i}")
            said = await _say(rt, change, f"c{i}")
            assert said.startswith("Noted: "), (change, said)
        for i, (before, change, question) in enumerate(pairs):
            said = await _say(rt, question, f"q{i}")
            assert f"«{before}» Later, ann said on " in said, (question, said)
            assert said.endswith(f"«{change}»"), (question, said)
        # Someone else's later move is not the asker's: nothing is added to where they live.
        said = await _say(rt, "Where do I live?", "m2")
        assert said.endswith("«I live in Leeds.»") and "Tariq" not in said, said
        await _say(rt, "We booked a trip to Cornwall in May.", "w1")
        assert (await _say(rt, "We cancelled the Cornwall trip.", "w2")).startswith("Noted")
        said = await _say(rt, "When is the Cornwall trip?", "w3")
        assert said.endswith("«We cancelled the Cornwall trip.»"), said
        await _say(rt, "My locker code changed to 7720.", "l1")
        assert await _say(rt, "What's my garage code?", "l2") == "Nothing I could find covers that."


async def test_what_do_you_know_about_someone_lists_what_was_said_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "What do you know about Elif?" gave one line; it lists every line said of her,
    newest first, each with who said it and when; someone never named gets "I don't
    know"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        told = [
            "Elif is vegetarian and doesn't eat fish.",
            "My brother Sami lives in Cambridge.",
            "Elif's passport number is X1234567.",
            "We're meeting Elif at the airport on Friday.",
        ]
        await _tell(rt, told)
        said = await _say(rt, "What do you know about Elif?", "q1")
        assert said.startswith("What I know about Elif: «We're meeting Elif"), said
        assert re.findall(r"«([^»]+)» \(ann, \d{4}-\d\d-\d\d\)", said) == [
            told[3],
            told[2],
            told[0],
        ], said
        said = await _say(rt, "Tell me about Sami", "q2")
        assert said == (
            f"What I know about Sami: «{told[1]}» (ann, {said.split('(ann, ')[1][:10]})."
        ), said
        said = await _say(rt, "What do you know about Sami and Elif?", "q4")
        sami, elif_ = said.splitlines()
        assert sami.startswith("«What do you know about Sami?» What I know about Sami:"), said
        assert elif_.startswith("«What do you know about Elif?» What I know about Elif:"), said
        said = await _say(rt, "What do you know about Bob?", "q3")
        assert said.startswith("I don't know yet"), said


async def test_a_fact_told_beside_a_question_is_kept_and_what_else_continues_the_list(
    make_config: Callable[..., Config],
) -> None:
    """ "What is my locker code? Also, my new phone number is 555-1234." answers the
    code and keeps the number; after "what do you know about me?" has listed nine
    things, "what else?" lists the rest, and only the rest."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My locker code is 4411.", "f0")
        said = await _say(
            rt, "what is my locker code? Also, my new phone number is 555-1234.", "f1"
        )
        assert said.startswith("Noted: your new phone number is 555-1234.") and "4411" in said
        assert "555-1234" in await _say(rt, "what is my phone number?", "f2")
        facts = [f"My cousin number {i} lives in town {i}." for i in range(1, 11)]
        for i, fact in enumerate(facts):
            await _say(rt, fact, f"g{i}")
        listed = await _say(rt, "what do you know about me?", "q1")
        assert "more things" in listed, listed
        rest = await _say(rt, "what else?", "q2")
        assert rest.startswith("You also told me:") and "more things" not in rest, rest
        first, then = re.findall(r"town (\d+)", listed), re.findall(r"town (\d+)", rest)
        assert sorted(first + then, key=int) == [str(i) for i in range(1, 11)], (listed, rest)
        assert "4411" in listed + rest and "555-1234" in listed + rest, (listed, rest)


async def test_a_question_about_two_people_is_answered_for_each(
    make_config: Callable[..., Config],
) -> None:
    """ "Where do Ana and Rui live?" answers for Ana and for Rui (it answered neither:
    no message names both), each line saying which it answers."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My sister Ana lives in Madrid.", "f1")
        await _say(rt, "My brother Rui lives in Paris.", "f2")
        said = await _say(rt, "Where do Ana and Rui live?", "q1")
        ana, rui = said.splitlines()
        assert ana.startswith("«Where does Ana live?»") and "Madrid" in ana, said
        assert rui.startswith("«Where does Rui live?»") and "Paris" in rui, said


@pytest.mark.parametrize(
    ("facts", "question", "expected"),
    [
        # Said differently, still the same thing: answered.
        (
            ["The cabin wifi password is pinecone42."],
            "What is my Wi-Fi password at the cabin?",
            "pinecone42",
        ),
        (["My phone number is 555-0199."], "What is my new phone number?", "555-0199"),
        (["My phone number is 555-0199."], "What's my mobile number?", "555-0199"),
        (["My garage code is 4471."], "Hey Tierbot, what's my garage code?", "4471"),
        (["My garage code is 4471."], "whats my grage code", "4471"),
        (["My garage code is 4471."], "Ugh, what's my garage code again? I always forget", "4471"),
        (["Mum's birthday is 4 June."], "When is my mother's birthday?", "4 June"),
        (["My wife Sofia turns 40 next year."], "How old is Sofi?", "Sofia"),
        (["I drive a red Volvo."], "Quick one - What car do I drive?", "Volvo"),
        (["My account number is 12345678."], "What's my bank account number?", "12345678"),
        (["My favorite band is Blur."], "What's my favourite band?", "Blur"),
        # Another thing of the same kind, or someone never mentioned: not answered.
        (["The cabin wifi password is pinecone42."], "what is the office wifi password?", None),
        (["My gym code is 9090."], "what is my locker code?", None),
        (["My wife Sofia turns 40 next year."], "How old is Max?", None),
    ],
)
async def test_answers_match_what_is_asked_however_it_is_said(
    make_config: Callable[..., Config], facts: list[str], question: str, expected: str | None
) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, fact in enumerate(facts):
            await _say(rt, fact, f"f{i}")
        said = await _say(rt, question, "q1")
        if expected is None:
            assert said == "Nothing I could find covers that.", said
        else:
            assert expected in said, said


async def _told_then_asked(
    make_config: Callable[..., Config],
    facts: list[str],
    unsaid: list[str],
    said: dict[str, str],
) -> None:
    """Tell ``facts``; each question of ``unsaid`` finds nothing, each of ``said`` its
    value."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, fact in enumerate(facts):
            await _say(rt, fact, f"f{i}")
        for i, question in enumerate(unsaid):
            answer = await _say(rt, question, f"u{i}")
            assert answer == "Nothing I could find covers that.", (question, answer)
        for i, (question, value) in enumerate(said.items()):
            answer = await _say(rt, question, f"s{i}")
            assert value in answer, (question, answer)


async def test_naming_whom_is_asked_about_does_not_answer_a_detail_never_told(
    make_config: Callable[..., Config],
) -> None:
    """ "What is Elif afraid of?" quoted "Elif is vegetarian…", "When is Ana's
    birthday?" the line naming her sister, "What time is our flight?" "We decided to
    skip Osaka this time": a statement must hold something of what is asked beyond
    the name (a date answers "when": Sofia "turns 40 on 2025-09-14")."""
    facts = [
        "My wife Sofia turns 40 on 2025-09-14.",
        "My sister Ana lives in Madrid.",
        "Elif is vegetarian and doesn't eat fish.",
        "We decided to skip Osaka this time.",
        "Lucia's replacement during leave is Omar.",
        "I live in Bristol with my husband George.",
        "Claire's husband is called Mark, he's a firefighter.",
        "George takes his blood pressure pills at 8am.",
    ]
    unsaid = [
        "When is George's appointment?",  # a time George does something else is no answer
        "What is Elif afraid of?",
        "What's Elif's passport number?",
        "When is Ana's birthday?",
        "What time is our flight?",
    ]
    said = {
        "When is Sofia's birthday?": "2025-09-14",
        "Where does Ana live?": "Madrid",
        "Who is Elif?": "vegetarian",
        "Does Elif eat fish?": "vegetarian",
        "Who is covering for Lucia?": "Omar",  # a "who" is answered by another name
        "What is my husband's name?": "George",  # not Claire's husband
    }
    await _told_then_asked(make_config, facts, unsaid, said)


async def test_a_thing_of_the_same_kind_told_for_another_place_or_person_does_not_answer(
    make_config: Callable[..., Config],
) -> None:
    """Of many similar facts, each question gets its own or none: "the wifi password at
    work" is not home's, "my favourite movie" not my favourite food, "my son's school"
    not my daughter's, "the combination for the garage" not the safe's; each fact is
    still found when asked for."""
    facts = [
        "The wifi password at home is BlueFalcon77.",
        "My favorite food is lasagna.",
        "The safe combination is 12-34-56.",
        "The locker at the pool is number 87.",
        "My daughter Ella's school is Oakwood Primary.",
        "My rabbit is called Thumper.",
    ]
    unsaid = [
        "What's the wifi password at work?",
        "What is my favourite movie?",
        "What's the combination for the garage?",
        "What number is my locker at the gym?",
        "Which school does my son go to?",
        "What's my guinea pig called?",
    ]
    said = {
        "What's the wifi password at home?": "BlueFalcon77",
        "What is my favourite food?": "lasagna",
        "What's the safe combination?": "12-34-56",
        "What number is my locker at the pool?": "87",
        "Which school does my daughter go to?": "Oakwood",
        "What's my rabbit called?": "Thumper",
    }
    await _told_then_asked(make_config, facts, unsaid, said)


async def test_a_yes_or_no_question_and_one_asked_of_me_are_not_confirmed_by_a_neighbour(
    make_config: Callable[..., Config],
) -> None:
    """ "Am I allergic to peanuts?" is not answered by "I'm allergic to penicillin" (it
    reads as a yes); "where do I live?" not by "Mum lives at …"; "when does my spotify
    renew?" not by "Netflix renews …"; "the water bill" not by the rent; "Sarah's
    wedding" not by her birthday. Each of those facts still answers its own question."""
    facts = [
        "I'm allergic to penicillin",
        "Mum lives at 7 Harbour Road, Whitby",
        "Netflix renews on the 9th",
        "Rent is £1,150, due on the 28th",
        "Sarah's birthday is 14 May",
    ]
    unsaid = [
        "Am I allergic to peanuts?",
        "where do I live?",
        "when does my spotify renew?",
        "when is the water bill due?",
        "when is Sarah's wedding?",
    ]
    said = {
        "Am I allergic to penicillin?": "penicillin",
        "where does my mum live?": "Harbour Road",
        "when does Netflix renew?": "9th",
        "when is the rent due?": "28th",
        "when is Sarah's birthday?": "14 May",
    }
    await _told_then_asked(make_config, facts, unsaid, said)


async def test_lower_case_chat_is_read_like_any_other(make_config: Callable[..., Config]) -> None:
    """Typed in a hurry: "hey im jonas, …" gives a name (kept as who he is, so it is
    answered once out of view), "so what do u know about me" asks, and "What a week,
    honestly." is no question to look up; "im starving" names nobody."""
    told, asked = "discord:9:1", "discord:9:2"
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        for i, line in enumerate(
            ["hey im jonas, 2nd year comp sci at tu delft", "im starving", "What a week, honestly."]
        ):
            await rt.submit(inbound(told, line, pid=f"t{i}", author="you"))
            await rt.drain()
        said = [o.text for o in rt.outbox.sent]
        assert said[0] == "Hey, Jonas! Noted: you're jonas, 2nd year comp sci at tu delft.", said
        assert not any("look further back" in s or "Nothing I could" in s for s in said), said
        await rt.memory.indexer.flush()
        for i, question in enumerate(["so what do u know about me", "whats my name"]):
            await rt.submit(inbound(asked, question, pid=f"q{i}", author="you"))
            await rt.drain()
        about, name = (o.text for o in rt.outbox.sent[-2:])
        assert about.startswith("Here is what you told me: you're jonas"), about
        assert name.startswith("Your name is Jonas: ") and "starving" not in name, name


async def test_work_it_cannot_do_and_trivia_are_not_searched_for(
    make_config: Callable[..., Config],
) -> None:
    """ "Can you review my PR?" and "Do you play any games?" are told what the offline
    bot can do, not "Nothing I could find"; "Did you know …?" tells something, said back
    without its lead; "Can you remember what my flight is?" still looks it up."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My flight is BA117.", "f1")
        assert (await _say(rt, "Can you review my PR?", "q1")).startswith("I can't do that")
        assert (await _say(rt, "Do you play any games?", "q2")).startswith("I'm a bot")
        trivia = await _say(rt, "Did you know croissants were originally Austrian?", "q3")
        assert trivia == "Noted: croissants were originally Austrian.", trivia
        assert "BA117" in await _say(rt, "Can you remember what my flight is?", "q4")
        assert not [o for o in rt.outbox.sent if "look further back" in o.text]


async def test_a_restatement_replaces_what_it_restates_and_what_stopped_keeps_its_sequel(
    make_config: Callable[..., Config],
) -> None:
    """ "Correction: butter is £6.40 per kilo" and "Actually, swap that: my shifts are
    now …" replace the line they restate (the old one is no longer listed as current;
    asked, the answer adds the new one), "the engineer moved to Friday" is added to "The
    fridge engineer is coming Thursday", and never a line that only shares a weekday.
    "We stopped buying eggs from X; we switched to Y" is quoted whole."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _tell(
            rt,
            [
                "Butter comes from Yeo Valley at £6.20 per kilo.",
                "My shifts this month are Monday, Wednesday and Friday nights.",
                "The fridge engineer is coming Thursday at 2pm.",
                "My husband Tom is an engineer.",
                "Correction: butter is £6.40 per kilo, they raised it last week.",
                "Actually the engineer moved to Friday at 10am.",
                "Actually, swap that: my shifts are now Tuesday, Thursday and Saturday nights.",
                "We stopped buying eggs from Hollow Farm; we switched to Wyke Farms.",
            ],
        )
        told = rt.outbox.sent[-2].text
        assert told == "Noted: your shifts are now Tuesday, Thursday and Saturday nights.", told
        engineer = await _say(rt, "When is the fridge engineer coming?", "q1")
        assert engineer.endswith("«Actually the engineer moved to Friday at 10am.»"), engineer
        assert "shifts" not in engineer, engineer
        butter = await _say(rt, "Where does our butter come from?", "q2")
        assert "Yeo Valley" in butter and "£6.40" in butter, butter
        # The restatement found first still says what it restates.
        price = await _say(rt, "Who supplies our butter?", "q2b")
        assert price.index("Yeo Valley") < price.index("Later, ann said"), price
        assert price.endswith("they raised it last week.»"), price
        eggs = await _say(rt, "Where do we get eggs now?", "q3")
        assert "Wyke Farms" in eggs, eggs
        about = await _say(rt, "What do you know about me?", "q4")
        for old in ("£6.20", "Monday", "Thursday at 2pm"):
            assert old not in about, (old, about)
        for new in ("£6.40", "Tuesday, Thursday and Saturday", "Friday at 10am", "an engineer"):
            assert new in about, (new, about)


async def test_forgetting_a_detail_or_with_a_reason_forgets_what_holds_it(
    make_config: Callable[..., Config],
) -> None:
    """ "forget the address" forgets the sentence that gave it (whatever the sentence is
    of), and "Forget that I'm mentoring Chidi, Oksana took that over" what it names, the
    reason left out; neither said "I had nothing of yours about that to forget"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _tell(
            rt,
            [
                "the LAN for Big Tom is at my flat, address 12 Harbour Road",
                "Chidi joined the team last week as a junior dev, I'm mentoring him.",
                "My gym code is 5521.",
            ],
        )
        done = await _say(rt, "forget the address", "x1")
        assert done.startswith("Done: I forgot"), done
        done = await _say(rt, "Forget that I'm mentoring Chidi, Oksana took that over.", "x2")
        # (that Chidi joined the team was not asked to be forgotten: it is kept)
        assert done == (
            "Done: I forgot that you're mentoring Chidi; I kept the rest: Chidi joined the "
            "team last week as a junior dev."
        ), done
        left = sorted(str(m["content"]) for m in await _memories(rt))
        assert left == [
            "ann: Chidi joined the team last week as a junior dev.",
            "ann: My gym code is 5521.",
        ], left
        assert "Harbour" not in await _say(rt, "where is the LAN?", "q1")
        assert "mentoring him" not in await _say(rt, "Who is mentoring Chidi?", "q2")


async def test_a_hurried_student_is_kept_and_answered(make_config: Callable[..., Config]) -> None:
    """All in lower case, with typos: "i work part time at a bike shop…" and "lotte is
    my ex now" are kept; "sofia switched groups so my lab partner is now tariq" is kept
    for its consequence and added to the old partner; a word the told line misspelled
    ("databses") is found by its right spelling; "where is annas wedding and when" asks
    when too, and the one line answering both is said once; a face ends its
    acknowledgement without a full stop after it; "Co." ends no sentence."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _tell(
            rt,
            [
                "i work part time at a bike shop on saturdays",
                "my lab partner for databses is sofia",
                "we broke up actually last week. lotte is my ex now",
                "sofia switched groups so my lab partner is now tariq",
                "my sister anna is getting married in june in utrecht",
            ],
        )
        acks = [o.text for o in rt.outbox.sent]
        assert acks[0] == "Noted: you work part time at a bike shop on saturdays.", acks
        assert acks[2].endswith("; and lotte is your ex now."), acks
        assert acks[3].startswith("Noted: sofia switched groups"), acks
        partner = await _say(rt, "who is my lab partner for databases", "q1")
        assert "sofia" in partner and partner.endswith("my lab partner is now tariq»"), partner
        wedding = await _say(rt, "where is annas wedding and when", "q2")
        assert wedding.count("married in june in utrecht") == 1, wedding
        assert "«" not in wedding.split("«my sister")[0], wedding  # no part named
        sad = await _say(rt, "Mo is moving to Canada in March :(", "q3")
        # (a sad face is met with sympathy; the news itself is kept as said)
        assert sad == "I'm sorry to hear that. Noted: Mo is moving to Canada in March :(", sad
        await _say(rt, "I like flat whites", "q4")
        gone = await _say(rt, "Forget that I like flat whites.", "q5")
        assert gone == "Done: I forgot that you like flat whites.", gone
        bakery = await _say(rt, "I run a small bakery called Crumb & Co. in Bristol.", "q6")
        assert bakery == "Noted: you run a small bakery called Crumb & Co. in Bristol.", bakery


async def test_what_we_do_is_answered_by_who_does_it(make_config: Callable[..., Config]) -> None:
    """ "What games do we play?" is answered by "… we play Deep Rock Galactic", not by
    "game night is every Thursday", which holds the question's rarer word; "when is game
    night?" still by the latter."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _tell(
            rt,
            [
                "I'm Kai, I run a Discord server called Midnight Raiders, we play Deep Rock "
                "Galactic and Helldivers 2",
                "Mo is the best scout, Jess always plays driller.",
                "remember that game night is every Thursday at 8pm UK time",
            ],
        )
        games = await _say(rt, "what games do we play?", "q1")
        assert "Helldivers 2" in games, games
        assert "driller" in await _say(rt, "what does Jess play?", "q2")
        assert "Thursday at 8pm" in await _say(rt, "when is game night?", "q3")


async def test_a_wedding_is_asked_of_a_marriage_told_long_ago(
    make_config: Callable[..., Config],
) -> None:
    """ "Where is Anna's wedding?" asks of "my sister anna is getting married in june in
    utrecht", recalled from memory (told in another channel): a name alone would not
    answer a detail never told, so the wedding must be the marriage."""
    told, asked = "discord:9:1", "discord:9:2"
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        for i, line in enumerate(
            ["my sister anna is getting married in june in utrecht", "anna loves tulips"]
        ):
            await rt.submit(inbound(told, line, pid=f"t{i}", author="you"))
            await rt.drain()
        await rt.memory.indexer.flush()
        await rt.submit(inbound(asked, "Where is Anna's wedding?", pid="q1", author="you"))
        await rt.drain()
        said = rt.outbox.sent[-1].text
        assert "married in june in utrecht" in said, said


async def test_forgetting_part_of_a_sentence_keeps_the_rest_of_it(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget where Ana lives" forgets Porto, not that she is a dentist; "forget the
    address" forgets the address, not where the party is.  Both are said in the reply,
    and both are still answered after the chat was compacted away."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await _say(rt, "I'm hosting the LAN party at my flat, the address is 14 Elm Road.", "a1")
        await _say(rt, "My sister Ana lives in Porto and works as a dentist.", "a2")
        said = await _say(rt, "Forget where Ana lives.", "a3")
        assert said == (
            "Done: I forgot what you told me about where Ana lives; "
            "I kept the rest: your sister Ana works as a dentist."
        ), said
        said = await _say(rt, "Forget the address.", "a4")
        assert said.endswith("I kept the rest: you're hosting the LAN party at your flat."), said
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert not live & {"a1", "a2"}, "the told lines should have been compacted away"
        said = await _say(rt, "What does Ana do?", "a5")
        assert "dentist" in said and "Porto" not in said, said
        said = await _say(rt, "Where is the LAN party?", "a6")
        assert "at my flat" in said and "Elm" not in said, said
        assert "Nothing I could find" in await _say(rt, "Where does Ana live?", "a7")
        kept = [str(m["content"]) for m in await _memories(rt)]
        assert not [k for k in kept if "Porto" in k or "Elm" in k], kept


async def test_a_kept_rest_the_store_cannot_save_is_told_back_not_lost(
    make_config: Callable[..., Config],
) -> None:
    """The forget went through but saving what else the sentence said fails: the reply
    says the forget is done, and tells back what could not be kept so it can be told
    again; nothing claims it was kept."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        graph = rt.memory.graph
        await _say(rt, "My sister Ana lives in Porto and works as a dentist.", "b1")
        await rt.memory.indexer.flush()

        async def failing_save(items: object) -> object:
            raise OSError("disk I/O error")

        graph.save_many = failing_save  # type: ignore[method-assign,assignment]
        said = await _say(rt, "Forget where Ana lives.", "b2")
        assert said.startswith("Done: I forgot what you told me about where Ana lives."), said
        assert "I kept" not in said, said
        assert (
            "I could not keep the rest of it (the memory store failed (OSError)): "
            "your sister Ana works as a dentist." in said
        ), said
        assert [m for m in await _memories(rt) if "Porto" in str(m["content"])] == []


async def test_a_number_forgotten_alone_whose_rest_cannot_be_saved_is_told_back(
    make_config: Callable[..., Config],
) -> None:
    """ "forget my account number" of "my bank details for fees: sort code 20-45-67
    account 33445566" with the store failing to save what is left: the number is gone,
    and the sort code is told back as not kept (never "I kept the rest")."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        graph = rt.memory.graph
        line = "my bank details for fees: sort code 20-45-67 account 33445566"
        await _say(rt, line, "k1", author="liam")
        await rt.memory.indexer.flush()

        async def failing_save(items: object) -> object:
            raise OSError("disk I/O error")

        graph.save_many = failing_save  # type: ignore[method-assign,assignment]
        said = await _say(rt, "forget my account number, just pay me cash", "k2", author="liam")
        assert said.startswith("Done: I forgot what you told me about your account number."), said
        assert "I kept" not in said, said
        assert "I could not keep the rest of it (the memory store failed (OSError))" in said, said
        assert "sort code 20-45-67" in said and "33445566" not in said, said
        assert [m for m in await _memories(rt) if "33445566" in str(m["content"])] == []


async def test_a_forget_with_a_reason_after_it_forgets_and_keeps_the_rest(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget that the password is in the vault, we shouldn't keep that here" was
    answered "I had nothing of yours about that to forget" and the secret stayed: the
    reason ("we shouldn't …") was read as part of what to forget.  Now the password
    line goes and the staging address said with it stays."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Staging is at staging.orbit.internal, the password is in the vault.", "v1")
        said = await _say(
            rt, "Forget that the password is in the vault, we shouldn't keep that here.", "v2"
        )
        assert said == (
            "Done: I forgot that the password is in the vault; "
            "I kept the rest: Staging is at staging.orbit.internal."
        ), said
        assert "vault" not in await _say(rt, "Where is the password?", "v3")
        assert "staging.orbit.internal" in await _say(rt, "Where is staging?", "v4")
        kept = [str(m["content"]) for m in await _memories(rt)]
        assert not [k for k in kept if "vault" in k], kept


async def test_a_forget_right_after_the_telling_finds_it_and_its_echo(
    make_config: Callable[..., Config],
) -> None:
    """Said a moment ago and not yet indexed (nor saved: the bot only said "OK."), a
    line was not found by "Forget where Ana lives" ("I had nothing of yours…") and was
    quoted back later; the bot's own "Noted: …" of a PIN stayed searchable after the PIN
    was forgotten.  The forget now waits for live indexing to catch up."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Ana lives in Porto, and so does her ex-husband.", "n1")
        said = await _say(rt, "Forget where Ana lives.", "n2")
        assert said.startswith("Done: I forgot what you told me about where Ana lives"), said
        assert "I kept" not in said, said  # "so does her ex-husband" says where too
        await _say(rt, "My brother Tom lives at 12 Elm Street and his PIN is 4821.", "n3")
        said = await _say(rt, "Forget his PIN.", "n4")
        assert said.endswith("I kept the rest: your brother Tom lives at 12 Elm Street."), said
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        left = [n["content"] for n in await _nodes(rt) if "4821" in str(n["content"])]
        assert left == [], left
        left = [n["content"] for n in await _nodes(rt) if "Porto" in str(n["content"])]
        assert left == [], left
        assert "Porto" not in await _say(rt, "Where does Ana live?", "n5")


async def test_what_a_forget_keeps_is_dated_as_it_was_said(
    make_config: Callable[..., Config],
) -> None:
    """A line said after the sentence a forget cut stays later than what the forget
    kept of it: "When is the dinner?" still quotes Luigi's on Friday, then "Later, …
    Mario's instead", not the kept part as the newest word."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(
            rt, "The dinner is at Luigi's on Friday and Jo's surprise gift is a watch.", "d1"
        )
        await _say(rt, "Actually, the dinner is at Mario's instead.", "d2")
        said = await _say(rt, "Forget Jo's surprise gift.", "d3")
        assert "I kept the rest: the dinner is at Luigi's on Friday." in said, said
        kept = [n for n in await _memories(rt) if "Luigi" in str(n["content"])]
        later = [n for n in await _memories(rt) if "Mario" in str(n["content"])]
        assert kept and later, (kept, later)
        assert float(str(kept[0]["created_at"])) < float(str(later[0]["created_at"]))
        said = await _say(rt, "When is the dinner?", "d4")
        assert "Luigi's on Friday.» Later," in said and "Mario's" in said, said


async def test_a_forget_whose_indexing_cannot_catch_up_still_forgets_and_warns(
    make_config: Callable[..., Config],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Live indexing stuck (a long burst elsewhere): the forget waits a bounded time,
    logs a warning naming the wait, and forgets what it can find; the turn is answered."""
    from structlog.testing import capture_logs

    import channels.memory_access as access

    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "Remember that my locker code is 4411.", "s1")
        stuck = asyncio.Event()

        async def never_catches_up() -> None:
            await stuck.wait()

        monkeypatch.setattr(rt.memory.indexer, "flush", never_catches_up)
        monkeypatch.setattr(access, "_FORGET_CATCH_UP_SECONDS", 0.05)
        with capture_logs() as logs:
            said = await _say(rt, "Forget my locker code.", "s2")
        assert said == "Done: I forgot what you told me about your locker code.", said
        assert [e for e in logs if e["event"] == "memory.forget_before_indexed"], logs
        assert await _memories(rt) == []
        monkeypatch.undo()  # shutting down flushes the indexer too


async def test_forget_everything_about_someone_forgets_what_was_said_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget everything about Tom" answered "I had nothing of yours about that to
    forget (everything about Tom)" and kept him; "Forget where the dinner is" was said
    back as "I forgot that where the dinner is"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "My brother Tom works as a chef.", "e1")
        await _say(rt, "The dinner is at Luigi's on Friday.", "e2")
        said = await _say(rt, "Forget everything about Tom.", "e3")
        assert said == "Done: I forgot what you told me about Tom.", said
        said = await _say(rt, "Forget where the dinner is.", "e4")
        assert said == "Done: I forgot what you told me about where the dinner is.", said
        assert await _memories(rt) == []
        said = await _say(rt, "Forget everything.", "e5")  # still one thing at a time
        assert said.startswith("I can't forget everything at once"), said


async def test_a_forget_takes_a_he_line_said_of_whom_it_names(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget what Dad takes" left "He also takes amlodipine every morning" in memory
    (it names no Dad); Mum's line stays, and so does a "He" line after hers."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _tell(
            rt,
            [
                "Dad takes metformin with breakfast.",
                "He also takes amlodipine every morning.",
                "Mum takes aspirin.",
            ],
        )
        said = await _say(rt, "Forget what Dad takes.", "f1")
        assert said.startswith("Done: I forgot"), said
        left = [str(n["content"]) for n in await _nodes(rt)]
        assert not [x for x in left if "amlodipine" in x or "metformin" in x], left
        assert any("aspirin" in x for x in left), left


async def test_forgets_as_people_word_them_forget_what_they_name_and_keep_the_rest(
    make_config: Callable[..., Config],
) -> None:
    """Each of these said "I had nothing of yours about that to forget" and left the
    memory in place: a reason after a comma ("…, it makes me sad to see it"), "entirely",
    a number told in passing in a line about someone else, two things at once, and
    "cancel …, forget it completely". What else such a line said is kept."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _tell(
            rt,
            [
                "Mia's best friend is Zoe, her mom is Karen, phone 555-0142",
                "My wife Edna passed away two years ago. I miss her.",
                "I take metformin 500 mg twice a day, and atorvastatin 20 mg at bedtime",
                "Joe's inhaler is in the blue bag.",
                "The school trip is on 3 June.",
                "The tea ceremony is on Oct 9 at 2pm, ref TC-4481.",
            ],
        )
        wife = await _say(rt, "Please forget about my wife, it makes me sad to see it.", "f1")
        drug = await _say(rt, "forget the atorvastatin entirely", "f2")
        phone = await _say(rt, "forget Karen's phone number", "f3")
        two = await _say(rt, "Forget Joe's inhaler and the school trip.", "f4")
        tea = await _say(rt, "cancel the tea ceremony, forget it completely - Lucia won't go", "f5")
        me = await _say(rt, "What do you know about me?", "q1")
        shown = {
            word: await rt.command(inbound(CH, f"/memory {word}"), is_admin=True)
            for word in ("Edna", "atorvastatin", "555-0142", "inhaler", "trip", "ceremony")
        }
    assert wife.startswith("Done: I forgot") and "your wife" in wife, wife
    assert drug.startswith("Done") and "metformin 500 mg twice a day" in drug, drug
    assert phone.startswith("Done") and "Mia's best friend is Zoe" in phone, phone
    assert two == "Done: I forgot what you told me about Joe's inhaler and the school trip.", two
    assert tea.startswith("Done") and "tea ceremony" in tea, tea
    for word, listed in shown.items():
        assert listed == "I remember nothing about that.", (word, listed)
    assert "metformin" in me and "Zoe" in me, me
    for gone in ("Edna", "atorvastatin", "555", "inhaler", "trip", "ceremony"):
        assert gone not in me, (gone, me)


async def test_a_forget_followed_by_what_to_do_instead_forgets_the_thing(
    make_config: Callable[..., Config],
) -> None:
    """ "forget my phone number please, just email me instead" was told there was nothing
    of hers to forget (the thing read as "my phone number please, just email me instead")
    and the number was still given out; "forget my account number, just pay me cash" the
    same.  What to do instead is no part of what goes."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "my phone number for photo stuff is 07911 123456", "a1", author="nina")
        await _say(rt, "we've got 35 guests confirmed so far", "a2", author="helen")
        said = await _say(
            rt, "forget my phone number please, just email me instead", "a3", author="nina"
        )
        assert said.startswith("Done: I forgot"), said
        await _say(rt, "my bank details: sort code 20-45-67 account 33445566", "b1", author="liam")
        said = await _say(rt, "forget my account number, just pay me cash", "b2", author="liam")
        assert said.startswith("Done: I forgot"), said
        kept = " ".join(str(m["content"]) for m in await _memories(rt))
        assert "07911" not in kept and "33445566" not in kept, kept
        assert "35 guests" in kept, kept


async def test_a_to_do_moved_long_ago_is_listed_as_moved_in_a_small_window(
    make_config: Callable[..., Config],
) -> None:
    """At a 2,048-token window, "what did I ask you to remind me?" listed "Biscuit's
    booster vaccine is due on october 3" after "actually the booster moved to october
    10": both were compacted away, and the recall for to-dos finds only to-dos.  What
    moved them is asked for too, and stands in their place."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await _say(rt, "Biscuit's booster vaccine is due on october 3", "d1")
        await _say(rt, "remind me to buy flea treatment on the 1st of every month", "d2")
        await _say(rt, "actually Hannah the walker switched to tue and thu at noon", "d3")
        await _say(rt, "actually the booster moved to october 10", "d4")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert not live & {"d1", "d2", "d3", "d4"}, "the told lines should be compacted away"
        said = await _say(rt, "what did I ask you to remind me?", "d5")
        assert said.startswith("Your to-dos: "), said
        assert "october 10" in said and "october 3" not in said, said
        assert "flea treatment" in said and "Hannah" not in said, said


async def test_a_to_do_list_whose_changes_cannot_be_looked_up_says_so(
    make_config: Callable[..., Config],
) -> None:
    """The recall asking what moved the to-dos fails: the list found is given, and says
    it may be out of date and why, not passed off as current."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "Biscuit's booster vaccine is due on october 3", "d1")
        await _say(rt, "actually the booster moved to october 10", "d2")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        access = rt.memory.access()
        real = access.recall_from_tool

        async def failing(arguments: dict[str, object], **kwargs: object) -> str:
            if "actually moved" in str(arguments.get("query")):
                raise OSError("disk I/O error")
            return await real(arguments, **kwargs)  # type: ignore[arg-type]

        access.recall_from_tool = failing  # type: ignore[method-assign,assignment]
        said = await _say(rt, "what did I ask you to remind me?", "d3")
        assert said.startswith("Your to-dos: Biscuit's booster vaccine is due on october 3"), said
        assert said.endswith(
            "(I could not check whether any of them changed since: "
            "the memory store failed (OSError); nothing was changed.)"
        ), said


async def test_a_line_answering_by_its_value_alone_is_found_further_back(
    make_config: Callable[..., Config],
) -> None:
    """ "How old is biscuit?" at a 2,048-token window found nothing: "Biscuit is 7 and
    Juno is 3" shares only the name with the question, as other lines about Biscuit do,
    and came ninth of the lines the look further back brought five of."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        for i, line in enumerate(
            [
                "hello! I have two dogs, Biscuit a beagle and Juno a border collie",
                "Biscuit is 7 and Juno is 3",
                "Biscuit takes Apoquel 16mg once a day for his itchy skin",
                "Biscuit's booster vaccine is due on october 3",
                "Biscuit's apoquel dose went down to 8mg from now on",
                "Biscuit had a lump removed on sept 9, biopsy came back fine phew",
                "i'm really worried, Biscuit has been limping and won't eat",
                "actually the booster moved to october 10",
            ]
        ):
            await _say(rt, line, f"d{i}")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert "d1" not in live, "the told line should be compacted away"
        said = await _say(rt, "how old is biscuit?", "q1")
        assert "Biscuit is 7 and Juno is 3" in said, said


async def test_a_forget_in_other_words_than_what_was_told_forgets_it(
    make_config: Callable[..., Config],
) -> None:
    """In a group, forgets said in other words than the lines they name were told
    "I had nothing of yours about that to forget" (a claim that was false) or "OK.",
    and the line was quoted to others later: "forget my allergy thing actually" of
    "i'm allergic to peanuts …", "forget that i owe jonas money" of "i owe jonas 12
    quid …", and "oh yeah lol sorry. forget that then" after "remember that ravi owes
    me £15 …"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "i'm allergic to peanuts so no peanut stuff pls jonas", "m1", author="mei")
        await _say(rt, "i'm allergic to peanuts as well, since i was a kid", "j1", author="jonas")
        await _say(rt, "btw i owe jonas 12 quid for the pizza", "a1", author="aisha")
        await _say(rt, "remember that ravi owes me £15 for the takeaway", "z1", author="zoe")
        await _say(
            rt, "actually i paid you back zoe, yesterday, check ur bank", "r1", author="ravi"
        )
        said = await _say(rt, "oh yeah lol sorry. forget that then", "z2", author="zoe")
        # (the reply is kept like any other: it does not say the line again)
        assert said == "Done: I forgot what you just told me.", said
        said = await _say(
            rt, "forget my allergy thing actually, i'll tell jonas myself", "m2", author="mei"
        )
        assert "Done: I forgot" in said and "nothing of yours" not in said, said
        assert "Noted" not in said, said  # "i'll tell jonas myself" is why, nothing to keep
        said = await _say(
            rt, "forget that i owe jonas money, i paid him back today", "a2", author="aisha"
        )
        assert said.startswith("Done: I forgot") and "nothing" not in said, said
        await rt.memory.indexer.flush()  # type: ignore[union-attr]
        kept = [str(n["content"]) for n in await _nodes(rt)]  # the bot's echoes too
        gone = [k for k in kept if "peanut stuff" in k or "12 quid" in k or "£15" in k]
        assert not gone, gone
        # only the asker's own lines go: Jonas's allergy stays
        assert [k for k in kept if "peanuts as well" in k and k.startswith("jonas")], kept
        for question in ("is mei allergic to anything?", "who owes money?"):
            said = await _say(rt, question, f"q{len(question)}", author="tom")
            assert "peanut stuff" not in said and "quid" not in said and "£15" not in said, said


async def test_a_forget_whose_own_memories_cannot_be_read_says_so(
    make_config: Callable[..., Config],
) -> None:
    """The search by the request's words finds none of the asker's lines and reading
    their own memories fails: the reply says the store failed, never "I had nothing
    of yours about that to forget", and the line is still there to forget again."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        graph = rt.memory.graph
        await _say(rt, "i'm allergic to peanuts so no peanut stuff pls jonas", "m1", author="mei")
        await _say(rt, "btw i owe jonas 12 quid for the pizza", "a1", author="aisha")
        await _say(rt, "remember that ravi owes me £15 for the takeaway", "z1", author="zoe")
        await rt.memory.indexer.flush()
        real = graph.memories_of

        async def failing(*args: object, **kwargs: object) -> list[object]:
            raise OSError("disk I/O error")

        graph.memories_of = failing  # type: ignore[method-assign]
        said = await _say(rt, "forget my allergy thing", "m2", author="mei")
        assert "the memory store failed (OSError)" in said, said
        assert "nothing of yours" not in said and "Done" not in said, said
        graph.memories_of = real  # type: ignore[method-assign]
        said = await _say(rt, "forget my allergy thing", "m3", author="mei")
        assert said.startswith("Done: I forgot"), said


async def test_what_a_forget_says_after_its_thing_is_kept_without_the_pointing_word(
    make_config: Callable[..., Config],
) -> None:
    """ "forget the oven service thing, phil rescheduled and i'll tell you later" kept
    "thing, phil rescheduled and you'll tell you later": the word pointing at what goes
    is no part of what was told after it."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "note that the oven service is booked for the 15th, engineer is phil", "o1")
        said = await _say(
            rt, "forget the oven service thing, phil rescheduled and i'll tell you later", "o2"
        )
        assert said.startswith("Noted: «phil rescheduled and i'll tell you later»."), said
        assert "Done: I forgot what you told me about the oven service" in said, said


async def test_looking_further_back_leaves_the_answer_room_to_say_what_changed(
    make_config: Callable[..., Config],
) -> None:
    """At a 2,048-token window, "what's the venue called?" looked further back and
    said only «the venue is Holloway Barn in Kent, booked for june 14th»: ten hits of
    each search left the answer no room for "Later, … moved our date to june 21st"."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        for i, line in enumerate(
            [
                "hey!! so we're finally planning the wedding lol, i'm Priya and my fiance is Tom",
                "the venue is Holloway Barn in Kent, booked for june 14th",
                "we paid a £2,500 deposit for the venue on march 3",
                "caterer is Olive & Fig, our contact there is Marta",
                "guest count so far is 120 - toms side 65 and mine 55",
                "photographer is Jess Lowry, she charges £1,800 for the full day",
                "actually the venue moved our date to june 21st bc of a double booking",
                "catering deposit is £1,000, due by may 1",
                "the cake is lemon and elderflower, three tiers, made by a lady called Gwen",
            ]
        ):
            await _say(rt, line, f"w{i}")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert not live & {"w1", "w6"}, "the told lines should be compacted away"
        said = await _say(rt, "what's the venue called?", "q1")
        assert "Holloway Barn" in said and "june 21st" in said, said


async def test_can_someone_forget_whose_store_fails_says_so_and_keeps_the_message(
    make_config: Callable[..., Config],
) -> None:
    """ "can someone forget my ankle stuff" in a group, the store failing on the forget:
    the reply says the store failed (never "OK", never "Done"), the request is stored,
    and asking again once the store is back forgets the line."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "remember that my ankle is sprained, no football for 2 weeks", "p1", "priya")
        await _say(rt, "five a side is thursday at 7pm", "k1", author="kofi")
        said = await _said_while_forgets_fail(
            rt, "can someone forget my ankle stuff", "p2", author="priya"
        )
        assert "the memory store failed (OSError)" in said, said
        assert "Done" not in said and not said.startswith("OK"), said
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["p1", "k1", "p2"]
        said = await _say(rt, "can someone forget my ankle stuff", "p3", author="priya")
        assert said.startswith("Done: I forgot"), said


async def test_whats_his_number_after_who_is_someone_is_theirs_further_back(
    make_config: Callable[..., Config],
) -> None:
    """At a 2,048-token window, "who is tiago?" found the line saying who he is, and
    "whats his number?" right after it found nothing: a name written small was not
    taken as the one "his" stands for, so the look further back asked for anyone's
    number."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await _say(
            rt, "the agent for both flats is called tiago, his whatsapp is +351 912 345 678", "d1"
        )
        await _say(rt, "shipping quotes so far: movebox £2100, seven seas £1850", "d2")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert "d1" not in live, "the told line should be compacted away"
        who = await _say(rt, "who is tiago?", "q1")
        assert "called tiago" in who, who
        said = await _say(rt, "whats his number?", "q2")
        assert "+351 912 345 678" in said, said


async def test_a_job_taken_back_whose_store_fails_says_so_and_keeps_the_message(
    make_config: Callable[..., Config],
) -> None:
    """ "actually i cant bring the bibs", the store failing on the forget of the job:
    the reply says the store failed (never "Corrected", never "OK"), the message is
    stored, and once the store is back, saying it again takes the job off the to-dos."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "ill bring the bibs, theyre in my boot anyway", "t1", "tom")
        await _say(rt, "how's everyone's week going", "p1", author="priya")
        said = await _said_while_forgets_fail(
            rt, "actually i cant bring the bibs, car's in the garage", "t2", "tom"
        )
        assert "the memory store failed (OSError)" in said, said
        assert not said.startswith(("Corrected", "OK")), said
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["t1", "p1", "t2"]
        said = await _say(rt, "actually i cant bring the bibs, car's in the garage", "t3", "tom")
        assert said.startswith("Corrected: you cant bring the bibs"), said
        said = await _say(rt, "what do i need to do?", "t4", "tom")
        assert "bibs" not in said, said


async def test_a_forget_with_its_reason_written_small_forgets_the_thing(
    make_config: Callable[..., Config],
) -> None:
    """ "forget the boat cost, its paid by the project" answered "I had nothing of yours
    about that to forget (the boat cost, its paid by the project)": the reason after the
    comma, its "its" written without the apostrophe, was looked for as part of the
    thing."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "guest list so far is about 30", "t1")
        await _say(rt, "boat is with scilly marine charters, 01720 422 900, costs 340 a day", "t2")
        said = await _say(rt, "forget the guest list number, its changing every day", "t3")
        assert said == "Done: I forgot what you told me about the guest list number.", said
        said = await _say(rt, "forget the boat cost, its paid by the project", "t4")
        assert said.startswith("Done: I forgot what you told me about the boat cost;"), said
        said = await _say(rt, "how much does the boat cost?", "t5")
        assert "340" not in said, said


async def test_no_to_do_kept_but_a_need_told_in_passing_is_shown(
    make_config: Callable[..., Config],
) -> None:
    """ "what do i need to do?" answered "You haven't asked me to remember a to-do" after
    "gels: …, need to order more" and "new trainers: …, need to break them in" at a
    2,048-token window: what was said to be needed in passing is shown, said to be no
    to-do."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await _say(rt, "gels: i use sis beta fuel, need to order more, they are 2.50 each", "d1")
        await _say(rt, "new trainers: asics novablast 4, cost 130, need to break them in", "d2")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert not live & {"d1", "d2"}, "the told lines should be compacted away"
        said = await _say(rt, "what do i need to do?", "q1")
        assert said.startswith("You haven't asked me to remember a to-do, but you said:"), said
        assert "need to order more" in said and "need to break them in" in said, said


async def test_a_need_told_in_passing_whose_lookup_fails_says_so(
    make_config: Callable[..., Config],
) -> None:
    """No to-do kept, and the store failing on the look for needs told in passing: the
    answer says no to-do was asked for and that the rest could not be looked for,
    never that there is nothing."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "gels: i use sis beta fuel, need to order more, they are 2.50 each", "d1")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        access = rt.memory.access()
        real = access.recall_from_tool

        async def failing(arguments: dict[str, object], **kwargs: object) -> str:
            if arguments.get("query") == "need to have to":
                raise OSError("disk I/O error")
            return await real(arguments, **kwargs)  # type: ignore[arg-type]

        access.recall_from_tool = failing  # type: ignore[method-assign,assignment]
        said = await _say(rt, "what do i need to do?", "q1")
        assert said == (
            "You have no to-dos that I know of. (I could not look for what you said you "
            "need to do: the memory store failed (OSError); nothing was changed.)"
        ), said


async def test_a_list_asked_with_some_of_it_compacted_away_is_looked_up(
    make_config: Callable[..., Config],
) -> None:
    """At a 2,048-token window "what deadlines do i have?" gave only the deadline still
    in view: the rest, compacted away, are in memory and are looked up too."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await _say(rt, "grant deadline is 15 june, form is on the grad school website", "d1")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        await _say(rt, "chapter 2 deadline moved to 16 may, helen is away", "d2")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert "d1" not in live and "d2" in live, "only the first deadline is compacted"
        said = await _say(rt, "what deadlines do i have?", "q1")
        assert "16 may" in said and "15 june" in said, said


async def test_a_to_do_said_done_whose_store_fails_says_so_and_keeps_the_message(
    make_config: Callable[..., Config],
) -> None:
    """ "booked the leave", the store failing on crossing off the to-do: the reply
    says the store failed (never "Done"), the message is stored, the to-do stays on
    the list, and saying it again once the store is back crosses it off."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "remind me to book annual leave for the exam week", "t1")
        said = await _said_while_forgets_fail(rt, "booked the leave", "t2")
        assert said.startswith("I could not cross it off your to-dos: "), said
        assert "the memory store failed (OSError)" in said and ".." not in said, said
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["t1", "t2"]
        said = await _say(rt, "what do i need to do?", "t3")
        assert "book annual leave" in said, said
        said = await _say(rt, "booked the leave", "t4")
        assert said.startswith("Done: I crossed it off your to-dos"), said
        said = await _say(rt, "what do i need to do?", "t5")
        assert "annual leave" not in said, said


async def test_a_to_do_crossed_off_whose_store_fails_is_no_to_do_missing(
    make_config: Callable[..., Config],
) -> None:
    """ "I watered the plants, cross it off my list", the store failing: the reply said
    "I had no to-do of yours like that to cross off", an error told as nothing found."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "Remind me to water the plants.", "t1")
        said = await _said_while_forgets_fail(
            rt, "I watered the plants, cross it off my list", "t2"
        )
        assert said.startswith("I could not cross it off your to-dos: "), said
        assert "no to-do" not in said, said


async def test_a_to_do_said_done_after_it_was_compacted_away_is_crossed_off(
    make_config: Callable[..., Config],
) -> None:
    """At a 2,048-token window, "booked the leave" got "OK.": "remind me to book annual
    leave" had been summarized away, though the bot had just listed it back."""
    cfg = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await _say(rt, "remind me to book annual leave for the exam week", "d1")
        await _say(rt, "remind me to ring the gp about mum's flu jab", "d2")
        for i, line in enumerate(SMALL_TALK * 2):
            await _say(rt, line, f"f{i}", author="bo")
        live = {m.platform_id for m in rt.registry.actors[CH].ctx.items}
        assert not live & {"d1", "d2"}, "the to-dos should be compacted away"
        said = await _say(rt, "what do i need to do", "d3")
        assert "book annual leave" in said, said
        said = await _say(rt, "booked the leave", "d4")
        assert (
            said == "Done: I crossed it off your to-dos (book annual leave for the exam week)."
        ), said
        said = await _say(rt, "what's left on my to do list", "d5")
        assert "ring the gp" in said and "annual leave" not in said, said


async def test_a_to_do_said_done_after_it_left_the_view_leaves_the_list(
    make_config: Callable[..., Config],
) -> None:
    """A wedding planner's "sent the save the dates yesterday" came after the request
    and the bot's listing of it were compacted away (a 2,048-token window): nothing
    crossed it off, and "what do i still need to do" listed it for the rest of the chat.
    The list now leaves out a to-do its asker said was done since; with none left, it
    says so and why."""
    config = make_config({**MEMORY, "defaults": {"context_window": 2048}})
    async with Runtime.open(config, llm=OfflineProvider()) as rt:
        await _say(rt, "remind me to send save the dates", "w1")
        for k in range(8):
            for i, line in enumerate(SMALL_TALK):
                await _say(rt, line, f"w-talk-{k}-{i}")
            live = " ".join(m.text for m in await rt.store.load_live(CH))
            if "save the dates" not in live:
                break
        assert "save the dates" not in live, "the request is still in view"
        await _say(rt, "sent the save the dates yesterday", "w2")
        said = await _say(rt, "what do i still need to do", "w3")
        assert "save the dates yesterday" in said and "Your to-dos" not in said, said
        await _say(rt, "remind me to book the florist", "w4")
        said = await _say(rt, "what do i still need to do", "w5")
        assert said == "Your to-dos: book the florist.", said


async def test_what_i_know_about_you_tells_a_memory_cut_from_a_line_once(
    make_config: Callable[..., Config],
) -> None:
    """A dog walker's "what do you know about me" listed "Jess starts earlier now" (a
    memory a compaction cut from her line) beside "Nala's walk moved to 6.45am, jess
    starts earlier now", the line it was cut from."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "Nala's walk moved to 6.45am, jess starts earlier now", "n1")
        await rt.memory.graph.save(
            "ann: Jess starts earlier now", "event", channel=CH, author_id="ann"
        )
        about = await _say(rt, "what do you know about me", "n2")
        assert about.lower().count("starts earlier now") == 1, about


async def test_a_to_do_marked_done_without_its_verb_is_crossed_off(
    make_config: Callable[..., Config],
) -> None:
    """ "done the oat milk order", "boiler serviced yesterday, done" and "restrung, done"
    got "OK." and stayed on the list: a line marking something done that names a to-do
    crosses it off.  "done with work, knackered" names none."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "remind me to order more oat milk by thursday", "k1")
        await _say(rt, "remind me to get the boiler serviced before gary starts", "k2")
        await _say(rt, "remind me to restring my bass before the gig", "k3")
        await _say(rt, "remind me to finish the tax return", "k4")
        said = await _say(rt, "done the oat milk order", "k5")
        assert said == "Done: I crossed it off your to-dos (order more oat milk by thursday).", said
        said = await _say(rt, "boiler serviced yesterday, done", "k6")
        assert said.startswith("Done: I crossed it off your to-dos (get the boiler"), said
        said = await _say(rt, "restrung, done", "k7")
        assert said.startswith("Done: I crossed it off your to-dos (restring"), said
        said = await _say(rt, "done with work, knackered", "k8")
        assert not said.startswith("Done:"), said
        assert await _say(rt, "what do i need to do", "k9") == "Your to-dos: finish the tax return."
        await _say(rt, "finished the tax return, done", "k10")
        said = await _say(rt, "what do i need to do", "k11")
        assert said == "You have no to-dos that I know of.", said


async def test_a_to_do_marked_done_whose_store_fails_says_so(
    make_config: Callable[..., Config],
) -> None:
    """ "restrung, done", the store failing on crossing the to-do off: the reply says the
    store failed (never "Done"), and the message is stored.  The list then tells the
    to-do was said done, quoting the line (the memory is still there); said again once
    the store is back, it is crossed off."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _say(rt, "remind me to restring my bass before the gig", "r1")
        said = await _said_while_forgets_fail(rt, "restrung, done", "r2")
        assert said.startswith("I could not cross it off your to-dos: "), said
        assert "the memory store failed (OSError)" in said, said
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["r1", "r2"]
        said = await _say(rt, "what do i need to do?", "r3")
        assert said.startswith("You have no to-dos left that I know of; the last you said "), said
        assert said.endswith("«restrung, done»"), said
        assert [m for m in await _memories(rt) if m["type"] == "todo"], "the to-do is kept"
        said = await _say(rt, "restrung, done", "r4")
        assert said.startswith("Done: I crossed it off your to-dos (restring"), said
        assert [m for m in await _memories(rt) if m["type"] == "todo"] == []


async def test_a_debt_asked_whose_save_fails_is_not_noted(
    make_config: Callable[..., Config],
) -> None:
    """ "can everyone pay me back for the internet, £12.50 each" with the memory graph's
    connection closed: the reply says the save failed, never "Noted", and the message
    is stored."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _say(rt, "morning all", "m0", author="tom")
        await rt.memory.graph.storage.connection.close()  # type: ignore[attr-defined]
        said = await _say(
            rt, "can everyone pay me back for the internet, £12.50 each", "m1", author="priya"
        )
        assert said.startswith("I could not save that: the memory store failed"), said
        assert "Noted" not in said, said
        stored = [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]
        assert stored == ["m0", "m1"]
