"""What the offline provider answers in a conversation: which line it quotes, or none."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from bot.runtime import Runtime
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.llm.offline import OfflineProvider
from tierbot.llm.offline_chat import GLAD_REPLY, HOLDING, SAME_AS_QUOTED, SUMS_REPLY

CH = "chat:1"
MEMORY = {"memory": {"enabled": True}}
NOTHING = "Nothing I could find covers that."


async def _talk(
    make_config: Callable[..., Config],
    lines: Sequence[str | tuple[str, str]],
    author: str = "ann",
) -> list[str]:
    """Say each of ``lines`` in turn (as ``author``, or as the person a ``(who, line)``
    pair names), in one conversation; the bot's last reply to each."""
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, said in enumerate(lines):
            who, line = said if isinstance(said, tuple) else (author, said)
            await rt.submit(inbound(CH, line, pid=f"p{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    return replies


async def test_a_line_sharing_only_a_qualifying_word_does_not_answer(
    make_config: Callable[..., Config],
) -> None:
    """ "What car do I drive?", no car told, quoted «The car insurance renewal is due on
    30 September»: a renewal is not a car.  Once a car is told, it answers."""
    replies = await _talk(
        make_config,
        [
            "The car insurance renewal is due on 30 September.",
            "What car do I drive?",
            "When is the car insurance renewal due?",
            "I drive a grey Honda Civic.",
            "What car do I drive?",
            "My favourite study spot is the fourth floor of Powell.",
            "Where do I like to study?",  # a spot to study is what is asked
            "The beta customers are Acme, Globex and Initech.",
            "Which beta customers do we have?",
        ],
    )
    assert replies[1] == NOTHING, replies[1]
    assert "30 September" in replies[2], replies[2]
    assert "Honda Civic" in replies[4], replies[4]
    assert "Powell" in replies[6], replies[6]
    assert "Acme" in replies[8], replies[8]  # the kind asked is "customers", not "beta"


async def test_are_we_still_going_is_answered_by_the_plan_and_its_cancellation(
    make_config: Callable[..., Config],
) -> None:
    """ "We cancelled the Cornwall trip", then "Are we still going to Cornwall?" found
    nothing: "still" asks whether the plan holds, so the plan answers, with what was
    said of it later."""
    replies = await _talk(
        make_config,
        [
            "We're going to Cornwall for a week in May.",
            "Our lodger Ben is moving to Leeds in June.",
            "thank you dear",
            "We cancelled the Cornwall trip.",
            "Ben called off the move to Leeds.",
            "Are we still going to Cornwall?",
            "Is Ben still moving to Leeds?",
        ],
    )
    assert (
        "Cornwall for a week" in replies[5] and "«We cancelled the Cornwall trip.»" in (replies[5])
    ), replies[5]
    assert "«Ben called off the move to Leeds.»" in replies[6], replies[6]


async def test_when_is_someone_back_is_answered_by_the_line_giving_a_date(
    make_config: Callable[..., Config],
) -> None:
    """ "When is Lucia back?" found nothing, and "When is Lucia back from leave?" quoted
    «Lucia's replacement during leave is Omar»: a "when" is answered by the line naming
    her that gives a date (away "until June 2nd" says when she is back)."""
    replies = await _talk(
        make_config,
        [
            "Our PM is Lucia and she's out on leave until June 2nd.",
            "My brother Sam is travelling until next Friday.",
            "Lucia's replacement during leave is Omar.",
            "When is Lucia back?",
            "When is Lucia back from leave?",
            "When will Sam be home?",
            "When is Omar back?",  # the line giving a date is not about him
            "Who is covering for Lucia?",
        ],
    )
    for reply in replies[3:5]:
        assert "until June 2nd" in reply, reply
    assert "next Friday" in replies[5], replies[5]
    assert replies[6] == NOTHING, replies[6]
    assert "Omar" in replies[7], replies[7]


async def test_a_pronoun_stands_for_the_person_the_question_before_it_named(
    make_config: Callable[..., Config],
) -> None:
    """ "Where does Priya sit and what editor does she use?" answered its second half
    with «Kenji uses Emacs»: "she" is Priya, in the same message or the asker's next
    question, and the answer still shows the question as it was asked."""
    replies = await _talk(
        make_config,
        [
            "Our team lead is Priya and she sits in Berlin.",
            "Priya's favourite editor is Vim.",
            "Kenji uses Emacs.",
            "My teammate Kenji handles the Kafka consumers.",
            "Where does Priya sit and what editor does she use?",
            "What does Kenji handle?",
            "Which editor does he use?",
            "What do you know about him?",
        ],
    )
    sits, editor = replies[4].splitlines()
    assert sits.startswith("«Where does Priya sit»") and "Berlin" in sits, sits
    assert editor.startswith("«what editor does she use?»") and "Vim" in editor, editor
    assert "Emacs" in replies[6] and "Vim" not in replies[6], replies[6]
    assert replies[7].startswith("What I know about Kenji:"), replies[7]


async def test_a_request_to_forget_or_keep_private_is_never_told_as_a_fact(
    make_config: Callable[..., Config],
) -> None:
    """ "Please keep Elif's passport number private" was saved and listed, and "Please
    delete Elif's phone number" (nothing told of it) quoted, as what is known about
    Elif: a request to forget or not to keep something names it and tells nothing, in
    view, recalled, or in a summary."""
    lines = [
        "my name is Daniel and I'm planning a trip to Japan with my partner Elif.",
        "Elif is vegetarian and doesn't eat fish.",
        "Please keep Elif's passport number private.",
        "Forget Elif's shoe size.",
        "Please delete Elif's phone number.",
        "Don't remember Elif's dietary stuff, she wants to keep that private.",
        "What do you know about Elif?",
    ]
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        replies = []
        for i, line in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"p{i}", author="ann"))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
        assert replies[2].startswith("OK: I won't save that. I found nothing"), replies[2]
        assert replies[4].startswith("I had nothing of yours about that to forget"), replies[4]
        for _ in range(3):  # the requests leave the view: recalled, or in a summary
            await rt.command(inbound(CH, "/compact"), is_admin=True)
            await rt.drain()
        await rt.submit(inbound(CH, "What do you know about Elif?", pid="q2", author="ann"))
        await rt.drain()
        replies.append(rt.outbox.sent[-1].text)
        for reply in (replies[6], replies[7]):
            assert reply.startswith("What I know about Elif:") and "vegetarian" in reply, reply
            for request in ("private", "shoe size", "delete", "dietary"):
                assert request not in reply, reply


async def test_who_is_not_answered_by_a_line_naming_nobody_while_one_naming_someone_is_kept(
    make_config: Callable[..., Config],
) -> None:
    """ "Who is our team lead?" quoted «I'm no longer on the payments team, I moved to
    the platform team» (in view, sharing "team") once «Our team lead is Priya» had
    left the view: a "who" answered by a line naming nobody looks further back."""
    lines = [
        "Our team lead is Priya and she sits in Berlin.",
        "My teammate Kenji handles the Kafka consumers.",
        "The staging database host is db-stg-03.internal.",
        "The deploy freeze starts on Thursday.",
        "Sprint demo is on Wednesday at 3:30pm.",
    ]
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"p{i}", author="ann"))
            await rt.drain()
        for _ in range(2):
            await rt.command(inbound(CH, "/compact"), is_admin=True)
            await rt.drain()
        for i, line in enumerate(
            [
                "I'm no longer on the payments team, I moved to the platform team.",
                "Who is our team lead?",
            ]
        ):
            await rt.submit(inbound(CH, line, pid=f"q{i}", author="ann"))
            await rt.drain()
        said = rt.outbox.sent[-1].text
    assert "Priya" in said, said


async def test_a_birthday_is_answered_by_a_line_saying_one_not_any_date_naming_the_person(
    make_config: Callable[..., Config],
) -> None:
    """ "When is Lucia's birthday?" quoted «Lucia and I have a call on Friday at 10»:
    any dated line naming her passed for it.  A birthday is answered by a line that
    says one, that she was born, or the age she turns."""
    replies = await _talk(
        make_config,
        [
            "Lucia and I have a call on Friday at 10.",
            "My brother Tom's birthday is on June 2nd.",
            "When is Lucia's birthday?",
            "My wife Sofia turns 40 on 2025-09-14.",
            "When is Sofia's birthday?",
            "When is Tom's bday?",
        ],
    )
    assert replies[2] == NOTHING, replies[2]
    assert "2025-09-14" in replies[4], replies[4]
    assert "June 2nd" in replies[5], replies[5]


async def test_ages_are_not_dates_and_anything_asks_for_whatever_is_told(
    make_config: Callable[..., Config],
) -> None:
    """ "When are the grandchildren coming?" quoted their ages (a number passed for a
    date); "How old is Sam?" quoted his allergy (any line naming him); "Is Sam allergic
    to anything?" found nothing ("anything" is not a word the answer must hold)."""
    replies = await _talk(
        make_config,
        [
            "They are coming to stay from 12 to 19 August.",
            "Our grandchildren are Ellie, who is 8, and Sam, who is 5.",
            "Remember that Sam is allergic to strawberries.",
            "When are the grandchildren coming?",
            "How old is Sam?",
            "Is Sam allergic to anything?",
            "Is Ellie allergic to anything?",
        ],
    )
    assert "12 to 19 August" in replies[3], replies[3]
    assert "who is 5" in replies[4], replies[4]
    assert "allergic to strawberries" in replies[5], replies[5]
    assert "strawberries" not in replies[6], replies[6]


async def test_a_statement_saying_instead_is_quoted_after_what_it_replaces(
    make_config: Callable[..., Config],
) -> None:
    """ "Actually, the pond will go by the greenhouse instead, not the apple tree" and
    "Dave can't do Thursday, he's coming on Monday instead" change what was said
    before without the words "correction" or "update": asked, the old line comes
    with what replaced it, never alone."""
    replies = await _talk(
        make_config,
        [
            "We decided to put a small pond in the corner by the apple tree.",
            "The boiler in flat 2 is broken, the plumber Dave is coming on Thursday 6 February.",
            "Actually, the pond will go by the greenhouse instead, not the apple tree.",
            "Actually, Dave can't do Thursday, he's coming on Monday 10 February instead.",
            "What did I decide about the pond?",
            "When is the plumber coming?",
        ],
    )
    assert "apple tree.» Later," in replies[4] and "greenhouse instead" in replies[4], replies[4]
    assert "Monday 10 February" in replies[5], replies[5]


async def test_a_remark_asking_agreement_is_small_talk_not_a_search(
    make_config: Callable[..., Config],
) -> None:
    """ "Lovely weather today, isn't it?" was looked up ("Let me look further back…",
    then "Nothing I could find"); it asks agreement.  "Sam is allergic to peanuts,
    isn't he?" asks to confirm a fact, and is answered from what was told."""
    replies = await _talk(
        make_config,
        [
            "Remember that Sam is allergic to peanuts.",
            "Lovely weather today, isn't it?",
            "What a long day, eh?",
            "Sam is allergic to peanuts, isn't he?",
        ],
    )
    for reply in replies[1:3]:
        assert reply.startswith("I'll take your word for it!"), reply
    assert "allergic to peanuts" in replies[3], replies[3]


async def test_a_follow_up_asking_only_where_or_when_asks_it_of_the_question_before(
    make_config: Callable[..., Config],
) -> None:
    """ "And where from?" after "Which variety of seed potatoes did I order?", and
    "When is that?" after "What does Margaret want to do with the kids?", found
    nothing: they ask of what the question before asked about."""
    replies = await _talk(
        make_config,
        [
            "The seed potatoes are Charlotte, I ordered them from Thompson & Morgan.",
            "Margaret wants to take the kids to the Severn Valley Railway on the 15th.",
            "I'm having a filling done at the dentist next Tuesday.",
            "Which variety of seed potatoes did I order?",
            "And where from?",
            "What does Margaret want to do with the kids?",
            "When is that?",
        ],
    )
    assert "Thompson & Morgan" in replies[4], replies[4]
    assert "on the 15th" in replies[6], replies[6]


async def test_what_else_after_a_quoted_answer_brings_what_was_not_quoted_then_says_so(
    make_config: Callable[..., Config],
) -> None:
    """A bare "What else?" was always refused ("What else about what?").  After an
    answer quoting a line it asks the same question again, for lines not quoted yet;
    when there are none it says that is all; after a to-do list, that the list was all."""
    replies = await _talk(
        make_config,
        [
            "The allotment society meeting is on the first Tuesday of every month.",
            "The allotment has a water tap by the gate.",
            "I must fix the water butt before April.",
            "What do you know about the allotment?",
            "What else?",
            "What else?",
            "What else?",
            "What do I need to do before April?",
            "What else?",
        ],
    )
    first, second = replies[3], replies[4]
    assert ("meeting" in first) != ("meeting" in second), (first, second)
    assert ("water tap" in first) != ("water tap" in second), (first, second)
    assert replies[5] == "That is all I found on that.", replies[5]
    assert replies[6] == "That is all I found on that.", replies[6]
    assert "water butt" in replies[7], replies[7]
    assert replies[8] == "That is all your to-dos.", replies[8]


async def test_of_lines_sharing_the_same_words_the_one_answering_what_is_asked_is_quoted(
    make_config: Callable[..., Config],
) -> None:
    """Wrong lines a fifth round of new users were quoted, each sharing the question's
    words with the right one: the boiler in flat 2 for who lives there, a lesson to buy a
    book for where the lessons are, "next time" for what time we start, a plumber's visit
    for his number (after the number was forgotten), a liking for what is not liked."""
    replies = await _talk(
        make_config,
        [
            "Flat 2 is rented by Jess and Kieran, a young couple.",
            "The boiler in flat 2 is broken, the plumber Dave is coming on Thursday.",
            "The lessons are at the library in Neude, room 3.",
            "I have to buy the book before next lesson.",
            "From now on sessions start at 8pm.",
            "I'll bring snacks next time.",
            "Dave's number is 07700 900123.",
            "I like to learn with Duolingo but I prefer real conversation.",
            "Who lives in flat 2?",
            "Where are the lessons?",
            "What time do we start?",
            "What's Dave's number?",
            "Forget Dave's number, he changed phones.",
            "What's Dave's number?",
            "What do I not like?",
            "I don't like the g sound.",
            "What do I not like?",
            "We're having the party at Sam's place.",
            "The party is on Saturday.",
            "Where is the party?",
        ],
    )
    assert "Sam's place" in replies[19], replies[19]
    assert "Jess and Kieran" in replies[8], replies[8]
    assert "library" in replies[9], replies[9]
    assert "8pm" in replies[10], replies[10]
    assert "07700" in replies[11], replies[11]
    assert replies[13] == NOTHING, replies[13]
    assert replies[14] == NOTHING, replies[14]
    assert "g sound" in replies[16], replies[16]


async def test_in_a_group_and_when_follows_whoever_asked_just_before(
    make_config: Callable[..., Config],
) -> None:
    """ "Aisha: And when?" right after Ben asked where the next session is asks when
    that session is; it found nothing while only the asker's own question counted."""
    lines = [
        ("marcus", "The next session is at my flat on Elm Street."),
        ("marcus", "We decided to move the next session to Saturday 22 March."),
        ("ben", "Where is the next session?"),
        ("aisha", "And when?"),
    ]
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"g{i}", author=who))
            await rt.drain()
        said = rt.outbox.sent[-1].text
    assert "22 March" in said, said


