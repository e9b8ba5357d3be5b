"""choose_cut: the oldest share of a channel, cut where no turn or tool exchange is split."""

from __future__ import annotations

import json
from itertools import count

from compactor.cuts import choose_cut
from tierbot.messages import Message, Role

_ids = count(1)


def msg(role: Role, text: str = "x", **meta: object) -> Message:
    i = next(_ids)
    return Message("c:1", f"p{i}", role, text, tokens=10, id=i, pos=float(i), meta=dict(meta))


def turns(n: int) -> list[Message]:
    """``n`` plain turns: a user message and the bot's reply each."""
    out = []
    for _ in range(n):
        out += [msg(Role.USER), msg(Role.ASSISTANT)]
    return out


def test_takes_the_oldest_share_ending_on_a_turn_boundary() -> None:
    items = turns(10)
    cut = choose_cut(items, 0.3)
    assert cut == items[: len(cut)], "the oldest messages, in order"
    assert len(cut) == 6  # 30 % of 20 messages is 6: three whole turns
    assert items[len(cut)].role is Role.USER


def test_the_newest_turn_always_stays_even_at_a_share_of_one() -> None:
    items = turns(4)
    cut = choose_cut(items, 1.0)
    assert cut == items[:6]
    assert choose_cut(turns(1), 1.0) == []


def test_summaries_markers_and_pinned_messages_are_never_taken() -> None:
    summary = msg(Role.SUMMARY, "earlier")
    marker = msg(Role.MARKER, "set aside")
    pinned = msg(Role.USER, "keep me", pinned=True)
    items = [summary, marker, pinned, *turns(6)]
    cut = choose_cut(items, 0.9)
    assert cut and not {summary.id, marker.id, pinned.id} & {m.id for m in cut}


def test_a_tool_call_and_its_results_are_taken_together_or_not_at_all() -> None:
    user = msg(Role.USER)
    call = msg(Role.TOOL_CALL, calls=[{"id": "a"}, {"id": "b"}])
    first = msg(Role.TOOL_RESULT, call_id="a")
    chatter = msg(Role.USER, "meanwhile")
    second = msg(Role.TOOL_RESULT, call_id="b")
    reply = msg(Role.ASSISTANT)
    items = [user, call, first, chatter, second, reply, *turns(4)]
    for share in (0.1, 0.2, 0.3, 0.5, 0.7):
        ids = {m.id for m in choose_cut(items, share)}
        exchange = {call.id, first.id, second.id}
        assert exchange <= ids or not exchange & ids, f"share {share} split the exchange"


def test_a_running_branch_exchange_stays_live_and_the_cut_goes_around_it() -> None:
    user = msg(Role.USER)
    call = msg(Role.TOOL_CALL, calls=[{"id": "c1", "name": "branch"}])
    started = msg(Role.TOOL_RESULT, json.dumps({"started": "branch-3"}), call_id="c1")
    items = [user, call, started, msg(Role.ASSISTANT), *turns(6)]
    cut = {m.id for m in choose_cut(items, 0.5, in_flight=("branch-3",))}
    assert cut, "the channel still shrinks"
    assert not {call.id, started.id} & cut
    done = {m.id for m in choose_cut(items, 0.5)}
    assert {call.id, started.id} <= done, "once the branch ended, its exchange may go"


def test_nothing_to_take_gives_an_empty_cut() -> None:
    assert choose_cut([], 0.5) == []
    assert choose_cut([msg(Role.SUMMARY), msg(Role.USER)], 0.5) == []
