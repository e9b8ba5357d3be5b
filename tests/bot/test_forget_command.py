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
