"""What the offline provider may quote from summaries: people's words, never the bot's."""

from __future__ import annotations

import re

import pytest

from tierbot.llm.base import ChatMessage
from tierbot.llm.offline_chat import candidates
from tierbot.llm.quoting import quote


def summary_message(text: str) -> ChatMessage:
    return ChatMessage("user", quote(text, source="summary"))


def test_a_summary_of_a_summary_still_hides_the_bots_own_replies() -> None:
    """A range that covers an earlier summary writes its lines as "summary: - who: what";
    the bot's reply inside is still the bot's, and a person's words are still theirs."""
    nested = summary_message(
        "[Summary of 12 earlier messages]\n"
        "- summary: - tierbot (bot): Noted: your wife Sofia turns 40 on 2025-09-14.\n"
        "- summary: - dana: my wife Sofia turns 40 on 2025-09-14\n"
        "- erin: the build is green"
    )
    found = {(e.author, e.text) for e in candidates([nested], [])}
    assert found == {
        ("dana", "my wife Sofia turns 40 on 2025-09-14"),
        ("erin", "the build is green"),
    }


async def test_offline_usage_is_the_exact_count_of_the_prompt_it_was_sent() -> None:
    """The offline provider's input usage is the prompt's exact token count (each text
    plus the framing), whether the channel counted a message already or not."""
    from channels.prompt import build_prompt
    from tierbot.llm.offline import OfflineProvider
    from tierbot.messages import Message, Role
    from tierbot.tokens import MESSAGE_OVERHEAD, get_counter

    counter = get_counter()
    texts = ["Good morning, the deploy is on Friday.", "Noted: the deploy is on Friday."]
    items = [
        Message(
            "console:local", f"p{i}", role, t, author_name="dana", tokens=counter.count_message(t)
        )
        for i, (role, t) in enumerate(zip((Role.USER, Role.ASSISTANT), texts, strict=True))
    ]
    prompt = build_prompt("Answer briefly.", items)
    unhinted = [type(m)(m.role, m.content, name=m.name) for m in prompt]
    exact = sum(counter.count(m.content) + MESSAGE_OVERHEAD for m in prompt)
    provider = OfflineProvider(counter)
    for sent in (prompt, unhinted):
        done = await provider.complete(sent)
        assert done.usage is not None
        assert done.usage.input_tokens == exact
        assert done.usage.output_tokens == counter.count(done.text)


async def test_a_long_conversation_is_read_off_the_event_loop_and_a_short_one_alike() -> None:
    """A long prompt is read in a worker thread, so other channels keep flowing meanwhile;
    a young conversation's short prompt is answered on the loop.  Same answers either way."""
    import asyncio

    from tierbot.llm.offline import OfflineProvider

    provider = OfflineProvider()
    said = [f"message {i}: the deploy queue is green and lunch is at noon" for i in range(300)]
    question = ChatMessage("user", "What did we say about the deploy queue?", name="dana")
    long_prompt = [ChatMessage("system", "sys")]
    long_prompt += [ChatMessage("user", t, name="erin") for t in said] + [question]
    short_prompt = [ChatMessage("system", "sys"), ChatMessage("user", said[0], name="erin")]
    short_prompt.append(question)

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        before = ticks
        long_reply = await provider.complete(long_prompt)
        during_long = ticks - before
        before = ticks
        short_reply = await provider.complete(short_prompt)
        during_short = ticks - before
    finally:
        task.cancel()
    # The loop ran other work while the long prompt was read; the short one took no turn.
    assert during_long > 0
    assert during_short == 0
    long_direct = provider._chat(long_prompt, set(), 1024)
    short_direct = provider._chat(short_prompt, set(), 1024)
    assert long_reply.text == long_direct[0]
    assert short_reply.text == short_direct[0]