async def test_a_moved_date_follows_what_it_moves_and_what_someone_said_is_theirs(
    make_config: Callable[..., Config],
) -> None:
    """In a team chat: "What did Priya decide?" quoted the launch on 9 March without
    "then we push the launch to Thursday 11 March"; "Is the billing migration still due
    on 2 March?" found nothing ("done by", not "due"); "What do you know about Priya?"
    gave only her greeting, and "What else did Tom say?" nothing."""
    lines = [
        ("priya", "I'm Priya, product manager for the Orbit launch."),
        ("priya", "We decided the Orbit public launch is on Tuesday 9 March."),
        ("priya", "Remember that legal must sign off on the pricing page before launch."),
        ("tom", "I own the billing migration, it has to be done by 2 March."),
        ("priya", "The beta customers are Acme, Globex and Initech."),
        ("tom", "Actually, the billing migration deadline moves to 4 March, the vendor is late."),
        ("priya", "Hmm, then we push the launch to Thursday 11 March."),
        ("tom", "lol the coffee machine is broken again"),
        ("lena", "What did Priya decide?"),
        ("priya", "Is the billing migration still due on 2 March?"),
        ("tom", "What do you know about Priya?"),
        ("lena", "What did Tom say?"),  # named as people write names
        ("tom", "Who needs to sign off on the pricing page?"),
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"t{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    decided, due, priya, tom, sign_off = replies[8:]
    assert "legal must sign off" in sign_off and "Later" not in sign_off, sign_off
    assert "9 March.» Later," in decided and "11 March" in decided, decided
    assert "2 March.» Later," in due and "4 March" in due, due
    assert priya.startswith("What I know about Priya:"), priya
    assert "Acme" in priya and "9 March" in priya, priya
    assert tom.startswith("Tom said:") and "billing migration" in tom, tom
    assert "coffee" not in tom, tom  # said, but nothing worth keeping


async def test_what_is_noted_is_said_back_without_the_hesitation_before_it(
    make_config: Callable[..., Config],
) -> None:
    """ "Noted: Hmm, then we push the launch…" and "Noted: Change of plan: …" said the
    filler back; the acknowledgement says what was kept."""
    replies = await _talk(
        make_config,
        [
            "Hmm, then we push the launch to Thursday 11 March.",
            "Change of plan: the grandchildren now come from 19 to 26 August instead.",
        ],
    )
    assert replies[0] == "Noted: we push the launch to Thursday 11 March.", replies[0]
    assert replies[1] == ("Noted: the grandchildren now come from 19 to 26 August instead."), (
        replies[1]
    )


async def test_what_else_about_me_with_no_list_in_view_says_it_starts_over(
    make_config: Callable[..., Config],
) -> None:
    """ "What else do you know about me?" once the list it continues has left the view
    gave the same list again as if it were new; it says it starts from the top."""
    replies = await _talk(
        make_config,
        [
            "My name is Harold and I'm retired from the railway.",
            "I live in Shrewsbury with my wife Margaret.",
            "What else do you know about me?",
        ],
    )
    assert replies[2].startswith(
        "(I cannot see an earlier list in this conversation's view, so here it is from the "
        "top.) Here is what you told me:"
    ), replies[2]
    assert "Shrewsbury" in replies[2], replies[2]


async def test_how_much_and_a_pronoun_for_what_is_asked_still_find_the_line(
    make_config: Callable[..., Config],
) -> None:
    """ "How much did the greenhouse cost?" ("much" counted as a word the line lacked)
    and "What does Margaret want to do with the kids?" (the line says "them") found
    nothing."""
    replies = await _talk(
        make_config,
        [
            "The greenhouse is 8 by 6 feet, I got it second-hand for 150 pounds.",
            "Margaret wants to take them to the Severn Valley Railway on the 15th.",
            "I live in Shrewsbury with my wife Margaret.",
            "How much did the greenhouse cost?",
            "What does Margaret want to do with the kids?",
        ],
    )
    assert "150 pounds" in replies[3], replies[3]
    assert "Severn Valley" in replies[4], replies[4]


async def test_a_question_asked_of_another_is_answered_only_in_kind(
    make_config: Callable[..., Config],
) -> None:
    """ "What else?" after "When is the launch?" quoted "I think the launch will go
    well", and "And where?" after "When is the party?" quoted the line giving only its
    date: asked of another question, a "when" needs a date and a "where" a place."""
    replies = await _talk(
        make_config,
        [
            "The launch is on Tuesday.",
            "I think the launch will go well.",
            "When is the launch?",
            "What else?",
            "The party is on Saturday at 8pm.",
            "When is the party?",
            "And where?",
        ],
    )
    assert "Tuesday" in replies[2], replies[2]
    assert replies[3] == "That is all I found on that.", replies[3]
    assert "Saturday" in replies[5], replies[5]
    assert replies[6] == "I don't know yet: nothing I can see or remember covers that.", replies[6]


async def test_a_date_is_no_age_and_a_dislike_is_no_liking(
    make_config: Callable[..., Config],
) -> None:
    """ "How old is Lee?" quoted «Lee's birthday is on 3 March» (a date's number passed
    for an age), and "What do I like?" «I don't like olives»."""
    replies = await _talk(
        make_config,
        [
            "I don't like olives.",
            "Lee's birthday is on 3 March.",
            "What do I like?",
            "How old is Lee?",
            "I like capers, but I don't like anchovies.",
            "Lee is 34 years old.",
            "What do I like?",
            "How old is Lee?",
        ],
    )
    assert "olives" not in replies[2], replies[2]
    assert "3 March" not in replies[3], replies[3]
    assert "capers" in replies[6], replies[6]
    assert "34 years" in replies[7], replies[7]


async def test_what_someone_said_is_listed_asked_either_way_and_continued(
    make_config: Callable[..., Config],
) -> None:
    """ "What did I say about Tom?" and "Did I say anything about Kim?" found nothing
    (the words "say" and "anything" were looked for); "What else?" after "Alice said: …"
    was refused.  Both now list, and "What else?" goes on, then says that was all."""
    lines = [
        ("ann", "My brother Tom works as a chef."),
        ("ann", "Kim's number is 07700 900123."),
        ("ann", "What did I say about Tom?"),
        ("ann", "Did I say anything about Kim?"),
        ("alice", "The launch budget is 5000 euros."),
        ("alice", "We decided to launch on Tuesday."),
        ("alice", "lol ok"),
        ("bob", "What did Alice say?"),
        ("bob", "What else?"),
        ("bob", "What else?"),
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"w{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    assert replies[2].startswith("What I know about Tom:") and "chef" in replies[2], replies[2]
    assert replies[3].startswith("What I know about Kim:") and "07700" in replies[3], replies[3]
    said = replies[7]
    assert said.startswith("Alice said:") and "5000" in said and "Tuesday" in said, said
    assert "lol" not in said, said
    assert replies[8] == "That is everything Alice said that I kept.", replies[8]
    assert replies[9] == "That is all I found on that.", replies[9]


async def test_a_follow_up_is_answered_by_the_line_just_quoted_when_it_says_that(
    make_config: Callable[..., Config],
) -> None:
    """ "Who is coming on Friday?" quoted Zoe's line; "And where from?" then found
    nothing (asked as "where from is coming on Friday", it shared too little), though
    the line just quoted says "from Lyon".  A line just quoted without a place still
    does not answer "And where?"."""
    replies = await _talk(
        make_config,
        [
            "My friend Zoe is from Lyon and she arrives on Friday with her brother.",
            "The party is on Saturday at 8pm.",
            "Who is coming on Friday?",
            "And where from?",
            "When is the party?",
            "And where?",
        ],
    )
    assert "Zoe" in replies[2], replies[2]
    assert "from Lyon" in replies[3], replies[3]
    assert replies[5] == "I don't know yet: nothing I can see or remember covers that.", replies[5]


async def test_who_is_not_answered_by_a_line_whose_only_name_is_its_subject(
    make_config: Callable[..., Config],
) -> None:
    """ "Who lives in flat 3?" quoted «Flat 3 is empty at the moment» over the new
    tenant's line: "Flat" opening a sentence counted as someone named."""
    replies = await _talk(
        make_config,
        [
            "Flat 3 is empty at the moment.",
            "A new tenant, Tomasz Nowak, signed for flat 3 today, rent 780 pounds from 1 March.",
            "Who lives in flat 3?",
        ],
    )
    assert "Tomasz Nowak" in replies[2], replies[2]


async def test_a_line_said_of_everyone_answers_for_each_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "What level is Veska?" found nothing against «Everyone is level 4 after last
    session»: it is said of Veska too.  It still does not answer what it does not say."""
    replies = await _talk(
        make_config,
        [
            "Everyone is level 4 after last session.",
            "Aisha plays Veska, a tiefling warlock.",
            "What level is Veska?",
            "What colour are Veska's eyes?",
        ],
    )
    assert "level 4" in replies[2], replies[2]
    assert "level 4" not in replies[3], replies[3]


async def test_a_branch_answer_recorded_slowly_is_waited_for_by_drain(
    make_config: Callable[..., Config],
    monkeypatch: Any,
) -> None:
    """A branch concluded, then its run was recorded (a store write, slow on a loaded
    PostgreSQL) before its answer reached the channel; in between the channel looked
    idle, so a drain returned with only "Let me look further back…" sent.  The run now
    counts as running until its answer is posted."""
    here, other = "slack:T1:C1", "slack:T1:C2"  # one workspace: one memory
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await rt.submit(
            inbound(other, "Remember that the deploy window is Friday at 5pm.", pid="o1")
        )
        await rt.drain()
        records = rt.registry.deps.tasks.records
        finish = records.finish_run

        async def slow_finish(*args: Any, **kwargs: Any) -> None:
            await asyncio.sleep(0.3)
            await finish(*args, **kwargs)

        # Something of this channel was summarized: the bot looks further back in a
        # branch (with nothing set aside, the memories would answer in the turn).
        said_here = [
            "The coffee machine on the third floor is fixed again, the engineer replaced "
            f"the pump and the descaler, and says it should last until spring {n}."
            for n in range(4)
        ]
        for i, line in enumerate(said_here):
            await rt.submit(inbound(here, line, pid=f"h{i}", author="eli"))
            await rt.drain()
        await rt.command(inbound(here, "/compact", pid="c1", author="eli"), is_admin=True)
        await rt.drain()
        monkeypatch.setattr(records, "finish_run", slow_finish)
        before = len(rt.outbox.sent)
        await rt.submit(inbound(here, "When is the deploy window?", pid="q1", author="eli"))
        await rt.drain()
        said = [m.text for m in rt.outbox.sent[before:] if m.channel == here]
    assert len(said) == 2 and "Friday at 5pm" in said[-1], said


async def test_a_group_chat_of_a_sixth_round_of_new_users(
    make_config: Callable[..., Config],
) -> None:
    """What a parents' group and an on-call team met: a question put to someone else by
    name was answered by the bot ("I can't do that here"); "What did Maria say about
    lunch?" and "Did anyone mention the coffee machine?" found nothing, nor "What was the
    root cause of INC-1042?" (the line after the ticket's does not repeat it); "Note
    that …" after a filler, "Sam here" and "Welcome to the … chat" were said back as
    told; "I've collected £48 so far" was not kept ("so far" read as an opinion)."""
    lines = [
        ("maria", "Hi all! Welcome to the Year 3 trip chat. The trip is on Friday 9 May."),
        ("maria", "Great. Note that each family pays £12 for museum entry and lunch."),
        ("sam", "Hi, Sam here, Leo's dad."),
        ("dev", "I've collected £48 so far from four families."),
        ("dev", "No worries. Sam, can you drive instead?"),
        ("omar", "Heads up, INC-1042: checkout API returning 502s since 09:40."),
        ("omar", "The root cause was a memory leak in the new retry client."),
        ("omar", "coffee machine on floor 3 is broken again btw"),
        ("karen", "What did Maria say about lunch?"),
        ("karen", "Did anyone mention the coffee machine?"),
        ("karen", "What was the root cause of INC-1042?"),
        ("karen", "What was the root cause of INC-2077?"),
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"g{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    assert "Welcome" not in replies[0] and "Friday 9 May" in replies[0], replies[0]
    assert replies[1].startswith("Noted: each family pays £12"), replies[1]
    assert "you're Sam, Leo's dad" in replies[2], replies[2]
    assert replies[3].startswith("Noted: you've collected £48"), replies[3]
    assert replies[4] == "OK, dev.", replies[4]  # Sam's to answer, not the bot's
    assert "£12 for museum entry and lunch" in replies[8], replies[8]
    assert "broken again" in replies[9], replies[9]
    assert "memory leak" in replies[10], replies[10]
    assert "memory leak" not in replies[11], replies[11]  # another ticket's


async def test_chat_shorthand_asks_and_thanks(make_config: Callable[..., Config]) -> None:
    """ "wen do i work" and "anything else" (no question mark) got "OK, ann."; so did
    "ok ty ur the best"."""
    replies = await _talk(
        make_config,
        [
            "i work at the campus cafe on tues and thurs evenings 5 to 9",
            "my flatmate is priya, she studies medicine",
            "wen do i work",
            "anything else",
            "ok ty ur the best",
        ],
    )
    assert "campus cafe" in replies[2], replies[2]
    assert replies[3] == "That is all I found on that.", replies[3]
    assert replies[4] == "You're welcome.", replies[4]


async def test_a_question_without_its_apostrophe_is_asked_all_the_same(
    make_config: Callable[..., Config],
) -> None:
    """ "whats dan's number?" and "whats the campaign called?" found nothing, where
    "what's" found the line."""
    replies = await _talk(
        make_config,
        [
            "dan's number is 07700 900 261",
            "the campaign is called the ashen crown",
            "whats dan's number?",
            "whats the campaign called?",
        ],
    )
    assert "07700 900 261" in replies[2], replies[2]
    assert "ashen crown" in replies[3], replies[3]


async def test_how_much_is_answered_by_a_line_giving_an_amount(
    make_config: Callable[..., Config],
) -> None:
    """ "How much is Tom's cake?" quoted "Tom changed his order: it's a strawberry cake
    now", the newest line about Tom's cake, over the one giving its price."""
    replies = await _talk(
        make_config,
        [
            "Tom Becker ordered a chocolate fudge cake for 21 June, price £45.",
            "And the price for Tom's cake is £50 instead of £45.",
            "Actually Tom changed his order: it's a strawberry cake now, not chocolate fudge.",
            "How much is Tom's cake?",
            "How many cakes did Lina order?",
        ],
    )
    # a line giving the price, the newest price last (what changed the order but not
    # its price is no "Later" of how much it is)
    assert "£50" in replies[3].split("Later,")[-1], replies[3]
    assert "strawberry" not in replies[3], replies[3]
    assert replies[4] == NOTHING, replies[4]


async def test_a_question_asking_for_several_of_a_kind_lists_each(
    make_config: Callable[..., Config],
) -> None:
    """ "wat exams do i have" quoted one exam of two; "What decisions did we make?" one
    decision of two.  Each is listed now, and a question for one thing still gets one."""
    replies = await _talk(
        make_config,
        [
            "my stats exam is on the 12th of jan at 9am in the roger stevens building",
            "also linear algebra exam is jan 19 pls remember",
            "my flatmate is priya",
            "Decision: roll back payments-gateway to 1.8.2.",
            "We decided to postpone release 4.2 to Tuesday.",
            "wat exams do i have",
            "What decisions did we make?",
            "When is my stats exam?",
        ],
    )
    assert "stats exam" in replies[5] and "linear algebra" in replies[5], replies[5]
    assert "priya" not in replies[5], replies[5]
    assert "1.8.2" in replies[6] and "postpone" in replies[6], replies[6]
    assert "stats exam" in replies[7] and "linear algebra" not in replies[7], replies[7]


async def test_a_line_said_of_he_or_she_answers_for_who_was_named_before_it(
    make_config: Callable[..., Config],
) -> None:
    """ "He also takes amlodipine every morning" after "Dad takes metformin…" did not
    answer "What does Dad take in the morning?", nor Lina's card "She also asked for…"."""
    replies = await _talk(
        make_config,
        [
            "Dad takes metformin 500mg twice a day with breakfast and dinner.",
            "He also takes amlodipine 5mg every morning for blood pressure.",
            "Lina Okafor wants a red velvet cake for her anniversary on 28 June.",
            "She also asked for a handwritten card saying 10 years, still sweet.",
            "What does Dad take in the morning?",
            "What should the card for Lina say?",
            "What should the card for Tom say?",
        ],
    )
    assert "amlodipine" in replies[4], replies[4]
    assert "10 years" in replies[5], replies[5]
    assert replies[6] == NOTHING, replies[6]


async def test_what_else_with_a_question_goes_on_and_one_line_answering_two_parts_is_said_once(
    make_config: Callable[..., Config],
) -> None:
    """ "What else did I book?" quoted the hotel again; "What time do we meet and
    where?" quoted the same line twice, once per part."""
    replies = await _talk(
        make_config,
        [
            "I booked the Hotel Gracery in Shinjuku for 2 to 7 April.",
            "I also booked a ryokan called Yoshida-sanso in Kyoto from 8 to 12 April.",
            "What did I book?",
            "What else did I book?",
            "What else did I book?",
            "We meet at the school gate at 8:15.",
            "What time do we meet and where?",
        ],
    )
    first, second = replies[2], replies[3]
    assert ("Gracery" in first) != ("Gracery" in second), (first, second)
    assert ("Yoshida" in first) != ("Yoshida" in second), (first, second)
    assert replies[4] == "That is all I found on that.", replies[4]
    assert replies[6].count("school gate") == 1 and "«What time" not in replies[6], replies[6]


async def test_what_do_i_need_to_remember_lists_the_to_dos(
    make_config: Callable[..., Config],
) -> None:
    """ "What do I need to remember?" quoted one line, not the to-dos."""
    replies = await _talk(
        make_config,
        [
            "Remind me to buy a pocket wifi before I leave.",
            "Don't forget that I'm vegetarian, I need to check restaurants.",
            "Remind me to send postcards to grandma from Nara.",
            "What do I need to remember?",
        ],
    )
    assert replies[3].startswith("Your to-dos:"), replies[3]
    assert "pocket wifi" in replies[3] and "postcards" in replies[3], replies[3]


async def test_a_thread_line_is_of_the_nearest_ticket_and_he_of_a_man_named_before(
    make_config: Callable[..., Config],
) -> None:
    """An attack on the new rules: after INC-1042's thread came INC-1043's, and INC-1042's
    root cause was quoted as 1043's DNS; "He also takes amlodipine" after "Mum called
    this afternoon" answered for Mum (and Dad's question found nothing); "free" counted as
    an amount."""
    replies = await _talk(
        make_config,
        [
            "Heads up, INC-1042: checkout API returning 502s.",
            "The root cause was a memory leak in the retry client.",
            "INC-1043: DNS errors on the edge.",
            "The root cause was a DNS misconfiguration.",
            "Dad takes metformin with breakfast.",
            "Mum called this afternoon.",
            "He also takes amlodipine every morning.",
            "Aisha wants the cupcakes gluten-free.",
            "What was the root cause of INC-1042?",
            "What was the root cause of INC-1043?",
            "What does Dad take in the morning?",
            "What does Mum take in the morning?",
            "How much does Aisha want?",
        ],
    )
    assert "memory leak" in replies[8], replies[8]
    assert "DNS misconfiguration" in replies[9], replies[9]
    assert "amlodipine" in replies[10], replies[10]
    assert "amlodipine" not in replies[11], replies[11]
    assert "gluten-free" not in replies[12], replies[12]


async def test_a_question_put_by_name_in_a_group_is_left_to_them_even_before_they_spoke(
    make_config: Callable[..., Config],
) -> None:
    """ "Sam, can you drive instead?" before Sam had said anything was answered "I can't
    do that here…"; so was "Also where is it?" after "Maria, what time is lunch?"."""
    lines = [
        ("maria", "The trip is on Friday 9 May."),
        ("dev", "I can drive six kids."),
        ("dev", "Sam, can you drive instead?"),
        ("karen", "Maria, what time is lunch? Also where is it?"),
        ("karen", "Guys, when is the trip?"),
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"v{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    assert replies[2] == "OK, dev.", replies[2]
    assert replies[3] == "OK, karen.", replies[3]
    assert "Friday 9 May" in replies[4], replies[4]  # a question to the bot still is


async def test_what_else_after_another_question_is_not_told_it_was_all(
    make_config: Callable[..., Config],
) -> None:
    """ "What else did I book?" after "What's my hotel confirmation number?" (and "What else
    is open?" after anything) was answered "That is all I found on that.", as if a list
    had run out."""
    replies = await _talk(
        make_config,
        [
            "I booked the Hotel Gracery in Shinjuku, confirmation number GX-55821.",
            "What's my hotel confirmation number?",
            "What else did I book?",
            "What else is open?",
        ],
    )
    assert "GX-55821" in replies[1], replies[1]
    assert replies[2] == "Nothing else I can see or remember covers that.", replies[2]
    assert replies[3] == "Nothing else I can see or remember covers that.", replies[3]


async def test_a_list_and_a_profile_leave_out_what_was_called_off_and_say_so(
    make_config: Callable[..., Config],
) -> None:
    """ "What orders do I have?" listed Jake's cancelled order, and quoted "Later, Jake
    cancelled his carrot cake order" after Mrs. Patel's and Tom's too; "What do you know
    about me?" kept the cancelled order.  The cancelled order is left out and the line
    cancelling it is said once, as the reason; asked of it, the order is quoted with
    its cancellation after it; a kept order is still listed."""
    replies = await _talk(
        make_config,
        [
            "New order: Mrs. Patel wants a lemon drizzle cake for Saturday 14 June, £28.",
            "Note that Tom Becker ordered a chocolate fudge cake for 21 June, price £45.",
            "Order from Jake Morris: carrot cake, 20 June, £32, with cream cheese frosting.",
            "Jake cancelled his carrot cake order.",
            "I have a dentist appointment on Monday at 3pm.",
            "The dentist appointment is cancelled.",
            "What orders do I have?",
            "What do you know about me?",
            "What did Jake order?",
            "What appointments do I have?",
        ],
    )
    orders = replies[6]
    assert "Mrs. Patel" in orders and "Tom Becker" in orders, orders
    assert "cream cheese" not in orders, orders
    assert orders.count("Jake cancelled") == 1 and "Not listed, since" in orders, orders
    assert "carrot cake, 20 June" not in replies[7] and "Tom Becker" in replies[7], replies[7]
    assert replies[8].index("cream cheese") < replies[8].index("Jake cancelled"), replies[8]
    assert replies[9].startswith("Nothing that still holds"), replies[9]
    assert "The dentist appointment is cancelled." in replies[9], replies[9]


async def test_a_freelancer_is_answered_at_once_however_the_client_is_named(
    make_config: Callable[..., Config],
) -> None:
    """What a seventh round of new users met, with nothing yet out of view: each of these
    said "Let me look further back…" first, and then nothing, though its answer was in
    view.  "When is the Bloom Florist deadline?" was not answered by "Bloom's deadline"
    (each word of a name was needed);
    "Is INV-042 paid?" looked for INV-041 too (read as a typo); "Who is my contact at
    Northpoint?" skipped "Northpoint's contact is Raj" (someone else's contact); "How
    much is the job worth?" needed "worth", "When is … due?" "due", "What's happening
    with …?" "happening"; "Has Bloom paid their invoice?" missed "paid INV-041", the
    invoice named in the line before."""
    replies = await _talk(
        make_config,
        [
            "Client one: Bloom Florist, they want a new logo. Contact is Hannah.",
            "Bloom's deadline is 12 March.",
            "Northpoint is paying a flat fee of £2,400 for the labels.",
            "Third is a charity, Kindred Trails, annual report design, deadline end of April.",
            "I invoiced Bloom Florist £1,150 on 20 February, invoice number INV-041.",
            "Note that Northpoint's contact is Raj, and he prefers WhatsApp over email.",
            "Bloom Florist paid INV-041 today!",
            "Kindred Trails just emailed, the annual report project is cancelled.",
            "Oh and a new client, Ferro Cycles, wants a website mockup by 2 May.",
            "I need to chase Northpoint if INV-042 isn't paid by 15 March.",
            "When is the Bloom Florist deadline?",
            "Who is my contact at Northpoint?",
            "Is INV-042 paid?",
            "How much is the Northpoint job worth?",
            "What's happening with Kindred Trails?",
            "When is Ferro Cycles due?",
            "Has Bloom paid their invoice?",
            "When is the Acme Widgets deadline?",
        ],
    )
    assert "12 March" in replies[10], replies[10]
    assert "Raj" in replies[11], replies[11]
    assert "INV-042 isn't paid" in replies[12] and "INV-041" not in replies[12], replies[12]
    assert "£2,400" in replies[13], replies[13]
    assert replies[14].index("annual report design") < replies[14].index("cancelled"), replies[14]
    assert "2 May" in replies[15], replies[15]
    assert "paid INV-041" in replies[16], replies[16]
    assert replies[17] == NOTHING, replies[17]


async def test_a_group_of_a_seventh_round_thanks_another_and_introduces_oneself(
    make_config: Callable[..., Config],
) -> None:
    """ "Thanks Sarah, that's a huge help" got "You're welcome." from the bot; "Hiya,
    Ben, Freddie's dad." by Ben greeted him and kept nothing; "sorry my english is not
    so good" was asked what it corrects; "remember please the agent…" kept "please";
    "Oh no, Hartwell Barn said…" kept "no,"; "what you know about me?" found nothing."""
    lines = [
        ("sarah", "I can drive Leo and Arjun to the away game."),
        ("priya", "Thanks Sarah, that's a huge help."),
        ("ben", "Hiya, Ben, Freddie's dad."),
        ("ben", "sorry my english is not so good"),
        ("ben", "remember please the agent for the Ancoats flat is called Sophie"),
        ("emma", "Oh no, Hartwell Barn said the ceremony has to finish by 2pm."),
        ("emma", "what you know about me?"),
        ("priya", "Thanks!"),
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"g{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    assert "welcome" not in replies[1].lower(), replies[1]
    assert "you're Ben, Freddie's dad" in replies[2], replies[2]
    assert "corrects" not in replies[3], replies[3]
    assert replies[4] == "Noted: the agent for the Ancoats flat is called Sophie.", replies[4]
    assert replies[5].startswith("Noted: Hartwell Barn said"), replies[5]
    assert replies[6].startswith("Here is what you told me: Hartwell Barn said"), replies[6]
    assert replies[7] == "You're welcome.", replies[7]


async def test_a_forget_of_that_thing_about_something_keeps_no_chatter(
    make_config: Callable[..., Config],
) -> None:
    """ "Forget the discount thing for Kindred then" had nothing to forget ("thing" and
    "then" were looked for); "Forget that thing about puppy breath" said "about thing
    about" and kept "lol" as a memory of its own; "forget about the weather thing" kept
    "Today is raining so much" of a remark as a new memory."""
    replies = await _talk(
        make_config,
        [
            "Remember that Kindred Trails get a 20% charity discount on my day rate.",
            "Forget the discount thing for Kindred then.",
            "Do Kindred Trails get a discount?",
            "Honestly, puppy breath is the best thing ever. lol",
            "Forget that thing about puppy breath.",
            "What do you know about me?",
            "today is raining so much, manchester weather is terrible haha",
            "forget about the weather thing",
        ],
    )
    assert replies[1].startswith("Done: I forgot"), replies[1]
    assert "20%" not in replies[2], replies[2]
    assert replies[4] == "Done: I forgot what you told me about puppy breath.", replies[4]
    assert "lol" not in replies[5], replies[5]
    # (the rest of a remark is no memory to keep: "Today is raining so much")
    assert replies[7] == "Done: I forgot what you told me about the weather.", replies[7]


async def test_a_puppy_is_asked_after_by_name_weight_food_and_vet(
    make_config: Callable[..., Config],
) -> None:
    """ "What's my puppy's name?" quoted the line about her food ("puppy's" was taken
    for a name every answer must hold, and "Her name is Biscuit" does not); "How much
    does Biscuit weigh?" found nothing ("She weighed…" was not of Biscuit, the line
    naming her starting "Her"); "She's now 4.1 kg" did not follow "She weighed 3.2 kg",
    nor "We're switching her food to Purina" "She eats Royal Canin"; "Who is our vet?"
    added "Later, «she's allergic to chicken, the vet thinks»"; "What do you know about
    Biscuit?" left out every line calling her "she"."""
    replies = await _talk(
        make_config,
        [
            "Her name is Biscuit, she's a 9 week old cocker spaniel.",
            "She weighed 3.2 kg at the breeder's.",
            "Our vet is Dr Amelia Fox at Riverside Veterinary Clinic.",
            "She eats Royal Canin Puppy, 4 small meals a day.",
            "Puppy classes start on 6 May at Pawsitive Steps.",
            "She's now 4.1 kg at the vet weigh-in today.",
            "We're switching her food to Purina Pro Plan Puppy because Royal Canin upset her.",
            "Don't forget she's allergic to chicken, the vet thinks.",
            "What's my puppy's name?",
            "How much does Biscuit weigh?",
            "What food does she eat?",
            "Who is our vet?",
            "When do puppy classes start?",
            "What do you know about Biscuit?",
        ],
    )
    assert "Her name is Biscuit" in replies[8], replies[8]
    assert replies[9].index("3.2 kg") < replies[9].index("4.1 kg"), replies[9]
    assert replies[10].index("Royal Canin Puppy") < replies[10].index("Purina"), replies[10]
    assert "Amelia Fox" in replies[11] and "chicken" not in replies[11], replies[11]
    assert "6 May" in replies[12] and "Purina" not in replies[12], replies[12]
    assert "She eats Royal Canin" in replies[13] and "Amelia" not in replies[13], replies[13]


async def test_a_wedding_group_puts_questions_to_each_other_and_takes_on_work(
    make_config: Callable[..., Config],
) -> None:
    """ "Ben can you take them?" (no comma after the name) was answered by the bot with a
    line about shirt sizes; "I'm doing flowers and the cake, Rosa can you handle the
    photographer?" kept nothing of what Emma takes on; "I'm Rosa, your planner" was said
    back as "you're Rosa, your planner"; "Yes I'll drive…" as "Yes you'll drive…"; a
    to-do with no time was told "I can't send reminders at a set time"."""
    lines = [
        ("rosa", "Hi both! I'm Rosa, your planner."),
        ("ben", "Arjun takes a youth small shirt."),
        (
            "sarah",
            "I can't drive on Sunday anymore, my car's in the garage. Ben can you take them?",
        ),
        ("ben", "Yes I'll drive Leo and Arjun on Sunday no problem."),
        ("emma", "I'm doing flowers and the cake, Rosa can you handle the photographer?"),
        ("josh", "Remind me to pay the venue deposit by 1 March."),
        ("rosa", "What is Emma doing?"),
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"w{i}", author=who))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    assert replies[0].endswith("Noted: you're Rosa, the planner."), replies[0]
    assert replies[2] == "Noted: you can't drive on Sunday anymore, your car's in the garage."
    assert replies[3] == "Noted: you'll drive Leo and Arjun on Sunday no problem.", replies[3]
    assert replies[4] == "Noted as a to-do: you're doing flowers and the cake.", replies[4]
    assert "I can't send reminders at a set time" in replies[5], replies[5]
    assert "flowers and the cake" in replies[6], replies[6]


async def test_a_landlord_lists_his_flats_and_finds_the_plumbers_phone_number(
    make_config: Callable[..., Config],
) -> None:
    """ "Which flats do I have?" left out "Flat 1 is on Ashby Road, flat 2 is…" (its
    "Flat" read as a person's name, "Flat 1" as a flat qualifying a "1"); "What's my
    plumber's phone number?" found nothing ("phone" was a detail the line must hold)."""
    replies = await _talk(
        make_config,
        [
            "I rent out three flats and I keep losing track of things.",
            "Flat 1 is on Ashby Road, flat 2 is above the bakery on Mill Lane.",
            "My plumber is Dave Kettering, his number is 07700 900417.",
            "Dave fixed the boiler, it was a faulty pump.",
            "Which flats do I have?",
            "What's my plumber's phone number?",
            "What's my accountant's phone number?",
        ],
    )
    assert "three flats" in replies[4] and "Ashby Road" in replies[4], replies[4]
    assert "07700 900417" in replies[5], replies[5]
    assert replies[6] == NOTHING, replies[6]


async def test_two_parts_answered_by_one_line_looked_for_further_back_quote_it_once(
    make_config: Callable[..., Config],
) -> None:
    """ "When is the first match and where?", its line summarized away: each part was
    looked for further back and each late answer quoted the same line in full.  It is
    quoted once, however the two lookups come back."""
    long = (
        "The coffee machine on the third floor is fixed again, the engineer replaced the "
        "pump and the descaler, and says it should last until {}."
    )
    lines = [
        "Our first match is Saturday 14th September away at Hollins Lane, kick off 10am.",
        *(long.format(season) for season in ("spring", "summer", "winter")),
    ]
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(lines):
            await rt.submit(inbound(CH, line, pid=f"m{i}", author="coach"))
            await rt.drain()
        await rt.command(inbound(CH, "/compact", pid="c1", author="coach"), is_admin=True)
        await rt.drain()
        before = len(rt.outbox.sent)
        await rt.submit(inbound(CH, "When is the first match and where?", pid="q", author="sarah"))
        await rt.drain()
        said = [m.text for m in rt.outbox.sent[before:]]
    assert said[0] == HOLDING, said
    assert " ".join(said).count("Hollins Lane") == 1, said
    # The two parts are looked for by branches that may come back in one turn or in two:
    # one answer labelled with both parts, or the second saying the first answers it.
    both = said[-1].startswith("«When is the first match / where?»")
    assert both or said[-1].endswith(SAME_AS_QUOTED), said


async def test_a_cancellation_retires_only_what_it_names_for_good(
    make_config: Callable[..., Config],
) -> None:
    """What an attack on cancellations found: "Jake cancelled his carrot cake order" also
    took his chocolate cake order and his mum's; "I cancelled Spotify" took "I pay for
    Spotify and Netflix"; "Friday's meeting is cancelled" the Monday meeting; a snow day
    the son's school; "I still haven't cancelled…", "I almost cancelled…" their thing."""
    replies = await _talk(
        make_config,
        [
            "Order from Jake Morris: carrot cake, pickup Friday.",
            "Order from Jake Morris: chocolate cake, pickup Sunday.",
            "Order from Jake's mum: birthday cake, pickup Saturday.",
            "Jake cancelled his carrot cake order.",
            "Order from Priya's dad: sponge cake, pickup Monday.",
            "Priya cancelled her cake order.",
            "My subscriptions are Spotify and Netflix.",
            "I cancelled Spotify.",
            "Team meeting every Monday at 10am.",
            "Friday's meeting is cancelled.",
            "My son Leo goes to Park Lane School.",
            "School is cancelled tomorrow because of the snow.",
            "My gym membership costs £30 a month.",
            "I still haven't cancelled my gym membership.",
            "My trip to Japan is in April.",
            "I almost cancelled my trip to Japan but decided to go anyway.",
            "What orders do I have?",
            "Tell me everything you know about me.",
            "What meetings do I have?",
        ],
    )
    orders = replies[16]
    assert "chocolate cake" in orders and "Jake's mum" in orders, orders
    assert "Priya's dad" in orders, orders
    assert "carrot cake, pickup" not in orders and "Not listed, since" in orders, orders
    me = replies[17]
    for kept in ("Spotify and Netflix", "Park Lane School", "£30 a month", "Japan is in April"):
        assert kept in me, (kept, me)
    assert "Team meeting every Monday" in replies[18], replies[18]


async def test_an_attack_on_names_owners_and_group_questions_finds_no_wrong_answer(
    make_config: Callable[..., Config],
) -> None:
    """What an attack on this round's rules found: "What's my dog's name?" quoted "My
    dog's vet is Dr Fox"; "Rex is my dog" and "Our puppy, Biscuit, …" gave no name; one
    word of a name matched another name ("Bloom Bakery" for "Bloom Florist", "New
    Jersey" for "New York"); "She loves gardening" was of the vet named two lines
    before, not of Mum just before; "Where did I park, Sam can you remember?" was kept
    and quoted as told; "Tom paid me £20" answered "How much does Tom charge?"."""
    replies = await _talk(
        make_config,
        [
            "Our vet is Dr Amelia Fox.",
            "My mum is visiting next week.",
            "She loves gardening.",
            "What does Dr Fox love?",
            "My dog's vet is Dr Fox.",
            "What's my dog's name?",
            "Rex is my dog, he's a border collie.",
            "What's my dog's name?",
            "I invoiced Bloom Florist £1,150 last month.",
            "Bloom Bakery owes me £300 for the logo.",
            "How much does Bloom Florist owe me?",
            "My sister lives in New York.",
            "My brother moved to New Jersey last year.",
            "Where does my sister live?",
            "I parked on level 3 of the Arndale car park.",
            "Where did I park, Sam can you remember?",
            "Where did I park?",
            "Tom paid me £20 for the concert tickets.",
            "How much does Tom charge?",
            "Dinner with Sam is at Luigi's on Friday.",
            "Sorry, I meant Mario's.",
            "Remind me to call the dentist.",
            "Biscuit weighed 3.2 kg when we got her.",
            "My parcel to Spain weighs 2 kg.",
            "She's now 4.1 kg.",
            "How much does my parcel weigh?",
        ],
    )
    assert replies[3] == NOTHING, replies[3]  # she is Mum, said just before
    assert replies[5] == NOTHING, replies[5]
    assert "Rex is my dog" in replies[7], replies[7]
    assert "Bakery" not in replies[10], replies[10]
    assert "New York" in replies[13] and "New Jersey" not in replies[13], replies[13]
    assert "level 3" in replies[16], replies[16]
    assert replies[18] == NOTHING, replies[18]
    assert "Mario's on Friday" in replies[20] and "Mario's's" not in replies[20], replies[20]
    assert "I can't send reminders at a set time" in replies[21], replies[21]
    assert "2 kg" in replies[25] and "4.1 kg" not in replies[25], replies[25]


async def test_a_group_attack_on_who_a_question_is_for_and_whose_list(
    make_config: Callable[..., Config],
) -> None:
    """ "Hiya can you tell me where the party is?" was taken as put to someone called
    Hiya (and, its greeting counted as a word asked, looked for further back); Ben's
    "What cakes did I order?" listed Anna's order once his was cancelled; "What is Emma
    allergic to?" quoted Emma's "My son is allergic to nuts"; "Thanks, Great stuff" was
    taken as thanks to someone called Great."""
    lines = [
        ("anna", "Hi all, the party is on Saturday at 7pm at the Red Lion."),
        ("carl", "Hiya can you tell me where the party is?"),
        ("anna", "I ordered a chocolate cake for Saturday."),
        ("ben", "I ordered a lemon cake too."),
        ("ben", "I cancelled my lemon cake."),
        ("ben", "What cakes did I order?"),
        ("anna", "What cakes did I order?"),
        ("emma", "My son is allergic to nuts."),
        ("tom", "What is Emma allergic to?"),
        ("carl", "Thanks, Great stuff"),
    ]
    replies = await _talk(make_config, lines)
    assert "Red Lion" in replies[1], replies[1]
    assert "chocolate" not in replies[5] and "Not listed, since" in replies[5], replies[5]
    assert "chocolate" in replies[6] and "lemon" not in replies[6], replies[6]
    assert replies[8] == NOTHING, replies[8]
    assert replies[9] == "You're welcome.", replies[9]


async def test_with_nothing_out_of_view_the_memories_answer_in_the_turn(
    make_config: Callable[..., Config],
) -> None:
    """Told in another channel of the workspace, asked here where nothing was summarized:
    the memories answer in the same turn, without "Let me look further back…" first."""
    here, other = "slack:T1:C1", "slack:T1:C2"  # one workspace: one memory
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        await rt.submit(
            inbound(other, "Remember that the deploy window is Friday at 5pm.", pid="o1")
        )
        await rt.drain()
        await rt.submit(inbound(here, "When is the deploy window?", pid="q1", author="eli"))
        await rt.drain()
        said = [m.text for m in rt.outbox.sent if m.channel == here]
    assert len(said) == 1 and "Friday at 5pm" in said[0], said


async def test_a_question_asked_after_another_in_one_message_is_of_what_that_one_asked(
    make_config: Callable[..., Config],
) -> None:
    """ "What's the venue and how much was the deposit?" quoted the florist's deposit,
    told later, for the venue's: the second part is of what the first asked about."""
    lines = [
        ("josh", "We've booked Hartwell Barn as the venue, the deposit was £3,000."),
        ("rosa", "I've also booked the florist, Petal & Stem, deposit £400."),
        ("josh", "What's the venue and how much was the deposit?"),
        ("rosa", "What's the florist and how much was the deposit?"),
    ]
    replies = await _talk(make_config, lines)
    assert "£3,000" in replies[2] and "£400" not in replies[2], replies[2]
    assert "£400" in replies[3] and "£3,000" not in replies[3], replies[3]


async def test_one_booking_of_a_list_called_off_leaves_the_others(
    make_config: Callable[..., Config],
) -> None:
    """ "I cancelled the Cross Hotel in Osaka, staying at Hotel Nikko Osaka instead" hid
    the line listing all three hotels: "Which hotels have I booked?" was told "Nothing
    that still holds", and the Kyoto one was never found. The list still holds, with the
    change said after it when it is of what is asked, and "where … staying" is asked of
    a place."""
    lines = [
        "hotels: Tokyo Oct 4-8 at Hotel Gracery Shinjuku, Kyoto Oct 8-12 at Ryokan "
        "Yoshida-sanso, Osaka Oct 12-16 at Cross Hotel",
        "Order from Jake Morris: carrot cake, 20 June, £32.",
        "actually change of plans, I cancelled the Cross Hotel in Osaka, staying at Hotel "
        "Nikko Osaka instead",
        "Jake cancelled his carrot cake order.",
        "which hotels have I booked?",
        "where am I staying in Kyoto?",
        "where am I staying in Osaka?",
        "What orders do I have?",
    ]
    replies = await _talk(make_config, lines, author="elena")
    booked, kyoto, osaka, orders = replies[4:]
    assert "Ryokan Yoshida-sanso" in booked and "Later" in booked and "Nikko" in booked, booked
    assert "Ryokan Yoshida-sanso" in kyoto and "Nikko" not in kyoto, kyoto
    assert "Nikko" in osaka, osaka
    # A line telling of one thing is still retired by its cancellation.
    assert "Not listed, since" in orders and "carrot cake" in orders, orders


async def test_a_book_club_is_answered_with_what_the_group_changed(
    make_config: Callable[..., Config],
) -> None:
    """A book club of four: "when is the meeting?" quoted Nina's Thursday after Omar
    moved it to Friday (a shared meeting anyone may move); "what book are we reading?"
    quoted Ben's "I've already read it twice"; "what's the address?" found nothing in
    "14 Birch Lane, apartment 3B"; Nina asking to forget what Ben said was told only
    that she had nothing to forget."""
    lines = [
        ("nina", 'so our first book is "Klara and the Sun" by Kazuo Ishiguro'),
        ("ben", "nice, I've already read it twice lol"),
        ("nina", "meeting is at my place on Thursday June 5 at 7"),
        ("claire", "yep! 14 Birch Lane, apartment 3B"),
        ("omar", "date change — meeting moved to Friday June 6, 7:30"),
        ("claire", "my team meeting moved to Monday June 9"),
        ("claire", "when is the meeting?"),
        ("omar", "what book are we reading?"),
        ("nina", "what's the address?"),
        ("ben", "I thought the ending was kinda flat tbh"),
        ("nina", "forget what Ben said about the ending, he asked me to"),
        ("ben", "what did I think of the ending?"),
    ]
    replies = await _talk(make_config, lines)
    when, book, address, _, forget, ending = replies[6:]
    # (Claire's own meeting is hers: "my team meeting" changes no shared one.)
    assert "Friday June 6" in when and "Monday" not in when, when
    assert "Klara and the Sun" in book, book
    assert "14 Birch Lane" in address, address
    assert "Only Ben can have me forget" in forget, forget
    assert "kinda flat" in ending, ending


async def test_what_a_question_asks_of_a_named_thing_is_answered_by_the_line_naming_it(
    make_config: Callable[..., Config],
) -> None:
    """ "What time do I take atorvastatin?" quoted the Metformin line (it says "I take");
    "Which medicines do I take?" quoted "I would like you to help me keep track of my
    medicines please", which asks the bot for help and tells nothing."""
    lines = [
        "I would like you to help me keep track of my medicines please.",
        "I take Metformin 500 mg twice a day with meals, for my diabetes.",
        "and atorvastatin 20 mg at bedtime",
        "What time do I take atorvastatin?",
        "Which medicines do I take?",
        "What games do we play?",
        "We play chess on Fridays.",
        "What games do we play?",
    ]
    replies = await _talk(make_config, lines, author="harold")
    assert "bedtime" in replies[3] and "Metformin" not in replies[3], replies[3]
    assert "keep track" not in replies[4] and "Metformin" in replies[4], replies[4]
    assert "chess" in replies[7], replies[7]


async def test_an_age_given_in_brackets_after_a_name_answers_how_old(
    make_config: Callable[..., Config],
) -> None:
    """ "my kids are Mia (9), Leo (7) and Ava (4)", then "how old is Ava?" found nothing;
    a number in brackets after something that is no name is no age."""
    lines = [
        "my kids are Mia (9), Leo (7) and Ava (4)",
        "My flat is number (3) on the list",
        "how old is Ava?",
        "how old is my flat?",
    ]
    replies = await _talk(make_config, lines, author="dana")
    assert "Ava (4)" in replies[2], replies[2]
    assert "number (3)" not in replies[3], replies[3]


async def test_a_death_told_gets_a_word_of_sympathy_and_pronouns_are_said_back_in_case(
    make_config: Callable[..., Config],
) -> None:
    """ "My wife Edna passed away two years ago" got a bare "Noted"; "… Her number is
    555-2380" was said back as "; and Her number is …"."""
    lines = [
        "My wife Edna passed away two years ago. I miss her.",
        "The printer died again, it was a faulty fuser.",
        "My doctor is Dr. Ramirez at Oakwood Clinic. Her number is 555-2380.",
    ]
    replies = await _talk(make_config, lines, author="harold")
    assert replies[0].startswith("I'm sorry for your loss. Noted:"), replies[0]
    assert "sorry" not in replies[1], replies[1]
    assert "and her number is 555-2380" in replies[2], replies[2]


async def test_a_trip_is_answered_without_other_changes_or_repeats(
    make_config: Callable[..., Config],
) -> None:
    """A trip planned in one chat: the flight's confirmation code came with "Later, …
    the tea ceremony got moved to Oct 10" (both name October); "how much have I spent?"
    found nothing in "flights cost $1,450 already"; "which hotels have I booked?" quoted
    the hotels twice; "where am I staying in Kyoto?" quoted the tea ceremony in Kyoto."""
    lines = [
        "flight out is United UA837 from SFO to Tokyo Narita, departs 11:05am Oct 3, "
        "confirmation K7XQ2M",
        "total budget is $6,000, flights cost $1,450 already",
        "hotels: Tokyo Oct 4-8 at Hotel Gracery Shinjuku, Kyoto Oct 8-12 at Ryokan "
        "Yoshida-sanso, Osaka Oct 12-16 at Cross Hotel",
        "booked a tea ceremony in Kyoto on Oct 9 at 2pm, ref TC-4481",
        "actually change of plans, I cancelled the Cross Hotel in Osaka, staying at Hotel "
        "Nikko Osaka instead",
        "also the tea ceremony got moved to Oct 10, same time",
        "what's the confirmation code for the United flight?",
        "how much have I spent?",
        "which hotels have I booked?",
        "where am I staying in Kyoto?",
    ]
    replies = await _talk(make_config, lines, author="elena")
    code, spent, hotels, kyoto = replies[6:]
    assert "K7XQ2M" in code and "tea ceremony" not in code, code
    assert "$1,450" in spent, spent
    assert hotels.count("Hotel Gracery") == 1 and "Nikko" in hotels, hotels
    assert "Ryokan" in kyoto and "tea ceremony" not in kyoto, kyoto


async def test_a_yes_or_no_question_nothing_confirms_is_given_what_was_said_of_its_subject(
    make_config: Callable[..., Config],
) -> None:
    """ "Is Lucia coming to Tokyo?" and "is Brannoc a wizard?" got "Let me look further
    back…" and then "Nothing I could find covers that.", though what was said of them
    ("joining me for the Kyoto part only", "a dwarf paladin") answers them to a reader;
    "When do I see Dr. Ramirez?" found nothing in "Next appointment with Dr. Ramirez is
    on the 12th of May"."""
    lines = [
        "my sister Lucia is joining me for the Kyoto part only",
        "my character is Brannoc, a dwarf paladin, level 4",
        "Next appointment with Dr. Ramirez is on the 12th of May at 10:15 am",
        "is Lucia coming to Tokyo?",
        "is Brannoc a wizard?",
        "When do I see Dr. Ramirez?",
        "Is Mark coming?",
    ]
    replies = []
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, line in enumerate(lines):
            n = len(rt.outbox.sent)
            await rt.submit(inbound(CH, line, pid=f"p{i}", author="elena"))
            await rt.drain()
            replies.append(" | ".join(m.text for m in rt.outbox.sent[n:]))
    lucia, brannoc, ramirez, mark = replies[3:]
    assert lucia.startswith("Nothing I have says so.") and "Kyoto part only" in lucia, lucia
    assert "dwarf paladin" in brannoc and "Let me look" not in brannoc, brannoc
    assert "12th of May" in ramirez, ramirez
    # (no one of that name was spoken of: nothing to give instead)
    assert mark.endswith("Nothing I could find covers that."), mark


async def test_a_correction_naming_the_word_it_takes_back_is_said_after_anyones_line(
    make_config: Callable[..., Config],
) -> None:
    """In a game's group chat the DM set right what a player said ("correction, the key
    is silver, not brass"); "what kind of key did Fenn find?" still quoted "brass key"
    alone. A correction naming the word it takes back is said after the line, whoever
    said it; one naming another word is not."""
    lines = [
        ("sam", "Fenn also picked up 250 gold and a mysterious brass key"),
        ("mara", "actually correction, the key is silver, not brass"),
        ("mara", "correction, the session is on Sunday, not Saturday"),
        ("theo", "what kind of key did Fenn find?"),
        ("sam", "ugh fine, I'll bring chips and salsa"),
    ]
    replies = await _talk(make_config, lines)
    key = replies[3]
    assert "brass key" in key and "silver, not brass" in key and "Sunday" not in key, key
    assert replies[4].startswith("Noted as a to-do: you'll bring chips"), replies[4]


async def test_a_name_written_short_a_kind_of_someone_and_a_host_are_found(
    make_config: Callable[..., Config],
) -> None:
    """ "When do the M365 licences renew?" found nothing of «Microsoft 365 licences renew
    on March 31»; "What class is Fenn?" nothing of «I play Fenn, a halfling bard»; "Who
    is hosting?" nothing of «meeting is at my place».  Each is that line; a name written
    short that nothing spells out, or a kind nothing says, still finds nothing."""
    replies = await _talk(
        make_config,
        [
            ("raj", "Microsoft 365 licences renew on March 31, we have 14 seats"),
            ("jonas", "hi all, I play Fenn, a halfling bard, level 4"),
            ("nina", "meeting is at my place on Thursday June 5 at 7"),
            ("theo", "the new printer is a Brother HL-L2350"),
            ("raj", "when do the M365 licences renew?"),
            ("theo", "what class is Fenn?"),
            ("priya", "who is hosting?"),
            ("priya", "what is the VPN address?"),
            ("priya", "what colour is Fenn's cloak?"),
        ],
    )
    assert "Microsoft 365 licences renew on March 31" in replies[4], replies[4]
    assert "halfling bard" in replies[5], replies[5]
    assert "at my place" in replies[6] and "nina" in replies[6], replies[6]
    assert replies[7] == NOTHING, replies[7]
    assert replies[8] == NOTHING, replies[8]


async def test_a_forget_of_a_number_or_a_name_inside_a_line_takes_only_that(
    make_config: Callable[..., Config],
) -> None:
    """ "please forget the plumber's number" and "forget Claire's phone number" were told
    there was nothing to forget (the line says neither "phone" nor "number"), and the
    number stayed in every answer; "the hotel name" likewise.  The number goes, the rest
    of its line stays; a forget after "actually" is one; what it says holds instead is
    kept; a reason with no verb (", not relevant") is not part of what goes."""
    replies = await _talk(
        make_config,
        [
            "the plumber is Dave Reilly, 07700 900789, quote £2,850",
            "my physio is Claire at Active Physio, 0117 496 0321",
            "the hotel in Lisbon is Hotel Alfama Garden, 3 nights",
            "living room paint is Farrow & Ball Hague Blue",
            "the skip hire costs £240 a week",
            "please forget the plumber's number, we have it saved",
            "please forget Claire's phone number, I've saved it in my phone",
            "please forget the hotel name, I'm switching to an airbnb",
            "actually forget the Hague Blue, we're going for Sulking Room Pink in the living room",
            "forget the skip hire, not relevant",
            "what do you know about me?",
            "what colour is the living room?",
        ],
    )
    assert replies[5].startswith("Done:") and "Dave Reilly" in replies[5], replies[5]
    assert replies[6].startswith("Done:") and "Active Physio" in replies[6], replies[6]
    assert "Done:" in replies[7] and "Done:" in replies[8], (replies[7], replies[8])
    assert replies[9].startswith("Done:"), replies[9]
    profile = replies[10]
    for gone in ("07700", "0117 496", "Alfama", "Hague Blue", "skip hire"):
        assert gone not in profile, (gone, profile)
    for kept in ("Dave Reilly", "quote £2,850", "Active Physio", "airbnb"):
        assert kept in profile, (kept, profile)
    assert "Sulking Room Pink" in replies[11], replies[11]


async def test_a_forget_of_someone_elses_line_says_whose_it_is(
    make_config: Callable[..., Config],
) -> None:
    """In a group, Mia's "please forget the rehearsal room thing" of Dan's line was told
    "nothing of yours", as if nothing was kept.  The line stays (it is Dan's), and the
    reply says who can have it forgotten, without quoting it."""
    replies = await _talk(
        make_config,
        [
            ("dan", "we owe the rehearsal room £60 for last month"),
            ("mia", "please forget the rehearsal room thing"),
            ("mia", "forget the van, nobody said anything about it"),
            ("dan", "what do we owe the rehearsal room?"),
        ],
    )
    assert replies[1].endswith("dan told me of it: only dan can have me forget that."), replies[1]
    assert "£60" not in replies[1], replies[1]
    assert "told me of it" not in replies[2], replies[2]
    assert "£60" in replies[3], replies[3]


async def test_a_list_of_those_with_a_number_takes_each_and_not_another_number(
    make_config: Callable[..., Config],
) -> None:
    """ "Which characters are level 4?" quoted only «my character is Orrin, a human
    cleric, level 3» (the one line saying "character").  Each line at level 4 answers;
    a line giving the level another number does not."""
    replies = await _talk(
        make_config,
        [
            ("jonas", "hi all, I play Fenn, a halfling bard, level 4"),
            ("theo", "Brannoc is my dwarf fighter, level 4"),
            ("priya", "I play Lysa, an elf ranger, level 4"),
            ("sam", "my character is Orrin, a human cleric, level 3"),
            ("theo", "which characters are level 4?"),
        ],
    )
    for name in ("Fenn", "Brannoc", "Lysa"):
        assert name in replies[4], (name, replies[4])
    assert "Orrin" not in replies[4], replies[4]


async def test_hard_times_told_in_passing_get_a_word_of_sympathy(
    make_config: Callable[..., Config],
) -> None:
    """ "my mum's in hospital at the moment so training has been hard tbh" was answered
    "OK."; a grandad's death "Noted: …" alone.  Each gets a word of sympathy; a plain
    fact does not."""
    replies = await _talk(
        make_config,
        [
            "honestly been a rough week, my grandad passed away on Monday",
            "my mum's in hospital at the moment so training has been hard tbh",
            "honestly I feel like an imposter most days",
            "the new printer is on the second floor",
        ],
    )
    assert replies[0].startswith("I'm sorry for your loss."), replies[0]
    assert replies[1].startswith("I'm sorry to hear that."), replies[1]
    assert replies[2].startswith("I'm sorry to hear that."), replies[2]
    assert "sorry" not in replies[3], replies[3]


async def test_a_price_a_name_called_and_another_ones_change_are_told_apart(
    make_config: Callable[..., Config],
) -> None:
    """ "What's the price of sourdough?" quoted «the Johnsons want 4 dozen sourdough
    rolls» (no price); "What's my dog called?" «Mrs Patel called, she moved her pickup»;
    "When is the Harrisons' pickup?" added Mrs Patel's move as a "Later".  The price, the
    name and the Harrisons' own pickup answer; Mrs Patel's move is hers."""
    replies = await _talk(
        make_config,
        [
            "sourdough loaf is £4.50, croissants £2.20 each",
            "note that the Johnsons want 4 dozen sourdough rolls, pickup friday at 8am",
            "my dog Biscuit has been poorly this week, vet says it's his kidneys",
            "the Harrisons ordered a birthday cake, chocolate, pickup sunday 15th at 10",
            "Mrs Patel called, she moved her pickup to Friday 13th June instead",
            "what's the price of sourdough?",
            "what's my dog called?",
            "when is the Harrisons' pickup?",
            "when is Mrs Patel's pickup?",
        ],
    )
    assert "£4.50" in replies[5] and "Johnsons" not in replies[5], replies[5]
    assert "Biscuit" in replies[6] and "Patel" not in replies[6], replies[6]
    assert "sunday 15th" in replies[7] and "Patel" not in replies[7], replies[7]
    assert "Friday 13th June" in replies[8], replies[8]


async def test_a_chapter_written_short_a_fee_and_a_package_i_use_are_found(
    make_config: Callable[..., Config],
) -> None:
    """ "When is chapter 2 due?" quoted «… in room 2.14» (ch2 was written short); "what
    R package do I use?" found nothing of «the R package I use … is glmmTMB»; "what's
    the fee for Manchester?" nothing of «we also got Manchester, …, £250»; "how much are
    we getting for Sheffield?" quoted the gig's move, not its £450."""
    replies = await _talk(
        make_config,
        [
            "the R package I use for the models is glmmTMB",
            "ch2 lit review is due to Okafor by 30 June",
            "ch3 methods draft is due 15 August",
            "my committee meeting is on 3 September at 10am in room 2.14",
            ("leo", "we also have the Sheffield gig at the Leadmill on 26 July, £450"),
            ("leo", "actually the Sheffield gig got moved to 2 August, same venue"),
            ("mia", "we also got Manchester, Night & Day Cafe, 9 August, £250"),
            "what R package do I use?",
            "when is chapter 2 due?",
            "which deadlines do I have?",
            ("sam", "how much are we getting for Sheffield?"),
            ("sam", "what's the fee for Manchester?"),
        ],
    )
    assert "glmmTMB" in replies[7], replies[7]
    assert "30 June" in replies[8] and "2.14" not in replies[8], replies[8]
    assert "15 August" in replies[9] and "30 June" in replies[9], replies[9]
    assert "£450" in replies[10], replies[10]
    assert "£250" in replies[11], replies[11]


async def test_days_and_severities_written_short_answer(
    make_config: Callable[..., Config],
) -> None:
    """ "Who's on call friday?" quoted Ellie's «third night call this week», as the rota
    said «Dev fri-sun»; "what severity is INC-4822?" found nothing of «… is sev1 now».
    A range of days holds each day in it; "sev1" is a severity."""
    replies = await _talk(
        make_config,
        [
            ("aisha", "rota for this week: Ben mon-tue, Chloe wed-thu, Dev fri-sun"),
            ("ellie", "honestly I'm exhausted, third night call this week"),
            ("dev", "INC-4822 login failures for Contoso, sev2, assigned to Ben"),
            ("ben", "INC-4822 is sev1 now, Contoso escalated"),
            ("ben", "who's on call saturday?"),
            ("aisha", "what severity is INC-4822?"),
        ],
    )
    assert "Dev fri-sun" in replies[4] and "exhausted" not in replies[4], replies[4]
    assert "sev1" in replies[5], replies[5]


async def test_a_quote_gone_up_is_said_later_and_a_number_is_no_sum(
    make_config: Callable[..., Config],
) -> None:
    """ "How much is the kitchen quote?" gave £12,400 without «Mark's quote went up to
    £13,100»; "What's Mark's number?" found nothing of «…, phone 07700 900456»; after
    the plumber's number was forgotten, "what's the plumber's number?" quoted «quote
    £2,850», a sum, as if it were one."""
    replies = await _talk(
        make_config,
        [
            "the kitchen fitter is Mark from Oakline Kitchens, quote £12,400, phone 07700 900456",
            "the plumber is Dave Reilly, 07700 900789, quote £2,850",
            "please forget the plumber's number, we have it saved",
            "actually Mark's quote went up to £13,100 because of the extra cabinets",
            "how much is the kitchen quote?",
            "what's Mark's number?",
            "what's the plumber's number?",
        ],
    )
    assert "£12,400" in replies[4] and "£13,100" in replies[4], replies[4]
    assert "07700 900456" in replies[5], replies[5]
    assert replies[6] == NOTHING, replies[6]


async def test_questions_for_the_group_and_thoughts_aloud_are_not_looked_up(
    make_config: Callable[..., Config],
) -> None:
    """In a group, "what's everyone eating before Leeds? pizza?" got "Let me look further
    back…" and two "Nothing I could find"; so did "lol who ate my sandwich", "anyway
    how's your day going" and the "hmm what else..." before a fact.  They are the
    others' to answer, small talk, and thinking aloud; a question for the bot in the same
    group is still answered.  (A group: someone else has spoken.)"""
    replies = await _talk(
        make_config,
        [
            ("mia", "we got the Leeds gig at the Brudenell, Sat 12 July"),
            ("dan", "what's everyone eating before Leeds? pizza?"),
            ("ben", "lol who ate my sandwich from the fridge"),
            ("rosa", "anyway how's your day going"),
            ("rosa", "hmm what else... the oven service is booked for the 20th"),
            ("mia", "did anyone mention where the Leeds gig is?"),
        ],
    )
    for said in replies[1:5]:
        assert "look further back" not in said and NOTHING not in said, said
    assert replies[1] == "OK, dan.", replies[1]
    assert replies[4] == "Noted: the oven service is booked for the 20th.", replies[4]
    assert "Brudenell" in replies[5], replies[5]


async def test_a_day_asked_about_outweighs_a_word_and_got_moved_links_nothing(
    make_config: Callable[..., Config],
) -> None:
    """ "Who's on call thursday?" was looked for further back and found nothing, the
    one line saying "call" (Ellie's «third night call») outweighing the day; the swap
    that gave Ellie Thursday answers.  "When is chapter 2 due?" had «the talk got moved
    to 11 July» added as a "Later": both lines "got" something, nothing more."""
    replies = await _talk(
        make_config,
        [
            ("aisha", "rota for this week: Ben mon-tue, Chloe wed-thu, Dev fri-sun"),
            ("chloe", "i can't do thursday, my kid is sick. Ellie can you swap?"),
            ("ellie", "yes, I'll take Chloe's thursday, Chloe takes my saturday next week"),
            ("ellie", "honestly I'm exhausted, third night call this week"),
            ("chloe", "who's on call thursday?"),
            ("hannah", "actually the ch2 deadline got pushed to 14 July because of the conference"),
            ("hannah", "oh wait, the talk got moved to 11 July, afternoon session"),
            ("hannah", "when is chapter 2 due?"),
        ],
    )
    assert "I'll take Chloe's thursday" in replies[4], replies[4]
    assert "14 July" in replies[7] and "talk" not in replies[7], replies[7]


async def test_fillers_around_a_fact_are_not_said_back(
    make_config: Callable[..., Config],
) -> None:
    """ "Noted: you weigh 72kg btw", "Noted: quick one, we got the Leeds gig…": the
    filler words around a fact were said back, and listed in "what do you know about
    me?".  The fact is; a word that is the fact's own ("team lunch…") stays."""
    replies = await _talk(
        make_config,
        [
            "quick one, we got the Leeds gig at the Brudenell, Sat 12 July",
            "i weigh 72kg btw",
            "the team meeting moved to Thursday",
            "what do you know about me?",
        ],
    )
    assert replies[0] == "Noted: we got the Leeds gig at the Brudenell, Sat 12 July.", replies[0]
    assert replies[1] == "Noted: you weigh 72kg.", replies[1]
    assert "the team meeting" in replies[2], replies[2]
    assert "btw" not in replies[3] and "quick one" not in replies[3], replies[3]


async def test_a_rule_asked_for_is_answered_by_the_line_stating_it(
    make_config: Callable[..., Config],
) -> None:
    """ "What's the rule for nut products?" found nothing of «anything with nuts must go
    on the separate blue trays»: a line saying what must or must never be done states a
    rule, of what it shares with the question (not of sourdough)."""
    replies = await _talk(
        make_config,
        [
            "don't forget: anything with nuts must go on the separate blue trays, never mix",
            "sourdough loaf is £4.50",
            "the nut supplier is Hazel & Co",
            "what's the rule for nut products?",
            "what is the rule about sourdough?",
        ],
    )
    assert "blue trays" in replies[3], replies[3]
    assert replies[4] == NOTHING, replies[4]


async def test_a_correction_saying_what_it_is_not_is_kept_and_said_later(
    make_config: Callable[..., Config],
) -> None:
    """ "actually the cert expired on the load balancer, not the gateway" was answered
    "OK, dev." and never kept, and the root cause was answered "the gateway".  It is
    noted, and follows the line it corrects."""
    replies = await _talk(
        make_config,
        [
            ("dev", "INC-4821 root cause was an expired TLS cert on the gateway, fixed at 02:10"),
            ("ben", "INC-4822 fixed, it was a bad config push"),
            ("dev", "actually the cert expired on the load balancer, not the gateway"),
            ("aisha", "what was the root cause of INC-4821?"),
        ],
    )
    assert replies[2].startswith("Noted:"), replies[2]
    assert "Later" in replies[3] and "load balancer" in replies[3], replies[3]


async def test_a_change_found_first_is_quoted_after_what_it_changes(
    make_config: Callable[..., Config],
) -> None:
    """ "How much is a croissant?" quoted only «croissants are going up to £2.40 from
    next month», not the £2.20 they cost now: what it changes is quoted first."""
    replies = await _talk(
        make_config,
        [
            "sourdough loaf is £4.50, croissants £2.20 each",
            "rye bread is £5 a loaf",
            "actually croissants are going up to £2.40 from next month",
            "how much is a croissant?",
        ],
    )
    assert replies[3].index("£2.20") < replies[3].index("Later") < replies[3].index("£2.40"), (
        replies[3]
    )


async def test_each_item_of_a_list_gets_only_its_own_change(
    make_config: Callable[..., Config],
) -> None:
    """ "Which orders do we have?" gave the Harrisons' cake with «Mrs Patel … moved her
    pickup» as its "Later", and Mrs Patel's with it again: each item's change is the
    one naming it."""
    replies = await _talk(
        make_config,
        [
            "remember that Mrs Patel ordered a 3-tier lemon cake for pickup on Saturday 14th June",
            "the Harrisons ordered a birthday cake, chocolate, pickup sunday 15th at 10",
            "Mrs Patel called, she moved her pickup to Friday 13th June instead",
            "which orders do we have?",
        ],
    )
    said = replies[3]
    assert "Harrisons" in said and "lemon cake" in said, said
    assert said.count("moved her pickup") == 1, said
    assert said.index("lemon cake") < said.index("moved her pickup"), said


async def test_a_thing_named_only_as_another_kind_of_it_does_not_answer(
    make_config: Callable[..., Config],
) -> None:
    """ "When is my marathon?" quoted «my half marathon PB is 1:29:40 from Bath last
    March»: a half marathon's PB names neither the marathon nor a date of it.  "My car
    insurance renewal" still answers "when is my car insurance?"."""
    replies = await _talk(
        make_config,
        [
            "hey! Marcus here, training for the Valencia marathon on 7 December",
            "my half marathon PB is 1:29:40 from Bath last March",
            "my car insurance renewal is on 3 May",
            "when is my marathon?",
            "what's my half marathon PB?",
            "when is my car insurance?",
        ],
    )
    assert "7 December" in replies[3] and "PB" not in replies[3], replies[3]
    assert "1:29:40" in replies[4], replies[4]
    assert "3 May" in replies[5], replies[5]


async def test_a_change_of_one_thing_is_no_change_of_another_sharing_a_light_word(
    make_config: Callable[..., Config],
) -> None:
    """ "actually my day rate is going up to £400 from april" was quoted as what changed
    «invoice #1043 went to Kettle & Co for £800 on feb 2, due in 30 days» ("went" and
    "going", "days" and "day"), for "how much is invoice 1043?" and for "what's my day
    rate?", where the £350 it changes was never quoted."""
    replies = await _talk(
        make_config,
        [
            "my day rate is £350, hourly is £50",
            "invoice #1043 went to Kettle & Co for £800 on feb 2, due in 30 days",
            "actually my day rate is going up to £400 from april",
            "how much is invoice 1043?",
            "what's my day rate?",
        ],
    )
    assert "£800" in replies[3] and "day rate" not in replies[3], replies[3]
    said = replies[4]
    assert "invoice" not in said, said
    assert said.index("£350") < said.index("Later") < said.index("£400"), said


async def test_a_thing_moved_is_listed_as_moved_and_stays_a_to_do(
    make_config: Callable[..., Config],
) -> None:
    """ "What did I ask you to remind me?" after "Biscuit's booster vaccine is due on
    october 3" and "actually the booster moved to october 10" said there were no to-dos
    (the move retired the line, and is no to-do itself): the move is listed in its place,
    once, in the to-dos and in "what do you know about me?"."""
    replies = await _talk(
        make_config,
        [
            "Biscuit's booster vaccine is due on october 3",
            "Juno is allergic to chicken",
            "actually the booster moved to october 10",
            "what did I ask you to remind me?",
            "what do you know about me?",
        ],
    )
    assert replies[3].startswith("Your to-dos: "), replies[3]
    for said in replies[3:]:
        assert said.count("october 10") == 1 and "october 3" not in said, said


async def test_a_plan_scrapped_or_taken_over_is_told_after_it(
    make_config: Callable[..., Config],
) -> None:
    """ "What is Ollie bringing?" quoted only the prosecco he then scrapped ("actually
    scrap the prosecco, …, I'll do the music playlist instead"); "who's washing the
    kit?" quoted «Rhys is washing it this week» after Dan said "I'll take the kit this
    week instead of Rhys"."""
    replies = await _talk(
        make_config,
        [
            ("ollie", "I'll bring 3 cases of prosecco and elderflower cordial for the kids"),
            ("sophie", "i'll sort the balloons too, gold and white"),
            (
                "ollie",
                "actually scrap the prosecco, Sophie is getting drinks from costco, I'll do "
                "the music playlist instead",
            ),
            ("helen", "what is Ollie bringing?"),
            ("gary", "kit is navy for home, white for away, Rhys is washing it this week"),
            ("dan", "I'll take the kit this week instead of Rhys"),
            ("dan", "who's washing the kit?"),
        ],
    )
    said = replies[3]
    assert said.index("3 cases") < said.index("Later") < said.index("music playlist"), said
    said = replies[6]
    assert said.index("Rhys is washing") < said.index("Later") < said.index("instead of"), said


async def test_what_times_is_what_time_is(make_config: Callable[..., Config]) -> None:
    """ "what time's kickoff?" found nothing ("what time is kickoff?" found it): the
    "'s" read as whose.  Its follow-up "and where?" is of the same kickoff."""
    replies = await _talk(
        make_config,
        [
            ("gary", "next fixture is sunday vs Red Star Rovers, 10:30 kickoff at Hackney Marshes"),
            ("kofi", "my hamstring is still bad, out for 2 weeks"),
            ("gary", "actually kickoff moved to 11am, ref is running late"),
            ("kofi", "what time's kickoff?"),
            ("rhys", "and where?"),
        ],
    )
    assert "10:30 kickoff" in replies[3] and "11am" in replies[3], replies[3]
    assert "Hackney Marshes" in replies[4], replies[4]


async def test_how_long_is_answered_by_a_line_giving_a_duration(
    make_config: Callable[..., Config],
) -> None:
    """ "How long is Kofi out?" found nothing of Kofi's «my hamstring is still bad, out
    for 2 weeks»: no line said "long".  A line giving a duration says it its own way;
    one giving none still answers nothing."""
    replies = await _talk(
        make_config,
        [
            ("kofi", "my hamstring is still bad, out for 2 weeks"),
            ("gary", "kit is navy for home, white for away"),
            ("liam", "how long is Kofi out?"),
            ("liam", "how long is Gary's kit?"),
        ],
    )
    assert "out for 2 weeks" in replies[2], replies[2]
    assert replies[3] == NOTHING, replies[3]


async def test_feelings_small_talk_and_thanks_said_as_people_say_them(
    make_config: Callable[..., Config],
) -> None:
    """ "ugh wedding planning is sooo exhausting honestly" was noted word for word, with
    no kind word; "…i'm terrified, … my mum is ill" got none either; "que tal?" was
    looked up and quoted back; "anyone watch the game last night?" in a group was
    looked up; "gracias! hasta luego" got "OK"."""
    replies = await _talk(
        make_config,
        [
            "ugh wedding planning is sooo exhausting honestly",
            "honestly i'm terrified, i don't know anyone in Valencia and my mum is ill",
            "que tal?",
            ("dan", "anyone watch the game last night? madness"),
            "gracias! hasta luego",
        ],
    )
    assert replies[0] == "I'm sorry to hear that.", replies[0]
    assert replies[1].startswith("I'm sorry to hear that."), replies[1]
    assert replies[2].startswith("I'm well, thanks for asking!"), replies[2]
    assert replies[3] == "OK, dan.", replies[3]
    assert replies[4] == "You're welcome.", replies[4]


async def test_a_move_follows_the_line_giving_the_date_it_moves(
    make_config: Callable[..., Config],
) -> None:
    """ "When are my lessons with Carmen?" quoted «actually the visa appointment got
    moved to july 21» with Carmen's move as its "Later" (two moves share "moved" and
    "actually"); "when is my visa appointment?" gave the visa move after «bring my
    passport photos … to the visa appointment», never the 9:15 on july 14 it moved."""
    replies = await _talk(
        make_config,
        [
            "my spanish teacher is Carmen, lessons are tuesdays and thursdays at 7pm on zoom",
            "visa appointment is at the spanish consulate in London on july 14 at 9:15",
            "remember to bring my passport photos and bank statements to the visa appointment",
            "actually the visa appointment got moved to july 21, same time",
            "actually Carmen moved my thursday lesson to fridays",
            "when is my visa appointment?",
            "when are my lessons with Carmen?",
        ],
    )
    said = replies[5]
    assert said.index("july 14 at 9:15") < said.index("Later") < said.index("july 21"), said
    assert "Carmen" not in said and "passport" not in said, said
    said = replies[6]
    assert said.index("7pm") < said.index("Later") < said.index("to fridays"), said
    assert "visa" not in said, said


async def test_a_word_asked_for_is_found_by_what_it_means(
    make_config: Callable[..., Config],
) -> None:
    """ "what's the spanish word for neighbourhood?" found nothing of «"barrio" means
    neighbourhood»: no line says "word".  A word asked for that no line gives is one
    to look up, which the bot says it cannot."""
    replies = await _talk(
        make_config,
        [
            '"piso" means flat and "barrio" means neighbourhood',
            "my spanish teacher is Carmen",
            "what's the spanish word for neighbourhood?",
            "what's the spanish word for kitchen?",
        ],
    )
    assert "barrio" in replies[2], replies[2]
    assert replies[3].startswith("I can't look that up"), replies[3]


async def test_a_change_found_first_follows_a_line_of_the_same_thing_not_the_same_name(
    make_config: Callable[..., Config],
) -> None:
    """ "What dose is Biscuit on?" found «Biscuit's apoquel dose went down to 8mg» and
    put it after «Biscuit had a lump removed on sept 9» (the newest earlier line naming
    Biscuit), not after the Apoquel 16mg it changes."""
    replies = await _talk(
        make_config,
        [
            "I have two dogs, Biscuit a beagle and Juno a border collie",
            "Biscuit takes Apoquel 16mg once a day for his itchy skin",
            "Biscuit had a lump removed on sept 9, biopsy came back fine phew",
            "Biscuit's apoquel dose went down to 8mg from now on",
            "what dose is Biscuit on?",
        ],
    )
    said = replies[4]
    assert said.index("16mg") < said.index("Later") < said.index("8mg"), said
    assert "lump" not in said, said


async def test_thanks_to_one_of_the_group_by_title_is_theirs(
    make_config: Callable[..., Config],
) -> None:
    """ "cheers gaffer, I'll be there", after the coach spoke, got "You're welcome.";
    alone with the bot, "cheers mate" is the bot's."""
    replies = await _talk(
        make_config,
        [
            ("dan", "cheers mate"),
            ("gary", "training is thursday at 7"),
            ("dan", "cheers gaffer, I'll be there"),
        ],
    )
    assert replies[0] == "You're welcome.", replies[0]
    assert replies[2] == "OK, dan.", replies[2]


async def test_how_much_is_not_told_a_change_without_an_amount(
    make_config: Callable[..., Config],
) -> None:
    """ "how much does Hannah charge?" quoted «Hannah charges £15 per walk» with "Later,
    «actually Hannah switched to tue and thu at noon»" (of her, but of no price); a
    change of her price is still told."""
    replies = await _talk(
        make_config,
        [
            "the dog walker is Hannah, she comes mon wed fri at 11am",
            "Hannah charges £15 per walk",
            "actually Hannah switched to tue and thu at noon",
            "how much does Hannah charge?",
            "when does Hannah come?",
            "Hannah's price went up to £18 a walk",
            "how much does Hannah charge?",
        ],
    )
    assert "£15" in replies[3] and "Later" not in replies[3], replies[3]
    assert "tue and thu" in replies[4], replies[4]
    assert replies[6].index("£15") < replies[6].index("Later") < replies[6].index("£18"), replies[6]


async def test_a_correction_naming_what_it_takes_back_is_kept_and_said_later(
    make_config: Callable[..., Config],
) -> None:
    """Corrections without "actually" got "OK." and the old value was given later:
    "mrs patel changed her mind, she wants raspberry not lemon", "not chess club, its
    coding club", and, in a group, another's "not thursday, … its friday now"."""
    replies = await _talk(
        make_config,
        [
            "first order: mrs patel wants a 3 tier lemon cake for saturday, £140",
            "chloe wants a lemon drizzle loaf for friday",
            "leo quit swimming, he's doing chess club on tuesdays instead",
            "not chess club, its coding club, i got confused",
            "mrs patel changed her mind, she wants raspberry not lemon",
            ("ellie", "i rang mr costa, plumber is coming thursday between 8 and 12"),
            ("zoe", "not thursday, ellie just said its friday now"),
            "what flavour is mrs patel's cake?",
            "what does leo do on tuesdays?",
            ("sam", "when is the plumber coming?"),
            "what does chloe want?",
        ],
    )
    for said in (replies[3], replies[4], replies[6]):
        assert said.startswith("Noted"), said
    assert (
        replies[7].index("lemon cake")
        < replies[7].index("Later")
        < replies[7].index("raspberry not lemon")
    ), replies[7]
    assert replies[8].index("chess club") < replies[8].index("its coding club"), replies[8]
    assert replies[9].index("thursday between") < replies[9].index("its friday now"), replies[9]
    # a correction of Mrs Patel's order is no change of another order saying "lemon"
    assert "lemon drizzle" in replies[10] and "raspberry" not in replies[10], replies[10]


async def test_someone_s_order_called_off_is_theirs_not_every_order(
    make_config: Callable[..., Config],
) -> None:
    """ "dan cancelled his order", written small, closed the to-do "order more eggs"
    ("You haven't asked me to remember a to-do") and was told as the "Later" of Mrs
    Patel's order: it is Dan's."""
    replies = await _talk(
        make_config,
        [
            "first order: mrs patel wants a 3 tier lemon cake for saturday, £140",
            "second one: a guy called dan, 24 vanilla cupcakes, pickup friday at 4pm",
            "remind me to order more eggs, we're down to 2 trays",
            "dan cancelled his order, said his party got called off",
            "what are my to-dos?",
            "what's mrs patel's order?",
        ],
    )
    assert replies[4].startswith("Your to-dos: order more eggs"), replies[4]
    assert "lemon cake" in replies[5] and "cancelled" not in replies[5], replies[5]


async def test_the_second_part_of_a_question_is_of_what_the_first_asked(
    make_config: Callable[..., Config],
) -> None:
    """ "who is the gp and what's the number?" gave the care agency's number for the
    second part: its line says "number", the gp's says "phone 0161 …"."""
    replies = await _talk(
        make_config,
        [
            "his gp is dr fitzgerald at elm tree surgery, phone 0161 496 0032",
            "the care agency is called homewell, their office number is 0161 496 0777",
            "who is the gp and what's the number?",
            "what's the care agency's number?",
        ],
    )
    assert "0161 496 0032" in replies[2] and "0777" not in replies[2], replies[2]
    assert "0161 496 0777" in replies[3] and "0032" not in replies[3], replies[3]


async def test_someone_named_small_in_a_group_is_answered_by_their_own_line(
    make_config: Callable[..., Config],
) -> None:
    """ "when does sam work?" quoted Ravi's "forget my work hours", and "where does ravi
    work?" Zoe's "sending love ravi <3": a name written small was no name, and "i work"
    written small was not said of oneself."""
    replies = await _talk(
        make_config,
        [
            ("Ravi", "i work at the cafe on campus saturdays and sundays 9 to 3"),
            ("Sam", "my shift at the cinema changed, i'm doing fridays 6 till midnight now"),
            ("Zoe", "sending love ravi <3"),
            ("Ravi", "ellie can you forget my work hours, i'm quitting the cafe"),
            ("Ellie", "when does sam work?"),
            ("Zoe", "where does ravi work?"),
        ],
    )
    assert replies[4].startswith("Sam said") and "fridays 6 till midnight" in replies[4], replies[4]
    assert replies[5].startswith("Ravi said") and "at the cafe on campus" in replies[5], replies[5]


async def test_and_someone_asks_the_question_before_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "and ruby?" after "what is leo allergic to?" quoted Ruby's ballet; "where is
    it?" after the ballet's line said "I don't know yet" (its place, "at miss claire's
    studio on high street", written small, was no place)."""
    replies = await _talk(
        make_config,
        [
            "leo is allergic to tree nuts and ruby is lactose intolerant",
            "ruby has ballet on wednesdays, 4:30, its at miss claire's studio on high street",
            "what is leo allergic to?",
            "and ruby?",
            "what day is ballet?",
            "where is it?",
            "and you?",
        ],
    )
    assert "lactose intolerant" in replies[3] and "ballet" not in replies[3], replies[3]
    assert "miss claire's studio" in replies[5], replies[5]
    assert "intolerant" not in replies[6], replies[6]


async def test_a_word_of_the_family_of_what_was_told_finds_it(
    make_config: Callable[..., Config],
) -> None:
    """ "who's doing the electrics?" found nothing of "the electrician is a woman
    called priya", nor "when is the inspection?" of "the building inspector visit is
    on april 2nd"."""
    replies = await _talk(
        make_config,
        [
            "the electrician is a woman called priya, she quoted £2,300 for rewiring",
            "the tiler is marco and he cant start until march 14",
            "note that the building inspector visit is on april 2nd",
            "who's doing the electrics?",
            "when is the inspection?",
        ],
    )
    assert "priya" in replies[3], replies[3]
    assert "april 2nd" in replies[4], replies[4]


async def test_a_line_speaking_to_someone_is_said_back_as_it_was_said(
    make_config: Callable[..., Config],
) -> None:
    """ "i paid you back zoe, yesterday" was said back "Noted: you paid you back zoe":
    turned round, a line speaking to someone as "you" says nonsense."""
    replies = await _talk(
        make_config,
        [
            ("Ravi", "actually i paid you back zoe, yesterday, check ur bank"),
            ("Ravi", "my locker code is 4411"),
        ],
    )
    assert replies[0] == "Noted: «i paid you back zoe, yesterday, check ur bank».", replies[0]
    assert replies[1] == "Noted: your locker code is 4411.", replies[1]


async def test_venting_a_fall_and_the_weather_get_a_fitting_reply(
    make_config: Callable[..., Config],
) -> None:
    """Venting got a bare "OK." ("ugh the card machine has been playing up all week",
    "some days i wonder if it's worth it"); "dad fell on tuesday" a bare "Noted"; "what's
    the weather going to be like tomorrow?" made the bot look further back and find
    nothing; in a group, "thanks aisha!" was answered "You're welcome."."""
    replies = await _talk(
        make_config,
        [
            "ugh the card machine has been playing up all week",
            "honestly some days i wonder if it's worth it, i barely break even",
            "dad fell on tuesday but he's ok, just bruised",
            "the dog fell asleep on the sofa",
            "what's the weather going to be like tomorrow?",
            "the forecast says rain on saturday",
            "what's the forecast for saturday?",
            ("aisha", "the next session is at mine"),
            ("jonas", "thanks aisha!"),
        ],
    )
    for said in replies[:3]:
        assert said.startswith("I'm sorry to hear that."), said
    assert "Noted: dad fell on tuesday" in replies[2], replies[2]
    assert "sorry" not in replies[3], replies[3]
    assert replies[4].startswith("I can't look that up"), replies[4]
    assert "rain on saturday" in replies[6], replies[6]
    assert replies[8] == "OK, jonas.", replies[8]


async def test_medicines_asked_for_are_the_lines_giving_a_dose_still_taken(
    make_config: Callable[..., Config],
) -> None:
    """ "what meds does dad take?" found nothing (no line says "meds"), then only the
    amlodipine; "he stopped taking amlodipine" left "the amlodipine dose went up to
    10mg" listed as current; madopar's "3 times a day" was given the neurology
    appointment's move ("same time") as its "Later"."""
    replies = await _talk(
        make_config,
        [
            "he takes madopar 3 times a day, 8am 1pm and 6pm",
            "also amlodipine 5mg once in the morning for blood pressure",
            "remember his neurology appointment is on the 9th of may at 10:40",
            "actually the neurology appointment got moved to 16th may, same time",
            "note that the amlodipine dose went up to 10mg",
            "he stopped taking amlodipine, gp switched him to ramipril 2.5mg",
            "what meds does dad take?",
            "how much amlodipine does he take?",
        ],
    )
    said = replies[6]
    assert "madopar 3 times a day" in said and "neurology" not in said, said
    current = said.split("Not listed")[0]
    assert "amlodipine" not in current, said
    assert "stopped taking amlodipine" in replies[7], replies[7]


async def test_when_something_comes_is_when_it_does_what_it_does(
    make_config: Callable[..., Config],
) -> None:
    """ "when does the flour come?" found nothing of "the flour supplier is whitmore
    mills, they deliver every monday" (no line says "come")."""
    replies = await _talk(
        make_config,
        [
            "the flour supplier is whitmore mills, they deliver every monday",
            "my assistant josie works tues to thurs",
            "my neighbour has a key in case builders come when i'm at work",
            "when does the flour come?",
            "when does josie come in?",
        ],
    )
    assert "deliver every monday" in replies[3], replies[3]
    assert "tues to thurs" in replies[4], replies[4]


async def test_a_bare_second_part_is_said_back_as_it_was_asked(
    make_config: Callable[..., Config],
) -> None:
    """ "who gave us the quest and where?" said its second answer was to «where gave us
    the quest» (how it was looked up)."""
    replies = await _talk(
        make_config,
        [
            "the quest came from the blacksmith, old bram",
            "bram's forge is in millbrook by the river",
            "who gave us the quest and where?",
        ],
    )
    assert "«where gave us" not in replies[2], replies[2]


async def test_what_one_needs_to_do_is_a_to_do_and_a_line_set_right_is_not_told_as_current(
    make_config: Callable[..., Config],
) -> None:
    """ "what do i need to order?" quoted "i need help tracking custom orders" over the
    to-do "remind me to order more eggs"; "what do you know about me?" listed "he's
    doing chess club on tuesdays" beside "not chess club, its coding club"."""
    replies = await _talk(
        make_config,
        [
            "i run a tiny bakery and i need help tracking custom orders, i keep losing post-its",
            "remind me to order more eggs, we're down to 2 trays",
            "what do i need to order?",
            "leo quit swimming, he's doing chess club on tuesdays instead",
            "not chess club, its coding club, i got confused",
            "what do you know about me?",
        ],
    )
    assert "order more eggs" in replies[2] and "post-its" not in replies[2], replies[2]
    assert "coding club" in replies[5] and "doing chess club" not in replies[5], replies[5]


async def test_a_bare_second_part_after_whats_asks_of_the_first(
    make_config: Callable[..., Config],
) -> None:
    """ "what's my best seller and how much?" quoted "£3.20 each" for the first part
    and found nothing for "how much?": "what's" did not open a question it could ask
    of."""
    replies = await _talk(
        make_config,
        [
            "my best seller is the cardamom bun, £3.20 each",
            "the farmers market is every second sunday, stall number 17",
            "what's my best seller and how much?",
        ],
    )
    assert "£3.20 each" in replies[2] and "Nothing" not in replies[2], replies[2]


async def test_quitting_the_place_one_works_is_told_after_it(
    make_config: Callable[..., Config],
) -> None:
    """ "where does ravi work?" quoted the cafe's hours with no word of Ravi's later "i'm
    quitting the cafe" (which got "OK, Ravi.")."""
    replies = await _talk(
        make_config,
        [
            ("Ravi", "i work at the cafe on campus saturdays and sundays 9 to 3"),
            ("Ravi", "ellie can you forget my work hours, i'm quitting the cafe"),
            ("Zoe", "where does ravi work?"),
        ],
    )
    assert replies[1].startswith("Noted"), replies[1]
    said = replies[2]
    assert said.index("at the cafe on campus") < said.index("quitting the cafe"), said


async def test_and_their_thing_asks_of_the_same_one_and_a_payment_is_not_moved(
    make_config: Callable[..., Config],
) -> None:
    """ "and their budget?" after "what's Brightwave's deadline?" was asked as "what's
    their budget deadline?"; "how much was the venue deposit?" was told "Later, … the
    venue moved our date to june 21st" (a payment's date is when it was paid)."""
    replies = await _talk(
        make_config,
        [
            "new client: Brightwave Coffee, they want a logo refresh, budget £1,200",
            "brightwave deadline is march 15",
            "we paid a £2,500 deposit for the venue on march 3",
            "actually the venue moved our date to june 21st bc of a double booking",
            "what's Brightwave's deadline?",
            "and their budget?",
            "how much was the venue deposit?",
        ],
    )
    assert "£1,200" in replies[5], replies[5]
    assert "£2,500" in replies[6] and "june 21st" not in replies[6], replies[6]


async def test_what_we_need_to_do_after_another_part_asks_of_it(
    make_config: Callable[..., Config],
) -> None:
    """ "when is the inspection and what do we need to do?" found nothing for its
    second part once "need to" no longer counted: "what do we need to do?" asks of
    what it is said after ("we need to clean the oven")."""
    replies = await _talk(
        make_config,
        [
            ("ellie", "the flat inspection is 28 april, we need to clean the oven"),
            ("zoe", "my exams are in may"),
            ("ravi", "when is the inspection and what do we need to do?"),
        ],
    )
    assert "clean the oven" in replies[2] and "Nothing" not in replies[2], replies[2]


async def test_a_correction_naming_someone_by_a_pronoun_is_told_after_their_line(
    make_config: Callable[..., Config],
) -> None:
    """ "actually her number is 07700 900999" after "my sister's new number is 07700
    900123": asked her number, the bot gave the old one alone.  The correction is her
    number's "Later"; it is not the asker's own number, nor its change."""
    replies = await _talk(
        make_config,
        [
            "my sister's new number is 07700 900123",
            "my number is 0800 111 222",
            "actually her number is 07700 900999",
            "what's my sister's number?",
            "what's my number?",
        ],
    )
    sister, mine = replies[3], replies[4]
    assert "07700 900123" in sister and "Later" in sister, sister
    assert sister.index("900999") > sister.index("900123"), sister
    assert "0800 111 222" in mine, mine
    assert "900999" not in mine, mine


async def test_someones_thing_in_view_is_answered_by_their_own_my(
    make_config: Callable[..., Config],
) -> None:
    """ "when is bens party?" with Ben's "party at mine saturday" in view: the bot said
    it would look further back, then quoted the memory of the same line.  Ben's "my
    party" (or his party "at mine") is Ben's party, answered at once."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        for i, (who, line) in enumerate(
            [
                ("ben", "party at mine saturday, 22 hill street"),
                ("tia", "my party is on the 9th, at the boathouse"),
                ("aisha", "cool what should i bring"),
            ]
        ):
            await rt.submit(inbound(CH, line, pid=f"p{i}", author=who))
            await rt.drain()
        for i, (question, said) in enumerate(
            [("when is bens party?", "22 hill street"), ("where is tia's party?", "boathouse")]
        ):
            before = len(rt.outbox.sent)
            await rt.submit(inbound(CH, question, pid=f"q{i}", author="cara"))
            await rt.drain()
            replies = [o.text for o in rt.outbox.sent[before:]]
            assert len(replies) == 1 and said in replies[0], replies
            assert HOLDING not in replies[0], replies


async def test_an_order_called_off_is_told_with_what_was_wanted(
    make_config: Callable[..., Config],
) -> None:
    """ "how many cupcakes does dan want?" after "dan cancelled his order" gave the 24
    cupcakes as if still wanted: "dan wants 24 cupcakes" was his order, without the
    word.  Mrs Patel's order stays, and the to-do "order more eggs" too."""
    replies = await _talk(
        make_config,
        [
            "dan wants 24 cupcakes for saturday, vanilla",
            "mrs patel ordered a lemon cake for the 14th",
            "remind me to order more eggs",
            "dan cancelled his order",
            "how many cupcakes does dan want?",
            "what orders do i have?",
            "what are my to-dos?",
        ],
    )
    assert "24 cupcakes" in replies[4], replies[4]
    assert replies[4].index("24 cupcakes") < replies[4].index("dan cancelled"), replies[4]
    assert "lemon cake" in replies[5], replies[5]
    assert "Not listed, since" in replies[5] and "dan cancelled" in replies[5], replies[5]
    assert replies[6].startswith("Your to-dos: order more eggs"), replies[6]


async def test_what_time_is_answered_only_by_a_line_giving_a_time(
    make_config: Callable[..., Config],
) -> None:
    """ "what time is kick off again" quoted Mia's «how much is it this time» (a question
    asked without a "?"), and "what time is kick off now?" Priya's «work has been brutal
    this week»: a time asked is answered by a line giving one, or by none."""
    replies = await _talk(
        make_config,
        [
            ("kofi", "five a side is back, booked pitch 3 for thursday 7pm"),
            ("mia", "nice one kofi!! how much is it this time"),
            ("priya", "ugh work has been brutal this week, so ready to kick something"),
            ("tom", "what time is kick off again"),
            ("dev", "rehearsal is wednesday 8pm at the studio"),
            ("tom", "what time is rehearsal?"),
        ],
    )
    assert "how much is it this time" not in replies[3], replies[3]
    assert "brutal" not in replies[3], replies[3]
    assert "wednesday 8pm" in replies[5], replies[5]


async def test_a_short_follow_up_is_asked_of_the_answer_before(
    make_config: Callable[..., Config],
) -> None:
    """ "and what time are we on?" after the Windmill gig's line, "and where?" after the
    Patel wedding's, and "what days?" after the gym plan and its change: each found
    nothing or a line sharing a word ("every 14 days"), though the line just quoted
    tells it (the change's, when it was changed)."""
    replies = await _talk(
        make_config,
        [
            "we're booked at the windmill brixton on march 8, doors 7:30, we're on at 9",
            "when's the windmill gig?",
            "and what time are we on?",
            "the patel wedding is on may 17 at hartwell manor, they paid a £400 deposit",
            "whens the patel wedding?",
            "and where?",
            "i want to start the gym, planning mon wed fri at 6pm",
            "my libre sensor needs changing every 14 days, last changed on jan 3",
            "the gym plan is changing, tuesdays and thursdays instead at 7am",
            "when am i going to the gym?",
            "what days?",
        ],
    )
    assert "we're on at 9" in replies[2], replies[2]
    assert "hartwell manor" in replies[5], replies[5]
    assert "tuesdays and thursdays" in replies[10], replies[10]
    assert "libre" not in replies[10], replies[10]


async def test_a_sum_or_what_the_world_knows_is_said_to_be_out_of_reach(
    make_config: Callable[..., Config],
) -> None:
    """ "whats 2200 minus 500?" quoted «harris deposit was £500», and "how many carbs in
    a banana?" a diabetic's carb ratio: a sum gets an honest "I can't work out sums",
    and what the world knows "I can't look that up", unless a line here tells it."""
    replies = await _talk(
        make_config,
        [
            "harris deposit was £500, paid in full",
            "my carb ratio is 1 unit per 10g carbs",
            "whats 2200 minus 500?",
            "how many kg is 400g plus 650g?",
            "how many carbs in a banana?",
            "a banana has about 27g carbs",
            "how many carbs in a banana?",
            "what's my carb ratio?",
            "my flight is on 3/4 at 10am",
            "whats on 3/4?",
        ],
    )
    assert replies[2] == SUMS_REPLY and replies[3] == SUMS_REPLY, replies[2:4]
    assert replies[4].startswith("I can't look that up"), replies[4]
    assert "27g" in replies[6], replies[6]
    assert "1 unit per 10g" in replies[7], replies[7]
    assert "my flight" in replies[9], replies[9]


async def test_annoyance_nerves_and_a_sad_face_get_sympathy(
    make_config: Callable[..., Config],
) -> None:
    """ "ugh the train was late again today, so annoying", "feeling kinda overwhelmed
    with everything", "work has been brutal this week" and a line ending "ugh" or ":("
    were answered "OK." or saved with their "ugh"; "ugh fine, I'll bring chips" and
    "this cake is brutally good" are no venting."""
    replies = await _talk(
        make_config,
        [
            "ugh the train was late again today, so annoying",
            "feeling kinda overwhelmed with everything tbh",
            "ugh work has been brutal this week, so ready to kick something",
            "my amp is making a weird buzzing noise ugh",
            "no football for me this week :(",
            "ugh fine, I'll bring chips",
            "this cake is brutally good",
        ],
    )
    for reply in replies[:5]:
        assert reply.startswith("I'm sorry to hear that."), replies
    assert replies[3].endswith("Noted: your amp is making a weird buzzing noise."), replies[3]
    assert not any("sorry" in r for r in replies[5:]), replies[5:]


async def test_a_gig_cancelled_on_us_and_a_thing_said_to_be_off_are_called_off(
    make_config: Callable[..., Config],
) -> None:
    """ "shacklewell arms cancelled on us" got "OK, Lou." and "is the shacklewell gig
    still on?" the booking alone; "the harris drone thing is off" was not told when
    asked "is the harris drone add-on happening?" ("add-on" against "add on")."""
    replies = await _talk(
        make_config,
        [
            ("lou", "second gig! the shacklewell arms on march 22, we're headlining"),
            ("lou", "gig news! we're booked at the windmill brixton on march 8"),
            ("lou", "bad news, shacklewell arms cancelled on us, venue has a flooding problem"),
            ("ana", "is the shacklewell gig still on?"),
            ("dana", "the harris couple want a drone add on, i quoted £250"),
            ("dana", "actually scratch that, the harris drone thing is off, venue doesnt allow"),
            ("dana", "is the harris drone add-on happening?"),
            ("dana", "the heating is off, it's freezing"),
        ],
    )
    assert replies[2].startswith("Noted:"), replies[2]
    gig = replies[3]
    assert gig.index("march 22") < gig.index("cancelled on us"), gig
    drone = replies[6]
    assert drone.index("£250") < drone.index("thing is off"), drone


async def test_a_game_said_to_be_off_with_an_apostrophe_is_told_when_asked_if_it_is_on(
    make_config: Callable[..., Config],
) -> None:
    """ "bad news, game's off lads, the other team pulled out" was not told when asked "bot
    is the game still on tuesday?": only "game on tuesday at 7" was quoted ("X's off"
    was not read as "X is off")."""
    replies = await _talk(
        make_config,
        [
            ("ollie", "game on tuesday at 7 lads, astro pitch at the leisure centre"),
            ("sam", "im in"),
            ("ollie", "bad news, game's off lads, the other team pulled out so we've forfeited"),
            ("priya", "bot is the game still on tuesday?"),
        ],
    )
    game = replies[3]
    assert game.index("tuesday at 7") < game.index("game's off lads"), game


async def test_a_price_put_up_by_someone_named_is_told_after_their_quote(
    make_config: Callable[..., Config],
) -> None:
    """ "jess emailed, she's put her price up, it's €3,100 now" was not told when asked
    "what do you know about the photographer?": only Jess's €2,800 quote was (the line
    names neither "photographer" nor a change word); a line naming her that moves no
    price is no change of it."""
    replies = await _talk(
        make_config,
        [
            "our photographer is Jess Marsh, she quoted €2,800 for the full day",
            "jess recommended a florist, she charges €400 for the tables",
            "jess emailed, she's put her price up, it's €3,100 now",
            "what do you know about the photographer?",
            "how much is the photographer?",
        ],
    )
    for reply in replies[3:]:
        assert reply.index("€2,800") < reply.index("€3,100 now"), reply
        assert "florist" not in reply, reply


async def test_a_rate_to_be_put_up_is_told_after_the_rate_it_changes(
    make_config: Callable[..., Config],
) -> None:
    """ "i'm putting my legal rate up to 0.16 from april" was not told when asked "what's
    my legal rate?" (a rate put up, said of oneself); the other rate stays as it is."""
    replies = await _talk(
        make_config,
        [
            "my legal rate is 0.12 a word",
            "my medical rate is 0.14 a word",
            "i'm putting my legal rate up to 0.16 from april",
            "what's my legal rate?",
            "what's my medical rate?",
        ],
    )
    legal, medical = replies[3:]
    assert legal.index("0.12") < legal.index("up to 0.16 from april"), legal
    assert "0.14" in medical and "0.16" not in medical, medical


async def test_a_count_given_again_as_a_sum_is_told_after_the_count(
    make_config: Callable[..., Config],
) -> None:
    """ "the Lees said yes so that makes 92" and "… so back to 86" were not told when
    asked "how many guests have we got?": only the first "90 guests" was.  A count
    given again without its noun is of the count told just before it, not of another
    ("so that makes 14" after "we hired 12 tables" is of the tables)."""
    replies = await _talk(
        make_config,
        [
            "we have 90 guests confirmed for the wedding",
            "the Lees said yes so that makes 92",
            "the Okafors can't come after all so back to 86",
            "we hired 12 tables from the village hall",
            "two more from the church so that makes 14",
            "the marquee was back to 18 degrees this morning",
            "how many guests have we got?",
            "how many tables have we got?",
        ],
    )
    guests, tables = replies[6:]
    assert guests.index("90 guests") < guests.index("back to 86"), guests
    assert "14" not in guests and "degrees" not in guests, guests
    assert tables.index("12 tables") < tables.index("makes 14"), tables
    assert "86" not in tables, tables


async def test_a_group_deciding_what_we_should_do_is_not_answered_unless_the_bot_is_asked(
    make_config: Callable[..., Config],
) -> None:
    """In a group, "how many pizzas should we order for friday" is the group's to decide:
    it got "Let me look further back…" and "Nothing I could find covers that."  Put to
    the bot by name, "bot where should we meet on friday?" is answered."""
    replies = await _talk(
        make_config,
        [
            ("mia", "pizza night friday at mine"),
            ("tom", "nice"),
            ("mia", "how many pizzas should we order for friday"),
            ("mia", "bot where should we meet on friday?"),
        ],
    )
    assert "look further back" not in replies[2] and "Nothing I could" not in replies[2]
    assert "pizza night friday at mine" in replies[3], replies[3]


async def test_a_request_to_everyone_and_a_will_do_are_not_looked_up(
    make_config: Callable[..., Config],
) -> None:
    """ "can everyone pay me back for the internet, £12.50 each", said before anyone else
    spoke, and Dan's "will do" each got "Let me look further back…" and "Nothing I could
    find covers that.": the first asks the group, the second tells (its "I" left off)."""
    replies = await _talk(
        make_config,
        [
            ("priya", "paid the internet bill, £50 for the month"),
            ("priya", "can everyone pay me back for the internet, £12.50 each"),
            ("dan", "will do"),
            ("sam", "should be fine for me too"),
        ],
    )
    for reply in replies[1:]:
        assert "look further back" not in reply and "Nothing I could" not in reply, replies


async def test_alone_with_the_bot_what_everyone_is_bringing_is_asked_of_the_bot(
    make_config: Callable[..., Config],
) -> None:
    """Alone with the bot, "what is everyone bringing?" asks it what was said, though it
    names everyone: no group is there to answer."""
    replies = await _talk(
        make_config,
        [
            "for the picnic tom is bringing crisps and sam is bringing dips",
            "what is everyone bringing?",
        ],
    )
    assert "crisps" in replies[1], replies[1]


async def test_a_date_set_right_mid_sentence_is_told_after_the_line_it_corrects(
    make_config: Callable[..., Config],
) -> None:
    """ "actually the tomatoes were sown march 1 not feb 28, just checked my diary": "when
    did i sow the tomatoes?" gave feb 28 alone.  A "Y not X" ending a clause, X a date
    of two words, corrects the line saying X; "what variety?" asks the line that says."""
    replies = await _talk(
        make_config,
        [
            "sowed tomatoes indoors on the windowsill feb 28, variety is gardeners delight",
            "actually the tomatoes were sown march 1 not feb 28, just checked my diary",
            "when did i sow the tomatoes?",
            "what variety?",
        ],
    )
    sown = replies[2]
    assert sown.index("feb 28") < sown.index("march 1 not feb 28"), sown
    assert "gardeners delight" in replies[3], replies[3]


async def test_a_debt_paid_by_whoever_owed_it_is_told_after_it(
    make_config: Callable[..., Config],
) -> None:
    """ "does tom still owe me?" gave Kofi's «tom you still owe me £15» alone, one line
    after Tom's "paid kofi the £15 now, we're square".  A payment by the one who owed,
    to the one owed, is the debt's "Later"; someone else's payment is not."""
    replies = await _talk(
        make_config,
        [
            ("kofi", "ps tom you still owe me £15 from last week"),
            ("priya", "i paid kofi my £15 already btw"),
            ("kofi", "does tom still owe me?"),
            ("tom", "paid kofi the £15 now, we're square"),
            ("kofi", "does tom still owe me?"),
        ],
    )
    assert "Later" not in replies[2], replies[2]
    paid = replies[4]
    assert paid.index("still owe me") < paid.index("we're square"), paid


async def test_im_ive_and_ill_typed_without_apostrophes_are_said_back_as_yours(
    make_config: Callable[..., Config],
) -> None:
    """ "Noted: your neighbour … she waters for you when im away" and "Noted as a to-do:
    ill grab them wednesday" mixed the listener's and the speaker's words; "mum is ill"
    stays ill."""
    replies = await _talk(
        make_config,
        [
            "my neighbour on plot 15 is called maureen, she waters for me when im away",
            "yeah fine ill grab them wednesday",
            "ive booked pitch 3 at goals southside for thursday 7pm",
            "my mum is ill so i'm looking after her dog, rex",
        ],
    )
    assert replies[0].endswith("she waters for you when you're away."), replies[0]
    assert "you'll grab them wednesday" in replies[1], replies[1]
    assert "you've booked pitch 3" in replies[2], replies[2]
    assert "your mum is ill" in replies[3], replies[3]


async def test_where_one_works_is_the_job_told_not_a_work_bag(
    make_config: Callable[..., Config],
) -> None:
    """ "where do i work again?" quoted «my hypo kit lives in the blue pouch in my work
    bag»: the job was told as "started at brightwave logistics …, im a data analyst
    there", without the word "work"."""
    replies = await _talk(
        make_config,
        [
            "started at brightwave logistics on monday, im a data analyst there",
            "my hypo kit lives in the blue pouch in my work bag",
            "where do i work again?",
            "where's my hypo kit?",
        ],
    )
    assert "brightwave logistics" in replies[2], replies[2]
    assert "blue pouch" in replies[3], replies[3]


async def test_a_group_question_put_to_one_of_them_or_to_all_is_theirs(
    make_config: Callable[..., Config],
) -> None:
    """ "legend, whats jay's number mia?" (put to Mia, named last) was looked up and
    answered with a line without a number; "can we drop paper moon, …" (put to the
    band) was looked further back for.  "what's wrong with priya?" is asked of Priya,
    and answered by her own "my ankle …", not by Kofi's "cheers priya, got it"."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        said: list[list[str]] = []
        for i, (who, line) in enumerate(
            [
                ("mia", "my brother jay can sub in if priya's ankle is bad"),
                ("kofi", "legend, whats jay's number mia?"),
                ("ana", "can we drop paper moon, i keep messing up the bridge"),
                ("priya", "my ankle is still a bit dodgy from the sprain"),
                ("kofi", "cheers priya, got it"),
                ("priya", "i paid kofi my £15 already btw"),
                ("mia", "what's wrong with priya?"),
            ]
        ):
            before = len(rt.outbox.sent)
            await rt.submit(inbound(CH, line, pid=f"p{i}", author=who))
            await rt.drain()
            said.append([o.text for o in rt.outbox.sent[before:]])
    assert said[1] == ["OK, kofi."], said[1]
    assert said[2] == ["OK, ana."], said[2]
    assert said[6] == [said[6][0]] and "my ankle is still" in said[6][0], said[6]


async def test_a_new_value_said_now_after_what_it_is_of_is_told_as_a_change(
    make_config: Callable[..., Config],
) -> None:
    """ "seven seas updated their quote, its £1790 now": "what quotes do i have for
    shipping?" gave the £1850 alone, because only the clause saying "now" was read for
    what changed, and it gives nothing but the value."""
    replies = await _talk(
        make_config,
        [
            "shipping quotes so far: movebox £2100, seven seas £1850",
            "seven seas updated their quote, its £1790 now",
            "what quotes do i have for shipping?",
        ],
    )
    assert replies[2].index("£1850") < replies[2].index("its £1790 now"), replies[2]


async def test_a_line_announced_or_going_on_is_kept_whole(
    make_config: Callable[..., Config],
) -> None:
    """ "the patel couple moved their date! its now may 24 not may 17" was noted without
    its new date, and "first harvest! 400g of radishes on may 12" answered "what did i
    harvest?" with «first harvest!» alone."""
    replies = await _talk(
        make_config,
        [
            "the patel couple moved their date! its now may 24 not may 17",
            "first harvest! 400g of radishes on may 12",
            "what did i harvest?",
        ],
    )
    assert replies[0] == "Noted: the patel couple moved their date! its now may 24 not may 17."
    assert replies[1] == "Noted: first harvest! 400g of radishes on may 12.", replies[1]
    assert "400g of radishes" in replies[2], replies[2]


async def test_who_someone_is_is_the_line_saying_who_they_are(
    make_config: Callable[..., Config],
) -> None:
    """ "who is rachel?" quoted the to-do «send rachel the shot list», and "who is
    tiago?" «…, tiago negotiated»: the lines saying who they are were there."""
    replies = await _talk(
        make_config,
        [
            "the boathouse coordinator is called rachel, her email is rachel@boathouse.co.uk",
            "remind me to send rachel the shot list",
            "flat agent is tiago, whatsapp +351 912 345 678",
            "the almirante reis one is now €1050, tiago negotiated",
            "who is rachel?",
            "who is tiago?",
        ],
    )
    assert "coordinator is called rachel" in replies[4], replies[4]
    assert "flat agent is tiago" in replies[5], replies[5]


async def test_a_lead_in_is_not_said_back_in_the_note(
    make_config: Callable[..., Config],
) -> None:
    """ "Noted: first one: the patel wedding …", "Noted: fair, sam and you can split it":
    a lead-in that numbers the line or agrees is no part of what was told."""
    replies = await _talk(
        make_config,
        [
            "first one: the patel wedding is on may 17 at hartwell manor",
            "fair, sam and me can split it then, £27 each",
            ("dev", "yo band, rehearsal this week is wednesday 8pm"),
        ],
    )
    assert replies[0] == "Noted: the patel wedding is on may 17 at hartwell manor.", replies[0]
    assert replies[1] == "Noted: sam and you can split it then, £27 each.", replies[1]
    assert replies[2].endswith("Noted: rehearsal this week is wednesday 8pm."), replies[2]


async def test_can_someone_forget_in_a_group_is_a_forget_for_the_bot(
    make_config: Callable[..., Config],
) -> None:
    """ "can someone forget my ankle stuff, dont want it hanging around lol" got "OK,
    Priya." and the ankle line was quoted again: in a group only the bot forgets."""
    replies = await _talk(
        make_config,
        [
            ("priya", "fyi my ankle is still a bit dodgy from the sprain, might only do half"),
            ("kofi", "five a side is thursday at 7pm"),
            ("priya", "can someone forget my ankle stuff, dont want it hanging around lol"),
            ("mia", "what's wrong with priya?"),
        ],
    )
    assert replies[2].startswith("Done: I forgot"), replies[2]
    assert "ankle" not in replies[3], replies[3]


def test_a_venue_word_is_a_place_only_after_at_or_in() -> None:
    """ "where?" after an answer giving only «consulate emailed, appointment moved to feb
    27» (its first line had left the view) was answered with that line, which names no
    place; "at hartwell manor", written small, is one."""
    from tierbot.llm.offline_chat import _PLACE

    assert _PLACE.search("consulate emailed, appointment moved to feb 27, same time") is None
    assert _PLACE.search("the patel wedding is on may 17 at hartwell manor") is not None
    assert _PLACE.search("appointment at the portuguese consulate in london") is not None


async def test_asking_for_help_and_a_moved_date_are_no_to_dos(
    make_config: Callable[..., Config],
) -> None:
    """ "need help keeping track of everything" was noted as a to-do and headed every
    to-do list, and "move date pushed back, now may 2" was listed as a to-do: one asks
    the bot for help, the other tells of a plan moved."""
    replies = await _talk(
        make_config,
        [
            "ok so its official, im moving to lisbon!! need help keeping track of everything",
            "remind me to book pixel's rabies jab",
            "move date pushed back, now may 2",
            "what do i need to do?",
            "when am i moving?",
        ],
    )
    assert "to-do" not in replies[0], replies[0]
    assert replies[2].startswith("Noted:") and "to-do" not in replies[2], replies[2]
    assert replies[3].startswith("Your to-dos: book pixel's rabies jab"), replies[3]
    assert "keeping track" not in replies[3] and "pushed back" not in replies[3], replies[3]
    assert "may 2" in replies[4], replies[4]


async def test_a_value_given_as_the_answer_to_a_question_is_kept_with_it(
    make_config: Callable[..., Config],
) -> None:
    """ "legend, whats jay's number mia?" answered by Mia's "its 07700 900462" was noted
    as "its 07700 900462", and "whats jay's number again?" found nothing: the value
    alone is kept with what it answers."""
    replies = await _talk(
        make_config,
        [
            ("mia", "my brother jay can sub in if priya's ankle is bad"),
            ("kofi", "legend, whats jay's number mia?"),
            ("mia", "its 07700 900462"),
            ("priya", "ugh work has been brutal this week"),
            ("kofi", "whats jay's number again?"),
        ],
    )
    assert replies[2] == "Noted: jay's number is 07700 900462.", replies[2]
    assert "07700 900462" in replies[4], replies[4]


async def test_someone_in_or_out_answers_whether_they_are_playing(
    make_config: Callable[..., Config],
) -> None:
    """ "my physio said no football for 2 weeks so im out thursday :(" did not answer
    "is priya playing thursday?" (Nothing I could find), and "so jay's in then" and "ok
    paper moon's out" got "OK, Mia." and were lost: being in or out is how a group says
    who plays, and what."""
    replies = await _talk(
        make_config,
        [
            ("kofi", "ive booked pitch 3 at goals southside for thursday 7pm"),
            ("priya", "my physio said no football for 2 weeks so im out thursday :("),
            ("mia", "so jay's in then, ill tell him"),
            ("dev", "ok paper moon's out"),
            ("tom", "is priya playing thursday?"),
            ("tom", "is jay playing?"),
            ("ana", "are we playing paper moon?"),
            ("ana", "where are we playing?"),
        ],
    )
    assert replies[2].startswith("Noted: jay's in then"), replies[2]
    assert replies[3] == "Noted: paper moon's out.", replies[3]
    assert "im out thursday" in replies[4], replies[4]
    assert "jay's in then" in replies[5], replies[5]
    assert "paper moon's out" in replies[6], replies[6]
    assert "jay's in" not in replies[7], replies[7]  # being in says nothing of where


async def test_digits_set_right_change_the_number_they_end(
    make_config: Callable[..., Config],
) -> None:
    """ "actually my number's wrong, last digits are 872 not 871" did not change "my
    number is 07700 900871": "871" was looked for as a word of its own, and "whats
    ana's number?" gave the old number alone."""
    replies = await _talk(
        make_config,
        [
            ("ana", "hey im back!! new phone btw, my number is 07700 900871"),
            ("dev", "cool"),
            ("ana", "actually my number's wrong, last digits are 872 not 871"),
            ("dev", "whats ana's number?"),
        ],
    )
    assert "07700 900871" in replies[3], replies[3]
    assert "Later, ana said" in replies[3] and "872 not 871" in replies[3], replies[3]


async def test_nerves_before_something_ahead_are_wished_well_not_pitied(
    make_config: Callable[..., Config],
) -> None:
    """ "i'm so nervous for march" (a move ahead) got "I'm sorry to hear that.": nerves
    before something to come are wished luck; a hard time told with them still gets
    the kind word."""
    replies = await _talk(
        make_config,
        [
            "i'm so nervous for march",
            "my mum's in hospital and im so nervous about the results",
        ],
    )
    assert replies[0] == "Fingers crossed for you.", replies[0]
    assert replies[1].startswith("I'm sorry to hear that."), replies[1]


async def test_what_the_bot_is_for_is_no_part_of_what_was_told(
    make_config: Callable[..., Config],
) -> None:
    """ "so im a wedding photographer and i need somewhere to dump all my booking stuff
    lol" was noted whole, and headed every "what do you know about me?" with "you need
    somewhere to dump all your booking stuff"; so was "…, want to keep notes here"."""
    replies = await _talk(
        make_config,
        [
            "hey! so im a wedding photographer and i need somewhere to dump all my booking "
            "stuff lol",
            "got an allotment plot this year, plot 14b at greenway allotments, want to keep "
            "notes here",
            "im saving up and i want to put £200 away each month",
            "we moved in last year and i want to stay here",
            "what do you know about me?",
        ],
    )
    assert replies[0].endswith("! Noted: you're a wedding photographer."), replies[0]
    assert replies[1] == (
        "Noted: got an allotment plot this year, plot 14b at greenway allotments."
    ), replies[1]
    assert "£200 away each month" in replies[2], replies[2]
    assert "want to stay here" in replies[3], replies[3]
    assert "dump" not in replies[4] and "notes here" not in replies[4], replies[4]
    assert "wedding photographer" in replies[4] and "plot 14b" in replies[4], replies[4]


async def test_a_job_taken_back_leaves_the_to_dos(
    make_config: Callable[..., Config],
) -> None:
    """ "actually i cant bring the bibs, car's in the garage" got "OK, Tom." and "ill
    bring the bibs" stayed his to-do: a job taken back by whoever took it on is no
    longer theirs, and what they said of it now is kept."""
    replies = await _talk(
        make_config,
        [
            ("tom", "ill bring the bibs, theyre in my boot anyway"),
            ("priya", "how's everyone's week going"),
            ("tom", "actually i cant bring the bibs, car's in the garage. mia can you grab them"),
            ("tom", "what do i need to do?"),
            ("priya", "who's bringing the bibs now?"),
            ("mia", "i cant make it tonight sadly"),
        ],
    )
    assert replies[2] == "Corrected: you cant bring the bibs, car's in the garage.", replies[2]
    assert "bibs" not in replies[3], replies[3]
    assert "cant bring the bibs" in replies[4], replies[4]
    assert not replies[5].startswith("Corrected"), replies[5]  # nothing of hers taken back


async def test_a_call_to_the_group_is_not_said_back_in_the_note(
    make_config: Callable[..., Config],
) -> None:
    """ "Noted: right lads, you've booked pitch 3 …": "right lads (n lasses)," calls the
    group to listen and is no part of what was told."""
    replies = await _talk(
        make_config,
        [
            (
                "kofi",
                "right lads n lasses, five a side is back, ive booked pitch 3 for thursday 7pm",
            ),
            ("kofi", "right lads, ive booked pitch 3 for friday"),
            ("mia", "alright gang, subs are £5"),
        ],
    )
    assert replies[0] == ("Noted: five a side is back, you've booked pitch 3 for thursday 7pm."), (
        replies[0]
    )
    assert replies[1] == "Noted: you've booked pitch 3 for friday.", replies[1]
    assert replies[2] == "Noted: subs are £5.", replies[2]


async def test_kick_off_is_asked_of_the_time_it_starts(
    make_config: Callable[..., Config],
) -> None:
    """ "what time is kick off now?" after "goals moved us to 8pm" found nothing (no line
    says "kick off"): a start is said by its time.  "when does the match kick off?",
    no match told, is not yoga's 7pm."""
    replies = await _talk(
        make_config,
        [
            ("kofi", "ive booked pitch 3 at goals southside for thursday 7pm"),
            ("priya", "ugh work has been brutal this week, so ready to kick something"),
            ("kofi", "change of plan guys, goals moved us to 8pm, same pitch"),
            ("tom", "what time is kick off now?"),
            ("ann", "yoga at 7pm on fridays"),
            ("ann", "when does the match kick off?"),
        ],
    )
    assert "moved us to 8pm" in replies[3] and "kick something" not in replies[3], replies[3]
    assert "yoga" not in replies[5], replies[5]


async def test_a_short_correction_of_a_date_a_range_or_a_day_changes_its_line(
    make_config: Callable[..., Config],
) -> None:
    """ "actually its the 12th of june not the 14th", "actually the market is 13-14
    december not 6-7" and "actually he cant do thurs, its friday 9am now" were noted,
    and the next question gave the old value alone: "14th", "6-7" and "thurs" were not
    read as values the lines before gave ("14 june", "6-7 december", "thursday")."""
    replies = await _talk(
        make_config,
        [
            "booked dave for thursday at 10am to look at the boiler",
            "actually he cant do thurs, its friday 9am now",
            "when is dave coming?",
            "gas safety cert for harbour st runs out on 14 june",
            "actually its the 12th of june not the 14th",
            "when does the gas cert run out?",
            "christmas market stall at the corn exchange, 6-7 december, pitch is 95",
            "actually the market is 13-14 december not 6-7",
            "when is the christmas market?",
        ],
    )
    assert "Later, ann said" in replies[2] and "friday 9am now" in replies[2], replies[2]
    assert "Later, ann said" in replies[5] and "12th of june" in replies[5], replies[5]
    assert "Later, ann said" in replies[8] and "13-14 december" in replies[8], replies[8]


async def test_a_move_of_it_right_after_a_date_moves_that_date(
    make_config: Callable[..., Config],
) -> None:
    """ "next physio appt is friday 4pm", then "actually anna moved it to friday 5:15":
    "when is my next physio?" gave 4pm alone ("it" shares no word with the line).  Said
    after another line of theirs, "it" is not taken to be the appointment."""
    replies = await _talk(
        make_config,
        [
            "next physio appt is friday 4pm",
            "actually anna moved it to friday 5:15",
            "when is my next physio?",
            ("bo", "dentist for bo is on the 3rd at 9am"),
            ("bo", "my sister's birthday is on the 5th"),
            ("bo", "actually they moved it to the 6th"),
            ("bo", "when is my dentist?"),
        ],
    )
    assert "Later, ann said" in replies[2] and "friday 5:15" in replies[2], replies[2]
    assert "moved it to the 6th" not in replies[6], replies[6]


async def test_scratch_and_someone_cancelled_call_a_plan_off(
    make_config: Callable[..., Config],
) -> None:
    """ "scratch that the okafors cancelled" and "scratch the ISRS abstract, decided not
    to go" got "OK.": the viewing with the okafors was then given as booked, and the
    abstract stayed a to-do."""
    replies = await _talk(
        make_config,
        [
            "viewing at kings rd saturday 11am with a couple called the okafors",
            "scratch that the okafors cancelled",
            "any viewings booked?",
            "remind me to write the conference abstract for ISRS, deadline is 30 april",
            "remind me to renew the grant form by 15 june",
            "scratch the ISRS abstract, decided not to go",
            "what do i need to do?",
        ],
    )
    assert replies[1] == "Noted: the okafors cancelled.", replies[1]
    assert "Later, ann said" in replies[2] and "okafors cancelled" in replies[2], replies[2]
    assert replies[5].startswith("Noted:"), replies[5]
    assert "grant form" in replies[6] and "ISRS" not in replies[6], replies[6]


async def test_an_address_written_small_is_an_address(
    make_config: Callable[..., Config],
) -> None:
    """ "bot whats the address again?" after "meeting is thursday 10 april, 7pm at mine,
    14 ash grove" found nothing: a street was one only with a capital letter.  "3 hours
    down the road" is still no address."""
    replies = await _talk(
        make_config,
        [
            ("lena", "meeting is thursday 10 april, 7pm at mine, 14 ash grove"),
            ("omar", "i drove 3 hours down the road to get the book"),
            ("omar", "bot whats the address again?"),
        ],
    )
    assert "14 ash grove" in replies[2] and "3 hours" not in replies[2], replies[2]


async def test_a_question_put_to_someone_named_small_is_theirs_and_so_is_the_answer(
    make_config: Callable[..., Config],
) -> None:
    """In a book club, "lena whats your number in case i get lost" (no "?") was noted as
    a fact, her "07700 900 155" was noted as it was, and "ill bring wine, omar can you
    bring snacks?" was looked up as a question to the bot: a name written small is
    whom it is put to, and the number she gives is hers."""
    replies = await _talk(
        make_config,
        [
            ("lena", "meeting is thursday at 7pm at mine"),
            ("omar", "cant wait"),
            ("dan", "lena whats your number in case i get lost"),
            ("lena", "07700 900 155"),
            ("priti", "ill bring wine, omar can you bring snacks?"),
            ("dan", "whats lenas number?"),
            ("lena", "what is priti bringing?"),
            ("lena", "forget my number, dan has it now"),
        ],
    )
    assert replies[2] == "OK, dan.", replies[2]
    assert replies[3] == "Noted: your number is 07700 900 155.", replies[3]
    assert replies[4] == "Noted as a to-do: you'll bring wine.", replies[4]
    assert "07700 900 155" in replies[5], replies[5]
    assert "bring wine" in replies[6], replies[6]
    assert replies[7] == "Done: I forgot what you told me about your number.", replies[7]


async def test_the_worst_day_gets_a_kind_word(
    make_config: Callable[..., Config],
) -> None:
    """ "ugh i've had the worst day, my train was cancelled twice" got "OK, Priti."."""
    replies = await _talk(
        make_config,
        [
            ("lena", "meeting is thursday at 7pm at mine"),
            ("priti", "ugh i've had the worst day, my train was cancelled twice"),
            ("omar", "having a nightmare week tbh"),
        ],
    )
    assert replies[1].startswith("I'm sorry to hear that."), replies[1]
    assert replies[2].startswith("I'm sorry to hear that."), replies[2]


async def test_an_email_is_said_by_its_address(
    make_config: Callable[..., Config],
) -> None:
    """ "whats her email?" after "who is my wax supplier?" found nothing: no line says
    "email", though one gives an address with an "@"."""
    replies = await _talk(
        make_config,
        [
            "main wax supplier is kerala wax co, contact is ruth, ruth@keralawax.co.uk",
            "wax is 48 quid per 10kg box, i order 3 boxes a month",
            "who is my wax supplier?",
            "whats her email?",
        ],
    )
    assert "ruth@keralawax.co.uk" in replies[3], replies[3]


async def test_and_someone_asks_what_two_people_pay_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "and priya?" after "how much do tom and jess pay?" quoted Tom and Jess's 920
    again: "priya" stood only for Tom, and "rent 850 a month" said no "pay"."""
    replies = await _talk(
        make_config,
        [
            "flat 1 is on harbour st, tenant is priya, rent 850 a month due on the 1st",
            "flat 2 is the one on mill lane, tenants are tom and jess, they pay 920",
            "how much do tom and jess pay?",
            "and priya?",
        ],
    )
    assert "they pay 920" in replies[2], replies[2]
    assert "rent 850 a month" in replies[3] and "920" not in replies[3], replies[3]


async def test_capitals_and_authors_no_one_here_gave_are_out_of_reach(
    make_config: Callable[..., Config],
) -> None:
    """ "whats the capital of portugal btw" looked further back and found nothing, as if
    the answer could be in the chat: what the world knows is said to be out of reach,
    unless a line here gives it ("who wrote klara and the sun?")."""
    replies = await _talk(
        make_config,
        [
            "the book for march is klara and the sun by ishiguro",
            "whats the capital of portugal btw",
            "who wrote klara and the sun?",
            "who wrote hamlet?",
        ],
    )
    assert replies[1].startswith("I can't look that up"), replies[1]
    assert "ishiguro" in replies[2], replies[2]
    assert replies[3].startswith("I can't look that up"), replies[3]


async def test_actually_can_we_is_put_to_the_group(
    make_config: Callable[..., Config],
) -> None:
    """ "actually can we move it to the 17th? my sister is visiting on the 10th" was
    looked up as a question to the bot and answered "The line I quoted just above
    answers that too.": it asks the others."""
    replies = await _talk(
        make_config,
        [
            ("lena", "meeting is thursday 10 april, 7pm at mine, 14 ash grove"),
            ("omar", "cool"),
            ("lena", "actually can we move it to the 17th? my sister is visiting on the 10th"),
        ],
    )
    assert replies[2] == "Noted: your sister is visiting on the 10th.", replies[2]


async def test_whats_the_plan_is_what_was_settled(
    make_config: Callable[..., Config],
) -> None:
    """ "sorry late to this, whats the plan?" quoted only «nana turns 80 on 22 march, we
    need to plan something!!», and "bot, can you tell ben the plan?" found nothing:
    asked for the plan, the bot gives what was settled, in the order it was said."""
    replies = await _talk(
        make_config,
        [
            ("sarah", "ok everyone, nana turns 80 on 22 march, we need to plan something!!"),
            ("mike", "omg 80 already"),
            ("aunt jo", "rang the rose and crown, back room is 150 to hire, holds 40 people"),
            ("sarah", "thats good. book it for saturday 22nd from 2pm"),
            ("aunt jo", "booked! deposit was 50, i paid it"),
            ("ben", "sorry late to this, whats the plan?"),
            ("sarah", "bot, can you tell ben the plan?"),
        ],
    )
    said = replies[5]
    assert said.startswith("Here is what was settled so far: "), said
    assert said.index("back room is 150") < said.index("saturday 22nd") < said.index("deposit"), (
        said
    )
    assert "omg 80" not in said, said
    assert replies[6] == said, replies[6]


async def test_what_about_me_asks_the_question_before_of_the_asker(
    make_config: Callable[..., Config],
) -> None:
    """ "what about me?" after Ben's "what do i need to do?" found nothing: Mike asks the
    same of himself."""
    replies = await _talk(
        make_config,
        [
            ("ben", "i'll order the cake from hollies bakery then, 45 quid"),
            ("mike", "ill sort the music, got a speaker"),
            ("ben", "what do i need to do?"),
            ("mike", "what about me?"),
        ],
    )
    assert "hollies bakery" in replies[2] and "music" not in replies[2], replies[2]
    assert "sort the music" in replies[3] and "hollies" not in replies[3], replies[3]


async def test_someone_named_small_is_known_by_what_was_said_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "what do you know about dan?" quoted one line of Dan's, «i vote piranesi» (not
    kept), and "who is kieran?" quoted «kieran says its a memory issue, …» over «my lab
    mate kieran is helping me …»: a name written small is asked about as a capitalised
    one is, and "my lab mate kieran" says who he is."""
    replies = await _talk(
        make_config,
        [
            ("dan", "my copy is on order from waterstones, 9.99"),
            ("dan", "i vote piranesi"),
            ("omar", "what do you know about dan?"),
            ("ann", "my lab mate kieran is helping me with the R stats for chapter 3"),
            ("ann", "kieran says its a memory issue, use data.table instead of dataframes"),
            ("ann", "who is kieran?"),
        ],
    )
    assert replies[1] == "Noted: you vote piranesi.", replies[1]
    assert replies[2].startswith("What I know about dan:"), replies[2]
    assert "waterstones" in replies[2] and "piranesi" in replies[2], replies[2]
    assert "my lab mate kieran" in replies[5] and "data.table" not in replies[5], replies[5]


async def test_tiredness_and_a_crashing_program_get_a_kind_word(
    make_config: Callable[..., Config],
) -> None:
    """ "honestly so tired today, did 3 hours of coral counting" and "ugh my code keeps
    crashing, R hates me" got "OK."."""
    replies = await _talk(
        make_config,
        [
            "honestly so tired today, did 3 hours of coral counting",
            "ugh my code keeps crashing, R hates me",
            "the new tyres are so good",
        ],
    )
    assert replies[0].startswith("I'm sorry to hear that."), replies[0]
    assert replies[1].startswith("I'm sorry to hear that."), replies[1]
    assert "sorry" not in replies[2], replies[2]


async def test_what_someone_not_here_said_is_what_the_asker_told_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "what did anna say about my knee?" (Anna the physio, not of the chat) quoted
    «my left knee has been hurting …»: what the asker told of her is what she said."""
    replies = await _talk(
        make_config,
        [
            "my left knee has been hurting since the 18 mile long run on sunday",
            "physio is called anna reid at leith sports clinic",
            "anna says its probably IT band syndrome, no running for 10 days",
            "anna cleared me for an easy 5k on saturday",
            "what did anna say about my knee?",
            ("maria", "lunch is at 1pm today"),
            ("ben", "what did maria say about lunch?"),
        ],
    )
    said = replies[4]
    assert "IT band syndrome" in said and "easy 5k" in said, said
    assert "hurting since" not in said, said
    assert "lunch is at 1pm" in replies[6], replies[6]


async def test_the_profile_leaves_out_what_was_not_kept(
    make_config: Callable[..., Config],
) -> None:
    """ "lol my cat keeps sitting on my foam roller" got "OK." (not kept), yet "what do
    you know about me?" listed "your cat keeps sitting on your foam roller"; and "club
    coach is gav, hes really supportive" was not kept at all."""
    replies = await _talk(
        make_config,
        [
            "training for the edinburgh marathon on 25 may",
            "lol my cat keeps sitting on my foam roller",
            "club coach is gav, hes really supportive, 07700 900 377",
            "ugh so frustrated, 6 weeks out and i cant run",
            "what do you know about me?",
        ],
    )
    assert replies[1].startswith("OK"), replies[1]
    assert replies[2].startswith("Noted: club coach is gav"), replies[2]
    assert replies[3].startswith("I'm sorry to hear that."), replies[3]
    assert "foam roller" not in replies[4] and "marathon" in replies[4], replies[4]


async def test_a_plan_put_to_the_group_without_a_question_word_is_theirs(
    make_config: Callable[..., Config],
) -> None:
    """ "omg 80 already. party at ours?" was looked up ("«party at ours?» Nothing I could
    find covers that."): a plan put to the others, with no question word, is theirs."""
    replies = await _talk(
        make_config,
        [
            ("sarah", "nana turns 80 on 22 march"),
            ("mike", "omg 80 already. party at ours?"),
            ("sarah", "bot, when is nanas birthday?"),
        ],
    )
    assert replies[1] == "OK, mike.", replies[1]
    assert "22 march" in replies[2], replies[2]


async def test_a_number_asked_of_names_the_one_asked_about(
    make_config: Callable[..., Config],
) -> None:
    """ "whats going on with order 4419?", its line forgotten, quoted «actually make that
    26, costs went up» ("going" and "went" share a stem): a line without the number asked
    of is about another thing."""
    replies = await _talk(
        make_config,
        [
            "order #4419 wants express delivery to dublin, extra 12.00",
            "price for the new scent is 24 for the 200g jar",
            "actually make that 26, costs went up",
            "forget order 4419, the customer cancelled",
            "whats going on with order 4419?",
        ],
    )
    assert replies[3].startswith("Done: I forgot"), replies[3]
    assert "costs went up" not in replies[4] and "4419" not in replies[4], replies[4]


async def test_savings_prices_of_a_count_and_paces_are_sums(
    make_config: Callable[..., Config],
) -> None:
    """ "how much do i save per parcel?" quoted the wax price, "how much is 400 jars?" the
    to-do to order them, and "whats my pace per km?" found nothing: each is a sum."""
    replies = await _talk(
        make_config,
        [
            "wax is 48 quid per 10kg box, i order 3 boxes a month",
            "switching to eco bubble from packhelp, 0.40 per unit instead of 0.65",
            "how much do i save per parcel?",
            "need to restock jars before the market, order 400",
            "how much is 400 jars?",
            "if i run 42.2 km in 4 hours whats my pace per km?",
        ],
    )
    assert replies[2] == SUMS_REPLY, replies[2]
    assert replies[4] == SUMS_REPLY, replies[4]
    assert replies[5] == SUMS_REPLY, replies[5]


async def test_a_move_of_one_deadline_is_no_change_of_another(
    make_config: Callable[..., Config],
) -> None:
    """ "when is the grant deadline?" was told "Later, … chapter 2 deadline moved to 16
    may": two deadlines share the word, not the thing."""
    replies = await _talk(
        make_config,
        [
            "grant deadline is 15 june, form is on the grad school website",
            "thesis draft chapter 2 is due to helen on 9 may",
            "chapter 2 deadline moved to 16 may, helen is away",
            "when is the grant deadline?",
            "when is chapter 2 due?",
        ],
    )
    assert "15 june" in replies[3] and "chapter 2" not in replies[3], replies[3]
    assert replies[4].index("9 may") < replies[4].index("Later") < replies[4].index("16 may")


async def test_a_move_put_to_the_group_holds_once_agreed(
    make_config: Callable[..., Config],
) -> None:
    """Lena's "actually can we move it to the 17th?" got "17th works for me" and "fine
    by me", yet "when is the meeting?" gave the 10th alone.  A move someone turns down
    is no move."""
    replies = await _talk(
        make_config,
        [
            ("lena", "meeting is thursday 10 april, 7pm at mine, 14 ash grove"),
            ("lena", "bot, tell dan what we're reading"),
            ("lena", "actually can we move it to the 17th? my sister is visiting on the 10th"),
            ("priti", "17th works for me"),
            ("omar", "fine by me"),
            ("dan", "when is the meeting?"),
            ("kim", "dinner club is friday 3 may at the anchor"),
            ("kim", "can we move it to the 10th?"),
            ("jo", "i cant do the 10th sorry"),
            ("kim", "when is dinner club?"),
        ],
    )
    answer = replies[5]
    assert answer.index("10 april") < answer.index("Later") < answer.index("the 17th"), answer
    assert "17th works for me" in answer and "fine by me" in answer, answer
    assert "3 may" in replies[9] and "10th?" not in replies[9], replies[9]


async def test_a_month_asked_of_is_no_line_of_another_month(
    make_config: Callable[..., Config],
) -> None:
    """ "where is the may meeting?" quoted «meeting is thursday 10 april, … at mine»:
    the line of May says where ("may 15th at mine, 3 cedar close")."""
    replies = await _talk(
        make_config,
        [
            ("lena", "meeting is thursday 10 april, 7pm at mine, 14 ash grove"),
            ("dan", "yeah may 15th at mine, 3 cedar close, flat b"),
            ("omar", "where is the may meeting?"),
            ("omar", "where is the april meeting?"),
        ],
    )
    assert "3 cedar close" in replies[2], replies[2]
    assert "14 ash grove" in replies[3], replies[3]


async def test_a_question_put_to_someone_by_name_and_you_is_theirs(
    make_config: Callable[..., Config],
) -> None:
    """ "dan you're hosting in may right?" was answered with Dan's «i vote piranesi»:
    it is put to Dan."""
    replies = await _talk(
        make_config,
        [
            ("dan", "i vote piranesi"),
            ("lena", "dan you're hosting in may right?"),
        ],
    )
    assert replies[1] == "OK, lena.", replies[1]


async def test_days_between_two_dates_is_a_sum(
    make_config: Callable[..., Config],
) -> None:
    """ "how many days from 1 march to 22 march?" quoted «nana turns 80 on 22 march»: the
    line holds one of the dates, not the count."""
    replies = await _talk(
        make_config,
        [
            "nana turns 80 on 22 march",
            "how many days from 1 march to 22 march?",
            "how many nights between the 3rd and the 9th?",
            "when does nana turn 80?",
        ],
    )
    assert replies[1] == SUMS_REPLY, replies[1]
    assert replies[2] == SUMS_REPLY, replies[2]
    assert "22 march" in replies[3], replies[3]


async def test_remind_me_said_after_the_thing_makes_it_a_to_do(
    make_config: Callable[..., Config],
) -> None:
    """ "the mill lane smoke alarm needs new batteries too, remind me" got "Noted: …,
    remind you." as a fact, and "what do i need to do?" then knew of no to-do."""
    replies = await _talk(
        make_config,
        [
            "the mill lane smoke alarm needs new batteries too, remind me",
            "bins go out on tuesday, can you remind me",
            "what do i need to do?",
        ],
    )
    assert replies[0].startswith("Noted as a to-do: the mill lane smoke alarm"), replies[0]
    assert "remind you" not in replies[0], replies[0]
    assert "smoke alarm" in replies[2] and "bins go out" in replies[2], replies[2]


async def test_good_news_is_met_gladly_and_a_groan_with_sympathy(
    make_config: Callable[..., Config],
) -> None:
    """ "knee felt fine today on the bike!! small wins" got "OK."; "ugh mondays. tenants
    texting me at 7am" and "im not feeling great" got no sympathy.  Good news said
    the other way round ("didnt go well") is no good news."""
    replies = await _talk(
        make_config,
        [
            "knee felt fine today on the bike!! small wins",
            "ugh mondays. tenants texting me at 7am",
            "im not feeling great",
            "the interview didnt go well",
            "passed my driving test today!",
            "ugh fine ill do it",
        ],
    )
    assert replies[0] == GLAD_REPLY, replies[0]
    assert replies[1].startswith("I'm sorry to hear that."), replies[1]
    assert replies[2] == "I'm sorry to hear that.", replies[2]
    assert replies[3] == "I'm sorry to hear that.", replies[3]
    assert replies[4].startswith(GLAD_REPLY), replies[4]
    assert "sorry" not in replies[5] and GLAD_REPLY not in replies[5], replies[5]


async def test_an_email_asked_for_is_the_newest_given_and_no_other_news(
    make_config: Callable[..., Config],
) -> None:
    """ "whats her email?" quoted ruth's email and then "Later, … «ruth says wax price
    goes up to 52 per box»", no news of her email; once a new email is given, the old
    one was quoted over it."""
    replies = await _talk(
        make_config,
        [
            "main wax supplier is kerala wax co, contact is ruth, ruth@keralawax.co.uk",
            "ruth says wax price goes up to 52 per box from november",
            "whats her email?",
            "uncle ray, his number is 07700 900 812",
            "uncle ray says he's in spain that week",
            "whats uncle ray's number?",
            "actually ruth's email is now ruth@kwax.com",
            "whats ruth's email?",
        ],
    )
    assert "ruth@keralawax.co.uk" in replies[2] and "52 per box" not in replies[2], replies[2]
    assert "07700 900 812" in replies[5] and "spain" not in replies[5], replies[5]
    assert "ruth@kwax.com" in replies[7], replies[7]
    assert "keralawax" not in replies[7] or replies[7].index("keralawax") < replies[7].index(
        "kwax.com"
    ), replies[7]


async def test_a_thing_asked_by_its_name_is_priced_by_what_it_is(
    make_config: Callable[..., Config],
) -> None:
    """ "how much is fig and cedar?" quoted «new scent launching 1 november: fig and
    cedar»: its price was told of "the new scent".  And "actually make that 26, costs
    went up" was noted as a line of its own, so the price stayed 24."""
    replies = await _talk(
        make_config,
        [
            "new scent launching 1 november: fig and cedar",
            "price for the new scent is 24 for the 200g jar",
            "actually make that 26, costs went up",
            "ruth says wax price goes up to 52 per box from november",
            "how much is fig and cedar?",
            "when does fig and cedar launch?",
        ],
    )
    assert replies[2].startswith("Corrected: price for the new scent is 26"), replies[2]
    assert "26 for the 200g jar" in replies[4] and "24" not in replies[4], replies[4]
    assert "1 november" in replies[5], replies[5]


async def test_cycling_is_asked_of_the_bike(
    make_config: Callable[..., Config],
) -> None:
    """ "how long can i cycle for?" quoted the marathon target time: the line of the
    bike says how long."""
    replies = await _talk(
        make_config,
        [
            "target time is 4 hours, would be happy with 4:15 tbh",
            "can cross train on the bike though, max 45 min",
            "how long can i cycle for?",
        ],
    )
    assert "max 45 min" in replies[2] and "4 hours" not in replies[2], replies[2]


async def test_what_is_known_about_someone_named_with_a_title_names_them_whole(
    make_config: Callable[..., Config],
) -> None:
    """ "lol what do you know about aunt jo" answered "What I know about aunt: …"."""
    replies = await _talk(
        make_config,
        [
            ("Aunt Jo", "i can ring them, their number is 01632 960 441"),
            ("Aunt Jo", "booked! deposit was 50, i paid it"),
            ("Mike", "lol what do you know about aunt jo"),
        ],
    )
    assert replies[2].startswith("What I know about aunt jo: "), replies[2]
    assert "deposit was 50" in replies[2] and "01632 960 441" in replies[2], replies[2]


async def test_the_vote_so_far_counts_each_voters_last_vote(
    make_config: Callable[..., Config],
) -> None:
    """ "whats the vote so far?" quoted Dan's «i vote piranesi» alone: Omar's "piranesi
    too" and Priti's "marriage portrait for me" count as well, and a changed vote
    replaces the first."""
    replies = await _talk(
        make_config,
        [
            (
                "Lena",
                "after klara the shortlist is piranesi, the marriage portrait and demon copperhead",
            ),
            ("Dan", "i vote piranesi"),
            ("Priti", "marriage portrait for me"),
            ("Omar", "piranesi too"),
            ("Lena", "whats the vote so far?"),
            ("Priti", "actually i vote demon copperhead"),
            ("Dan", "who's winning?"),
        ],
    )
    assert replies[4] == (
        "Votes so far: piranesi 2 (Dan and Omar); the marriage portrait 1 (Priti); "
        "demon copperhead 0."
    ), replies[4]
    assert "demon copperhead 1 (Priti)" in replies[6], replies[6]
    assert "the marriage portrait 0" in replies[6], replies[6]


async def test_what_is_said_to_the_bot_by_name_is_read_as_said(
    make_config: Callable[..., Config],
) -> None:
    """In a group, "bot what do we need to do" was saved as a to-do, "bot is the party
    still on" as an event, "bot what do you know about tom" got "OK, Marcus.", and
    "bot, note that …" was noted with "bot, note that" in it."""
    replies = await _talk(
        make_config,
        [
            ("Leah", "cleaning rota: tom bins, leah kitchen, marcus bathroom, priya hoovering"),
            ("Marcus", "bot, note that the electricity bill is £184 for the quarter"),
            ("Leah", "bot remember we need to tell the neighbours about the party"),
            ("Marcus", "party's off, my parents are visiting that weekend instead"),
            ("Marcus", "bot what do we need to do"),
            ("Priya", "bot is the party still on"),
            ("Marcus", "bot what do you know about tom"),
            ("Tom", "bot what's the electricity bill"),
        ],
    )
    assert replies[1] == "Noted: the electricity bill is £184 for the quarter.", replies[1]
    assert replies[2].startswith("Noted as a to-do: we need to tell the neighbours"), replies[2]
    assert "tell the neighbours" in replies[4] and "Noted" not in replies[4], replies[4]
    assert "party's off" in replies[5] and "Noted" not in replies[5], replies[5]
    assert replies[6].startswith("What I know about tom: "), replies[6]
    assert "£184" in replies[7] and "bot, note" not in replies[7], replies[7]


async def test_a_sum_ordered_and_world_knowledge_are_said_to_be_out_of_reach(
    make_config: Callable[..., Config],
) -> None:
    """ "bot split 184 four ways" was noted as a fact, and "who won the premier league
    last year" looked through the chat and found nothing."""
    replies = await _talk(
        make_config,
        [
            "the electricity bill is £184 for the quarter",
            "split 184 four ways",
            "who won the premier league last year",
            "whats the best breed for a first time owner",
        ],
    )
    assert replies[1] == SUMS_REPLY, replies[1]
    assert replies[2].startswith("I can't look that up"), replies[2]
    assert replies[3].startswith("I can't look that up"), replies[3]


async def test_who_is_in_counts_each_players_last_word(
    make_config: Callable[..., Config],
) -> None:
    """ "bot who's in for tuesday" quoted the fixture and Ollie's «cant do tues»: Dev's
    "im in", Gaz's bare "in" and Jamal's "in 👍" went uncounted, and Ollie's later
    "i'm in" did not replace his "cant do tues"."""
    replies = await _talk(
        make_config,
        [
            ("Connor", "right lads, fixture this week is tuesday 8pm vs Real Ale Madrid"),
            ("Dev", "im in"),
            ("Gaz", "in"),
            ("Ollie", "cant do tues, got my kid"),
            ("Jamal", "in 👍"),
            ("Connor", "bot who's in for tuesday"),
            ("Ruth", "i'm in, can play in goal"),
            ("Jamal", "sorry lads im out, pulled my hamstring at work"),
            ("Ollie", "actually my ex can have the kid, i'm in"),
            ("Connor", "bot how many do we have"),
            ("Gaz", "who's in charge of the kit?"),
        ],
    )
    assert replies[5] == "In: Dev, Gaz and Jamal (3). Out: Ollie.", replies[5]
    assert replies[9] == "In: Dev, Gaz, Ollie and Ruth (4). Out: Jamal.", replies[9]
    assert not replies[10].startswith("In:"), replies[10]


async def test_sorry_lads_im_out_is_noted_without_the_lads_and_pitied(
    make_config: Callable[..., Config],
) -> None:
    """ "sorry lads im out, pulled my hamstring at work" was noted as "lads you're out",
    with no word of sympathy."""
    replies = await _talk(
        make_config,
        [
            ("Connor", "fixture this week is tuesday 8pm"),
            ("Jamal", "sorry lads im out, pulled my hamstring at work"),
        ],
    )
    assert replies[1] == (
        "I'm sorry to hear that. Noted: you're out, pulled your hamstring at work."
    ), replies[1]


async def test_a_short_correction_with_its_reason_corrects(
    make_config: Callable[..., Config],
) -> None:
    """ "actually it's thursdays now, she changed jobs" got "OK." and "who does mums
    shopping and when" gave wednesdays; "actually the venue can only do 13th june not
    12th, saturday got booked" was not given with "date is 12th june 2026"."""
    replies = await _talk(
        make_config,
        [
            "my sister Gemma does mum's shopping on wednesdays",
            "actually it's thursdays now, she changed jobs",
            "who does mums shopping and when",
            "date is 12th june 2026",
            "we've got 86 guests on the list so far",
            "actually the venue can only do 13th june not 12th, saturday got booked",
            "what's the wedding date",
        ],
    )
    assert replies[1] == "Corrected: your sister Gemma does mum's shopping on thursdays.", replies[
        1
    ]
    assert "thursdays" in replies[2] and "wednesdays" not in replies[2], replies[2]
    answer = replies[6]
    assert answer.index("12th june 2026") < answer.index("Later") < answer.index("13th june")


async def test_a_job_named_by_its_client_and_a_hold_until_a_date_are_found(
    make_config: Callable[..., Config],
) -> None:
    """ "what's the deadline for the lexicon job" found nothing, the line saying "the
    lexicon pharma leaflet"; "when does the hotel hold expire" found nothing, one line
    after "30 rooms held until 1st april".  "my new job" is no "lexicon job"."""
    replies = await _talk(
        make_config,
        [
            "deadline for the lexicon pharma leaflet is friday 5pm",
            "what's the deadline for the lexicon job",
            "the hotel block is at Hotel Sintra Palace, 30 rooms held until 1st april",
            "when does the hotel hold expire",
            "when does my new job start",
        ],
    )
    assert "friday 5pm" in replies[1], replies[1]
    assert "1st april" in replies[3], replies[3]
    assert "lexicon" not in replies[4] and "1st april" not in replies[4], replies[4]


async def test_a_debt_paid_told_by_whom_it_was_owed_settles_it(
    make_config: Callable[..., Config],
) -> None:
    """ "does dan owe me anything?" gave «dan owes me £60» alone, one line after "dan
    paid me the 60 quid this morning"; "does pica still owe me money" found nothing.
    Someone else paying settles no debt of Sam's."""
    replies = await _talk(
        make_config,
        [
            "remember that dan owes me £60 for last week",
            "dan paid me the 60 quid this morning",
            "does dan owe me anything?",
            "pica books owe me €940 for the novel chapter, invoice 2219",
            "pica paid!! finally. full €940",
            "does pica still owe me money",
            "sam owes me 20 quid",
            "tom paid me back for the tickets",
            "does sam owe me anything",
        ],
    )
    assert (
        replies[2].index("owes me £60")
        < replies[2].index("Later")
        < replies[2].index("dan paid me")
    ), replies[2]
    assert "€940" in replies[5] and "Later" in replies[5] and "pica paid" in replies[5]
    assert "sam owes me 20 quid" in replies[8] and "tom paid" not in replies[8], replies[8]


async def test_a_to_do_said_done_is_crossed_off(
    make_config: Callable[..., Config],
) -> None:
    """ "booked the leave" got "OK." and "sent the save the dates yesterday" was noted
    as a fact: "what do i still need to do" then listed both as still to do.  A line
    done of no to-do ("booked dave for thursday") is noted as ever."""
    replies = await _talk(
        make_config,
        [
            "remind me to book annual leave for the exam week",
            "remind me to ring the gp about mums flu jab",
            "remember to send save the dates",
            "booked the leave",
            "sent the save the dates yesterday",
            "what do i still need to do",
            "booked dave for thursday",
        ],
    )
    assert replies[3] == (
        "Done: I crossed it off your to-dos (book annual leave for the exam week)."
    ), replies[3]
    assert replies[4] == "Done: I crossed it off your to-dos (send save the dates).", replies[4]
    assert replies[5] == "Your to-dos: ring the gp about mums flu jab.", replies[5]
    assert replies[6] == "Noted: booked dave for thursday.", replies[6]


async def test_a_time_corrected_by_its_digits_keeps_its_am(
    make_config: Callable[..., Config],
) -> None:
    """ "no wait, 6.45" after "nala's walk moved to 6.30am" got "I can't tell what that
    corrects", and "what time is nala" gave 6.30."""
    replies = await _talk(
        make_config,
        [
            "nala's walk moved to 6.30am, jess starts earlier now",
            "no wait, 6.45",
            "what time is nala's walk",
        ],
    )
    assert replies[1] == "Corrected: nala's walk moved to 6.45am, jess starts earlier now.", (
        replies[1]
    )
    assert "6.45am" in replies[2] and "6.30" not in replies[2], replies[2]


async def test_left_on_my_to_do_list_the_florist_and_a_translation(
    make_config: Callable[..., Config],
) -> None:
    """ "what's left on my to do list" found nothing; "who's doing the flowers" found
    nothing, the florist being named; "what's the german for "invoice"" quoted the
    intro line."""
    replies = await _talk(
        make_config,
        [
            "hi, i'm Matteo, freelance translator, italian and german into english",
            "remind me to ring the gp",
            "what's left on my to do list",
            "florist is Flores da Rita, they need numbers by april",
            "the florist cancelled on us, rita's retiring",
            "who's doing the flowers",
            'what\'s the german for "invoice"',
        ],
    )
    assert replies[2] == "Your to-dos: ring the gp.", replies[2]
    assert "Flores da Rita" in replies[5] and "cancelled" in replies[5], replies[5]
    assert replies[6].startswith("I can't look that up"), replies[6]


async def test_sums_after_if_and_an_equals_are_sums(
    make_config: Callable[..., Config],
) -> None:
    """ "if i do 3 walks for bramble and 5 for biscuit how much is that" and "5 players
    x £7 = ? bot" were noted as facts."""
    replies = await _talk(
        make_config,
        [
            "if i do 3 walks for bramble and 5 for biscuit how much is that",
            "if i got 52 out of 70 on the mock what percent is that",
            ("dev", "5 players x £7 = ? bot"),
            "what do you know about me?",
        ],
    )
    assert replies[0] == SUMS_REPLY, replies[0]
    assert replies[1] == SUMS_REPLY, replies[1]
    assert replies[2] == SUMS_REPLY, replies[2]
    assert "how much is that" not in replies[3] and "percent" not in replies[3], replies[3]


async def test_a_value_taken_back_in_the_next_line_is_given_with_it(
    make_config: Callable[..., Config],
) -> None:
    """ "actually he rang back, its friday not thursday now", the next line after
    "plumber is coming thursday between 8 and 12": "when is the plumber coming" gave
    thursday alone; and "what do you know about moose" left out "actually the lockbox
    code is 4417 not 4471"."""
    replies = await _talk(
        make_config,
        [
            "plumber is coming thursday between 8 and 12",
            "actually he rang back, its friday not thursday now",
            "when is the plumber coming",
            "Moose is the Hendersons' great dane, key is in the lockbox, code 4471",
            "rolo belongs to dan, hes a staffie",
            "actually the lockbox code is 4417 not 4471",
            "what do you know about moose",
            "ugh pickle bit me again today, my hand is throbbing",
        ],
    )
    assert (
        replies[2].index("thursday")
        < replies[2].index("Later")
        < replies[2].index("friday not thursday")
    ), replies[2]
    assert "4417 not 4471" in replies[6] and "code 4471" in replies[6], replies[6]
    assert replies[7].startswith("I'm sorry to hear that."), replies[7]


async def test_a_name_of_two_words_written_small_is_named_whole(
    make_config: Callable[..., Config],
) -> None:
    """ "what do you know about pica books" answered "What I know about pica: …"; and
    "how much would a 4200 word legal doc be at my rate" looked for a line and found
    nothing, where it is a sum."""
    replies = await _talk(
        make_config,
        [
            "pica books owe me 940 quid for the novel chapter",
            "the pica contact is Luca Ferri, the editor",
            "what do you know about pica books",
            "my rate is 0.10 per word for general stuff, 0.14 for legal",
            "how much would a 4200 word legal doc be at my rate",
        ],
    )
    assert replies[2].startswith("What I know about pica books: "), replies[2]
    assert "Luca Ferri" in replies[2] and "940 quid" in replies[2], replies[2]
    assert replies[4] == SUMS_REPLY, replies[4]


async def test_a_request_to_tell_someone_is_nothing_known_of_them(
    make_config: Callable[..., Config],
) -> None:
    """ "what do you know about dan?" listed Lena's «bot, tell dan what we're reading»:
    a request to the bot tells nothing of Dan."""
    replies = await _talk(
        make_config,
        [
            ("Dan", "my copy is on order from waterstones, 9.99"),
            ("Lena", "bot, tell dan what we're reading"),
            ("Omar", "what do you know about dan?"),
        ],
    )
    assert "waterstones" in replies[2] and "reading" not in replies[2], replies[2]


async def test_a_player_out_is_no_move_and_a_debt_asked_needs_a_debt(
    make_config: Callable[..., Config],
) -> None:
    """ "what do you know about the fixture" added "Later, Ollie: «cant do tues, got my
    kid»" (his absence, not a move of the fixture); "bot who owes priya money" quoted
    the cleaning rota («… priya hoovering»)."""
    replies = await _talk(
        make_config,
        [
            ("Connor", "right lads, fixture this week is tuesday 8pm vs Real Ale Madrid"),
            ("Ollie", "cant do tues, got my kid"),
            ("Ruth", "bot what do you know about the fixture"),
            ("Leah", "cleaning rota: tom bins, leah kitchen, marcus bathroom, priya hoovering"),
            ("Marcus", "bot who owes priya money"),
            ("Dev", "dan cant do thurs, its friday now"),
        ],
    )
    assert "tuesday 8pm" in replies[2] and "cant do tues" not in replies[2], replies[2]
    assert "hoovering" not in replies[4], replies[4]


async def test_the_time_of_a_named_thing_is_its_line_with_a_time(
    make_config: Callable[..., Config],
) -> None:
    """A dog walker's "what time is rolo's walk" got "Nothing I could find covers that"
    after «rolo belongs to dan, hes a staffie, 12.30 every weekday»: the line names Rolo
    and gives a time, and "walk" goes unsaid.  A line naming a dog with no time does not
    answer, nor does another dog's time."""
    replies = await _talk(
        make_config,
        [
            "bramble is mr okafor's lab, out at 9.15 on mondays",
            "pickle is toms dachshund, he bites",
            "what time is pickle's walk",
            "rolo belongs to dan, hes a staffie, 12.30 every weekday",
            "what time is rolo's walk",
        ],
    )
    assert replies[2] == NOTHING, replies[2]
    assert "12.30" in replies[4], replies[4]


async def test_a_value_said_to_hold_now_replaces_the_one_before(
    make_config: Callable[..., Config],
) -> None:
    """A translator's "actually the lexicon leaflet deadline is thursday now" was listed
    beside «deadline for the lexicon pharma leaflet is friday 5pm», both as to-dos: a
    value said to hold now ("… is thursday now", "… is now …") replaces the one told of
    the same thing, and what is said of another thing stays."""
    replies = await _talk(
        make_config,
        [
            "deadline for the lexicon pharma leaflet is friday 5pm",
            "remind me to renew my ITI membership before end of month",
            "actually the lexicon leaflet deadline is thursday now, they pulled it forward",
            "what's on my list",
            "the brennan contract is due on the 19th",
            "my sister is a nurse",
            "the brennan contract is now due on the 21st",
            "what's on my list",
            "what do you know about me",
        ],
    )
    assert "thursday" in replies[3] and "friday" not in replies[3], replies[3]
    assert "ITI membership" in replies[3], replies[3]
    assert "21st" in replies[7] and "19th" not in replies[7], replies[7]
    assert "nurse" in replies[8] and "19th" not in replies[8], replies[8]


async def test_health_shifts_and_things_done_are_noted_not_just_ok(
    make_config: Callable[..., Config],
) -> None:
    """A nurse's "mum's been diagnosed with copd, she's at home in leeds", "this week i'm
    on nights tues wed thurs" and "i've done safeguarding already" each got "OK, Sam.",
    and "what do you know about mum" left the diagnosis out."""
    replies = await _talk(
        make_config,
        [
            "mum's been diagnosed with copd, she's at home in leeds",
            "this week i'm on nights tues wed thurs, then long day sunday",
            "i've done safeguarding already",
            "what do you know about mum",
        ],
    )
    assert replies[0] == "Noted: mum's been diagnosed with copd, she's at home in leeds.", replies[
        0
    ]
    assert replies[1].startswith("Noted: this week you're on nights"), replies[1]
    assert replies[2] == "Noted: you've done safeguarding already.", replies[2]
    assert "copd" in replies[3], replies[3]


async def test_when_is_answered_by_a_line_giving_a_time(
    make_config: Callable[..., Config],
) -> None:
    """A nurse's "when is my exam" quoted «the exam pass mark is 70%» once the line with
    its date was out of view: a line with no time in it does not say when.  A day
    written short ("tues"), or a habit ("every"), does."""
    replies = await _talk(
        make_config,
        [
            "the exam pass mark is 70%",
            "when is my exam",
            "squash with jo is tues and thurs",
            "when is squash",
            "the bins go out every other week",
            "when do the bins go out",
            "i prefer baking overnight, less interruptions lol",
            "when do i like to bake",
        ],
    )
    assert "70%" not in replies[1], replies[1]
    assert "tues and thurs" in replies[3], replies[3]
    assert "every other week" in replies[5], replies[5]
    assert "overnight" in replies[7], replies[7]


async def test_a_debt_asked_of_the_others_is_kept_and_settled(
    make_config: Callable[..., Config],
) -> None:
    """A flatshare's "can everyone pay me back for the internet, £12.50 each" got "OK,
    Priya." and "bot who owes priya money" found nothing: a sum asked of everyone, or of
    someone by name, is a debt, kept and told with who has paid since.  A sum asked of
    the bot is no debt."""
    replies = await _talk(
        make_config,
        [
            ("Leah", "cleaning rota: tom bins, leah kitchen, marcus bathroom, priya hoovering"),
            ("Priya", "can everyone pay me back for the internet, £12.50 each"),
            ("Marcus", "bot who owes priya money"),
            ("Tom", "paid priya just now"),
            ("Marcus", "bot who owes priya money"),
            ("Kofi", "dan can you pay me back the £15 for the tickets"),
            ("Dan", "sent kofi the £15"),
            ("Amy", "bot who owes kofi money"),
            ("Ann", "can you send me £20 for the tickets"),
            ("Ann", "bot who owes me money"),
        ],
    )
    assert replies[1] == "Noted: everyone to pay you back for the internet, £12.50 each.", replies[
        1
    ]
    assert "£12.50 each" in replies[2] and "hoovering" not in replies[2], replies[2]
    assert replies[4].index("£12.50") < replies[4].index("Later") < replies[4].index("paid priya")
    assert replies[7].index("£15 for") < replies[7].index("Later") < replies[7].index("sent kofi")
    assert "£20" not in replies[9], replies[9]


async def test_a_list_is_told_with_what_was_said_done_of_it(
    make_config: Callable[..., Config],
) -> None:
    """A nurse's "what topics have i got left" quoted her four revision topics and not
    her "i've done safeguarding already": an item of a list said done since is told
    after it.  Something done that is no item of the list is not."""
    replies = await _talk(
        make_config,
        [
            "studying: topics are leadership, medicines management, safeguarding, and "
            "deteriorating patient",
            "finished the ironing finally",
            "what topics have i got left",
            "i've done safeguarding already",
            "what topics have i got left",
        ],
    )
    assert "deteriorating patient" in replies[2] and "ironing" not in replies[2], replies[2]
    answer = replies[4]
    assert (
        answer.index("deteriorating patient")
        < answer.index("Later")
        < answer.index("done safeguarding")
    ), answer


async def test_a_count_settled_in_reply_is_told_after_the_one_before(
    make_config: Callable[..., Config],
) -> None:
    """A flatshare's "bot how many people is marcus inviting" quoted «30 is a lot for this
    flat marcus» alone, after Marcus settled on "fine 20 then": a count settled on in
    reply is told after the count it replaces."""
    replies = await _talk(
        make_config,
        [
            ("Tom", "morning all"),
            ("Marcus", "party saturday?? my birthday, thinking 30 people"),
            ("Leah", "30 is a lot for this flat marcus"),
            ("Priya", "bot how many people is marcus inviting"),
            ("Marcus", "fine 20 then"),
            ("Priya", "bot how many people is marcus inviting"),
        ],
    )
    assert "30" in replies[3] and "Later" not in replies[3], replies[3]
    assert replies[5].index("30") < replies[5].index("Later") < replies[5].index("fine 20 then")


async def test_who_keeps_a_thing_is_kept_from_an_answer_saying_it(
    make_config: Callable[..., Config],
) -> None:
    """A five-a-side team's "who's got the kit", answered "i washed it, it's at mine",
    left "bot who has the kit" with nothing: an answer saying where the thing asked for
    is, or that its speaker has it, tells of that thing."""
    replies = await _talk(
        make_config,
        [
            ("Connor", "right lads, fixture this week is tuesday 8pm vs Real Ale Madrid"),
            ("Dev", "who's got the kit"),
            ("Jamal", "i washed it, it's at mine"),
            ("Dev", "bot who has the kit"),
            ("Ruth", "where's the pump"),
            ("Gaz", "i've got it"),
            ("Ruth", "bot where is the pump"),
        ],
    )
    assert replies[2] == "Noted: the kit is at yours.", replies[2]
    assert "Jamal" in replies[3] and "the kit is at mine" in replies[3], replies[3]
    assert "Gaz" in replies[6] and "the pump" in replies[6], replies[6]


async def test_a_group_plan_called_off_by_another_word_is_told(
    make_config: Callable[..., Config],
) -> None:
    """A five-a-side team's "bot is the game still on tuesday" got "Nothing I could find
    covers that" after Connor's «fixture this week is tuesday 8pm vs Real Ale Madrid»
    and Jamal's "game's off lads": the fixture is the game, and a plan of no one's own
    may be called off by anyone.  One's own plan is not called off by another."""
    replies = await _talk(
        make_config,
        [
            ("Connor", "right lads, fixture this week is tuesday 8pm vs Real Ale Madrid"),
            ("Ruth", "my physio session is thursday at 6"),
            ("Jamal", "game's off lads, real ale madrid forfeited, we get the 3 points"),
            ("Dev", "bot is the game still on tuesday"),
            ("Gaz", "session's off, the coach is ill"),
            ("Dev", "bot when is ruth's physio session"),
        ],
    )
    answer = replies[3]
    assert answer.index("tuesday 8pm") < answer.index("Later") < answer.index("game's off"), answer
    assert "thursday at 6" in replies[5] and "coach is ill" not in replies[5], replies[5]


async def test_what_i_know_about_you_leaves_out_a_debt_paid(
    make_config: Callable[..., Config],
) -> None:
    """A dog walker's "what do you know about me" listed "dan owes you £60 for last week"
    after "dan paid me the 60 quid this morning"; a debt not paid stays."""
    replies = await _talk(
        make_config,
        [
            "hi, i'm Kerry, i walk dogs for a living",
            "remember that dan owes me £60 for last week",
            "dan paid me the 60 quid this morning",
            "remember that tom owes me £24 for pickle",
            "what do you know about me",
        ],
    )
    about = replies[4]
    assert "paid you the 60 quid" in about and "dan owes" not in about, about
    assert "tom owes you £24" in about, about


async def test_and_at_another_place_asks_the_question_before_of_it(
    make_config: Callable[..., Config],
) -> None:
    """A translator's "and at pica?" after "who's my contact at brennan" quoted «remind me
    to send pica a final demand letter»: it asks the question before, of Pica.  With no
    contact at Pica told, the Brennan contact is no answer; once told, it is found."""
    replies = await _talk(
        make_config,
        [
            "remind me to send pica a final demand letter",
            "my contact at brennan is Siobhan Kerr",
            "who's my contact at brennan",
            "and at pica?",
            "the pica contact is Luca Ferri, the editor",
            "who's my contact at brennan",
            "and at pica?",
        ],
    )
    assert "Siobhan" not in replies[3] and "final demand" not in replies[3], replies[3]
    assert "Luca Ferri" in replies[6], replies[6]


async def test_a_change_is_told_after_the_line_of_whom_it_names(
    make_config: Callable[..., Config],
) -> None:
    """A dog walker's "what time is nala" quoted «juniper's thursday walks are cancelled»
    before «Nala's walk moved to 6.45am»: the line a change changes names whom it names
    (Nala), not only a word of it ("walk")."""
    replies = await _talk(
        make_config,
        [
            "and nala, jess's whippet, 7am before jess goes to work",
            "clare called, juniper's thursday walks are cancelled for the rest of the month",
            "Nala's walk moved to 6.45am, jess starts earlier now",
            "what time is nala",
        ],
    )
    answer = replies[3]
    assert "juniper" not in answer, answer
    assert answer.index("7am") < answer.index("Later") < answer.index("6.45am"), answer


async def test_the_web_and_dice_asked_are_said_to_be_out_of_reach(
    make_config: Callable[..., Config],
) -> None:
    """ "can you look up reviews for kowalski builders" got "Let me look further back…
    Nothing I could find" (as if it had searched); "bot search spotify for bands like
    us" got "OK, Tariq."; "bot roll a d20 for me" was noted, and told back in Olly's
    profile.  Each is said to be out of the bot's reach, and nothing is kept."""
    replies = await _talk(
        make_config,
        [
            ("Tariq", "kowalski builders quoted £8,400 for the extension"),
            ("Tariq", "can you look up reviews for kowalski builders"),
            ("Tariq", "bot search spotify for bands like us"),
            ("Olly", "bot roll a d20 for me"),
            ("Olly", "can you check what flour prices are at makro this week"),
            ("Tariq", "bot how much did kowalski quote"),
            ("Tariq", "what do you know about olly"),
        ],
    )
    for said in replies[1:3] + replies[4:5]:
        assert said.startswith("I can't look that up"), said
    assert replies[3].startswith("I can't do that here"), replies[3]
    assert "£8,400" in replies[5], replies[5]
    assert "d20" not in replies[6], replies[6]


async def test_a_name_written_small_or_given_with_a_title_answers(
    make_config: Callable[..., Config],
) -> None:
    """ "whats the name of the plumber" got "Nothing I could find covers that" after «the
    plumber for the bathroom is gary, he quoted £3,200» (a name written small), and
    "which dentist is maisie seeing" quoted her swimming over «maisies dentist appt is
    tues 24th 9am, dr okafor».  "is late" names no one."""
    replies = await _talk(
        make_config,
        [
            "the electrician is late again",
            "whats the name of the electrician",
            "the plumber for the bathroom is gary, he quoted £3,200",
            "whats the name of the plumber",
            "maisie has swimming mondays 5pm",
            "maisies dentist appt is tues 24th 9am, dr okafor",
            "which dentist is maisie seeing",
        ],
    )
    assert "late again" not in replies[1], replies[1]
    assert "gary" in replies[3], replies[3]
    assert "dr okafor" in replies[6] and "swimming" not in replies[6], replies[6]


async def test_make_that_a_count_is_told_after_the_count_it_changes(
    make_config: Callable[..., Config],
) -> None:
    """ "how many boxes of tiles" quoted «… 12 boxes from topps tiles» alone after
    "actually make that 14 boxes, gary says we need spare"."""
    replies = await _talk(
        make_config,
        [
            "tiles for bathroom: grey metro, 12 boxes from topps tiles",
            "actually make that 14 boxes, gary says we need spare",
            "how many boxes of tiles",
        ],
    )
    assert replies[2].index("12 boxes") < replies[2].index("Later") < replies[2].index("14 boxes")


async def test_what_am_i_bringing_is_what_the_asker_said_they_bring(
    make_config: Callable[..., Config],
) -> None:
    """A D&D group's "bot what am i bringing", asked by Marcus after his "sick. i'm
    bringing pizza", quoted Lena's «yeah fine i'll bring crisps and dip»: "I" is the
    asker.  His line had also got only "OK, Marcus." """
    replies = await _talk(
        make_config,
        [
            ("Priya", "ok so dnd is back on!! session 12 is this sunday 6pm at mine"),
            ("Marcus", "sick. i'm bringing pizza, pepperoni obvs"),
            ("Lena", "yeah fine i'll bring crisps and dip"),
            ("Marcus", "bot what am i bringing"),
        ],
    )
    assert replies[1].startswith("Noted as a to-do: you're bringing pizza"), replies[1]
    assert "pizza" in replies[3] and "crisps" not in replies[3], replies[3]
