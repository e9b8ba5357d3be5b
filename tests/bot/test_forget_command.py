"""``/forget ID`` as a person sees it: the memory, the messages that told it and the
answers that repeated it stop being used, while the archive keeps them; "/forget that …"
is a request in words, not the admin command."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from bot.adapters.console import ConsoleAdapter
from bot.commands import command_name
from bot.runtime import Runtime
from tests.helpers import inbound, wait_for
from tierbot.config import Config, ConsoleAdapterConfig
from tierbot.llm.base import ToolCall
from tierbot.llm.offline import OfflineProvider
from tierbot.messages import Role, State
from workers.tools import builtin_tools

CH = "chat:1"
MEMORY = {"memory": {"enabled": True}}
#: Summaries short enough to be smaller than what they replace.
SHORT_SUMMARIES = {**MEMORY, "defaults": {"compaction": {"max_summary_tokens": 120}}}


async def _told(rt: Runtime, text: str, pid: str, author: str = "ann") -> str:
    """Say ``text``; the bot's last reply once every answer (a late one too) is in."""
    await rt.submit(inbound(CH, text, pid=pid, author=author))
    await rt.drain()
    return rt.outbox.sent[-1].text


async def _fact_id(rt: Runtime, says: str) -> str:
    assert rt.memory is not None
    await rt.memory.indexer.flush()
    found = [
        n["id"]
        async for n in rt.memory.graph.export()
        if n["kind"] == "node" and n["type"] != "episode" and says in str(n["content"])
    ]
    assert len(found) == 1, found
    return str(found[0])


async def _live(rt: Runtime) -> list[str]:
    actor = await rt.registry.actor(CH)
    return [m.text for m in actor.ctx.items]


async def test_forget_by_id_stops_the_bot_using_what_the_memory_said(
    make_config: Callable[..., Config],
) -> None:
    """After "/forget ID" the bot no longer answers with the forgotten value: not from the
    memory, not from the message that told it (live or archived), not from its own earlier
    answer.  The message is still in the archive, and what else was said stays in view."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _told(rt, "Remember that my locker code is 4411.", "a1")
        await _told(rt, "My bike is green.", "a2")
        assert "4411" in await _told(rt, "What is my locker code?", "a3")
        memory_id = await _fact_id(rt, "4411")

        reply = await rt.command(inbound(CH, f"/forget {memory_id}"), is_admin=True)
        assert reply == (
            f"Forgot memory {memory_id}. 3 messages that said it left the conversation"
            " (archived: /history --all shows them)."
        )
        live = await _live(rt)
        assert not [t for t in live if "4411" in t], live
        assert "My bike is green." in live
        # The archive keeps what the person said.
        kept = {m.platform_id: m async for m in rt.store.export(CH)}
        assert kept["a1"].text == "Remember that my locker code is 4411."
        assert kept["a1"].state is State.ARCHIVED

        answer = await _told(rt, "What is my locker code?", "a4")
        assert "4411" not in answer and "4411" not in " ".join(o.text for o in rt.outbox.sent[4:])
        await rt.memory.indexer.flush()
        hits = await rt.memory.search("locker code 4411", channel=CH)
        assert not [h for h in hits if "4411" in h["content"]], hits
        # What the person said about something else is still known.
        assert "green" in await _told(rt, "What color is my bike?", "a5")


async def test_forget_by_id_leaves_what_someone_else_said(
    make_config: Callable[..., Config],
) -> None:
    """Ann's memory is forgotten; Bob's message saying the same of his own locker, and the
    bot's reply to him, stay in the conversation, and so does his memory."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _told(rt, "Remember that my locker code is 4411.", "a1")
        await _told(rt, "Remember that my locker code is 4411 too.", "b1", author="bob")
        await rt.memory.indexer.flush()
        mine = [
            n async for n in rt.memory.graph.export() if n["kind"] == "node" and n["type"] == "fact"
        ]
        [ann] = [n["id"] for n in mine if n["author_id"] == "ann"]
        [bob] = [n["id"] for n in mine if n["author_id"] == "bob"]
        reply = await rt.command(inbound(CH, f"/forget {ann}"), is_admin=True)
        assert "2 messages that said it left the conversation" in reply, reply
        live = await _live(rt)
        assert "Remember that my locker code is 4411." not in live
        assert "Remember that my locker code is 4411 too." in live
        assert await rt.memory.graph.get(bob) is not None