def test_a_forget_removes_the_sentence_it_names_and_what_came_after_stays() -> None:
    """Evidence in view after "forget my bike code": the other sentence of the message
    that held it, and a value told again after the forget; never the forgotten one."""
    from tierbot.llm.base import ChatMessage
    from tierbot.llm.offline_chat import candidates

    history = [
        ChatMessage("user", "My bike code is 2222. My gym code is 1111.", name="ann", sent_at=1.0),
        ChatMessage("user", "Forget my bike code.", name="ann", sent_at=2.0),
        ChatMessage("user", "My bike code is now 3333.", name="ann", sent_at=3.0),
    ]
    texts = [e.text for e in candidates(history, [])]
    assert "My gym code is 1111." in texts
    assert "My bike code is now 3333." in texts
    assert not [t for t in texts if "2222" in t], texts


def test_a_request_to_forget_or_keep_private_is_no_evidence_wherever_it_comes_from() -> None:
    """A request naming something ("Please delete Elif's phone number", "Don't
    remember Elif's dietary stuff") tells nothing of it: not as a message in view, a
    recalled message, or a summary's line."""
    import json

    requests = [
        "Please delete Elif's phone number.",
        "Forget Elif's shoe size.",
        "Don't remember Elif's dietary stuff, she wants to keep that private.",
        "Please keep Elif's passport number private.",
    ]
    told = "Elif is vegetarian and doesn't eat fish."
    history = [ChatMessage("user", t, name="ann", sent_at=1.0) for t in [told, *requests]]
    history.append(
        summary_message(
            "Summary of 5 messages:\n" + "\n".join(f"- ann: {t}" for t in [told, *requests])
        )
    )
    hits = [{"content": t, "author": "ann", "type": "episode"} for t in [told, *requests]]
    recalled = ChatMessage("tool", json.dumps(hits), tool_call_id="r1")
    found = {(e.kind, e.text) for e in candidates(history, [recalled])}
    assert found == {("said", told), ("summary", told)}, found


async def test_a_branch_answer_adds_what_its_author_said_after_it() -> None:
    """A branch looking further back finds "I work at the bank on Mondays" and also,
    dated later, "I don't work at the bank anymore": its conclusion quotes both, as
    the channel's own answer does, rather than the old sentence alone."""
    import json

    from tierbot.llm.base import ToolCall
    from tierbot.llm.offline import OfflineProvider

    found = [
        {"type": "identity", "content": "ann: I work at the bank on Mondays.", "created_at": 100.0},
        {"type": "fact", "content": "ann: My wife works at the bank.", "created_at": 150.0},
        {
            "type": "identity",
            "content": "ann: I don't work at the bank anymore.",
            "created_at": 200.0,
        },
    ]
    call = ToolCall("search-0", "memory_recall", {"query": "where do I work on Mondays?"})
    messages = [
        ChatMessage("user", "where do I work on Mondays?", name="ann"),
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", json.dumps(found), tool_call_id="search-0"),
    ]
    done = await OfflineProvider().complete(messages, (), 200, purpose="branch")
    assert "«I work at the bank on Mondays.» Later, ann " in done.text, done.text
    assert done.text.endswith("«I don't work at the bank anymore.»"), done.text


