"""What the offline provider may quote from summaries: people's words, never the bot's."""

from __future__ import annotations

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