async def test_forgotten_messages_are_not_found_by_a_search_of_the_conversation(
    make_config: Callable[..., Config],
) -> None:
    """conversation_search (what branches and task workers use to look further back) leaves
    out a forgotten message and the messages of a forgotten author; the others are found."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await _told(rt, "the deploy key rotates on Mondays", "k1")
        await _told(rt, "the deploy key for staging rotates on Fridays", "k2", author="bob")
        await _told(rt, "the deploy key for the lab rotates daily", "k3", author="cy")
        tools = builtin_tools(CH, store=rt.store, recall=rt.memory.access())

        async def found() -> set[str]:
            call = ToolCall(
                "1", "conversation_search", {"query": "deploy key rotates", "limit": 20}
            )
            return {h["message_id"] for h in json.loads((await tools.run(call)).text)}

        assert {"k1", "k2", "k3"} <= await found()
        await rt.memory.forget_messages(CH, ["k1"])
        await rt.memory.graph.forget_author("bob")
        assert not {"k1", "k2"} & await found()
        assert "k3" in await found()


def test_forget_in_words_is_talk_and_an_id_is_the_command() -> None:
    assert command_name("/forget that my locker code is 4411") is None
    assert command_name("/Forget my locker code") is None
    assert command_name("/forget mem_0123") == "/forget"
    assert command_name("/forget --author U1") == "/forget"
    assert command_name("/forget") == "/forget"


async def test_forget_that_typed_as_a_command_forgets_in_the_console(
    make_config: Callable[..., Config],
) -> None:
    """A newcomer types "/forget that my locker code is 4411": the bot forgets it (no usage
    line of the admin command, no "not a command" note) and no longer knows it."""
    out = io.StringIO()
    typed = (
        "Remember that my locker code is 4411.\n"
        "/forget that my locker code is 4411\n"
        "What is my locker code?\n"
    )
    console = ConsoleAdapter(
        ConsoleAdapterConfig(user="dana"),
        channel="console:local",
        stdin=io.StringIO(typed),
        stdout=out,
    )
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        await rt.drain()
        printed = out.getvalue()
        assert "Usage: /forget" not in printed and "is not a command" not in printed, printed
        assert "Done: I forgot what you told me about your locker code." in printed
        after = printed.split("I forgot what you told me", 1)[1]
        assert "4411" not in after, printed


async def test_a_forget_whose_messages_cannot_be_set_aside_says_so(
    make_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store refuses to archive the messages that said the forgotten memory: the reply
    says the memory is forgotten but those messages are still in view, and why; it does not
    claim they left."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _told(rt, "Remember that my locker code is 4411.", "a1")
        memory_id = await _fact_id(rt, "4411")

        async def refuse(*args: object, **kwargs: object) -> None:
            raise OSError("disk I/O error")

        monkeypatch.setattr(rt.store, "swap", refuse)
        reply = await rt.command(inbound(CH, f"/forget {memory_id}"), is_admin=True)
        assert reply.startswith(f"Forgot memory {memory_id}. The messages that said it could")
        assert "OSError: disk I/O error" in reply and "left the conversation" not in reply
        assert [t for t in await _live(rt) if "4411" in t]  # still in view, as it says
        assert rt.memory is not None and await rt.memory.graph.get(memory_id) is None


async def test_shouted_requests_are_said_back_in_lower_case(
    make_config: Callable[..., Config],
) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        reply = await _told(rt, "REMEMBER THAT MY SEAT IS 14C.", "s1")
        assert reply == "Noted: your seat is 14C."
        assert [m.text async for m in rt.store.export(CH) if m.role is Role.USER] == [
            "REMEMBER THAT MY SEAT IS 14C."
        ]


async def _summaries(rt: Runtime) -> list[str]:
    """The live summaries' texts."""
    actor = await rt.registry.actor(CH)
    return [m.text for m in actor.ctx.items if m.role is Role.SUMMARY]


def _filler(i: int) -> str:
    """A long line of chat (a summary of a few short lines is no smaller than they are),
    without numbers: an extractive summary favours the lines that hold them."""
    word = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")[i]
    return (
        f"A {word} random thought about the allotment: the runner beans along the north"
        " fence took much longer than expected this year, the slugs had the lettuces twice,"
        " and the water butt by the shed leaked again after the frost, so the repair list"
        " keeps growing while the weekends keep shrinking."
    )


async def _compact(rt: Runtime) -> None:
    """A /compact pass, landed."""
    await rt.command(inbound(CH, "/compact"), is_admin=True)
    await rt.drain()
    assert await _summaries(rt), "the pass wrote no summary"