async def test_what_a_recall_could_not_bring_is_said_to_be_there() -> None:
    """ "What do you know about me?" answered from a recall the window cut short (its
    note says 7 more were found): the list says there are 7 more things, rather than
    passing off the two it got as all there is."""
    import json

    from tierbot.llm.base import ToolCall
    from tierbot.llm.offline import OfflineProvider

    found = [
        {"type": "identity", "content": "ann: I'm Ann, a nurse", "created_at": 100},
        {"type": "preference", "content": "ann: I prefer tea over coffee", "created_at": 120},
        {"left_out": 7, "note": "7 more memories were found but did not fit"},
    ]
    asked = "what do you know about me?"
    calls = (
        ToolCall("recall-0", "memory_recall", {"query": asked, "from_asker": True}),
        ToolCall("recall-0.facts", "memory_recall", {"query": asked, "from_asker": True}),
    )
    messages = [
        ChatMessage("user", asked, name="ann"),
        ChatMessage("assistant", "", tool_calls=calls),
        ChatMessage("tool", json.dumps(found), tool_call_id="recall-0"),
        ChatMessage("tool", "[]", tool_call_id="recall-0.facts"),
    ]
    done = await OfflineProvider().complete(messages, (), 300, purpose="chat")
    assert "you're Ann, a nurse" in done.text and "tea over coffee" in done.text, done.text
    assert done.text.endswith(
        "and 7 more things (ask me about any of them, or what else I know about you)."
    ), done.text
    # The second recall failed: the count is a floor, said once, not contradicted.
    failed = json.dumps({"error": "the context window has no room for the 12 results found"})
    messages[3] = ChatMessage("tool", failed, tool_call_id="recall-0.facts")
    done = await OfflineProvider().complete(messages, (), 300, purpose="chat")
    assert done.text.endswith(
        "and at least 7 more things (ask me about any of them, or what else I know about you)."
    ), done.text
    messages[3] = ChatMessage("tool", "[]", tool_call_id="recall-0.facts")
    found[2] = {"left_out": 1, "note": "1 more memory was found but did not fit"}
    messages[2] = ChatMessage("tool", json.dumps(found), tool_call_id="recall-0")
    done = await OfflineProvider().complete(messages, (), 300, purpose="chat")
    assert done.text.endswith(
        "and 1 more thing (ask me about it, or what else I know about you)."
    ), done.text


async def test_what_else_says_what_it_cannot_bring_and_asks_what_it_continues() -> None:
    """ "What else?" after a list, when the recall brings back only what was listed and
    notes 3 more that did not fit: it says there are 3 more (it answered "You also told
    me: and 3 more things"); "what else?" with no list in view asks what it is about
    (it looked further back and found nothing)."""
    import json

    from tierbot.llm.base import ToolCall
    from tierbot.llm.offline import OfflineProvider

    listed = "Here is what you told me: you're Ann, a nurse; you prefer tea over coffee."
    found = [
        {"type": "identity", "content": "ann: I'm Ann, a nurse", "created_at": 100},
        {"type": "preference", "content": "ann: I prefer tea over coffee", "created_at": 120},
        {"left_out": 3, "note": "3 more memories were found but did not fit"},
    ]
    calls = (
        ToolCall("recall-2", "memory_recall", {"query": "what else?", "from_asker": True}),
        ToolCall("recall-2.facts", "memory_recall", {"query": "what else?", "from_asker": True}),
    )
    messages = [
        ChatMessage("user", "what do you know about me?", name="ann"),
        ChatMessage("assistant", listed),
        ChatMessage("user", "what else?", name="ann"),
        ChatMessage("assistant", "", tool_calls=calls),
        ChatMessage("tool", json.dumps(found), tool_call_id="recall-2"),
        ChatMessage("tool", "[]", tool_call_id="recall-2.facts"),
    ]
    done = await OfflineProvider().complete(messages, (), 300, purpose="chat")
    assert done.text.startswith("There are 3 more things you told me"), done.text
    alone = [ChatMessage("user", "what else?", name="ann")]
    done = await OfflineProvider().complete(alone, (), 300, purpose="chat")
    assert done.text.startswith("What else about what?"), done.text