async def test_a_value_forgotten_in_words_stays_forgotten_after_a_compaction(
    make_config: Callable[..., Config],
) -> None:
    """Kim replaces her code and forgets the old one; a compaction afterwards does not
    bring the old one back (the summary leaves forgotten messages out), for her or for
    anyone else, and the new one is still answered."""
    async with Runtime.open(make_config(SHORT_SUMMARIES), llm=OfflineProvider()) as rt:
        await _told(rt, "Remember that my gym locker code is 7731.", "k1", author="kim")
        await _told(rt, "Actually my gym locker code is now 9902.", "k2", author="kim")
        done = await _told(rt, "Forget that my gym locker code is 7731.", "k3", author="kim")
        assert done == "Done: I forgot what you told me about your gym locker code."
        for i in range(8):
            await _told(rt, _filler(i), f"g{i}", author="kim")
        await _compact(rt)
        assert not [s for s in await _summaries(rt) if "7731" in s]
        answer = await _told(rt, "What is my gym locker code?", "k4", author="kim")
        assert "9902" in answer and "7731" not in answer, answer
        other = await _told(rt, "What is my gym locker code?", "l1", author="lee")
        assert "7731" not in other, other


async def test_forget_by_id_cuts_it_from_a_summary_written_before(
    make_config: Callable[..., Config],
) -> None:
    """A fact already summarized: "/forget ID" cuts its sentence from the live summary,
    so it is not answered from there; the summary's other sentences stay."""
    async with Runtime.open(make_config(SHORT_SUMMARIES), llm=OfflineProvider()) as rt:
        await _told(rt, "My son Leo plays football every Saturday at 10.", "d1", author="dana")
        await _told(rt, "Our boiler service is booked for 2026-03-02.", "d2", author="dana")
        for i in range(8):
            await _told(rt, _filler(i), f"h{i}", author="dana")
        await _compact(rt)
        [summary] = await _summaries(rt)
        assert "Saturday at 10" in summary, summary
        memory_id = await _fact_id(rt, "Saturday at 10")
        reply = await rt.command(inbound(CH, f"/forget {memory_id}"), is_admin=True)
        assert reply.startswith(f"Forgot memory {memory_id}."), reply
        [after] = await _summaries(rt)
        assert "Saturday at 10" not in after, after
        # Its other sentences stay.
        assert after == "\n".join(
            line for line in summary.split("\n") if "Saturday at 10" not in line
        )
        answer = await _told(rt, "When does Leo play football?", "d9", author="dana")
        assert "Saturday at 10" not in answer, answer