async def test_a_list_whose_second_recall_failed_never_says_it_is_all() -> None:
    """The recall of facts failed (the window had no room) while the personal one
    worked: the list says there may be more and why; "what else?" then answered "That
    is everything you told me that I kept" while many things were kept. A "what else?"
    whose list a compaction took out of view in the middle of its turn still continues
    it (it answered "What else about what?")."""
    import json

    from tierbot.llm.base import ToolCall
    from tierbot.llm.offline import OfflineProvider

    no_room = json.dumps({"error": "the context window has no room for the 9 results found"})
    found = [{"type": "identity", "content": "ann: I'm Ann, a nurse", "created_at": 100}]

    def turn(question: str, before: list[ChatMessage]) -> list[ChatMessage]:
        calls = (
            ToolCall("recall-a", "memory_recall", {"query": question, "from_asker": True}),
            ToolCall("recall-b", "memory_recall", {"query": question, "from_asker": True}),
        )
        return [
            *before,
            ChatMessage("user", question, name="ann"),
            ChatMessage("assistant", "", tool_calls=calls),
            ChatMessage("tool", json.dumps(found), tool_call_id="recall-a"),
            ChatMessage("tool", no_room, tool_call_id="recall-b"),
        ]

    done = await OfflineProvider().complete(turn("what do you know about me?", []), (), 300)
    assert done.text.startswith("Here is what you told me: you're Ann, a nurse."), done.text
    assert done.text.endswith(
        "(There may be more: I could not look further back: the "
        "context window has no room for the 9 results found.)"
    ), done.text
    listed = [ChatMessage("assistant", "Here is what you told me: you're Ann, a nurse.")]
    done = await OfflineProvider().complete(turn("what else?", listed), (), 300)
    assert done.text.startswith("I could not look further back: the context window"), done.text
    done = await OfflineProvider().complete(turn("what else?", []), (), 300)
    # ... and says why it starts over: what it listed is out of view.
    assert done.text.startswith(
        "(The list I just gave has already left this conversation's view, so I cannot "
        "tell what I listed: here it is from the top.) Here is what you told me: you're Ann"
    ), done.text


async def test_a_reply_too_long_for_its_room_ends_at_an_item_and_what_else_goes_on() -> None:
    """ "What do you know about Rin?" with room for ~60 tokens of reply: the list ends
    after its last whole item and says it was cut (it stopped mid-word before); "what
    else?" then names Rin's other lines, none already quoted, and once all were given,
    says that is everything."""
    from tierbot.llm.offline import OfflineProvider
    from tierbot.llm.offline_chat import CUT_SHORT

    told = [f"Rin plays game number {n} on Fridays." for n in range(1, 9)]
    told.append("Jess is the new mod.")
    messages = [ChatMessage("user", line, name="kai") for line in told]
    messages.append(ChatMessage("user", "what do you know about Rin?", name="kai"))
    provider = OfflineProvider()
    first = (await provider.complete(messages, (), 60)).text
    assert first.startswith("What I know about Rin: «") and first.endswith(CUT_SHORT), first
    assert first.removesuffix(CUT_SHORT).endswith("» (kai)"), first
    quoted = set(re.findall(r"«([^»]+)»", first))
    rest: set[str] = set()
    for _ in range(4):
        messages += [ChatMessage("assistant", first), ChatMessage("user", "what else?", name="kai")]
        first = (await provider.complete(messages, (), 1024)).text
        if first == "That is everything I know about Rin.":
            break
        assert first.startswith("Also about Rin: «"), first
        more = set(re.findall(r"«([^»]+)»", first))
        assert not more & (quoted | rest), (more, first)
        rest |= more
    assert first == "That is everything I know about Rin.", first
    assert quoted | rest == {t for t in told if "Rin" in t}, quoted | rest