async def test_forget_in_other_words_still_finds_what_was_said(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget that my brother Tom moved to Berlin" forgets "My brother Tom moved to
    Berlin in 2021" (no "is" to name a thing by: the words decide)."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _told(rt, "My brother Tom moved to Berlin in 2021.", "s1", author="sam")
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        done = await _told(rt, "Forget that my brother Tom moved to Berlin.", "s2", author="sam")
        assert done.startswith("Done: I forgot"), done
        answer = await _told(rt, "Where does Tom live?", "s3", author="sam")
        assert "Berlin" not in answer, answer


async def test_forgetting_someone_elses_fact_is_not_reported_done(
    make_config: Callable[..., Config],
) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _told(rt, "Remember that my gym locker code is 9902.", "a1", author="sam")
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        reply = await _told(rt, "Forget that my gym locker code is 9902.", "b1", author="lee")
        assert reply.startswith("I had nothing of yours about that to forget"), reply
        assert "9902" in await _told(rt, "What is my gym locker code?", "a2", author="sam")


async def test_forget_author_takes_their_messages_out_of_the_conversation(
    make_config: Callable[..., Config],
) -> None:
    """After "/forget --author lee" the bot no longer quotes what Lee said, while it is
    still archived; Sam's messages stay in view."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _told(rt, "We adopted a cat named Miso in 2024.", "l1", author="lee")
        await _told(rt, "Our dog is called Biscuit.", "s1", author="sam")
        assert "Miso" in await _told(rt, "Which cat was adopted?", "s2", author="sam")
        reply = await rt.command(inbound(CH, "/forget --author lee"), is_admin=True)
        assert "1 message of theirs left the conversation" in reply, reply
        live = await _live(rt)
        assert not [t for t in live if "Miso" in t], live
        assert "Our dog is called Biscuit." in live
        assert "Miso" not in await _told(rt, "Which cat was adopted?", "s3", author="sam")
        kept = [m.text async for m in rt.store.export(CH) if m.author_id == "lee"]
        assert kept == ["We adopted a cat named Miso in 2024."]


async def test_a_forget_in_words_whose_messages_cannot_be_set_aside_still_forgets(
    make_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store refuses to archive the exchanges that repeated what was forgotten: the
    memory is forgotten all the same and the reply says so; the bot still does not answer
    with it (the request in view tells it what was forgotten)."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _told(rt, "Remember that my locker code is 4411.", "a1")
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        real_swap = rt.store.swap

        async def refuse(channel: str, covered: object, replacement: object, **kw: object):
            if replacement is None and not kw.get("record"):
                raise OSError("disk I/O error")
            return await real_swap(channel, covered, replacement, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(rt.store, "swap", refuse)
        done = await _told(rt, "Forget that my locker code is 4411.", "a2")
        assert done == "Done: I forgot what you told me about your locker code.", done
        assert [t for t in await _live(rt) if "4411" in t]  # left in view
        assert "4411" not in await _told(rt, "What is my locker code?", "a3")


async def test_a_memory_store_that_fails_before_a_summary_loses_nothing(
    make_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory store fails when a compaction asks what was forgotten: the pass fails
    and says so, every message stays live (none is summarized unchecked or lost), and
    the next pass, with the store back, lands."""
    async with Runtime.open(make_config(SHORT_SUMMARIES), llm=OfflineProvider()) as rt:
        for i in range(8):
            await _told(rt, _filler(i), f"f{i}", author="kim")
        assert rt.memory is not None
        access = rt.memory.access()
        real = access.forgotten_messages

        async def failing(*args: object, **kwargs: object) -> set[str]:
            raise OSError("disk I/O error")

        monkeypatch.setattr(type(access), "forgotten_messages", failing)
        live_before = await _live(rt)
        await rt.command(inbound(CH, "/compact"), is_admin=True)
        await rt.drain()
        report = rt.outbox.sent[-1].text
        assert report.startswith("/compact failed: disk I/O error."), report
        assert "the messages stay live" in report, report
        assert await _live(rt) == live_before
        assert await _summaries(rt) == []
        monkeypatch.setattr(type(access), "forgotten_messages", real.__func__)
        await _compact(rt)


async def test_forget_author_of_an_id_nobody_speaks_as_forgets_nothing_and_says_so(
    make_config: Callable[..., Config],
) -> None:
    """A mistyped id ("/forget --author leee") is refused with the reason rather than
    reported as "Forgot 0 memories": nothing is forgotten, and that id's later messages
    are not refused either."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await _told(rt, "We adopted a cat named Miso in 2024.", "l1", author="lee")
        reply = await rt.command(inbound(CH, "/forget --author leee"), is_admin=True)
        assert reply == (
            "No one with the id 'leee' has said anything I keep: nothing was forgotten. "
            "/forget --author takes the id a person speaks as (/history shows who said what)."
        )
        assert "Miso" in await _told(rt, "Which cat was adopted?", "s1", author="sam")
        await _told(rt, "Remember that my locker code is 4411.", "x1", author="leee")
        assert rt.memory is not None
        await rt.memory.indexer.flush()
        hits = await rt.memory.search("locker code 4411", channel=CH)
        assert hits, "leee's own message was refused after a forget that never happened"
        reply = await rt.command(inbound(CH, "/forget --author lee"), is_admin=True)
        assert reply is not None and reply.startswith("Forgot "), reply


async def test_commands_that_take_no_arguments_refuse_words_after_them(
    make_config: Callable[..., Config],
) -> None:
    """ "/compact now please" and "/status extra" say they take no arguments and do
    nothing, rather than quietly running."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i in range(12):
            await _told(rt, f"Note {i}: crate {i} of apples went to stall {i}.", f"h{i}")
        for text in ("/compact now please", "/status extra"):
            reply = await rt.command(inbound(CH, text), is_admin=True)
            name = text.split()[0]
            assert reply == f"Usage: {name}  (it takes no arguments; nothing was done)", reply
        await rt.drain()
        assert await rt.store.compactions(CH, limit=1) == []
        reply = await rt.command(inbound(CH, "/compact"), is_admin=True)
        await rt.drain()
        assert len(await rt.store.compactions(CH, limit=1)) == 1, reply