def test_a_forget_takes_the_clause_that_names_it_and_what_refers_back_to_it() -> None:
    """What a forget leaves of a sentence: the other clauses, with the subject they
    share; a phrase set off by commas is part of its clause; "he" after the forgotten
    husband goes with him; a sentence that is all about it leaves nothing."""
    from tierbot.llm.text import without_named

    cases = [
        (
            "where Ana lives",
            "My sister Ana lives in Porto and works as a dentist.",
            "My sister Ana works as a dentist.",
        ),
        (
            "the address",
            "I'm hosting the LAN party at my flat, the address is 14 Elm Road.",
            "I'm hosting the LAN party at my flat.",
        ),
        ("my husband", "My husband is called Daniel and he teaches high school chemistry.", ""),
        ("where Ana lives", "Ana, my sister, lives in Porto.", ""),
        # what is left only points back at what went: it goes too
        (
            "Veska has the Sunsword",
            "Veska has the Sunsword in her pack, the party doesn't know.",
            "",
        ),
        ("the address", "The address is 14 Elm Road, Leeds.", ""),
        (
            "the plumber",
            "Remind me to call the plumber. Remind me to buy milk.",
            "Remind me to buy milk.",
        ),
        # The subject a clause shares is the nearest one said: Ben's job stays Ben's.
        (
            "where Ben lives",
            "Ana works as a dentist and lives in Porto, and Ben lives in Braga and works as a "
            "nurse.",
            "Ana works as a dentist, Ana lives in Porto, Ben works as a nurse.",
        ),
        ("where Eva lives", "Eva is 29 and lives in Braga.", "Eva is 29."),
        (
            "where Ben lives",
            "Ben is 34; he lives in Braga; he is a nurse.",
            "Ben is 34, Ben is a nurse.",
        ),
        ("where Carla lives", "Carla - who lives in Faro - is a pilot.", "Carla is a pilot."),
        (
            "Tom's PIN",
            "My brother Tom lives in Leeds and his PIN is 4821.",
            "My brother Tom lives in Leeds.",
        ),
        (
            "where Ana lives",
            "Ana lives in Porto and her son is called Leo.",
            "Ana's son is called Leo.",
        ),
        # What is tied to the forgotten part, or is about the forgotten thing, goes too.
        ("my bank PIN", "My bank PIN is 7731, which is also my phone unlock code.", ""),
        ("my password", "My password, which is hunter2, is also used for my email.", ""),
        ("where Ana lives", "Ana lives in Porto, and so does her ex-husband.", ""),
        (
            "that I don't like the g sound",
            "I don't like the g sound, it is hard for my throat.",
            "",
        ),
        # Only a name asked, or a second thing asked by a pronoun: which clause is meant
        # cannot be told, so the sentence goes whole.
        ("what Ana does", "My sister Ana lives in Porto and works as a dentist.", ""),
        ("where Ana lives and what she does", "Ana lives in Porto and works as a dentist.", ""),
        # The thing asked is told of, not what the clause is said of: what he did then
        # goes with it, and so does what speaks of it.
        (
            "the fall",
            "He had a fall in January and bruised his hip, we don't talk about it in front of him.",
            "",
        ),
        (
            "the fall",
            "Dad had a fall, please never mention it to Paul, his GP is Dr. Nwosu.",
            "Dad's GP is Dr. Nwosu.",
        ),
        # A sentence that goes on telling of the event goes with it, unless it gives a
        # time of its own; one that is only said of the same person keeps its name.
        (
            "the fall",
            "Dad had a fall in January. He bruised his hip and spent two nights in hospital.",
            "",
        ),
        (
            "the fall",
            "Dad had a fall in January and moved in with us in May.",
            "Dad moved in with us in May.",
        ),
        (
            "where Ana lives",
            "Ana lives in Porto. She works as a dentist.",
            "Ana works as a dentist.",
        ),
        # "his GP" after "His NHS number is …" is still his GP, not the number's.
        (
            "his NHS number",
            "I look after my dad. His NHS number is 485 777 3929 and his GP is Dr Patel.",
            "I look after my dad. His GP is Dr Patel.",
        ),
        # A plea after a comma is no item of a list.
        ("my gambling problem", "I have a gambling problem, please keep it quiet.", ""),
        ("my latex allergy", "I have a latex allergy, tell nobody.", ""),
        ("my gambling problem", "I have a gambling problem, big time.", ""),
        # An item of a list goes, the rest of the list stays, joined as it was.
        ("the condoms", "I need to buy milk, eggs, and condoms.", "I need to buy milk and eggs."),
        ("milk", "I need to buy milk, eggs, and condoms.", "I need to buy eggs and condoms."),
        (
            "that Mum takes metformin",
            "Mum takes aspirin, metformin and lisinopril.",
            "Mum takes aspirin and lisinopril.",
        ),
        (
            "the cap",
            "For the trip I pack sunscreen, a hat or a cap.",
            "For the trip I pack sunscreen or a hat.",
        ),
        ("Joe", "My kids are Sam, Lily and Joe.", "My kids are Sam and Lily."),
        (
            "the strip club",
            "For the party we could go to Nando's, Wagamama or the strip club.",
            "For the party we could go to Nando's or Wagamama.",
        ),
        # ... not when it names the whole list, says more than it, or the list does not
        # end the sentence (where its last item ends cannot be told).
        ("milk, eggs and condoms", "I need to buy milk, eggs, and condoms.", ""),
        ("that I need condoms for Friday", "I need to buy milk, eggs, and condoms.", ""),
        ("Ben", "Yesterday evening I met Tom, Ana and Ben at the pub.", ""),
        (
            "Tom",
            "Yesterday evening I met Tom, Ana and Ben at the pub.",
            "Yesterday evening I met Ana and Ben at the pub.",
        ),
        ("two tents", "We need two tents, a stove and a lamp.", "We need a stove and a lamp."),
        # A number forgotten alone: what said it goes with it ("my phone number for photo
        # stuff is" was kept, and "your if anyone needs a lift"); a number of another kind
        # ("the policy number", "my account number") goes alone when it ends its clause.
        ("my phone number", "my phone number for photo stuff is 07911 123456", ""),
        ("my number", "my number is 07700 900321 if anyone needs a lift", ""),
        (
            "the policy number",
            "the insurance is with PetGuard, policy number PG-44821",
            "The insurance is with PetGuard.",
        ),
        (
            "my account number",
            "liam: my bank details for fees: sort code 20-45-67 account 33445566",
            "My bank details for fees: sort code 20-45-67.",
        ),
    ]
    for request, told, left in cases:
        assert without_named(request, told) == left, (request, told)


def test_what_a_forget_leaves_of_a_live_message_is_still_quoted() -> None:
    """Asked to forget where Ana lives, the evidence a reply may quote keeps the rest of
    the sentence the person said, and never the part forgotten."""
    history = [
        ChatMessage(
            "user", "My sister Ana lives in Porto and works as a dentist.", name="ann", sent_at=1.0
        ),
        ChatMessage("user", "Forget where Ana lives.", name="ann", sent_at=2.0),
    ]
    said = [e.text for e in candidates(history, [])]
    assert said == ["My sister Ana works as a dentist."], said


def test_a_memory_cut_from_a_message_is_not_quoted_as_said_later_than_it() -> None:
    """ "What class is Grim?" quoted Ben's message, then «Later, Ben told me» its own
    first sentence (the memory saved from it, dated a moment later); a line said later
    that changes it still follows it."""
    from tierbot.llm.offline_chat import Evidence, best, quoted_with_changes

    said = "Actually, Grim is a ranger, not a rogue. I changed class."
    pool = [
        Evidence("My character is Grim Ironfoot, a dwarf rogue.", "Ben", 1.0),
        Evidence(said, "Ben", 2.0),
        Evidence("Actually, Grim is a ranger, not a rogue.", "Ben", 3.0, "memory"),
    ]
    found, _ = best("What class is Grim?", pool)
    assert found is not None
    answer = quoted_with_changes(found, "What class is Grim?", pool)
    assert answer.count("ranger") == 1, answer
    answer = quoted_with_changes(pool[0], "What is Ben's character?", pool)
    assert "dwarf rogue.» Later," in answer and "ranger" in answer, answer


@pytest.mark.parametrize(
    ("told", "later", "question", "changes"),
    [
        # Said of another thing, mentioning it: no change.
        (
            "My flight is LH716 from Munich to Tokyo Haneda on 2 April, departing 11:50.",
            "My total budget is 4,000 euros, not counting flights.",
            "When is my flight to Tokyo?",
            False,
        ),
        # "now" said of the budget, a place named in another clause.
        (
            "I met two Australians at the hostel in Tokyo, Mick and Jess.",
            "My budget is now 3,500 euros, I spent too much in Tokyo.",
            "Who is Mick?",
            False,
        ),
        # A month both give is not a thing in common.
        (
            "I have a JR Pass for 14 days, I need to activate it on 7 April.",
            "Actually I changed the Kyoto ryokan to 9 to 13 April instead of 8 to 12.",
            "When do I activate the JR Pass?",
            False,
        ),
        # What does change it still follows it.
        (
            "My total budget is 4,000 euros, not counting flights.",
            "My budget is now 3,500 euros, I spent too much in Tokyo.",
            "What is my budget?",
            True,
        ),
        (
            "He also takes amlodipine 5mg every morning for blood pressure.",
            "Actually the doctor changed his amlodipine to 10mg, not 5mg.",
            "How much amlodipine does he take?",
            True,
        ),
        (
            "Dad takes metformin 500mg twice a day.",
            "Actually the doctor changed his amlodipine to 10mg, not 5mg.",
            "How much metformin does he take?",
            False,
        ),
    ],
)
def test_what_is_quoted_as_said_later_changes_what_was_found(
    told: str, later: str, question: str, changes: bool
) -> None:
    """A sixth round of new users saw "Later, you said: «My total budget is …»" after
    their flight, and the amlodipine dose changed "to 10mg, not 5mg" never shown."""
    from tierbot.llm.offline_chat import Evidence, quoted_with_changes

    pool = [Evidence(told, "ann", 1.0), Evidence(later, "ann", 2.0)]
    answer = quoted_with_changes(pool[0], question, pool)
    assert ("Later," in answer) == changes, answer


def test_of_several_changes_the_one_about_what_is_asked_follows() -> None:
    """Tom's cake changed twice, its flavour then its price: "What did Tom order?" is
    followed by the new flavour (it was followed by the price, the newest), "How much is
    Tom's cake?" by the new price."""
    from tierbot.llm.offline_chat import Evidence, quoted_with_changes

    pool = [
        Evidence("Tom Becker ordered a chocolate fudge cake for 21 June, price £45.", "ann", 1.0),
        Evidence(
            "Actually Tom changed his order: it's a strawberry cake now, not chocolate fudge.",
            "ann",
            2.0,
        ),
        Evidence("And the price for Tom's cake is £50 instead of £45.", "ann", 3.0),
    ]
    ordered = quoted_with_changes(pool[0], "What did Tom order?", pool)
    assert "strawberry" in ordered.split("Later,")[1], ordered
    price = quoted_with_changes(pool[0], "How much is Tom's cake?", pool)
    assert "£50" in price.split("Later,")[1], price


def test_a_question_for_several_of_a_kind_is_answered_by_lines_of_that_kind() -> None:
    """ "What cakes do I have to bake?" led with "I have to bake on Friday…" (more words
    in common) over the line about a cake."""
    from tierbot.llm.offline_chat import Evidence, best_all

    pool = [
        Evidence("The lemon cake is for Mrs Patel.", "ann", 1.0),
        Evidence("I have to bake on Friday and Saturday.", "ann", 2.0),
    ]
    found, _, also = best_all("What cakes do I have to bake?", pool)
    assert found is not None and "lemon cake" in found.text, found
    assert also == [], also


def test_a_thing_named_in_three_words_is_not_answered_by_a_line_sharing_one() -> None:
    """After the guest wifi password was forgotten, a late answer to "what's the guest
    wifi password?" quoted "… reset his password anyway" from an incident: another
    password. A line sharing two of the words still answers."""
    from tierbot.llm.offline_chat import Evidence, best_all

    incident = Evidence(
        "incident 2: Feb 10 phishing email hit Marcus, he clicked but reset his password anyway",
        "raj",
        1.0,
    )
    other = Evidence("QuickBooks licence renews Jan 10", "raj", 2.0)
    assert best_all("what's the guest wifi password?", [incident, other])[0] is None
    wifi = Evidence("the wifi password is fish", "raj", 3.0)
    assert best_all("what's the guest wifi password?", [incident, other, wifi])[0] == wifi


def test_a_forget_no_clause_names_alone_takes_the_clause_holding_what_it_asks() -> None:
    """ "forget Zoe's mom's phone number" of "Mia's best friend is Zoe, her mom is Karen,
    phone 555-0142" took the whole line: no clause names Zoe's mom's phone alone (Zoe is
    in the first). The clause holding most of what it asks besides names goes."""
    from tierbot.llm.text import without_named

    line = "ann: Mia's best friend is Zoe, her mom is Karen, phone 555-0142"
    assert without_named("Zoe's mom's phone number", line) == "Mia's best friend is Zoe."


def test_a_time_both_lines_give_is_no_thing_in_common() -> None:
    """ "what time does Ava's preschool end?" came with "Later, … Leo's swimming moved to
    thursdays at 5:30": both lines hold a ":30"."""
    from tierbot.llm.offline_chat import Evidence, said_later

    preschool = Evidence("Ava goes to Little Acorns preschool, it ends at 12:30", "dana", 1.0)
    swim = Evidence("Leo has swimming on Tuesdays at 4:30", "dana", 0.5)
    moved = Evidence("actually Leo's swimming moved to thursdays at 5:30", "dana", 2.0)
    pool = [swim, preschool, moved]
    assert said_later(preschool, "what time does Ava's preschool end?", pool) is None
    assert said_later(swim, "when is Leo's swimming?", pool) == moved


async def test_what_else_keeps_the_count_the_list_before_it_gave() -> None:
    """A list ending "and 14 more things", then "what else?" whose recall (a different
    query, a window's worth of room) brings back only what was listed and notes nothing
    left out: it said "That is everything you told me that I kept", right after 14
    more.  A page bringing one new thing and noting 13 left out (a different set)
    said "and 13 more things" after "12 more": the count follows the list's own."""
    import json

    from tierbot.llm.base import ToolCall
    from tierbot.llm.offline import OfflineProvider

    def asked(n: int, found: list[dict[str, object]]) -> list[ChatMessage]:
        listed = (
            "Here is what you told me: you're Ann, a nurse; you prefer tea over coffee; "
            f"and {n} more things (ask me about any of them, or what else I know about you)."
        )
        calls = (
            ToolCall("recall-2", "memory_recall", {"query": "what else?", "from_asker": True}),
            ToolCall(
                "recall-2.facts", "memory_recall", {"query": "what else?", "from_asker": True}
            ),
        )
        return [
            ChatMessage("user", "what do you know about me?", name="ann"),
            ChatMessage("assistant", listed),
            ChatMessage("user", "what else?", name="ann"),
            ChatMessage("assistant", "", tool_calls=calls),
            ChatMessage("tool", json.dumps(found), tool_call_id="recall-2"),
            ChatMessage("tool", "[]", tool_call_id="recall-2.facts"),
        ]

    listed = [
        {"type": "identity", "content": "ann: I'm Ann, a nurse", "created_at": 100},
        {"type": "preference", "content": "ann: I prefer tea over coffee", "created_at": 120},
    ]
    done = await OfflineProvider().complete(asked(14, listed), (), 300, purpose="chat")
    assert done.text.startswith("There are 14 more things you told me that I could not"), done.text
    new = {"type": "fact", "content": "ann: my bike is a red Brompton", "created_at": 130}
    found = [*listed, new, {"left_out": 13, "note": "13 more memories were found"}]
    done = await OfflineProvider().complete(asked(12, found), (), 300, purpose="chat")
    assert done.text.startswith("You also told me: your bike is a red Brompton"), done.text
    assert done.text.endswith(
        "; and 11 more things (ask me about any of them, or what else I know about you)."
    ), done.text
