"""The offline provider's side of a conversation: what it answers, saves and forgets.

One call answers everything since the bot's last reply:

* **explicit memory**: "Remember that…", "Note that…", "Don't forget…", "Remind me…"
  save a typed memory at once (``memory_save``); "Forget that…" removes the asker's
  matching memories (``memory_forget``); the reply says what was saved or forgotten,
  in the second person ("Noted: your locker code is 4411."), only once the tool said so;
* **corrections** of what the speaker just said ("Sorry, I meant Thursday, not
  Tuesday") forget the old value and save the corrected sentence;
* **statements** that hold something durable (an identity, a preference, a decision…)
  are saved the same way; chit-chat is not, and gets a short true reply;
* **greetings** are greeted, by the name the speaker gave if any, and the rest of the
  message is read as if the greeting were not there;
* **questions** are answered by quoting the best evidence (stemmed, IDF-weighted word
  overlap) with who said it and when; never the bot's own replies or tool traffic.
  "What is my name?" and "What do you know about me?" are answered from what the
  asker said and the memories saved from it.  When nothing in view covers a question,
  it looks further back (a ``branch``, else ``memory_recall``) first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from tierbot.llm.base import ChatMessage, ToolCall
from tierbot.llm.extraction import (
    CHANCE_ASKED,
    CHANGED,
    CLOCK_TIME,
    FORGET_ALL,
    NO_LONGER,
    NOT_THAT,
    RESTATING,
    THIS_NOT_THAT,
    WEB_ASKED,
    WORD_MEANS,
    Correction,
    Request,
    cant_do_asked,
    classify,
    corrected,
    is_chitchat,
    is_question,
    joined,
    lower_case_name,
    read_correction,
    read_request,
    says_something,
    skipped_topic,
    split_greeting,
    things_named,
    to_first_person,
    to_second_person,
)
from tierbot.llm.pronouns import people_named, person_named, refers, with_person
from tierbot.llm.quoting import blocks, is_quoted, unquote
from tierbot.llm.text import (
    CALENDAR_WORDS,
    MEN,
    MONEY_AMOUNT,
    PHONE_NUMBER,
    SAID_ABOUT,
    STOPWORDS,
    WOMEN,
    Overlap,
    bare,
    kin,
    names,
    sentences,
    spelled_out,
    stems,
    without_named,
    words,
)
from tierbot.llm.transcript import BOT_MARK

__all__ = [
    "Evidence",
    "best",
    "candidates",
    "chat",
    "conclusions",
    "quoted_with_changes",
    "recall_query",
    "tool_json",
]

HOLDING = "Let me look further back for that; I'll answer in a moment."
#: What a question about the world outside the chat gets (nothing said here answers it).
OUTSIDE_REPLY = (
    "I can't look that up: I only know what people here have told me, and I have no "
    "access to the weather, the news or the web."
)
# The weather, the news, prices of the day: what no chat line answers unless told.
_OUTSIDE = re.compile(
    r"\b(?:weather|forecast|temperature\s+(?:outside|today|tomorrow)|(?:the\s+)?news\s+today|"
    r"stock\s+price|exchange\s+rate|(?:is\s+it|will\s+it)\s+(?:going\s+to\s+)?(?:rain|snow))\b",
    re.I,
)
#: The reply to a sum asked ("whats 2200 minus 500?").
SUMS_REPLY = (
    "I can't work out sums: I only quote what people here have told me. Ask me for the "
    "numbers you gave me, and add them up yourself."
)
# "whats 2200 minus 500?", "how many kg is 400g plus 650g?", "what's 15% of 80?"
_SUM_ASKED = re.compile(
    r"\d[\d,.]*\s*(?:[a-z£$€]{0,3})\s*(?:\+|\*|plus|minus|times|multiplied\s+by|divided\s+by)"
    r"\s*[£$€]?\d|\d[\d,.]*\s+[-/x]\s+[£$€]?\d|\d\s*%\s+of\s+[£$€]?\d|\badd\s+(?:up|together)\b|"
    # "how much do i save per parcel?", "how much is 400 jars?", "whats my pace per km?"
    r"\bhow\s+much\s+(?:do|would|will|did|could)\s+(?:i|we|you)\s+save\b|"
    r"\bhow\s+much\s+(?:is|are|would\s+be|will\s+be)\s+\d[\d,.]*\s+[a-z]+\W*$|"
    r"\bwhat(?:['\u2019]s|s|\s+is|\s+would\s+be)?\s+(?:my|the|our)\s+(?:average\s+)?pace\s+per\b|"
    r"\bhow\s+many\s+(?:days|weeks)\s+(?:until|till|to)\b|"
    # "how much would a 4200 word legal doc be at my rate"
    r"\bhow\s+much\s+(?:would|will)\b[^?]*\b(?:at|on)\s+(?:my|the|that|this|our|his|her)\s+"
    r"(?:\w+\s+)?rate\b|"
    # "if i got 52 out of 70 on the mock what percent is that", "5 players x £7 = ?"
    r"^\W*if\b.*\d.*\b(?:how\s+(?:much|many)|what\s+percent(?:age)?)\s+(?:is|would|will|does|do)\b|"
    r"\d.*=\s*\?|"
    # "split 184 four ways", "work out 15% of 340"
    r"^\W*(?:please\s+|pls\s+|can\s+you\s+|could\s+you\s+)?(?:split|divide)\s+[£$€]?\d|"
    r"^\W*(?:please\s+|pls\s+|can\s+you\s+|could\s+you\s+)?(?:work\s+out|calculate|add\s+up)\s+\S|"
    # "how many days from 1 march to 22 march?", "… between the 3rd and the 20th"
    r"\bhow\s+many\s+(?:days|weeks|months|hours|nights)\s+(?:is\s+it\s+|are\s+there\s+)?"
    r"(?:from|between)\s+\S.*?\b(?:to|and|until|till)\s+\S",
    re.I,
)
# "how many carbs in a banana?": what the world knows, not the chat (unless it says so).
_GENERAL = re.compile(
    r"(?:\bhow\s+(?:many|much)\s+[\w-]+\s+(?:are\s+|is\s+)?(?:there\s+)?in\s+(?:a|an|one|1)\s+|"
    # "whats the capital of portugal btw", "who wrote klara and the sun?"
    r"\b(?:capital\s+(?:city\s+)?|population\s+)of\s+|"
    r"^\W*who\s+(?:wrote|directed|painted|invented|composed|discovered)\s+(?:the\s+)?|"
    # "who won the premier league last year", "what's the best breed for a first time owner"
    r"^\W*who\s+won\s+the\s+(?=(?:[\w-]+\s+){0,2}(?:league|cup|election|championship|"
    r"final|open|oscars?|grand\s+prix|world\s+series|super\s+bowl|tour)\b)|"
    r"^\W*what(?:['\u2019]s|s|\s+is)\s+the\s+best\s+|"
    # "what's the german for "invoice"", "what's the normal oxygen saturation for …"
    r"^\W*what(?:['\u2019]s|s|\s+is)\s+(?:the\s+)?(?:(?:german|french|spanish|italian|"
    r"portuguese|dutch|polish|japanese|chinese|english|latin|greek|welsh|irish)\s+(?:word\s+)?"
    r"for|normal|average|usual\s+dose\s+of)\s+\W*)"
    r"(?P<thing>[\w-]+)",
    re.I,
)
#: A late answer that found only what was quoted already for another part of its question.
SAME_AS_QUOTED = "The line I quoted just above answers that too."
#: How a reply cut to the room the window leaves ends (see the offline provider).
CUT_SHORT = ' (cut short here: ask me "what else?" for the rest)'
UNKNOWN = "I don't know yet: nothing I can see or remember covers that."
#: A question about the asker's own things.
_MINE = re.compile(r"\b(my|mine|myself)\b", re.I)
#: "How are you?": small talk, not a question to look up.
SMALL_TALK_REPLY = (
    "I'm well, thanks for asking! Tell me something to remember, or ask me about this conversation."
)
_SMALL_TALK = re.compile(
    r"^\W*(?:(?:anyway|anyways|so|hey|and|btw|ok|okay|well)\W+)*"
    r"(?:how\s+(?:are|r)\s+(?:you|u|ya)(?:\s+(?:doing|going|keeping|today|this \w+)){0,2}|"
    r"how(?:'s|\s+is)\s+(?:it\s+going|life|your\s+day|everything)|how\s+have\s+you\s+been|"
    r"how(?:'re|\s+are)\s+things|what'?s\s+up|wh?at'?s\s+new|sup|you\s+ok(?:ay)?|"
    # asked in another language, often to practise it
    r"qu[eé]\s+tal|[cç]a\s+va|c[oó]mo\s+est[aá]s|wie\s+geht'?s|come\s+stai)"
    r"\W*(?:\w+\W*)?$",
    re.I,
)
# "Lovely weather today, isn't it?": a remark asking agreement, not a question to look up.
_REMARK = re.compile(
    r"^\W*(?:(?:what|such)\s+an?\s+|(?:it'?s|it\s+is|that'?s|that\s+was)\s+(?:an?\s+)?)?"
    r"(?:so\s+|really\s+|very\s+)?(?:lovely|nice|great|beautiful|gorgeous|glorious|terrible|"
    r"awful|horrible|dreadful|cold|freezing|hot|warm|miserable|grim|wet|rainy|sunny|windy|"
    r"busy|long|quiet|crazy|mad|wild|strange|funny)\b[^?]{0,40}?,?\s*(?:isn'?t\s+it|"
    r"wasn'?t\s+it|aren'?t\s+they|weren'?t\s+they|innit|eh|right|huh|don'?t\s+you\s+think)\W*$",
    re.I,
)
REMARK_REPLY = (
    "I'll take your word for it! Tell me something to remember, or ask me about this conversation."
)
# "Can you review my PR?": work the offline model cannot do, not a question to look up.
_FOR_ME = re.compile(
    r"^\W*(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+)?"
    r"(?!(?:remember|recall|remind|tell|find|look|search|list|show|check|say|repeat|note|save|"
    r"keep|forget|delete|remove|erase|give|let|help me (?:remember|recall|find))\b)[a-z]+\b",
    re.I,
)
FOR_ME_REPLY = (
    "I can't do that here: without a language model I keep what you tell me and find it "
    "again, nothing more. Ask me what was said, or tell me something to remember."
)
# "what am i bringing", "where am i staying": asked of what the asker does.
_AM_I_DOING = re.compile(r"\b(?:am\s+i|i'?m)\s+(?:\w+\s+)?\w+ing\b", re.I)
# "Do you play any games?": a question about the bot's own tastes, which it has none of.
_OF_MINE = re.compile(
    r"^\W*(?:do|did)\s+(?:you|u)\s+(?:\w+\s+)?(?:like|love|enjoy|play|watch|prefer|eat|drink|"
    r"read|listen to|have a favou?rite)\b",
    re.I,
)
OF_MINE_REPLY = "I'm a bot, so nothing of my own; tell me yours and I'll remember it."
_MEMORY_TOOLS = ("memory_save", "memory_forget")
# Memory types, in the order "what do you know about me" tells them.
_SAVABLE = ["identity", "preference", "goal", "todo", "decision", "event", "fact"]
_PERSONAL, _MENTIONED = _SAVABLE[:5], _SAVABLE[5:]
# At most this many memories are saved from one message (the rest wait for compaction).
_SAVES_PER_MESSAGE = 3

_ABOUT_ME = re.compile(
    r"\b(what (else )?(do )?(you|u) (know|remember) (about|of) me|what have i told you|"
    r"tell me (about|what you know about) (me|myself)|what do you know about myself|"
    r"(tell me |list )?(everything|all|what else) (do )?you (know|remember) (about|of) me)\b",
    re.I,
)
#: "What else…", "everything you know…": the whole list, not the first few.
_EVERYTHING = re.compile(r"\b(else|everything|all)\b", re.I)
_MY_TODOS = re.compile(
    r"\b(my (to-?dos?|todos?|reminders|tasks)\b|(to-?do|to do|todo|task) list|"
    r"what('s| is|s) left (on my list|to do)\b|what (do|should|must) i "
    r"(still )?(need|have) to (do|remember)|what('s| is) on my (list|plate)|"
    r"what (should|do|did) you (need to )?remind me|what did i ask you to remind me)",
    re.I,
)
_MY_NAME = re.compile(r"\b(what('s| is|s) my name|who am i\b|do you know (my name|who i am))", re.I)
_NAME_SAID = re.compile(
    r"\b(?:my name is|my name's|call me|i go by|i'm|i am|im)\s+([A-Z][\w'-]+)(?!\w)", re.I
)
# A name typed in lower case counts where nothing else could follow: "my name is jonas",
# "call me jo", or opening the message ("hey im jonas, 2nd year…"), not "i'm starving".
_NAMING = re.compile(r"^(?:my name is|my name's|call me|i go by)\b", re.I)
_NOT_NAMES = frozenset(
    "a an the not so very just from in at on a here back going happy sorry fine good "
    "tired from done exhausted knackered sleepy hungry bored busy sick stressed excited "
    "starving shattered ready sure glad okay ok new late early home away off out there "
    "also still really honestly actually afraid aware allergic married single retired".split()
)
# "I'm British" says where someone is from, not what to call them.
_NATIONALITIES = frozenset(
    "american african albanian algerian argentine argentinian asian australian austrian "
    "bangladeshi belgian bolivian bosnian brazilian british bulgarian cambodian cameroonian "
    "canadian chilean chinese colombian congolese croatian cuban cypriot czech danish "
    "dominican dutch ecuadorian egyptian emirati english eritrean estonian ethiopian "
    "european filipino finnish french georgian german ghanaian greek guatemalan haitian "
    "hispanic honduran hungarian icelandic indian indonesian iranian iraqi irish israeli "
    "italian ivorian jamaican japanese jordanian kazakh kenyan korean kurdish kuwaiti "
    "latino latina latvian lebanese libyan lithuanian luxembourgish macedonian malaysian "
    "maltese mexican moldovan mongolian montenegrin moroccan nepali nepalese nicaraguan "
    "nigerian norwegian pakistani palestinian panamanian paraguayan persian peruvian "
    "polish portuguese qatari romanian russian rwandan salvadoran saudi scottish senegalese "
    "serbian singaporean slovak slovenian somali spanish sudanese swedish swiss syrian "
    "taiwanese tanzanian thai tunisian turkish ugandan ukrainian uruguayan uzbek "
    "venezuelan vietnamese welsh yemeni zambian zimbabwean kiwi aussie brit yankee "
    "jewish muslim catholic hindu buddhist sikh".split()
)
# What a saved sentence says without the words that lead into it ("Actually, …").
_LEAD = re.compile(
    r"^\s*(?:(?:actually|also|oh no|oh|yes|yeah|yep|and|btw|by the way|fyi|just so you know|"
    r"so|well|ok|okay|ugh fine|fine|"
    r"anyway|plus|oh and|sorry|oops|whoops|no wait|wait|hmm+|um+|erm+|uh+|then|"
    r"change of plans?|quick update|heads up|(?:please\s+)?note that|for the record|"
    rf"{RESTATING}|did (?:you|u) know(?: that)?|honestly|tbh|lol|haha+|"
    # "sorry lads im out", "lads i'm gutted": the ones spoken to, before what is said
    r"(?:lads|guys|folks|gang|mates?)(?=\s+(?:i|im|i'm|i've|ive|we|we're|my|our)\b))\b"
    r"[,:;!.-]*\s+|"
    # (a word of its own only with its comma: "quick one, we got…", not "team lunch is…")
    r"(?:quick one|no worries|guys|team|morning team|morning all|sweet|cool|nice|great|"
    r"ack|fair|band|folks|everyone|lads|gang|(?:first|second|third|next|another)\s+one|"
    # "right lads n lasses, five a side is back"
    r"(?:right|alright|listen up)(?:\s+(?:lads|guys|all|team|folks|everyone|gang|people)"
    r"(?:\s+(?:n|and|&)\s+lasses)?)?|lads\s+(?:n|and|&)\s+lasses)[,:;!.-]+\s+)+",
    re.I,
)
# What trails a line without telling anything: "I weigh 72kg btw", "I'm vegetarian fyi".
_TAIL = re.compile(r"[\s,]+(?:btw|fyi|tbh|lol|haha+|lmao|smh|imo|x+|ugh+|urgh+|argh+)\W*$", re.I)
_TODO_LEAD = re.compile(
    r"^\s*(?:please\s+)?(?:remind (?:me|you) to|(?:don'?t|do not) forget to|remember to|"
    r"note to self:?)\s+",
    re.I,
)
# "My locker code is …" (or, said back, "your locker code is …"): a thing and its value.
_SUBJECT = re.compile(r"^\s*((?:my|our|your)\s+[\w' -]{2,40}?)\s+(?:is|are|was|were)\b", re.I)
_THE_SUBJECT = re.compile(r"^\s*the\s+([\w' -]{2,40}?)\s+(?:is|are|was|were)\b", re.I)
_THANKS = re.compile(
    r"^\s*(?:(?:ok|okay|k|oh|great|perfect|cool|nice|brilliant)\W+)?"
    r"(thanks|thank you|thx|thnx|tysm|tyvm|ty|cheers|much appreciated|gracias|merci|danke|"
    r"grazie|obrigad[oa])\b",
    re.I,
)
# Whom thanks are for, when named: "Thanks Sarah", "thank you so much, Ben".
_THANKED = re.compile(
    r"[\s,]+(?:so much,?\s+|a lot,?\s+)?([A-Z][a-z]+)\b(?!')(?=\s*(?:[,.!;:]|$)|\s+for\b)"
)
# Thanks to one of the chat by what they are to the speaker: "cheers gaffer".
_TITLED = re.compile(
    r"[\s,]+(?:gaffer|coach|boss|skip|skipper|gov|guv|cap|captain|mate|bro|dude|lads|guys|"
    r"babe|hun|love)\b",
    re.I,
)
_SPEAKER = re.compile(r"^([^:\n]{1,60}):\s+(.+)$", re.S)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Something said that an answer may quote: who, what, when, and how it came."""

    text: str
    author: str = ""
    when: float | None = None
    #: "said" (a message), "memory" (a saved memory), "summary", "branch".
    kind: str = "said"
    #: A memory's type (identity, preference, …), when it is one.
    memory_type: str = ""
    #: Said as an explicit request ("Remember that…"): worth keeping whatever its type.
    requested: bool = False

    def quoted(self) -> str:
        """The answer quoting it: "Dana said on 2026-11-25: «…»"."""
        if self.kind == "branch":
            return self.text
        date = (
            f" on {datetime.fromtimestamp(self.when, UTC).strftime('%Y-%m-%d')}"
            if self.when
            else ""
        )
        if self.kind == "summary":
            who = f"{self.author} said" if self.author else "it was said"
            return f"From an earlier summary, {who}: «{self.text}»"
        verb = "told me" if self.kind == "memory" else "said"
        return f"{self.author or 'Someone'} {verb}{date}: «{self.text}»"


def tool_json(message: ChatMessage) -> object:
    """A tool result's JSON body (tool results reach models quoted), or None."""
    try:
        return json.loads(unquote(message.content))
    except json.JSONDecodeError:
        return None


def conclusions(tool_results: Sequence[ChatMessage]) -> dict[str, str]:
    """What each branch that came back concluded, by its task (a failure says so)."""
    out: dict[str, str] = {}
    for m in tool_results:
        body = tool_json(m)
        if not isinstance(body, dict) or "branch" not in body:
            continue
        task = str(body.get("task", ""))
        if body.get("conclusion"):
            out[task] = str(body["conclusion"])
        else:
            status = next((k for k in body if k not in ("branch", "task")), "failed")
            out[task] = f"I could not look further back for that ({status}: {body.get(status)})."
    return out


def _split_speaker(text: str, default: str = "") -> tuple[str, str]:
    m = _SPEAKER.match(text.strip())
    return (m[1].strip(), m[2].strip()) if m else (default, text.strip())


def _said(text: str) -> str:
    """What a message said, without its greeting or "Remember that" lead (or the bot's
    name it opens with, recalled as it was sent)."""
    text = _without_the_bot(text)
    request = read_request(text)
    if request is not None and request.kind == "remember":
        return request.what
    return split_greeting(text)[1] or text


def candidates(
    history: Sequence[ChatMessage], tool_results: Sequence[ChatMessage]
) -> list[Evidence]:
    """Everything ``history`` and ``tool_results`` hold that an answer may quote: people's
    messages, recalled memories and messages, summary lines, branch conclusions.
    Requests to forget, and what their author said that they name, are left out."""
    out: list[Evidence] = []
    for m in tool_results:
        hits = tool_json(m)
        if isinstance(hits, dict) and hits.get("conclusion"):
            out.append(Evidence(str(hits["conclusion"]), kind="branch"))
        for h in hits if isinstance(hits, list) else []:
            if not isinstance(h, dict) or not h.get("content") or h.get("role") == "assistant":
                continue  # the bot's own replies only repeat what people said
            stamp = h.get("created_at", h.get("ts"))
            when = float(stamp) if isinstance(stamp, int | float) else None
            if h.get("type", "episode") == "episode":  # a message (conversation_search's too)
                if not _tells(content := str(h["content"]), read_request(content)):
                    continue  # "Please don't remember my PIN…": never quoted back
                out.append(Evidence(_said(str(h["content"])), str(h.get("author", "")), when))
            else:
                author, text = _split_speaker(str(h["content"]), str(h.get("author", "")))
                out.append(Evidence(text, author, when, "memory", str(h.get("type", ""))))
    last_user: ChatMessage | None = None
    for m in history:
        if m.role == "assistant" and not m.tool_calls and last_user is not None:
            # "Corrected: your locker code is 1234.": what the correction before it made
            # of the sentence it corrected (which left the conversation with the old value).
            for line in m.content.splitlines():
                if line.startswith(_CORRECTED):
                    fixed = to_first_person(line.removeprefix(_CORRECTED).strip())
                    out.append(Evidence(fixed, last_user.name or "", last_user.sent_at, "memory"))
            continue
        if m.role != "user":
            continue
        last_user = m
        if not is_quoted(m.content):
            request = read_request(m.content)
            if _tells(m.content, request):
                said = Evidence(_said(m.content), m.name or "", m.sent_at)
                out.append(replace(said, requested=True) if request is not None else said)
            continue
        for block in blocks(m.content):
            if block.tag == "memory":
                author, text = _split_speaker(block.text)
                out.append(Evidence(text, author, None, "memory"))
            elif block.source == "summary":
                for line in block.text.splitlines():
                    if line.strip() and not line.startswith(("[Summary", "Summary of")):
                        author, text = _split_speaker(line.lstrip("- "))
                        while author == "summary":  # an earlier summary's line, summarized
                            author, text = _split_speaker(text.lstrip("- "))
                        # Not the bot's own replies, nor a request to forget or keep
                        # something private, which tells nothing of it.
                        if not author.endswith(f" {BOT_MARK}") and _tells(text, read_request(text)):
                            out.append(Evidence(text, author, None, "summary"))
    # What someone asked to forget is theirs alone: another person's words stay, and so
    # does what they said after asking ("forget my locker code", then "it is now 7777").
    forgotten = [
        (m.name or "", r.what, m.sent_at) for m in history if (r := _forget_of(m)) is not None
    ]
    kept = []
    for e in out:
        gone = [
            f
            for who, f, at in forgotten
            if who == e.author and (e.when is None or at is None or e.when <= at)
        ]
        if not gone or not any(names(f, e.text) for f in gone):
            kept.append(e)
            continue
        # "Remind me to call the plumber. Remind me to buy milk.", then "forget the
        # plumber": the milk stays; so does Ana's job after "forget where Ana lives".
        text = e.text
        for f in gone:
            if text and names(f, text):
                text = without_named(f, text)
        if text:
            kept.append(replace(e, text=text))
    return kept


def _tells(text: str, request: Request | None) -> bool:
    """Whether a person's message may be quoted as telling something: not a request to
    forget ("Please delete Elif's phone number", whether or not it was told) or to
    keep something private ("Don't remember Elif's dietary stuff"), which names a
    thing and says nothing of it.  ``request`` is :func:`read_request` of ``text``."""
    if request is not None:
        return request.kind == "remember"
    return _DELETE_THING.match(text) is None


def _forget_of(m: ChatMessage) -> Request | None:
    """The forget ``m`` asks for: "forget my locker code", or "delete the sandbox API
    token" (what it names of its author's is forgotten, if they told of one)."""
    if m.role != "user" or is_quoted(m.content):
        return None
    request = read_request(m.content)
    if request is None and (delete := _DELETE_THING.match(m.content)) is not None:
        return Request("forget", delete["what"])
    return request if request is not None and request.kind == "forget" else None


_ASKED_OF_ME = re.compile(
    r"\b(?:do|did|does|am|was|have|had|can|could|should|will|would)\s+i\b|^\s*i\b", re.I
)
# ("i", as chat writes it, too; not the "i" of "i.e.")
# ("im out thursday", "ive booked": as chat writes it)
_I_SAID = re.compile(
    # ("ill bring wine": "ill" opening a clause is "I'll")
    r"\b(?:[Ii](?:['\u2019](?:m|ve|d|ll))?|im|ive)\b(?!\.\w)|(?:^|(?<=[,.;!?] ))ill\b"
)
# A name inside a sentence ("Sofia"), or what a possessive names ("landlord's").
_NAMED = re.compile(r"(?<=\S )(?!I\b)[A-Z][\w-]+|\b[\w-]+(?='s\b)")


def _named(question: str) -> set[str]:
    """The stems of who or what ``question`` is about."""
    return {t for m in _NAMED.finditer(question) for t in stems(m.group(0))}


# "what is my garage code?", "the combination for the garage": what the question is
# about starts at its first "my" or "the".
_ABOUT = re.compile(r"\b(?:(?i:my|our|your|his|her|their|the)|[A-Z]\w*'s)\s+(.+)$", re.S)
# "My gym code is 9090", "The locker at the pool is number 87", "Rent is £1,150, due
# on the 28th", "Netflix renews on the 9th": what a statement is about.
_TOLD_ABOUT = re.compile(
    r"^\W*(?:(?:my|our|your|his|her|their|the)\s+)?([^\W\d][\w' -]{0,50}?)\s+(?:is|are|was|"
    r"were|renews|starts|opens|closes|lives|works|leaves|expires|changed|moved)\b",
    re.I,
)
# Whom a statement is about when it is someone else: "Mum lives at …", "Ana works at …".
_FAMILY = frozenset(
    stems(
        "mum mom mother dad father sister brother wife husband partner son daughter kid kids "
        "child children grandma grandpa granny grandmother grandfather aunt uncle cousin "
        "niece nephew friend neighbour neighbor boss manager"
    )
)
# "Am I allergic to peanuts?", "Is my locker code 4411?": asked to be confirmed.
_YES_NO = re.compile(
    r"^\W*(?:am|is|are|was|were|do|does|did|have|has|had|can|will)\b"
    r"(?!.*\b(?:what|where|when|who|whom|whose|which|how|why)\b)",
    re.I | re.S,
)
# What is asked of a thing rather than which thing: "my landlord's number" is answered
# by "My landlord's phone is …".
_HOW_LONG = re.compile(r"\bhow\s+long\b", re.I)
_A_DURATION = re.compile(
    r"\b(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|a\s+couple\s+of)"
    r"\s+(?:more\s+)?(?:min(?:ute)?s?|hours?|days?|nights?|weeks?|months?|years?)\b",
    re.I,
)
_ASKED_OF_IT = frozenset(
    stems(
        "number phone mobile name called age old colour color time date day year birthday born "
        "birth"
    )
)
_EVERYONE = re.compile(
    r"^\W*(?:everyone|everybody|all of us|we all|the whole (?:team|group|party))\b", re.I
)
_OBJECT_PRONOUN = re.compile(r"\b(?:them|it|her|him|they)\b", re.I)
# A birthday is said with one of these words, or an age turned ("turns 40 on …"): any
# other dated line naming the person ("a call with Lucia on Friday") is not it.
_BIRTH = frozenset(stems("birthday birthdays born birth bday"))
_TURNS = re.compile(r"\bturn(?:s|ed|ing)?\s+\d", re.I)
# Asked of whether something holds yet: "Are we still going…?", "Is Tom at Bosch anymore?";
# and words that stand for whatever the answer says: "Is Sam allergic to anything?".
_STILL = frozenset(stems("still anymore longer yet"))
_ANY = frozenset(
    stems("anything something anyone someone anybody somebody any some anywhere somewhere ever")
)
# A number, or a line naming one: what "What's Dave's number?" needs.
_A_NUMBER = re.compile(r"\d{3,}|\d[\d ()+.-]{3,}\d|\b(?:number|phone|mobile|tel)\b", re.I)
# Asked how much or how many, and a line giving an amount ("£50", "two dozen", "10mg").
_HOW_MUCH = re.compile(
    r"\bhow\s+(?:much|many)\b|\bwhat\s+(?:does|did|do)\b.*\bcost\b|"
    r"^\W*what(?:'s|s| is| are| was)\s+(?:the\s+)?(?:price|cost|fee|rate)s?\b",
    re.I,
)
# Numbers said in words, up to ninety-nine.
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    "eighty|ninety"
)
_AN_AMOUNT = re.compile(
    rf"\d|\b(?:{_NUMBER_WORDS}|hundred|thousand|dozen|half|a few|several)\b", re.I
)
# "How much…" of money: not of time, weight or room.
_HOW_MUCH_MONEY = re.compile(
    r"\bhow\s+much\b(?!\s+(?:time|longer|weight|space|room|data|water|sleep|of\b))", re.I
)
# "How much are we getting for Sheffield?", "how much do I owe Sam?": a sum asked for.
_HOW_MUCH_PAID = re.compile(
    r"\bhow\s+much\b(?:\s+\w+){0,3}?\s+(?:get|getting|got|earn|earning|earned|make|making|"
    r"made|paid|pay|paying|charge|charging|charged|owe|owed|spend|spent|cost|costs)\b",
    re.I,
)
_EARNING = frozenset(stems("get getting got earn earning earned make making made owe owed"))
# A sum of money, which is no one's number: "quote £2,850".
_SUM = re.compile(
    r"[£$€¥]\s?\d[\d,.]*[km]?\b|\b\d[\d,.]*\s?(?:pence|quid|pounds?|dollars?|euros?)\b", re.I
)
# Asked for a price, and a sum of money said.
_PRICE = re.compile(r"\b(?:price|prices|cost|costs|fee|fees|charge|charges)\b", re.I)
_MONEY_SAID = re.compile(
    # (a sum without its currency, said to be one: "rent 850 a month", "they pay 920")
    rf"{MONEY_AMOUNT.pattern}|\b(?:free|nothing)\b|"
    r"\b(?:rent|pay|pays|paid|costs?|charges?)\s+(?:is\s+|of\s+)?\d",
    re.I,
)
# Asked what someone does not like or want, and a line saying so.
_LIKING = re.compile(r"\b(?:like|likes|love|loves|enjoy|enjoys|prefer|prefers|favou?rite)\b", re.I)
# A liking said negated: "I don't like olives", "What do I not like?".
_NOT_LIKED = re.compile(
    r"\b(?:don'?t|doesn'?t|didn'?t|do\s+not|does\s+not|did\s+not|never|not)\s+(?:\w+\s+)?"
    r"(?:like|likes|love|loves|enjoy|enjoys|want)\b",
    re.I,
)
_NOT_LIKE = re.compile(rf"{_NOT_LIKED.pattern}|\b(?:dislikes?|hates?)\b", re.I)
_NEGATIVE = re.compile(
    r"\b(?:not|never|no|dislikes?|hates?|avoids?|stand)\b|n't\b|\bno\s+longer\b", re.I
)
# An age: "How old is Sam?" is answered by a line giving a number ("Sam, who is 5"), an
# age or a birth, not by any line naming Sam.
_HOW_OLD = re.compile(r"\bhow old\b|\bage\b", re.I)
_AN_AGE = re.compile(
    rf"\b(?:is|was|am|are|aged?|turns?|turned|turning|of)\s+(?:\d{{1,3}}|{_NUMBER_WORDS})"
    r"\b(?![:.]\d|\s*(?:%|(?:st|nd|rd|th|am|pm|feet|foot|ft|cm|kg|km|"
    r"miles?|pounds?|euros?|dollars?|quid|percent|minutes?|mins?|hours?|days?|weeks?|"
    r"months?|o'clock|people|of)\b))|"
    r"\b\d{1,3}\s*(?:years?|yrs?|y/?o)\b|\b(?:old|aged|born)\b|"
    r"(?-i:\b[A-Z][a-z]+)\s*\(\d{1,2}\)",  # "Mia (9), Leo (7) and Ava (4)"
    re.I,
)
_WHO = re.compile(r"^\W*who(?:m|'s)?\b", re.I)
_MY_THING = re.compile(r"\bmy\s+\w", re.I)
# A statement about someone's thing by name: "Claire's husband is called Mark".
_WHOSE = re.compile(r"[A-Z][\w-]*'s\s")
_WHERE = re.compile(r"^\W*(?:and\s+)?where\b", re.I)
_PLACE = re.compile(
    r"\b(?:at|in|near|behind|opposite|inside|outside|next\s+to|on|from)\s+(?:the|a|an|my|our|his|her|"
    r"their|(?!(?:" + "|".join(w.title() for w in CALENDAR_WORDS) + r")\b)[A-Z])|"
    r"\b(?:lives?|based|located)\b|"
    # written small: "at miss claire's studio on high street", "still at mine"
    r"(?i:\b(?:at|in)\s+(?:\w+\s+)?[a-z]+['\u2019]s\b|\b(?:at|in)\s+(?:mine|ours|theirs|yours)\b|"
    r"\b(?:street|road|lane|avenue|square|studio|centre|center)\b|"
    # a venue's word after "at" or "in": "at hartwell manor" (not "consulate emailed")
    r"\b(?:at|in)\s+(?:[\w'-]+\s+){0,3}(?:manor|hall|barn|hotel|church|chapel|park|pub|inn|"
    r"arms|clinic|surgery|hospital|gym|library|station|venue|cafe|restaurant|farm|consulate|"
    r"embassy|allotments?)\b)"
)
# What a thing does that asks only when: it comes, arrives, turns up.
_COMING = re.compile(
    r"\b(?:come|comes|coming|arrive|arrives|arriving|get\s+here|gets\s+here|turn\s+up|"
    r"turns\s+up|show\s+up|shows\s+up|happen|happens|happening)\b",
    re.I,
)
# Asked for a date or time, and a statement that gives one.
_WHEN = re.compile(r"^\W*when\b|\bwhat (?:time|day|date)\b|\bwhich day\b", re.I)
# Asks a time or a day, which only a line giving one answers.
_WHAT_TIME = re.compile(r"\b(?:what|which)\s+(time|days?|dates?)\b", re.I)
# A time of day: "7pm", "19:30", "at 8", "noon", "every morning".
_CLOCK = re.compile(
    rf"{CLOCK_TIME}|\b\d{{1,2}}[.h]\d\d\b|\b(?:at|by|until|till|from)\s+\d|"
    r"\b(?:noon|midday|midnight|morning|mornings|evening|evenings|afternoon|night|o'?clock|"
    r"breakfast|lunch|dinner|bedtime)\b",
    re.I,
)
# A number gives a date only in a date's shape ("the 15th", "10:30", "2025-09-14", "at 10",
# "from 12 to 19 August"): "Ellie, who is 8" gives an age, not when anyone comes.
_DATED = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}[:.h]\d\d\b|\b\d{1,2}\s*(?:am|pm)\b|"
    r"\b\d{4}-\d\d-\d\d\b|\b\d{1,2}/\d{1,2}\b|\b(?:19|20)\d\d\b|\b(?:at|by|until|till)\s+\d|"
    r"\b\d+\s+(?:days?|weeks?|months?|years?|hours?|minutes?|mins?)\b|"
    r"\b(?:"
    + "|".join([*CALENDAR_WORDS, "noon", "midnight", "weekend", "morning", "evening"])
    + r"|(?:next|last|this)\s+(?:week|month|year)|afternoon|night|jan|feb|mar|apr|jun|jul|aug|"
    r"sept?|oct|nov|dec|bedtime|(?:at|before|after)\s+(?:breakfast|lunch|dinner|bed))\b",
    re.I,
)
# A month named as one: "the may meeting", "in March", "15 may", not "may I" nor "march on".
_MONTH_NAMED = re.compile(
    r"\b(?:january|february|april|june|july|august|september|october|november|december|"
    r"jan|feb|apr|jun|jul|aug|sept?|oct|nov|dec)\b|"
    r"(?:\b(?:the|in|of|for|on|this|next|last|early|late|mid|from|until|till|by|since)\s+|"
    r"\d(?:st|nd|rd|th)?\s+)(?:may|march|mar)\b|\b(?:may|march|mar)(?=\s+\d)",
    re.I,
)


def _months(text: str) -> set[str]:
    """The months ``text`` names, by their first three letters ("may", "sep")."""
    return {m[0].split()[-1].lower()[:3] for m in _MONTH_NAMED.finditer(text)}


# Asked when someone is back, and a statement saying until when they are away.
_BACK = frozenset(stems("back return returns returning home"))
# A street address: "14 Birch Lane", "221B Baker Street".
_ADDRESS = "address"
_STREET = re.compile(
    # (its name may be written small, "14 ash grove", but is no count: "3 hours down the road")
    r"\b\d+[A-Za-z]?,?\s+(?:(?!(?i:the|a|an|of|to|down|up|on|in|at|by|more|less|other|"
    r"hours?|days?|weeks?|miles?|minutes?|mins?|km|times?|people|of)\b)[A-Za-z][\w'-]*\s+){1,3}"
    r"(?i:road|rd|street|st|lane|ln|avenue|ave|"
    r"close|drive|dr|way|court|ct|place|pl|crescent|terrace|gardens|grove|square|sq|"
    r"boulevard|blvd|hill|row|walk|mews|park)\b"
)
# Seeing someone: what a dated line naming them answers "when" of.
_MEETING = frozenset(stems("see seeing meet meeting visit visiting"))
# Any time a line may give: a date, a clock time, a day written short ("tues"), a
# season or a habit ("every", "weekends"), a time relative to another ("soon", "ago").
_TIMED = re.compile(
    rf"{_DATED.pattern}|{_CLOCK.pattern}|"
    r"\b(?:mon|tues?|wed|weds|thu|thur|thurs|fri|sat|sun)s?\b|"
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days\b|"
    r"\b(?:weekdays?|weekends?|christmas|easter|half[- ]term|term|semester|soon|later|ago|"
    r"every|daily|weekly|monthly|fortnightly|yearly|annually|season|summer|winter|spring|"
    r"autumn|fall|holidays?|once|twice|before|after|until|till|til|since|during|overnight|"
    r"nightly|weeknights?|lunchtime|teatime|dawn|dusk|sunrise|sunset|early|late|"
    r"(?:next|last|this)\s+\w+)\b",
    re.I,
)
# Staying somewhere, and where one stays.
_STAYING = frozenset(stems("stay staying stays sleep sleeping"))
_LODGING = re.compile(
    r"\b(?:hotels?|ryokan|hostels?|inn|motel|b&b|airbnb|guesthouse|guest house|apartment|"
    r"campsite|lodge|resort|staying)\b",
    re.I,
)
# Being somewhere: what a line giving a place answers "where" of.
_BEING_AT = frozenset(stems("stay staying stays live living sleep sleeping based located"))
# "What's happening with Kindred Trails?", "any news on the boiler?": anything of it.
_NEWS = frozenset(stems("happening happened news latest update status"))
# What a date answers as well as the word: "When is Ferro Cycles due?".
_DUE = frozenset(stems("due deadline"))
_BY_DATE = re.compile(
    r"\b(?:by|before|no later than)\s+(?:the\s+)?(?:\d|(?:next\s+)?(?:"
    + "|".join(CALENDAR_WORDS)
    + r")\b)",
    re.I,
)
# Words of what something costs, each another's: "How much is the job worth?".
_MONEY = frozenset(
    stems("cost costs price fee fees worth charge charges rate bill spent spend spending")
)
# Owing, which a line must say (or give a sum) to answer who owes what.
_OWING = frozenset(stems("owe owes owed owing money cash debt"))
# Money named as such, which a sum said is.
_MONEY_NAMED = frozenset(stems("money cash"))
# Paying is the other way round ("Tom paid me £20" is no charge of Tom's).
_PAYING = frozenset(stems("pay pays paying paid"))
_UNTIL = re.compile(r"\b(?:until|till|til|through)\b", re.I)
# Asked when something ends: what a line giving "until" a date answers.
_ENDING = frozenset(stems("expire expires expiry end ends run runs out finish finishes lapse"))
# "the lexicon job", "the brennan thing": a thing named by a word and a vague noun.
_VAGUE_THING = re.compile(r"\b([a-z][\w'-]+)\s+(job|thing|stuff|project|task|gig)\b", re.I)
# Words saying which one of any thing, not what it is: "my new job".
_WHICH_OF_ANY = frozenset(
    "new old next last first big small current other main this that same the a an my our "
    "your his her their full part day night".split()
)
# Asked what something is called, and a line saying what: "Her name is Biscuit", "My
# dentist is Dr Patel", "a ramen place called Ichiran".
_ASKS_NAME = re.compile(r"^\W*what(?:'s|s| is| was| are)\b.*\bnames?\b", re.I)
# "What's my dog called?" asks "What's my dog's name?" ("Mrs Patel called" is no name).
_CALLED = re.compile(
    r"^(\W*what(?:'s|s| is| was| are)\s+(?:my|our|your|his|her|their|the)\s+[\w -]{1,30}?)"
    r"\s+called(\W*)$",
    re.I,
)
_GIVES_NAME = re.compile(
    r"\bnames?(?:'s| is| was| are)\b|\b(?:called|named|goes by)\b|"
    r"\b(?:is|'s|are|was)\s+(?:(?:Dr|Mr|Mrs|Ms|Miss|Prof)\.?\s+)?[A-Z][a-z]|"
    r"\b(?i:my|our|his|her|their)\s+[a-z]+,?\s+[A-Z][a-z]|"  # "with my husband George"
    r"^\W*[A-Z][a-z]+\s+is\s+(?i:my|our|his|her|their)\s+[a-z]"  # "Rex is my dog"
)
_MY_BEFORE = re.compile(r"\b(?:my|our|your)\s+$", re.I)
# Someone named by a title: "dr okafor", "Mrs Patel".
_TITLE_NAMED = re.compile(r"\b(?:dr|mr|mrs|ms|miss|prof)\.?\s+[a-z][\w'-]+", re.I)
# One word after "is", then the sentence goes on or ends: a name written small ("… is
# gary, he quoted £3,200"), not "is late" or "is on friday".
_A_NAME_SMALL = re.compile(
    r"\s+(?!(?:a|an|the|my|our|on|at|in|not|now|here|there|back|off|out|due|done|late|"
    r"early|free|busy|open|closed|booked|sorted|fine|good|great|ok|okay|still|also|just|"
    r"very|so|really|coming|going|away|home|sick|ill|over|up|down)\b)[a-z][a-z'-]+\s*(?:[,.;!]|$)"
)
# A name of several capitalised words, not the question's first: "Bloom Florist".
_WHOLE_NAME = re.compile(r"(?<=\S )(?!I\b)[A-Z][\w-]+(?:\s+[A-Z][\w-]+)+")
# Not names, though capitalised or before "'s": the bot, "Let's".
_NOT_ASKED_NAMES = frozenset({"tierbot", "let"})


@dataclass(frozen=True, slots=True)
class _Asked:
    """What an answer to a question must agree with: the names it asks about, and what
    it says the thing asked about is ("my garage code", "the code for the side door")."""

    names: frozenset[str]
    about: frozenset[str]  # the stems from the question's first "my" or "the" on
    words: frozenset[str]  # every stem of the question
    mine: bool  # asked of the asker ("where do I live?")
    confirm: bool  # a yes-or-no question
    when: bool = False  # asks for a date or time ("When is Sofia's birthday?")
    who: bool = False  # asks for a person ("Who is covering for Lucia?")
    my_thing: bool = False  # asks of something the asker's ("my husband's name")
    kind: frozenset[str] = frozenset()  # the thing "what car…?" asks for: {"car"}
    age: bool = False  # asks how old someone is
    number: bool = False  # asks someone's number, nothing else of them
    against: bool = False  # asks what someone does not like or want
    liking: bool = False  # asks what someone likes
    amount: bool = False  # asks how much or how many
    # One name of several words ("Bloom Florist"): any of them names it ("Bloom's").
    whole: tuple[frozenset[str], ...] = ()
    naming: bool = False  # asks what something is called ("What's my puppy's name?")
    common: frozenset[str] = frozenset()  # stems it writes in lower case ("flats")
    owned: tuple[str, ...] = ()  # whose name is asked, as written ("dog" of "my dog's name")
    where: bool = False  # asks where ("Where am I staying in Kyoto?")
    kind_unsaid: bool = False  # no line says the kind asked for ("what class is Fenn?")
    numbered: frozenset[tuple[str, str]] = frozenset()  # "level 4": {("level", "4")}
    price: bool = False  # asks a price ("What's the price of sourdough?")
    duration: bool = False  # asks how long ("How long is Kofi out?")
    my_own: bool = False  # asks of the asker's own thing ("my number", not "my sister's")
    clock: str = ""  # asks what "time" or what "day" ("what time is kick off?")
    months: frozenset[str] = frozenset()  # the months it names ("the may meeting": may)
    text: str = ""  # the question itself

    @classmethod
    def of(cls, question: str, overlap: Overlap) -> _Asked:
        found = [m for m in _NAMED.finditer(question) if m.group(0).lower() not in _NOT_ASKED_NAMES]
        each = [frozenset(overlap.query_stems(m.group(0))) for m in found]
        named = {t for ts in each for t in ts}
        whole = [
            frozenset(t for w in m.group(0).split() for t in overlap.query_stems(w)) & named
            for m in _WHOLE_NAME.finditer(question)
        ]
        # A name said alone is a name of its own; of several words, one.  "my puppy's"
        # is the asker's thing, which a line may call "she" ("Her name is Biscuit").
        alone = [
            ts
            for m, ts in zip(found, each, strict=True)
            if not any(ts <= w and len(w) > len(ts) for w in whole)
            and not (m.group(0)[0].islower() and _MY_BEFORE.search(question[: m.start()]))
        ]
        about = _ABOUT.search(question)
        kind = _WHAT_KIND.match(question)
        return cls(
            frozenset(named),
            frozenset(overlap.query_stems(about[1])) if about else frozenset(),
            frozenset(overlap.query_stems(question)),
            bool(_ASKED_OF_ME.search(question)),
            bool(_YES_NO.match(question)),
            bool(_WHEN.search(question)),
            bool(_WHO.match(question)),
            bool(_MY_THING.search(question)),
            frozenset(overlap.query_stems(kind[1] or kind[2])) - _ASKED_OF_IT
            if kind
            else frozenset(),
            bool(_HOW_OLD.search(question)),
            "number" in (words := set(overlap.query_stems(question)))
            and not words - named - _ASKED_OF_IT - _ANY,
            _NOT_LIKE.search(question) is not None,
            _LIKING.search(question) is not None and _NOT_LIKE.search(question) is None,
            _HOW_MUCH.search(question) is not None,
            tuple(frozenset(ts) for ts in {*alone, *(w for w in whole if len(w) > 1)} if ts),
            _ASKS_NAME.search(question) is not None,
            frozenset(_lower_stems(question)),
            tuple(re.findall(r"([a-z][\w-]*)['\u2019]s\s+names?\b", question, re.I)),
            _WHERE.match(question) is not None,
            kind is not None and not overlap.query_stems(kind[1] or kind[2]) & overlap.idf.keys(),
            frozenset(_numbered(question)),
            _PRICE.search(question) is not None or _HOW_MUCH_PAID.search(question) is not None,
            _HOW_LONG.search(question) is not None,
            re.search(r"\bmy\s+(?![\w-]+['\u2019]s\b)\w", question, re.I) is not None,
            (m[1].lower() if (m := _WHAT_TIME.search(question)) else "")
            .replace("days", "day")
            .replace("dates", "day")
            .replace("date", "day"),
            frozenset(_months(question)),
            question,
        )

    def fits(self, e: Evidence, said: set[str]) -> bool:
        """Whether ``e`` (its stems ``said``) may answer: it names everyone the question
        names (by name, or a name it starts: "Tommy", "Sofi"; the author counts), and it
        is not about another thing of the same kind: a statement whose subject has a
        word the question lacks ("My gym code is …", "The wifi password at home is …")
        while the question has one it lacks ("my garage code", "… at work"). "My phone
        number is …" answers "my new phone number"; "I love the colour green" (no such
        subject) answers "my favourite colour"."""
        have = said | Overlap.stems(e.author)
        if MONEY_AMOUNT.search(e.text):
            have = have | _MONEY_NAMED  # "does pica still owe me money?": "… owe me €940"
            if _PAID_BACK_ASKED.search(e.text):
                have = have | _OWING  # "who owes priya money?": "can everyone pay me back …"
        if _EVERYONE.match(e.text):
            # "Everyone is level 4" is said of Veska too, for "What level is Veska?".
            have = have | self.names
        if self.words & _BIRTH and not have & _BIRTH and not _TURNS.search(e.text):
            return False
        if self.naming and not (_GIVES_NAME.search(e.text) or self._named_small(e.text)):
            return False  # "What's my puppy's name?" is not "We're switching her food"
        if self.naming and any(
            re.search(rf"\b{re.escape(w)}['\u2019]s\s+(?!names?\b)[a-z]", e.text, re.I)
            for w in self.owned
        ):
            return False  # "What's my dog's name?" is not "My dog's vet is Dr Fox"
        if self.age and not _AN_AGE.search(e.text):
            return False
        if self.words & _OWING and not have & _OWING and not _MONEY_SAID.search(e.text):
            return False  # "Who owes Priya money?" is not "… priya hoovering"
        if self.months and (named_months := _months(e.text)) and not named_months & self.months:
            return False  # "Where is the may meeting?" is not "meeting is 10 april, at mine"
        if self.clock and not (_CLOCK if self.clock == "time" else _DATED).search(e.text):
            return False  # "What time is kick off?" is not "how much is it this time"
        if self.when and not self.clock and not _TIMED.search(e.text):
            return False  # "When is my exam?" is not "the exam pass mark is 70%"
        if self.number and not _A_NUMBER.search(_SUM.sub(" ", e.text)):
            return False  # "What's Dave's number?" is not "Dave is coming on Thursday"
        if self.amount and not _AN_AMOUNT.search(e.text):
            return False  # "How much is Tom's cake?" is not "Tom changed his order"
        if self.price and not _MONEY_SAID.search(e.text):
            return False  # "What's the price of sourdough?" is not "4 dozen sourdough rolls"
        if self.against and not _NEGATIVE.search(e.text):
            return False  # "What do I not like?" is not "I like Duolingo"
        if self.liking and not _LIKING.search(_NOT_LIKED.sub(" ", e.text)):
            return False  # "What do I like?" is not "I don't like olives"
        for name in self.whole:
            if not any(n in have or any(_same_name(n, h) for h in have) for n in name):
                return False
            if len(name) > 1 and not name <= have and _another_name(e.text, name):
                return False  # "Bloom Bakery" is not "Bloom Florist", "New York" not "New Jersey"
        # Naming whom is asked about is not enough when the question asks a detail the
        # statement never mentions: "Elif is vegetarian" does not answer "What is Elif
        # afraid of?", nor "My sister Ana lives in Madrid" "When is Ana's birthday?".
        detail = self.words - self.names - _ASKED_OF_IT - _NEWS
        dated = self.when and _DATED.search(e.text) is not None  # "turns 40 on 2025-09-14"
        if dated and _BY_DATE.search(e.text):
            detail -= _DUE  # "When is Ferro Cycles due?": "wants a mockup by 2 May"
        if (
            self.amount
            and _AN_AMOUNT.search(e.text)
            and any(self.words & kind and have & kind for kind in (_MONEY, _PAYING))
        ):
            detail = frozenset()  # "How much is the Northpoint job worth?": "… a fee of £2,400"
        # "Who is covering for Lucia?" is answered by a line naming someone else too:
        # "Lucia's replacement during leave is Omar".
        someone = self.who and bool(_proper(e.text) - self.names)

        # "When is Lucia back?" is answered by "she's out on leave until June 2nd".
        returns = dated and detail <= _BACK and _UNTIL.search(e.text) is not None
        # "Where am I staying in Kyoto?" by "Kyoto Oct 8-12 at Ryokan Yoshida-sanso".
        placed = self.where and detail <= _BEING_AT and _PLACE.search(e.text) is not None
        # "When do I see Dr. Ramirez?" by "Next appointment with Dr. Ramirez is on the 12th".
        meets = dated and detail <= _MEETING
        # "What class is Fenn?" by what Fenn is said to be: "I play Fenn, a halfling bard".
        # (Only when no line says the kind: "Everyone is level 4" answers "What level…?")
        described = self.kind_unsaid and detail <= self.kind and self._described(e.text)
        # "What's Mark's number?" by "… Mark from Oakline Kitchens, phone 07700 900456".
        phoned = self.number and detail <= {"number"} and PHONE_NUMBER.search(e.text) is not None
        # "What's the fee for Manchester?" by "we also got Manchester, …, £250".
        priced = (
            self.price
            and detail <= _MONEY | _PAYING | _EARNING
            and _MONEY_SAID.search(e.text) is not None
            # ("How much does Tom charge?" is not "Tom paid me £20": the other way round)
            and (not have & _PAYING or bool(detail & _PAYING))
        )
        # "What time is rolo's walk?" by "rolo …, 12.30 every weekday": the time of
        # whom or what is named, its one detail ("walk") left unsaid.
        timed = self.clock == "time" and len(detail) == 1 and _CLOCK.search(e.text) is not None
        if (
            self.names
            and detail
            and not detail & have
            and not someone
            and not timed
            and not returns
            and not placed
            and not meets
            and not described
            and not priced
            and not phoned
        ):
            return False
        # Nor a statement sharing nothing of the thing asked about: "We decided to skip
        # Osaka this time" is not "What time is our flight?".
        # "Margaret wants to take them to the railway" may answer "What does Margaret want
        # to do with the kids?": "them" may be the kids.
        them = bool(self.names) and self.names <= have and _OBJECT_PRONOUN.search(e.text)
        if self.about - _NEWS and not self.about & have and not dated and not them and not phoned:
            return False
        # "What's the guest wifi password?" is not "… reset his password anyway": a thing
        # named in three words or more shares two of them with what answers it.
        thing = self.about - _NEWS - _ASKED_OF_IT - self.names - _MONEY - _PAYING
        if len(thing) >= 3 and len(thing & have) < 2 and not them:
            return False
        if not self.confirm and self.numbered:
            # "Which characters are level 4?" is not "Orrin, a human cleric, level 3"
            # (a yes-or-no question may be answered by the number that replaced its own).
            told = _numbered(e.text)
            asked_of = {w for w, _ in self.numbered}
            if any(w in asked_of for w, _ in told) and not told & self.numbered:
                return False
        if self.confirm:
            # "Am I allergic to peanuts?" is not confirmed by "I'm allergic to penicillin".
            # "Are we still going to Cornwall?" asks whether "going to Cornwall" holds:
            # "still" is what the answer (and what was said later) settles.
            # Of four words or more, one may be put another way ("still due on 2 March"
            # of "it has to be done by 2 March"), never a number.
            missing = self.words - _ASKED_OF_IT - _STILL - _ANY - have
            asked = self.words - _ASKED_OF_IT - _STILL - _ANY
            return not missing or (
                len(asked) >= 4
                and len(missing) == 1
                and not any(c.isdigit() for m in missing for c in m)
            )
        subjects = [_TOLD_ABOUT.match(_LEAD.sub("", x)) for x in sentences(e.text)]
        said_of = [m[1] for m in subjects if m is not None]
        # Named only as its author, a line of hers about her son is not of her: "What is
        # Emma allergic to?" is not "My son is allergic to nuts" (said by Emma).
        by_author = self.names & Overlap.stems(e.author) - said
        if by_author and said_of and all(Overlap.stems(x) & _FAMILY for x in said_of):
            return False
        # ("Flat 1 is on Ashby Road, flat 2 is…" is of no one: "flat" is a word)
        common = self.common | _lower_stems(e.text)
        if self.mine and any(_someone_else(x, common) for x in said_of):
            return False  # "Where do I live?" is not answered by "Mum lives at …"
        if (
            (self.mine or self.my_own)
            and said_of
            and all(_OF_THEIRS.match(_LEAD.sub("", x)) for x in sentences(e.text))
        ):
            return False  # "What's my number?" is not "actually her number is …"
        if (
            self.my_thing
            and said_of
            and all(_named_whose(x) and not _whose(x) & self.names for x in said_of)
        ):
            return False  # "my husband's name" is not "Claire's husband is called Mark"
        if self.kind and self.kind <= have and _TITLE_NAMED.search(e.text):
            return True  # "which dentist is maisie seeing?": "… dentist appt …, dr okafor"
        if self.kind and not self.about and any(self._said_of_another(x) for x in said_of):
            return False  # "What car do I drive?" is not "The car insurance renewal is…"
        if self.about and said_of and all(self._another_kind(x) for x in said_of):
            return False  # "When is my marathon?" is not "My half marathon PB is 1:29:40"
        held = have | self._vague_held(have)
        if self.about - _ASKED_OF_IT <= held:
            return True
        if self.when and dated and _UNTIL.search(e.text) and self.about - held <= _ENDING:
            return True  # "When does the hotel hold expire?": "30 rooms held until 1st april"
        if self.price and self.about - _MONEY & have:
            return True  # "the price of sourdough": "sourdough loaf is £4.50" (a sum, above)
        for subject in said_of:
            # A possessive name says whose, not what: "My daughter Ella's school".
            kind = " ".join(w for w in subject.split() if not re.match(r"[A-Z]\w*'s$", w))
            if kind and not Overlap.stems(kind) <= self.words:
                return False
        return True

    def _named_small(self, text: str) -> bool:
        """Whether ``text`` names the thing asked the name of by a word written small:
        "the plumber for the bathroom is gary, he quoted £3,200" for "whats the name of
        the plumber"."""
        said = _LEAD.sub("", text)
        told = _TOLD_ABOUT.match(said)
        thing = self.about - _ASKED_OF_IT
        return (
            told is not None
            and bool(thing)
            and thing <= Overlap.stems(told[1])
            and _A_NAME_SMALL.match(said[told.end() :]) is not None
        )

    def _vague_held(self, have: set[str]) -> set[str]:
        """The vague words ("job", "thing") of what the question names that a line
        naming it holds all the same: "the lexicon job" in "deadline for the lexicon
        pharma leaflet is friday" (not "my new job": "new" says which of any)."""
        return {
            t
            for m in _VAGUE_THING.finditer(self.text)
            if m[1].lower() not in _WHICH_OF_ANY and (which := set(stems(m[1]))) and which <= have
            for t in stems(m[2])
        }

    def _described(self, text: str) -> bool:
        """Whether ``text`` says what one asked about is: "Fenn, a halfling bard",
        "Brannoc is my dwarf fighter"."""
        return any(Overlap.stems(m[1]) & self.names for m in _DESCRIBED.finditer(text))

    def _another_kind(self, subject: str) -> bool:
        """Whether a statement's ``subject`` names what was asked about only inside the
        name of another thing, with a word before it and a word after it that the
        question does not say: "half marathon PB" (of "my marathon") is the best time of
        another race; "car insurance renewal" (of "my car insurance") is still of it."""
        head = _RELATIVE_CLAUSE.split(_QUALIFIED.split(subject)[0])[0].split()
        at = [i for i, w in enumerate(head) if Overlap.stems(w) & self.about]
        if not at:
            return False
        before = Overlap.stems(" ".join(head[: at[0]])) - self.words
        after = Overlap.stems(" ".join(head[at[-1] + 1 :])) - self.words
        return bool(before) and bool(after)

    def _said_of_another(self, subject: str) -> bool:
        """Whether a statement's ``subject`` names the thing asked for ("what car…?")
        only as what qualifies another thing: "car insurance renewal" names a renewal,
        not a car ("the car" or "my car" would be one)."""
        # ("Flat 1" is a flat: a number after a noun says which.)
        # ("the R package I use": a package, the one "I use")
        head = [
            w
            for w in _RELATIVE_CLAUSE.split(_QUALIFIED.split(subject)[0])[0].split()
            if not w[0].isdigit()
        ]
        shared = Overlap.stems(" ".join(head)) & self.kind
        return bool(head) and bool(shared) and not Overlap.stems(head[-1]) & self.kind


# "What car do I drive?", "which kind of bike…": the thing asked for, after "what".
# "Which beta customers do we have?": the head is the last word before the verb.
_WHAT_KIND = re.compile(
    r"^\W*(?:what|which)\s+(?:kind\s+of\s+|type\s+of\s+|sort\s+of\s+)?"
    r"(?!(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|'s)\b)"
    r"(?:[a-z][\w-]*\s+){0,2}?([a-z][\w-]*)"
    r"(?=\s+(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should)\b)|"
    r"^\W*(?:what|which)\s+(?:kind\s+of\s+|type\s+of\s+|sort\s+of\s+)?"
    r"(?!(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|'s)\b)"
    r"([a-z][\w-]*)",
    re.I,
)
# A word and the number that says which: "level 4", "flat 2", "room 12B".
_NUMBERED = re.compile(r"\b([a-z]{3,})\s+#?(\d+[a-z]?)\b(?![.:,/-]?\d)", re.I)


def _numbered(text: str) -> set[tuple[str, str]]:
    """``text``'s words each followed by a number ("level 4"), as (stem, number)."""
    return {(stems(m[1])[0], m[2].lower()) for m in _NUMBERED.finditer(text) if stems(m[1])}


# A name and what it is: "Fenn, a halfling bard", "Brannoc is my dwarf fighter".
_DESCRIBED = re.compile(
    r"\b([A-Z][\w-]*)(?:,\s*|\s+(?:is|was)\s+)(?:an?|my|our|his|her|their)\s+[a-z]"
)
# Where a subject's relative clause starts: "the R package I use", "the car that…".
_RELATIVE_CLAUSE = re.compile(r"\s+(?:that|which|who|I|you|we|he|she|they)\s+")
# What follows a subject's head noun: "the locker at the pool", "replacement during leave".
_QUALIFIED = re.compile(
    r"\s+(?:at|in|on|of|for|from|during|with|to|by|near|behind|under|over)\s+", re.I
)


def _another_name(text: str, name: frozenset[str]) -> bool:
    """Whether ``text`` gives a word of the name ``name`` (stems of several words) inside
    another name: "Bloom Bakery" for "Bloom Florist" (not "Bloom's deadline")."""
    words = re.findall(r"[\w'-]+", text)
    for i, w in enumerate(words):
        if not w[:1].isupper() or not Overlap.stems(w.removesuffix("'s")) & name:
            continue
        beside = [words[j] for j in (i - 1, i + 1) if 0 <= j < len(words)]
        if any(
            b[:1].isupper()
            and not b.endswith("'s")
            and b.lower() not in STOPWORDS
            and not Overlap.stems(b) & name
            for b in beside
        ):
            return True
    return False


def _named_whose(subject: str) -> bool:
    """Whether ``subject`` is someone's thing by their name ("Claire's husband"), not a
    relative's ("Mum's birthday" is the asker's mother's)."""
    m = _WHOSE.match(subject)
    return m is not None and not Overlap.stems(m[0].split("'")[0]) & _FAMILY


def _whose(subject: str) -> set[str]:
    """The stems of the name ``subject`` says it is of ("Northpoint's contact": northpoint)."""
    m = _WHOSE.match(subject)
    return Overlap.stems(m[0].split("'")[0]) if m else set()


def _someone_else(subject: str, common: Collection[str] = ()) -> bool:
    """Whether a statement's subject is another person: a relative or a name (not a
    word written in lower case elsewhere, ``common``'s stems)."""
    return bool(Overlap.stems(subject) & _FAMILY) or any(
        re.fullmatch(r"[A-Z][a-z]+", w) is not None
        and w != "I"
        and not set(Overlap.stems(w)) & set(common)
        for w in subject.split()
    )


def _lower_stems(text: str) -> set[str]:
    """The stems of the words ``text`` writes in lower case."""
    return {t for w in re.findall(r"(?<![\w'])[a-z][\w'-]*", text) for t in stems(w)}


def _same_name(a: str, b: str) -> bool:
    """ "tommi" and "tom", "sofi" and "sofia": one name, shortened or not."""
    return min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a))


def said_later(found: Evidence, question: str, pool: Sequence[Evidence]) -> Evidence | None:
    """What ``found``'s author said later about the same thing, if anything: "My locker
    code changed to 5521" after "My locker code is 4411"; "I moved to Lisbon" after "I
    live in Porto" when asked where they live."""
    if found.kind == "branch":
        return None
    # "I drink coffee every morning", then "I no longer drink coffee": said after it,
    # whatever the question (a summary's line has no date: any dated statement is later).
    said = set(stems(found.text))
    mine = bool(_I_SAID.search(found.text))
    stopped = [
        e
        for e in pool
        if e.author == found.author
        and e.when is not None
        and (found.when is None or e.when > found.when)
        and not _part_of(e.text, found.text)
        and not is_question(e.text)
        and any(of_me == mine and what <= said for of_me, what in _no_longer(e.text))
    ]
    if stopped:
        return max(stopped, key=lambda e: e.when or 0.0)
    if found.when is None:
        return None
    # "The annual report project is cancelled" after "Kindred Trails, annual report
    # design, deadline end of April"; "Thursday training is cancelled this week" after
    # "Training is Tuesdays and Thursdays" (called off once: said, not retired).
    # (a plan of no one's own, "fixture this week is tuesday", anyone may call off)
    anyones = _I_SAID.search(found.text) is None and _MINE.search(found.text) is None
    off = [
        e
        for e in pool
        if (e.author == found.author or (anyones and _MINE.search(e.text) is None))
        and e.when is not None
        and e.when > found.when
        and not _part_of(e.text, found.text)  # (the memory saved from the line itself)
        # (a thing of a list called off is news of the list: "scrap the prosecco")
        and _calls_off(e, found.text, question, partly=True)
    ]
    off = [e for e in off if _of_what_was_asked(found, e, question)]
    if off:
        return max(off, key=lambda e: e.when or 0.0)
    subject = _SUBJECT.match(_LEAD.sub("", found.text))
    about = set(stems(subject[1])) - {"my", "your", "our"} if subject else set()
    head = subject[1].split()[-1] if subject else ""
    # Words written in lower case somewhere are no names where they open a sentence
    # ("Puppy classes start…" after "our new puppy").
    common = {t for e in pool for t in _lower_stems(e.text)}
    # A move is the mover's: "I moved" updates "I live in…", not "Ana lives in…".
    moved = _MOVED.search(question) is not None and _I_SAID.search(found.text) is not None
    later = [
        e
        for e in pool
        if (
            e.author == found.author
            or _moves_shared(e.text)
            or _corrects_word(e.text, found.text)
            or _settles(e, found)
            or _counts_again(found, e, pool)
        )
        and e.when is not None
        and e.when > found.when
        and not _part_of(e.text, found.text)
        and (not is_question(e.text) or bool(_agreements(e, pool)))
        and (
            (about and about <= set(stems(e.text)) and _about_same(about, e.text, head))
            or (moved and _MOVED_TO.search(e.text) and _WE_MOVED.search(e.text))
            or _changed_since(found, e, said, mine, common, question)
            or _replaces(e, found.text)
            or _corrects_word(e.text, found.text)
            or (e.author == found.author and _corrects_theirs(e.text, found.text))
            or _settles(e, found)
            or (e.author == found.author and _moves_it(found, e, pool))
            or (e.author == found.author and _sets_right_next(found, e, pool))
            or _counts_again(found, e, pool)
            or (e.author == found.author and _done_of_list(found, e))
        )
    ]
    later = [e for e in later if _of_what_was_asked(found, e, question)]
    if subject is not None and re.match(r"\s*(?:my|our)\s+(?![\w-]+'s\b)", subject[1], re.I):
        # "actually her number is …" is of someone else's number, not of "my number is …"
        later = [e for e in later if not _OF_THEIRS.match(_LEAD.sub("", e.text))]
    if _HOW_MUCH.search(question):
        # "How much does Hannah charge?" is not told that "Hannah switched to tue and thu
        # at noon" (of her, but no amount): a change of how much gives one.
        later = [e for e in later if _AN_AMOUNT.search(e.text)]
    for value_words, value in ((_EMAIL_WORDS, _AN_EMAIL), (_PHONE_WORDS, _DIGITS)):
        # "whats her email?" is told no change by "ruth says wax price goes up": a
        # change of an email gives one.
        if value_words & set(stems(question)) and value.search(found.text):
            later = [e for e in later if value.search(e.text)]
    # Of several changes, the one about what is asked ("What did Tom order?": that he
    # changed his order, not that its price went up), else the newest.
    asked = set(stems(question))
    return (
        max(later, key=lambda e: (len(asked & set(stems(e.text))), e.when or 0.0))
        if later
        else None
    )


# "i've done safeguarding already", "finished the leadership module": one's own thing
# said done.
# The words that say a thing is done, for the three readings of it below.
_DONE_WORDS = r"done|sorted|finished|completed|ticked\s+off"
_DONE_WORD = re.compile(rf"\b(?:{_DONE_WORDS}|covered|revised|passed|crossed\s+off)\b", re.I)
# Where a list's items start, after what it lists: "topics are …", "studying: …".
_LIST_HEAD = re.compile(r"^[^:]{0,60}:\s*|^.{0,60}?\b(?:are|is|include|includes)\s+", re.I)


def _done_of_list(found: Evidence, e: Evidence) -> bool:
    """Whether ``e`` says one item of the list ``found`` gives is done: "i've done
    safeguarding already" of "studying: topics are leadership, medicines management,
    safeguarding, and deteriorating patient" (a list of three or more)."""
    if is_question(e.text) or not _DONE_WORD.search(e.text):
        return False
    items = [
        set(stems(x)) - STOPWORDS
        for x in re.split(r",\s*(?:and\s+)?|\s+and\s+", _LIST_HEAD.sub("", found.text))
    ]
    items = [x for x in items if x]
    said = set(stems(e.text))
    return len(items) >= 3 and any(x <= said for x in items)


# "we have 90 guests confirmed": a count of something.
_A_COUNT = re.compile(
    r"\b(?P<n>\d+)\s+(?P<what>[a-z][a-z-]*s|people|children|men|women|folk|staff)\b", re.I
)
# "so that makes 92", "back to 86", "down to 80 now": the count told just before, given
# again without what it counts.
_COUNT_AGAIN = re.compile(
    # ("actually make that 14 boxes, gary says we need spare")
    r"\b(?:(?:that|which|this)\s+makes(?:\s+it)?|makes\s+it|make\s+(?:that|it)|"
    r"(?:back|down)\s+to)\s+"
    r"(?P<n>\d+)(?![:.,]\d)(?:\s+(?P<what>[a-z][a-z-]*))?",
    re.I,
)


# "fine 20 then", "ok make it 25 then": a count settled on, in reply to what was said of
# the one before.
_COUNT_SETTLED = re.compile(
    r"^\W*(?:(?:ok|okay|fine|alright|right|go\s+on|yeah|ugh)\W+)*(?:make\s+it\s+|say\s+)?"
    r"(?P<n>\d+)(?![:.,]\d)\s+(?P<what>)then\b",
    re.I,
)


def _counts_again(found: Evidence, e: Evidence, pool: Sequence[Evidence]) -> bool:
    """Whether ``e`` gives the count ``found`` gives again ("the Lees said yes so that
    makes 92" after "we have 90 guests confirmed"): a count said without what it counts,
    or of the same thing, after ``found`` and no other count in between.  A count settled
    on in reply ("fine 20 then" after "thinking 30 people") gives again the count before
    it, and what was said of that number since ("30 is a lot for this flat")."""
    again = _COUNT_AGAIN.search(e.text)
    settled = _COUNT_SETTLED.match(e.text) if again is None else None
    if (again or settled) is None or e.when is None or found.when is None:
        return False
    counts = [
        (x, c)
        for x in pool
        if x.when is not None
        and x.when < e.when
        and _COUNT_AGAIN.search(x.text) is None
        and _COUNT_SETTLED.match(x.text) is None
        # (a count told beside a question: "party saturday?? thinking 30 people")
        and (c := _a_count(" ".join(t for t in sentences(x.text) if not is_question(t))))
        is not None
    ]
    if not counts:
        return False
    newest, counted = max(counts, key=lambda xc: xc[0].when or 0.0)
    if again is not None:
        what = again["what"]
        if what and what.lower() not in STOPWORDS and stems(what) != stems(counted["what"]):
            return False  # "back to 86 degrees" counts no guests
        return _part_of(newest.text, found.text)
    number = re.compile(rf"(?<![\d.,]){counted['n']}(?![\d.,]\d)")
    return _part_of(newest.text, found.text) or (
        newest.when is not None
        and newest.when <= found.when < e.when
        and number.search(found.text) is not None
    )


def _a_count(text: str) -> re.Match[str] | None:
    """The first count ``text`` gives ("30 people", "86 guests"), or None ("30 is a lot"
    counts nothing)."""
    return next((m for m in _A_COUNT.finditer(text) if m["what"].lower() not in STOPWORDS), None)


# "her number", "it's his car": a thing of someone else's, named by a pronoun.
_PRONOUN_OWNER = r"(?:it's\s+|its\s+)?(?:his|her|their)\s+"
# "actually her number is …": a correction of someone's thing, named by a pronoun.
_THEIRS_CORRECTED = re.compile(
    r"^\W*(?:actually|sorry|oops|whoops|my bad|correction|no wait|wait|no)\b[\s,:;.!-]*"
    rf"{_PRONOUN_OWNER}([\w' -]{{2,30}}?)\s+(?:is|are|was|were|'s)\b",
    re.I,
)
# "her number is …": a line said of such a thing.
_OF_THEIRS = re.compile(rf"^\W*{_PRONOUN_OWNER}[a-z]", re.I)
# "my sister's new number is …", "Tom's address is …": someone's thing, said of.
_THEIRS_SAID = re.compile(
    r"^\s*(?:my\s+|our\s+)?[\w-]+'s\s+([\w' -]{2,40}?)\s+(?:is|are|was|were)\b", re.I
)


def _corrects_theirs(text: str, before: str) -> bool:
    """Whether ``text`` corrects what ``before`` said of someone's thing, naming them by
    a pronoun: "actually her number is 07700 900999" after "my sister's new number is
    07700 900123" (not after "my number is …": that is the speaker's own)."""
    fix = _THEIRS_CORRECTED.match(text)
    said = _THEIRS_SAID.match(_LEAD.sub("", before))
    if fix is None or said is None:
        return False
    return bool(set(stems(fix[1].split()[-1])) & set(stems(said[1].split()[-1])))


# "the tomatoes were sown march 1 not feb 28, just checked my diary": "Y not X" ending
# a clause, X a date of two words as well as one word.
_NOT_THAT_CLAUSE = re.compile(
    THIS_NOT_THAT.pattern.split(r"\s*,?\s+not")[0]
    + r"\s*,?\s+not\s+(?:the\s+|a\s+|an\s+|on\s+)?(?P<old>[a-z]{3,9}\s+\d{1,2}(?:st|nd|rd|th)?\b|"
    r"\d{1,2}(?:st|nd|rd|th)?\s+[a-z]{3,9}\b|\d[\d:.]*(?:st|nd|rd|th|am|pm)?|[a-z][\w-]{2,})"
    r"\s*[,;]\s*\S",
    re.I,
)


_OWES = re.compile(r"\bowes?\b", re.I)
_PAID_BACK = re.compile(r"\b(?:paid|sent|transferred|settled|squared)\b", re.I)
# "dan paid me the 60 quid", "pica paid!! finally": who paid, opening the line.
_PAID_BY = re.compile(
    r"^\W*(?P<who>[a-z][\w'&-]*(?:\s+[a-z][\w'&-]*){0,2}?)\s+(?:has\s+|have\s+|finally\s+|"
    r"just\s+)*(?:paid|settled\s+up|transferred|sent\s+the\s+money)\b",
    re.I,
)


def _settles(e: Evidence, found: Evidence) -> bool:
    """Whether ``e`` says the debt ``found`` tells of was paid, by the one who owed it:
    Tom's "paid kofi the £15 now, we're square" after Kofi's "tom you still owe me £15"
    (who owed is named in the debt's line; whom it was paid, the one it was owed)."""
    if not (e.author and found.author):
        return False
    # ("can everyone pay me back …, £12.50 each" is a debt of each of them)
    asked = _debt_asked(found.text)
    of_all = asked and bool(_ALL_OF_YOU.search(found.text))
    if not (_OWES.search(found.text) or asked) or not _PAID_BACK.search(e.text):
        return False
    if e.author == found.author:
        # "dan paid me the 60 quid this morning" after "dan owes me £60", told by whom
        # it was owed: the one who paid is the one who owed.
        paid = _PAID_BY.match(_LEAD.sub("", e.text))
        owed = _OWES.split(found.text)[0]
        return (
            paid is not None
            and bool(who := set(stems(paid["who"])))
            and who <= set(stems(owed))
            and not is_question(e.text)
        )
    debtor = of_all or re.search(rf"\b{re.escape(e.author)}\b", found.text, re.I)
    creditor = re.search(rf"\b(?:{re.escape(found.author)}|you)\b", e.text, re.I)
    return debtor is not None and creditor is not None and not is_question(e.text)


# "anna moved it to friday 5:15", "it's been pushed to the 9th": a move of what was just
# said, naming it only as "it".
_MOVED_IT = re.compile(
    r"\b(?:moved|pushed|changed|switched|rescheduled|bumped|shifted|put)\s+(?:it|that)\b|"
    r"\b(?:it|that)(?:['\u2019]s|s|\s+is|\s+was|\s+got|\s+has\s+been)\s+(?:now\s+|been\s+)?"
    r"(?:moved|pushed|changed|rescheduled|bumped|shifted)\b",
    re.I,
)


# "can we move it to the 17th?": a move put to the others, which holds once one agrees.
_MOVE_ASKED = re.compile(
    r"\b(?:can|could|shall|should)\s+we\s+(?:move|push|change|switch|shift|bump|"
    r"reschedule)\s+(?:it|that)\b",
    re.I,
)
# "17th works for me", "fine by me", "sounds good": agreeing to what was put.
_AGREES = re.compile(
    r"^\W*(?:(?:[\w-]+\s+){0,3}(?:works|suits)(?:\s+for)?\s+(?:me|us)|fine\s+(?:by|with)\s+me|"
    r"sounds\s+(?:good|great|fine)|agreed|deal|yes|yep|yeah|sure|ok(?:ay)?|perfect)\b",
    re.I,
)
# "yeah no, i can't do that": agreeing words that go on to refuse.
_REFUSES = re.compile(r"\b(?:no|not|can'?t|cannot|won'?t|don'?t|doesn'?t|neither)\b", re.I)


def _agreements(e: Evidence, pool: Sequence[Evidence]) -> list[Evidence]:
    """Who agreed to the move ``e`` puts to the others ("can we move it to the
    17th?"), with the lines they agreed in; none when ``e`` puts none, or someone
    refused."""
    if e.when is None or not _MOVE_ASKED.search(e.text) or not _RESCHEDULED.search(e.text):
        return []
    after = sorted(
        (x for x in pool if x.when is not None and x.when > e.when and x.kind == "said"),
        key=lambda x: x.when or 0.0,
    )
    replies: list[Evidence] = []
    for x in after[:4]:  # the short answers right after it, up to its author's next line
        if x.author == e.author:
            break
        if _REFUSES.search(x.text):
            return []  # "i can't do the 17th"
        if len(words(x.text)) > 6 or not _AGREES.match(x.text):
            break
        replies.append(x)
    return replies


def _moves_it(found: Evidence, e: Evidence, pool: Sequence[Evidence]) -> bool:
    """Whether ``e`` moves the date ``found`` gives, naming it "it": said by the same
    person as their next line that gives a date ("next physio appt is friday 4pm",
    then "actually anna moved it to friday 5:15"), or put to the others as a question
    that one agreed to ("can we move it to the 17th?", "17th works for me")."""
    if found.when is None or e.when is None or e.when <= found.when:
        return False
    moved = _MOVED_IT.search(e.text) or _agreements(e, pool)
    if not (moved and _RESCHEDULED.search(e.text) and _DATED.search(found.text)):
        return False
    return not _said_between(found, e, pool, dated=True)


def _said_between(
    found: Evidence, e: Evidence, pool: Sequence[Evidence], *, dated: bool = False
) -> bool:
    """Whether ``found``'s author said another line (giving a date, when ``dated``)
    between ``found`` and ``e``: then "it" and a value taken back may be of that one."""
    return any(
        x.author == found.author
        and x.when is not None
        and found.when is not None
        and e.when is not None
        and found.when < x.when < e.when
        and not _part_of(x.text, found.text)
        and not _part_of(x.text, e.text)
        and (not dated or _DATED.search(x.text) is not None)
        for x in pool
    )


def _sets_right_next(found: Evidence, e: Evidence, pool: Sequence[Evidence]) -> bool:
    """Whether ``e`` takes back a value ``found`` gives, said by the same person as
    their next line: "actually he rang back, its friday not thursday now" after "plumber
    is coming thursday between 8 and 12" (nothing else of the line named)."""
    if found.when is None or e.when is None or e.when <= found.when:
        return False
    m = THIS_NOT_THAT.search(e.text) or _NOT_THAT_CLAUSE.search(e.text)
    if m is None or not _says_value(m["old"], found.text) or is_question(e.text):
        return False
    return not _said_between(found, e, pool)


def _mentions(name: str, text: str) -> bool:
    """Whether ``text`` names ``name`` (in any case, or its possessive)."""
    return re.search(rf"\b{re.escape(name)}(?:['\u2019]?s)?\b", text, re.I) is not None


# "he cant do thurs": a day taken back, as chat shortens it.
_CANT_DO_DAY = re.compile(
    # (said of someone else: "i cant do tues", "cant do tues, got my kid" are the speaker's
    # own absence, not a move of the line)
    r"\b(?!(?:i|we|you|u|so|and|but|actually|sorry|just|really|still|now)\b)[a-z]+\s+"
    r"(?:now\s+)?can['\u2019]?t\s+(?:do|make)\s+(?:it\s+)?(?:on\s+)?(?:the\s+)?"
    r"(?P<day>mon|tues?|wed|weds|thu|thur|thurs|fri|sat|sun|(?:mon|tues|wednes|thurs|fri|satur|"
    r"sun)day)\b",
    re.I,
)


def _says_value(old: str, before: str) -> bool:
    """Whether ``before`` says the value ``old`` a correction takes back: as a word of its
    own, a day or a date by its number ("the 14th" of "14 june"), or digits ending a
    longer number ("871" of "07700 900871")."""
    if re.fullmatch(r"\d+(?:st|nd|rd|th)", old, re.I):
        return re.search(rf"\b{old[:-2]}(?:st|nd|rd|th)?\b(?![:.]\d)", before, re.I) is not None
    start = r"(?:\b|(?<=\d))" if old.isdigit() else r"\b"
    return re.search(rf"{start}{re.escape(old)}\b", before, re.I) is not None


def _corrects_word(text: str, before: str) -> bool:
    """Whether ``text`` corrects a word ``before`` says, naming it: "correction, the key
    is silver, not brass" of Sam's "a mysterious brass key" (anyone in the chat may set
    that right: the word it takes back is named)."""
    m = re.search(
        r"(?:(?:\bcorrection\b|^\W*(?:actually|sorry|oops|my bad)\b).*,\s*not|"
        # "I'll take the kit this week instead of Rhys" (of Gary's "Rhys is washing it")
        r"\binstead\s+of)\s+(?:the\s+|a\s+|an\s+)?([\w-]{3,}(?:\s+[\w-]{3,})?)\s*[.!]?$",
        text,
        re.I,
    )
    if m is not None:
        return re.search(rf"\b{re.escape(m[1])}\b", before, re.I) is not None
    # "not thursday, ellie just said its friday now" of "plumber is coming thursday
    # between 8 and 12"; "she wants raspberry not lemon" of "mrs patel wants a 3 tier
    # lemon cake": the value taken back is named, and so is something else of the line
    # (not every line saying "lemon" is Mrs Patel's order).
    m = NOT_THAT.search(text) or THIS_NOT_THAT.search(text) or _NOT_THAT_CLAUSE.search(text)
    if m is None and (cant := _CANT_DO_DAY.search(text)) is not None:
        # "actually he cant do thurs, its friday 9am now" of "booked dave for thursday"
        day = re.escape(cant["day"])
        return re.search(rf"\b{day}\w*", before, re.I) is not None and not is_question(text)
    if m is None or not _says_value(m["old"], before):
        return False
    if not m["old"][0].isdigit() and not stems(m["old"]):
        return False  # "not now, I'm busy"
    rest = set(stems(text)) - set(stems(m["old"])) - _CORRECTING
    return m.re is NOT_THAT or bool(rest & set(stems(before)))


def _moves_shared(text: str) -> bool:
    """Whether ``text`` moves a date of something shared, which anyone in the chat may
    move: "date change — meeting moved to Friday June 6" by Omar changes Nina's "meeting
    is at my place on Thursday June 5"; "my dentist moved to Friday" is the speaker's."""
    moved = _RESCHEDULED.search(text)
    return moved is not None and not re.search(
        r"\b(?:my|i|i'm|i've)\b", text[: moved.start()], re.I
    )


_CALENDAR_STEMS = frozenset(t for w in CALENDAR_WORDS for t in stems(w))
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
# A day of a month, which is no amount: "1 november", "march 3rd".
_DAY_OF_MONTH = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b",
    re.I,
)
# "new scent launching 1 november: fig and cedar", "the blue one is called Harbour": a
# thing given a name, which other lines call by the thing.
_LABELLED = re.compile(
    r"^\W*(?P<label>[a-z][\w' -]{2,40}?)\s*:\s*(?P<name>[\w' &-]{3,40}?)\W*$|"
    r"^\W*(?P<label2>(?:the|my|our)\s+[\w' -]{2,30}?)\s+is\s+called\s+"
    r"(?P<name2>[\w' &-]{3,40}?)\W*$",
    re.I,
)


def _priced_by_its_label(
    question: str, found: Evidence, pool: Sequence[Evidence]
) -> Evidence | None:
    """The line giving the amount ``question`` asks of a thing by its name, when
    ``found`` gives no amount but names the thing ("how much is fig and cedar?" of
    "new scent launching 1 november: fig and cedar", then "price for the new scent is
    24"); None otherwise."""
    if not _HOW_MUCH.search(question) or _AN_AMOUNT.search(_DAY_OF_MONTH.sub(" ", found.text)):
        return None
    m = _LABELLED.match(found.text)
    if m is None:
        return None
    label, name = m["label"] or m["label2"], m["name"] or m["name2"]
    asked = set(stems(question))
    if not set(stems(name)) <= asked:
        return None  # the question names the thing by its name
    label_words = set(stems(label)) - _CALENDAR_STEMS - {t for t in stems(label) if t.isdigit()}
    best: Evidence | None = None
    for e in pool:
        if e is found or e.when is None or found.when is None or e.when < found.when:
            continue
        if not _AN_AMOUNT.search(_DAY_OF_MONTH.sub(" ", e.text)) or set(stems(name)) & set(
            stems(e.text)
        ):
            continue
        shared = label_words & set(stems(e.text))
        if len(shared) >= min(2, len(label_words)) and (best is None or e.when < (best.when or 0)):
            best = e
    return best


def _of_what_was_asked(found: Evidence, later: Evidence, question: str) -> bool:
    """Whether a change told ``later`` of one thing of the list ``found`` gives is of
    what ``question`` asks: "Where am I staying in Kyoto?" is not told that the Osaka
    hotel was cancelled; "Which hotels have I booked?", naming none, is."""
    asked = _named(question)
    if _MANY.match(question) and (mine := _proper(found.text)) and (other := _proper(later.text)):
        # "Which orders do we have?": Mrs Patel's moved pickup is of her order, not the
        # Harrisons' (each item is told apart by its names).
        if not mine & other:
            return False
    if asked & _proper(found.text) and (other := _proper(later.text)) and not asked & other:
        # "When is the Harrisons' pickup?" is not told that "Mrs Patel moved her pickup",
        # nor "Where is the Leeds gig?" that "the Sheffield gig got moved".
        return False
    changed = _proper(later.text) & _proper(found.text)
    if not changed or not _one_of_many(found.text, changed):
        return True
    return not asked or bool(asked & _proper(later.text))


def quoted_with_changes(found: Evidence, question: str, pool: Sequence[Evidence]) -> str:
    """``found`` quoted as an answer, with what its author said later that changes it,
    or, when it restates something, what it restates first ("Correction: butter is
    £6.40" alone does not say who supplies the butter)."""
    if (later := said_later(found, question, pool)) is not None:
        # "can we move it to the 17th?" holds as far as the others agreed to it
        agreed = "".join(f" {x.quoted()}" for x in _agreements(later, pool))
        return f"{found.quoted()} Later, {later.quoted()}{agreed}"
    if (before := said_before(found, pool)) is not None:
        return f"{before.quoted()} Later, {found.quoted()}"
    if found.when is not None and (CHANGED.search(found.text) or _RESCHEDULED.search(found.text)):
        # "how much is a croissant?" found "croissants are going up to £2.40 from next
        # month": what it changes comes first ("…, croissants £2.20 each").
        earlier = [
            e
            for e in pool
            if e.author == found.author
            and e.when is not None
            and e.when < found.when
            and not is_question(e.text)
            and not _part_of(e.text, found.text)
        ]
        # (a date moved is of a line giving one: "… on july 14 at 9:15", not "bring my
        # passport photos to the visa appointment")
        moves = _RESCHEDULED.search(found.text) is not None
        # (and of a line sharing a thing with it besides a name: "Biscuit's apoquel dose
        # went down to 8mg" changes "Biscuit takes Apoquel 16mg", not "Biscuit had a lump
        # removed")
        own = set(stems(found.text)) - _proper(found.text) - STOPWORDS - _CHANGE_TALK
        # (and of whom or what it names: "Nala's walk moved to 6.45am" changes "and nala,
        # jess's whippet, 7am", not "juniper's thursday walks are cancelled")
        named = {t for t in _proper(found.text) if t not in _lower_stems(found.text)}
        for e in sorted(earlier, key=lambda e: e.when or 0.0, reverse=True):
            if moves and not _DATED.search(e.text):
                continue
            if not own & set(stems(e.text)):
                continue
            if named and not named & set(stems(e.text)):
                continue
            if (after := said_later(e, question, pool)) is not None and after.text == found.text:
                return f"{e.quoted()} Later, {found.quoted()}"
    return found.quoted()


def _about_same(about: set[str], text: str, head: str = "") -> bool:
    """Whether ``text`` may say something new of ``about`` (the stems of what a line was
    said of, "my flight", its last word ``head``): not when it is said of another thing
    and only mentions it ("My total budget is 4,000 euros, not counting flights"), nor,
    saying of nothing, when it names the thing only in passing ("she's allergic to
    chicken, the vet thinks" says nothing new of "Our vet")."""
    moved = _PRICE_MOVED.search(text)
    if moved is not None and head and stems(head)[0] in set(stems(moved[0])):
        return True  # "i'm putting my legal rate up to 0.16 from april" of "my legal rate"
    subject = _SUBJECT.match(_LEAD.sub("", text))
    if subject is not None:
        return bool(about & set(stems(subject[1])))
    said_of = rf"\b{re.escape(head)}\w*\s+(?:is|are|was|were|has|have|had|will|now|changed|moved)\b"
    return not head or re.search(said_of, text, re.I) is not None


def _part_of(a: str, b: str) -> bool:
    """Whether one of two texts holds the other (a message and a memory saved from one
    of its sentences): neither says anything later than the other."""
    x, y = bare(a), bare(b)
    return bool(x) and bool(y) and (x in y or y in x)


def _same_said(a: str, b: str) -> bool:
    """Whether two texts say the same (a message and the memory saved from it, which
    the store dates later): equal but for case, spacing and punctuation."""
    return bare(a) == bare(b)


def said_before(found: Evidence, pool: Sequence[Evidence]) -> Evidence | None:
    """What ``found`` restates, when it says it does ("Correction: butter is £6.40 per
    kilo" of "Butter comes from Yeo Valley at £6.20 per kilo"), or calls off ("Jake
    cancelled his carrot cake order" of "Order from Jake Morris: carrot cake"): the
    newest such line of the same author, or None."""
    if found.when is None:
        return None
    restates = _restates(found.text)
    if not restates and not any(_cancelled(sent, once=True) for sent in sentences(found.text)):
        return None

    def ends(e: Evidence, sent: str) -> bool:
        # "Jake cancelled his carrot cake order": what was ordered
        return _replaces(found, sent) if restates else _calls_off(found, sent)

    earlier = [
        e
        for e in pool
        if e.author == found.author
        and e.when is not None
        and e.when < found.when
        and not is_question(e.text)
        and not _part_of(e.text, found.text)
        and any(ends(e, sent) for sent in sentences(e.text))
    ]
    return max(earlier, key=lambda e: e.when or 0.0) if earlier else None


def _of_the_moved(mover: str, text: str) -> bool:
    """Whether what a move names before its verb (``mover``: "chapter 2 deadline",
    "the visa appointment got") is of ``text``: the thing's words, its numbers with
    them, are all there; a move naming nothing but who moved it may be of anything."""
    thing = _MOVER_THING.match(mover.strip())
    if thing is None:
        return True
    words_ = {t for t in stems(thing[1]) if t not in STOPWORDS and t not in _MOVING}
    have = set(stems(text))
    # (one word may be put another way: "chapter 2 deadline" of "chapter 2 is due …";
    # never a number)
    missing = words_ - have
    return len(words_) < 2 or (
        len(missing) <= 1 and not any(c.isdigit() for m in missing for c in m)
    )


# The thing a move names before its verb: "chapter 2 deadline" of "chapter 2 deadline
# moved to 16 may" (not who moved it: "helen", "we", "anna").
_MOVER_THING = re.compile(
    r"^(?:(?:the|my|our|his|her|their)\s+)?((?:[\w-]+\s+){1,3}(?:deadline|appointment|appt|"
    r"meeting|date|session|lesson|class|call|interview|viewing|booking|exam|test|"
    r"launch|party|gig|match|game|trip|flight|visit|delivery|review|hearing|surgery|shift))\b",
    re.I,
)


def _changed_since(
    found: Evidence,
    e: Evidence,
    said: set[str],
    mine: bool,
    common: Collection[str] = (),
    asked: str = "",
) -> bool:
    """Whether ``e`` says what ``found`` tells changed: "We sold the Honda" after "I
    drive a grey Honda Civic" (a name both give), "Tariq moved from Glasgow to
    Edinburgh" after "Tariq lives in Glasgow", "I quit the library job" after "I work
    part time at the campus library" (both said of oneself, a word in common); "Rui
    doesn't work for us anymore" after "Our head baker Rui is allergic to sesame";
    "George's pills are at 9am now" after "George takes his pills at 8am" (two words in
    common)."""
    if (
        (moved := _RESCHEDULED.search(e.text))
        # (what moved is of it: "chapter 2 deadline moved to 16 may" is no move of "grant
        # deadline is 15 june")
        and _of_the_moved(_LEAD.sub("", e.text[: moved.start()]), found.text)
        and _DATED.search(found.text)  # a date it moves ("sign off before launch" has none)
        # (a payment's date is when it was paid: "the venue moved our date to june 21st"
        # does not move "we paid a £2,500 deposit for the venue on march 3")
        and not (_PAID.search(found.text) and not _PAID.search(e.text))
        # (a number both give is no thing in common: "ends at 12:30", "moved to 5:30")
        and {
            t
            for t in (said & set(stems(e.text))) - _WEEKDAYS - _NOT_SAID - _LIGHT - _MOVING - _SAME
            if not t.isdigit()
        }
    ):
        return True  # "we push the launch to Thursday" after "the launch is on Tuesday"
    if _CANCEL_VERB.search(e.text):
        # "Jake cancelled his carrot cake order" changes his carrot cake order only;
        # "I still haven't cancelled my gym membership" changes nothing.
        return _calls_off(e, found.text, asked)
    if (
        _PRICE_MOVED.search(e.text)
        and _AN_AMOUNT.search(found.text)
        and _AN_AMOUNT.search(e.text)
        and _proper(found.text) & set(stems(e.text))
    ):
        # "jess emailed, she's put her price up, it's €3,100 now" after "our photographer
        # is Jess Marsh, she quoted €2,800": someone named in it, a new amount.
        return True
    if not (CHANGED.search(e.text) or _no_longer(e.text) or _NOW.search(e.text)):
        return False
    # What says it changed: with "now", the clause saying "now" ("My budget is now 3,500
    # euros, I spent too much in Tokyo" changes no line about Tokyo).
    changing = e.text
    if not (CHANGED.search(e.text) or _no_longer(e.text)):
        changing = next((c for c in re.split(r"[,;]\s+", e.text) if _NOW.search(c)), e.text)
        if not {t for t in stems(changing) if not t.isdigit()} - _NOT_SAID - _CHANGE_TALK:
            # "seven seas updated their quote, its £1790 now": the clause saying "now"
            # gives only the value; what it is of is said before it.
            changing = e.text
    named, naming = _proper(found.text) - set(common), _proper(changing) - set(common)
    # "the Bloom deadline has moved to 19 March" changes no "Bloom paid INV-041" (what it
    # is said of, not who did it: "the doctor changed his amlodipine to 10mg").
    thing = _THING_CHANGED.match(_LEAD.sub("", changing))
    if thing and (what := set(stems(thing[1])) - STOPWORDS - naming) and not what & said:
        return False
    if thing and not set(stems(thing[1].split()[-1])) & said:
        return False  # "my day rate is going up" changes no "invoice … due in 30 days"
    if named & naming and _names_agree(found.text, changing):
        return True
    if named and naming:
        return False  # "Jake cancelled his cake order" changes no order of Mrs. Patel's
    if _NOW.search(e.text) and len(said & set(stems(changing)) - _NOT_SAID) >= 2:
        return True  # "George's pills are at 9am now" after "George takes his pills at 8am"
    if (
        _NOW.search(e.text)
        and _units(found.text) & _units(changing)
        and _same_doer(found.text, changing)
    ):
        return True  # "She's now 4.1 kg" after "She weighed 3.2 kg" (not "My parcel …")
    # (A month both give is no thing in common: "activate it on 7 April", "the ryokan
    # is 9 to 13 April instead".)
    common = said & set(stems(changing)) - _NOT_SAID - _WEEKDAYS - _LIGHT
    if CHANGED.search(e.text) and len(common) >= 2:
        return True  # "the doctor changed his amlodipine to 10mg, not 5mg"
    return mine and bool(_I_SAID.search(e.text)) and bool(common)


# A price said to have moved: "she's put her price up", "putting my legal rate up",
# "raised his rates", "the quote went down".
_PRICE_MOVED = re.compile(
    r"\b(?:put|puts|putting|bump(?:ed|ing|s)?|rais(?:ed|es|ing)|raise|upp(?:ed|ing)|"
    r"drop(?:ped|ping|s)?|lower(?:ed|ing|s)?)\s+(?:his|her|their|its|the|our|my)\s+"
    r"(?:[\w-]+\s+){0,2}?(?:prices?|rates?|fees?|quote)\b|"
    r"\b(?:prices?|rates?|fees?|quote)\s+(?:went|goes|has\s+gone|have\s+gone|is\s+going|"
    r"are\s+going)\s+(?:up|down)\b",
    re.I,
)
_THING_CHANGED = re.compile(
    r"^\s*(?:the|my|our|your)\s+([\w' -]{2,40}?)\s+(?:is|are|was|were|has|have|had)\b", re.I
)


def _names_agree(a: str, b: str) -> bool:
    """Whether two lines give a name of one: "Tom" and "Tom Becker" do, "New York" and
    "New Jersey" do not (a word in common, the names told apart)."""
    x, y = _full_names(a), _full_names(b)
    return any(p <= q or q <= p for p in x for q in y if p & q)


def _full_names(text: str) -> list[frozenset[str]]:
    """The names ``text`` gives, each the stems of its words: "New York" -> {new, york}."""
    out = []
    for s in sentences(text):
        for m in re.finditer(r"(?<![\w'])[A-Z][\w-]+(?:\s+[A-Z][\w-]+)*", s):
            words = [w for w in m[0].split() if w != "I" and not _opens(s, w)]
            if ws := frozenset(t for w in words for t in stems(w)):
                out.append(ws)
    return out


def _doer(text: str) -> set[str]:
    """Who or what ``text`` opens by telling of, as words: "She's now 4.1 kg" -> {she};
    "My sister Jo now runs 8 km" -> {sister, jo}; "My commute is 15 km" -> {commute}."""
    head = re.split(
        r"['\u2019]s\b|\s+(?:is|are|was|were|has|had|have|now|will|[a-z]+ed|[a-z]+s)\b",
        _LEAD.sub("", text).strip(),
        maxsplit=1,
    )[0]
    said = {w.lower() for w in re.findall(r"[\w-]+", head)} - {"my", "our", "the", "your"}
    return said


def _same_doer(a: str, b: str) -> bool:
    """Whether two lines open telling of the same one: the same words, or a name and a
    pronoun for it ("Biscuit weighed 3.2 kg", "She's now 4.1 kg")."""
    x, y = _doer(a), _doer(b)
    if x & y:
        return True
    pronouns = {"he", "she", "they", "it"}

    def named(d: set[str], text: str) -> bool:
        first = re.match(r"^\W*([A-Z][a-z]+)\b", _LEAD.sub("", text))
        return len(d) == 1 and first is not None and first[1].lower() not in STOPWORDS

    return (x <= pronouns and bool(x) and named(y, b)) or (
        y <= pronouns and bool(y) and named(x, a)
    )


def _units(text: str) -> set[str]:
    """The units ``text`` measures in: "3.2 kg" -> {kg} (money is said of everything)."""
    return {u.lower().rstrip("s") for u in _UNIT.findall(text)}


_UNIT = re.compile(
    r"\d[\d.,]*\s?(kg|g|lbs?|km|miles?|cm|mm|ml|litres?|liters?|stones?|kph|mph)\b", re.I
)


def _proper(text: str) -> set[str]:
    """The stems of the names in ``text``: capitalised words, a sentence's first too
    unless a common word opens it ("Nadia got a new job", not "We sold…")."""
    return {
        t
        for s in sentences(text)
        for w in re.findall(r"(?<![\w'])(?!I\b)[A-Z][\w-]+", s)
        if not _opens(s, w)
        for t in stems(w)
        if t not in _WEEKDAYS  # "Thursday" in both names no one thing
    }


def _opens(sentence: str, word: str) -> bool:
    """Whether ``word`` opens ``sentence`` as a common word does ("We sold…", "Actually,
    …"): capitalised there, it is no name."""
    return sentence.lstrip(" \"'(").startswith(word) and word.lower() in STOPWORDS | _OPENERS


# Words that open a sentence with a capital without being a name.
_OPENERS = frozenset(
    "actually also anyway btw but hey hi hello oh ok okay please so sorry thanks well yes "
    "yeah no not just maybe today tomorrow yesterday tonight".split()
)
# The mover is the speaker: "I moved to Lisbon", "we moved", not "Tariq moved to …".
_WE_MOVED = re.compile(
    r"\b(?:I|I've|we|we've)\s+(?:just\s+|finally\s+)?(?:moved|relocated)\b", re.I
)
# A date moved: "we push the launch to Thursday 11 March", "the deadline moves to 4 March".
_MOVE_VERBS = (
    "push pushes pushed pushing move moves moved moving delay delays delayed reschedule "
    "rescheduled postpone postponed bump bumped shift shifts shifted bring brought"
).split()
_RESCHEDULED = re.compile(
    rf"\b(?:{'|'.join(_MOVE_VERBS)})"
    r"\s+(?:[\w-]+\s+){0,4}?(?:to|back\s+to|forward\s+to|until)\s+(?:the\s+)?"
    r"(?:\d|(?:next\s+)?(?:" + "|".join(CALENDAR_WORDS) + r"))",
    re.I,
)
# The words that say a date moved: no thing two moves have in common ("the visa
# appointment got moved to july 21" is no move of "Carmen moved my thursday lesson").
_MOVING = frozenset(stems(" ".join(_MOVE_VERBS) + " actually"))  # (a correction's opening)
# A payment made: its date is when it was paid, which no move of a plan changes.
_PAID = re.compile(r"\b(?:paid|spent|deposit|bought|transferred)\b", re.I)
# "moved to 16th may, same time": no thing in common with "3 times a day"
_SAME = frozenset(stems("same time times"))
# "… now": a newer value of something said before ("George's pills are at 9am now").
_NOW = re.compile(r"\bnow\b", re.I)
# "Correction: butter is £6.40 per kilo", "Actually, swap that: my shifts are now…": a
# statement that says it replaces what was told of the same thing.
_RESTATED = re.compile(
    rf"^\W*(?:(?:actually|sorry|oops|ok|okay|so|oh)\b[,:;!.-]*\s*)*(?:{RESTATING})\b\s*[,:;!.-]",
    re.I,
)
# What a statement is about, before its verb: "the fridge engineer" (is coming…),
# "butter" (is £6.40…), "my shifts" (are now…); not "we" nor "I" (said of oneself).
_SUBJECT_OF = re.compile(
    r"^\s*(?:(?:the|my|our|your)\s+)?([\w' -]{2,40}?)\s+(?:is|are|was|were|has|have|had|"
    r"will|moved|changed|comes|come|came|got|goes|went|starts|start|costs|cost)\b",
    re.I,
)


def _subject(text: str) -> set[str]:
    """The stems of what ``text`` is about (see ``_SUBJECT_OF``); empty when it is the
    speaker, a name-less pronoun, or cannot be told."""
    m = _SUBJECT_OF.match(_LEAD.sub("", text))
    return set(stems(m[1])) - STOPWORDS - _WEEKDAYS if m else set()


def _replaces(e: Evidence, sent: str) -> bool:
    """Whether ``e`` restates or changes what ``sent`` (an earlier sentence of the same
    author) said of a thing: "Correction: butter is £6.40" after "Butter comes from Yeo
    Valley at £6.20"; "the engineer moved to Friday" after "The fridge engineer is coming
    Thursday".  A person moving ("Tariq moved to Leeds") replaces nothing said of them."""
    instead = _INSTEAD.search(e.text) is not None
    # ("… is thursday now" holds from now on: no earlier line need be in view for it
    # to answer, so it is no restatement to :func:`_unsure`.)
    if not (
        _restates(e.text)
        or _NOW_SO.search(e.text)
        or (CHANGED.search(e.text) and not _proper_subject(e.text))
    ):
        return False
    what = _subject(e.text)
    if what and what <= _subject(sent):
        return True
    if not instead:
        return False
    # "Actually, the pond will go by the greenhouse instead" of "We decided to put a
    # small pond by the apple tree"; "Dave can't do Thursday, he's coming on Monday
    # instead" of "the plumber Dave is coming on Thursday": what it is said of, or the
    # name it gives, is in the sentence it replaces.
    if what:
        return what <= set(stems(sent))
    return bool(_proper(e.text) & _proper(sent))


def _restates(text: str) -> bool:
    """Whether ``text`` says it replaces something said: "Correction: …", "… instead",
    "…, not the apple tree"; not one said on a condition ("If the match is cancelled
    we'll go to the cinema instead")."""
    if re.match(r"^\W*(?:if|unless|in case|should)\b", _LEAD.sub("", text), re.I):
        return False
    return _RESTATED.match(text) is not None or _INSTEAD.search(text) is not None


# "actually the lexicon leaflet deadline is thursday now", "the deadline is now the
# 12th": a value said to hold from now on, in place of the one told before.
_NOW_SO = re.compile(
    r"^\W*actually\b[^?]*\b(?:is|are|['\u2019]s)\s+(?:[^,.;!?]+\s+)?now\b(?!\s+that\b)|"
    r"\b(?:is|are)\s+now\s+(?!that\b|on\s+(?:my|the|our)\b)\w",
    re.I,
)


# "… instead", "…, not the apple tree": a statement saying it replaces what was said.
_INSTEAD = re.compile(
    r"\binstead\b|,\s*(?:and\s+)?not\s+(?:on\s+|at\s+|in\s+|by\s+)?(?:the|a|an)\b", re.I
)


def _proper_subject(text: str) -> bool:
    m = _SUBJECT_OF.match(_LEAD.sub("", text))
    return m is not None and m[1][:1].isupper() and m[1].split()[0].lower() not in STOPWORDS


_WEEKDAYS = frozenset(
    stems(
        " ".join(CALENDAR_WORDS)
        + " jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs"
        " fri sat sun"
    )
)


_DAYS = frozenset(stems(" ".join(CALENDAR_WORDS[:7])))  # monday … sunday
# A rule asked for, and a line stating one.
_RULE = frozenset(stems("rule rules policy"))
_RULE_SAID = re.compile(
    r"\b(?:must|mustn'?t|never|always|not allowed|no one may|nobody may|only ever|"
    r"have to|has to|don'?t ever)\b",
    re.I,
)
# (the words asked, a line saying them its own way, whether it must share the
# question's other words, the share of the word's weight it gets)
# A word and what it means: '"barrio" means neighbourhood' for "what's the spanish word
# for neighbourhood?".
_WORD = frozenset(stems("word words"))
_MEANS = re.compile(WORD_MEANS, re.I)
# Medicines asked for, and a line giving a dose.
_MEDS = frozenset(stems("meds medication medicine pills tablets drugs prescriptions"))
_A_DOSE = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:mg|mcg|µg|ml|iu|units?)\b|"
    r"\b(?:once|twice|\d|one|two|three|four)\s+(?:times?\s+)?(?:a|per|each)\s+day\b",
    re.I,
)
# A phone number, or the word for one (not a date written "2025-09-14").
_A_PHONE = re.compile(
    rf"\b(?:phone|mobile|cell|tel)\b|(?!\d{{4}}-\d\d-\d\d){PHONE_NUMBER.pattern}", re.I
)
# A job told: "started at brightwave logistics", "im a data analyst there", "works for
# the council".
_A_JOB = re.compile(
    r"\b(?:started|starting|start|working|works|work)\s+(?:at|for|with)\s+(?!home\b)[a-z]|"
    r"\bjob\s+(?:at|with|as)\b|\b(?:i'?m|im|i\s+am)\s+an?\s+[a-z]+(?:\s+[a-z]+)?\s+(?:at|there|for)\b",
    re.I,
)
# Something wrong with one's health: an ache, an injury, an illness.
_AILING = re.compile(
    r"\b(?:sprain\w*|injur\w*|hurt\w*|pain\w*|sore|ill|sick|poorly|flu|covid|broke|broken|"
    r"fractur\w*|physio\w*|dodgy|swollen|ache\w*|migraine\w*)\b",
    re.I,
)
# A sum paid by the month or week: "rent 850 a month", "£120/week".
_A_RATE = re.compile(
    r"\brent\b|\d\s*(?:a|an|per|/|each)\s*(?:month|week|mo|wk|year|yr|hour|hr)\b", re.I
)
_EMAIL_WORDS = frozenset(stems("email mail"))
_DIGITS = re.compile(r"\d{3,}")
_PHONE_WORDS = frozenset(stems("number phone mobile"))
# An email address: "ruth@keralawax.co.uk".
_AN_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
# The gaps inside a grouped number ("07700 900 462" is one number to look a part up in).
_DIGIT_RUN = re.compile(r"(?<=\d)[ ,](?=\d{3}\b)")
# Words asking whether a value still holds, of nothing in particular.
_NOW_ASKED = frozenset(stems("now again today tonight off"))
# A time of day given as one ("7pm", "19:30"), not "at 3" (a place, an age, a count).
_CLOCK_SAID = re.compile(CLOCK_TIME, re.I)
# Being in or out of what a group does: "im out thursday", "so jay's in then", "cant make
# it", "count me in", "sitting this one out".
_IN_OR_OUT = re.compile(
    r"\b(?:i['\u2019]?m|i\s+am|(?:s?he|it)['\u2019]?s|they['\u2019]?re|[a-z]+['\u2019]s)\s+"
    r"(?:(?:definitely|deffo|def|still|now)\s+)?(?:out|in)\b(?!\s+(?:the|a|an|my|our|his|her)\b)|"
    r"\bcan['\u2019]?t\s+(?:make|come|play|join)\b|\bcount\s+(?:me|him|her|us)\s+(?:in|out)\b|"
    r"\bsit(?:ting)?\s+(?:this\s+one\s+|it\s+)?out\b|\bno\s+(?:football|playing)\b",
    re.I,
)
# Asking to be paid back a sum: "can everyone pay me back for the internet, £12.50
# each", "can you send me the £20 for the tickets".
_PAY_ME = re.compile(
    r"\b(?:pay|paying|send|transfer|give)\s+(?:me|us)\b(?:\s+back\b)?|\bowe\s+(?:me|us)\b",
    re.I,
)


# The same with the sum it asks for: a debt, said as a request.
_PAID_BACK_ASKED = re.compile(
    rf"^(?=.*(?:{MONEY_AMOUNT.pattern})).*?(?:{_PAY_ME.pattern})", re.I | re.S
)
_SAID_THEIR_WAY = (
    (frozenset({_ADDRESS}), _STREET, False, 1.0),
    (_RULE, _RULE_SAID, True, 0.5),
    (_WORD, _MEANS, True, 1.0),
    # "what's the number?" of "his gp is dr fitzgerald …, phone 0161 496 0032"
    (frozenset(stems("number")), _A_PHONE, False, 1.0),
    # "how much does priya pay?" of "tenant is priya, rent 850 a month"
    (frozenset(stems("pay pays paying")), _A_RATE, True, 1.0),
    # "whats her email?" of "contact is ruth, ruth@keralawax.co.uk"
    (frozenset(stems("email mail")), _AN_EMAIL, False, 1.0),
    # "what meds does dad take?" of "he takes madopar 3 times a day", "amlodipine 5mg"
    (_MEDS, _A_DOSE, False, 1.0),
    # "where do i work?" of "started at brightwave logistics on monday, im a data analyst
    # there", over "my hypo kit lives in my work bag" (a bag, not a job)
    (frozenset(stems("work job")), _A_JOB, False, 1.25),
    # "what's wrong with priya?" of "my ankle is still a bit dodgy from the sprain"
    (frozenset(stems("wrong")), _AILING, False, 1.0),
    # "what time is kick off now?" of "goals moved us to 8pm": a start is said by its time
    (frozenset(stems("kick start starts begin begins")), _CLOCK_SAID, False, 1.0),
    # "is priya playing thursday?" of her "im out thursday"; "is jay coming?" of "jay's in"
    (frozenset(stems("playing coming joining")), _IN_OR_OUT, False, 1.0),
    # "who owes priya money?" of her "can everyone pay me back for the internet, £12.50 each"
    (frozenset(stems("owe owes owed owing")), _PAID_BACK_ASKED, False, 1.0),
)
# Verbs that say nothing of what moved: "the deadline got pushed", "the talk got moved".
_LIGHT = frozenset(stems("get got gets go goes went gone make made take took have has had"))
# Words a correction says whatever it sets right (not what it shares with its line).
_CORRECTING = (
    frozenset(
        stems(
            "not actually now just said says changed mind instead want wants need needs "
            "like likes come comes coming do does doing"
        )
    )
    | _LIGHT
)
# Words that say a value changed, not of what: "went down to 8mg from now on".
_CHANGE_TALK = (
    _MOVING
    | _LIGHT
    | frozenset(
        stems("change changed changes up down increase increased decrease decreased now from on")
    )
)


# Where someone lives, and the words that say it changed.
_MOVED = re.compile(r"\b(live|lives|living|based|home)\b", re.I)
_MOVED_TO = re.compile(
    r"\b(?:moved|moving|relocated|relocating)\s+(?:from\s+[\w' -]{1,40}?\s+)?"
    r"(?:to|into|back to)\b",
    re.I,
)

# "I don't live in Porto anymore", "I no longer drink coffee": what held before holds no
# more.  A clause at a time: "…, I moved to Lisbon" says something else.
_CLAUSE = re.compile(r"\s*(?:[,;:]|\s-\s|\bbut\b)\s*", re.I)
_NOT_SAID = frozenset(stems("anymore any more longer"))


def _no_longer(text: str) -> list[tuple[bool, set[str]]]:
    """What each clause of ``text`` says holds no more: whether it is said of the
    speaker, and its stems ("I don't live in Porto anymore" -> (True, {live, porto}));
    [] when it says nothing stopped."""
    return [
        (bool(_I_SAID.search(c)), set(stems(c)) - _NOT_SAID)
        for c in _CLAUSE.split(text)
        if NO_LONGER.search(c) and len(set(stems(c)) - _NOT_SAID) >= 2
    ]


# A medicine, a habit given up by name: "he stopped taking amlodipine", "I came off
# the sertraline".
_STOPPED_TAKING = re.compile(
    r"\b(?:stopped|stopping|came\s+off|come\s+off|quit)\s+(?:taking\s+|using\s+)"
    r"(?:(?:his|her|my|the|their)\s+)?([a-z][\w-]{3,})",
    re.I,
)


def retired(pool: Sequence[Evidence]) -> Callable[[Evidence, str], bool]:
    """Whether a sentence of an evidence in ``pool`` was said to hold no more by its
    author later: see :func:`retired_by`."""
    by = retired_by(pool)
    return lambda e, sent: by(e, sent) is not None


def retired_by(pool: Sequence[Evidence]) -> Callable[[Evidence, str], Evidence | None]:
    """The later line of its author in ``pool`` saying a sentence of an evidence holds
    no more, or None: "I live in Porto" or "I drink coffee every morning" after "I don't
    live in Porto anymore, I moved to Lisbon" and "I no longer drink coffee"; "I live
    in Porto" after "I moved to Lisbon"; "Order from Jake Morris: carrot cake" after
    "Jake cancelled his carrot cake order".  "My wife works at the bank" is not what "I
    don't work at the bank anymore" stopped.  (An answer quotes such a sentence when it
    fits best, and adds what was said later: :func:`said_later`.)"""
    stopped: list[tuple[Evidence, tuple[bool, set[str]]]] = []
    moved: list[Evidence] = []
    restated: list[Evidence] = []
    called_off: list[tuple[Evidence, _CalledOff]] = []
    corrections: list[Evidence] = []
    for e in pool:
        if is_question(e.text):
            continue
        if _RESTATED.match(e.text) or CHANGED.search(e.text) or _NOW_SO.search(e.text):
            restated.append(e)
        if NOT_THAT.search(e.text) or THIS_NOT_THAT.search(e.text):
            corrections.append(e)
        for sent in sentences(e.text):
            stopped += [(e, gone) for gone in _no_longer(sent)]
            # "he stopped taking amlodipine": every line of the amlodipine holds no more
            stopped += [
                (e, (bool(_I_SAID.search(sent[: m.start()])), set(stems(m[1]))))
                for m in _STOPPED_TAKING.finditer(sent)
                if stems(m[1])
            ]
            if _I_SAID.search(sent) and _MOVED_TO.search(sent):
                moved.append(e)
            called_off += [(e, off) for off in _cancelled(sent)]

    def later(e: Evidence, r: Evidence) -> bool:
        return not _same_said(r.text, e.text) and (
            e.when is None or (r.when is not None and r.when > e.when)
        )

    def by(e: Evidence, sent: str) -> Evidence | None:
        said = set(stems(sent))
        if not said:
            return None
        mine = bool(_I_SAID.search(sent))
        for r, (of_me, what) in stopped:
            if r.author == e.author and later(e, r) and of_me == mine and what <= said:
                return r
        # One thing of a list changed or called off leaves the others, and the line,
        # holding: "Tokyo … at Hotel Gracery, Kyoto … at Ryokan Yoshida-sanso, Osaka …
        # at Cross Hotel" after "I cancelled the Cross Hotel, staying at Hotel Nikko
        # instead" (an answer quoting it says what changed after it).
        for r in restated:
            if (
                r.author == e.author
                and later(e, r)
                and _replaces(r, sent)
                and not _one_of_many(sent, _proper(r.text) & _proper(sent))
            ):
                return r
        for r, off in called_off:
            # "Jake cancelled his carrot cake order" of "Order from Jake Morris: carrot
            # cake, …": what was called off, and whoever called it off.
            if (
                r.author == e.author
                and later(e, r)
                and off.of(sent, said)
                and not _one_of_many(sent, set(off.what - _PLAN_WORDS))
            ):
                return r
        # "not chess club, its coding club" of "he's doing chess club on tuesdays"
        # (anyone may set a line right, naming what it takes back)
        for r in corrections:
            if later(e, r) and _corrects_word(r.text, sent):
                return r
        lives = _I_SAID.search(sent) and _MOVED.search(sent) and not _MOVED_TO.search(sent)
        if lives:
            return next((r for r in moved if r.author == e.author and later(e, r)), None)
        return None

    return by


# "Jake cancelled his carrot cake order", "we called off the trip to Rome": what was
# called off, after the word that says so.
# The words that call something off, once for the three patterns that read them.
_CALLS_OFF = r"cancell?ed|called\s+off|calls\s+off|scrapped"
_CALLED_OFF = re.compile(
    rf"(?:\b(?:{_CALLS_OFF}|cancels)|"
    # "actually scrap the prosecco, …": one's own plan called off as it is changed
    r"^\W*(?:(?:actually|ok|okay|so|oh|wait|change\s+of\s+plans?)\W+)+"
    r"(?:scrap|cancel|drop|ditch|skip)|"
    # "scratch the ISRS abstract, decided not to go", "scratch that about uncle ray"
    r"^\W*(?:(?:actually|ok|okay|so|oh|wait)\W+)*(?:scratch|scrap)(?:\s+that\s+about)?"
    r"(?=\s+(?!that\b|it\b|this\b)))\s+"
    r"(?:(?:my|the|our|his|her|their|this|that)\s+)?(?P<what>[^,.;:!?]{2,60})",
    re.I,
)
_IS_CALLED_OFF = re.compile(
    r"(?:^|[,;:]\s*|\b(?:so|and|but)\s+)(?:(?:the|my|our|his|her|their|this|that)\s+)?"
    r"(?P<what>[^,.;:!?]{2,50}?)\s+(?:is|are|was|were|has\s+been|have\s+been|got)\s+"
    rf"(?:now\s+|just\s+|been\s+)?(?:{_CALLS_OFF})\b",
    re.I,
)
# "shacklewell arms cancelled on us": the thing (or who was to hold it) called it off.
_CANCELLED_ON = re.compile(
    r"(?:^|[,;:]\s*|\b(?:so|and|but)\s+)(?:(?:the|my|our|his|her|their|this|that)\s+)?"
    r"(?P<what>[^,.;:!?]{2,50}?)\s+(?:cancell?ed|pulled\s+out|bailed)"
    # ("scratch that the okafors cancelled": on whom is not said)
    r"(?:\s+on\s+(?:us|me|them)\b|\s*(?:[,.;!]|$))",
    re.I,
)
# "the harris drone thing is off", "game's off lads": a plan said to be off (not "the
# heating is off").
_IS_OFF = re.compile(
    r"(?:^|[,;:]\s*|\b(?:so|and|but|that)\s+)(?:(?:the|my|our|his|her|their|this|that)\s+)?"
    r"(?P<what>[^,.;:!?]{2,50}?)(?:\s+(?:is|are)|['\u2019]s)\s+"
    r"(?:now\s+|definitely\s+|officially\s+)?off\b"
    r"(?!\s+(?:to|for|work|sick|school|the|on|at|in|with)\b)",
    re.I,
)
_CALLED_OFF_END = re.compile(r"\s+(?:because|since|so|and|but|as|after|due)\b.*$", re.I)
_CANCEL_VERB = re.compile(rf"\b(?:{_CALLS_OFF}|cancell?(?:ing|s)?)\b", re.I)
# Where a sentence tells of more than one thing: "I have yoga on Mondays and piano
# lessons on Wednesdays", "Book club is on Thursday, then dinner with Sam".
_THINGS_GAP = re.compile(r"\s+and\s+|\s*;\s*|,\s*then\s+|\s+&\s+", re.I)
# What says it did not happen, or not yet, or only might: "I still haven't cancelled my
# gym membership", "If the match is cancelled…", "I almost cancelled my trip".
_NOT_CALLED_OFF = re.compile(
    r"n't\b|\b(?:not|never|almost|nearly|if|whether|unless|might|may|maybe|should|could|"
    r"would|will|going to|want to|wants to|thinking|about to|in case)\b",
    re.I,
)
# Called off once, not for good: "School is cancelled tomorrow", "… cancelled this week".
_ONCE = re.compile(
    r"\b(?:today|tomorrow|tonight|this\s+(?:week|weekend|morning|afternoon|evening|time|term|"
    r"month|season|semester|year|"
    + "|".join(CALENDAR_WORDS[:7])
    + r")|next\s+(?:week|"
    + "|".join(CALENDAR_WORDS[:7])
    + r"))\b",
    re.I,
)
# Words that only say what kind of plan a thing was: "the annual report project" is the
# "annual report design" told before.
_PLAN_WORDS = frozenset(
    stems(
        "order booking reservation appointment plan plans project session class lesson "
        "meeting trip visit subscription membership event thing"
    )
)
_OFF_PLANS = _PLAN_WORDS | frozenset(
    stems("gig party trip wedding match game deal show dinner drinks add-on holiday")
)


@dataclass(frozen=True, slots=True)
class _CalledOff:
    """A thing a line says was called off: its words, the names said with it (who
    called it off), and the days it names (it is that day's)."""

    what: frozenset[str]
    who: frozenset[str]
    days: frozenset[str]
    head: str  # its last word, as written ("order")

    def of(self, sent: str, said: set[str], partly: bool = False) -> bool:
        """Whether ``sent`` (its stems ``said``) tells of the thing called off: all its
        words (one that only says what kind of plan it was may be missing), its names,
        its day; not one item of a list ("Spotify and Netflix" stays but for Spotify),
        unless ``partly``: a list of which one thing was called off is of it too."""
        missing = self.what - _with_kin(said)  # ("game's off" of "fixture … tuesday 8pm")
        if missing and self.what <= _ORDERS and any(_ordered_by(name, sent) for name in self.who):
            missing = frozenset()  # "dan cancelled his order" of "dan wants 24 cupcakes"
        if missing and not (len(missing) == 1 and missing <= _PLAN_WORDS and len(self.what) > 1):
            return False
        if self.days and not self.days & said:
            return False
        for name in self.who:
            # "Jake cancelled his cake order" is not "Order from Jake's mum: birthday cake".
            his = rf"\b{re.escape(name)}\b(?!['\u2019]s\s+(?:{'|'.join(sorted(_FAMILY))})\b)"
            if re.search(his, sent, re.I) is None:
                return False
        # A line telling of more than the thing called off stays: "I pay for Spotify and
        # Netflix" after "I cancelled Spotify"; "Tokyo … at Hotel Gracery, Kyoto … at
        # Ryokan Yoshida-sanso, Osaka … at Cross Hotel" after "I cancelled the Cross
        # Hotel" (a part after a comma opening with a name is another thing; "Order from
        # Jake Morris: carrot cake, 20 June, £32" is one).
        parts = _THINGS_GAP.split(sent)
        core = self.what - _PLAN_WORDS
        return partly or len(parts) == 1 or all(core <= set(stems(p)) for p in parts)


_ORDERS = frozenset(stems("order booking reservation"))
# Words one thing goes by: a five-a-side "fixture" is the "game" and the "match".
_SAME_THING = tuple(
    frozenset(stems(group))
    for group in (
        "game match fixture",
        "gig show concert",
        "doctor gp",
        "holiday vacation",
        "flat apartment",
    )
)


def _with_kin(said: Collection[str]) -> set[str]:
    """``said`` (stems) with every other word of the things it names: "fixture" with
    "game" and "match"."""
    out = set(said)
    for group in _SAME_THING:
        if group & out:
            out |= group
    return out


def _ordered_by(name: str, sent: str) -> bool:
    """Whether ``sent`` tells what ``name`` ordered, without the word: "dan wants 24
    cupcakes for saturday", "Mrs Patel booked the back room"."""
    return (
        re.match(
            rf"^\W*(?:[\w.]+\s+)?{re.escape(name)}\s+(?:\w+ly\s+)?(?:wants?|ordered|booked|reserved|"
            r"asked\s+for|needs?|would\s+like|'d\s+like)\b",
            sent,
            re.I,
        )
        is not None
    )


def _one_of_many(sent: str, thing: set[str]) -> bool:
    """Whether ``sent`` lists other things beside the one whose stems are ``thing``: a
    part after a comma opening with a name, without the thing ("Tokyo … at Hotel
    Gracery, Kyoto … at Ryokan Yoshida-sanso, Osaka … at Cross Hotel" of the Cross
    Hotel); "Order from Jake Morris: carrot cake, 20 June, £32" lists nothing else."""
    items = [p.strip() for p in sent.split(",")]
    return any(not thing <= set(stems(p)) and _ANOTHER_ITEM.match(p) for p in items[1:])


# A part of a list after a comma that opens with a name: another thing of the list.
_ANOTHER_ITEM = re.compile(
    rf"(?!(?:I|{'|'.join(w.capitalize() for w in CALENDAR_WORDS)})\b)[A-Z][\w'-]*\s+\S"
)


def _written_names(text: str) -> set[str]:
    """The names ``text`` gives, as written: capitalised words but a sentence's opener."""
    return {
        w
        for w in re.findall(r"(?<![\w'])(?!I\b)[A-Z][\w-]+", text)
        if not _opens(text, w) and w.lower() not in STOPWORDS
    }


def _calls_off(r: Evidence, text: str, asked: str = "", partly: bool = False) -> bool:
    """Whether ``r`` says what a sentence of ``text`` told was called off, for good or
    once ("Thursday training is cancelled this week"), or with ``partly`` one thing of
    what it lists ("scrap the prosecco" of "3 cases of prosecco and cordial")."""
    offs = [off for s in sentences(r.text) for off in _cancelled(s, once=True)]
    # Called off once ("School is cancelled tomorrow") is news for a question about it
    # ("What school does Leo go to?"), not for any question of the line ("What year…?").
    if asked and _ONCE.search(r.text):
        offs = [off for off in offs if off.what & set(stems(asked))]
    return any(off.of(x, set(stems(x)), partly) for x in sentences(text) for off in offs)


# "… cancelled his order": the thing is its subject's; and that subject, one word.
_THEIRS = re.compile(r"\b(?:his|her|their)\s+\S", re.I)
_SUBJECT_WORD = re.compile(r"(?:^|[,;:.!]\s*|\b(?:and|but|so|oh|ok)\s+)([a-z][a-z'-]+)\s+$", re.I)


def _cancelled(sent: str, once: bool = False) -> list[_CalledOff]:
    """What ``sent`` says was called off ("Jake cancelled his carrot cake order": the
    carrot cake order, Jake's); [] when it calls nothing off for good: "She cancelled"
    (who?), "if it is cancelled", "I haven't cancelled it", and, unless ``once``,
    "cancelled tomorrow"."""
    if NO_LONGER.search(sent) or is_question(sent) or (_ONCE.search(sent) and not once):
        return []
    found = []
    for m in _CALLED_OFF.finditer(sent):
        before = sent[: m.start()]
        if _NOT_CALLED_OFF.search(before) or re.search(r"\b(?:he|she|they|it)\s*$", before, re.I):
            continue
        thing = _CALLED_OFF_END.sub("", m["what"]).strip()
        who = _written_names(before)
        if not who and _THEIRS.search(m[0]) and (owner := _SUBJECT_WORD.search(before)):
            # "dan cancelled his order", written small: Dan's order, not every order
            # ("remind me to order more eggs" stays a to-do).
            if owner[1].lower() not in STOPWORDS:
                who = {owner[1]}
        found.append((thing, who, sent))
    if (passive := _IS_CALLED_OFF.search(sent)) is not None and not _NOT_CALLED_OFF.search(
        sent[: passive.end()]
    ):
        # "Saturday's match is cancelled": the thing is said before.
        found.append((passive["what"].strip(), set(), sent))
    # (after what opens it: "scratch that the okafors cancelled")
    opened = _LEAD.sub("", sent)
    if (on := _CANCELLED_ON.search(opened)) is not None and not _NOT_CALLED_OFF.search(
        opened[: on.end()]
    ):
        found.append((on["what"].strip(), set(), sent))
    if (
        (off := _IS_OFF.search(sent)) is not None
        and off["what"].split()
        and set(stems(off["what"].split()[-1])) & _OFF_PLANS
        and not _NOT_CALLED_OFF.search(sent[: off.end()])
    ):
        found.append((off["what"].strip(), set(), sent))
    out = []
    for thing, who, _ in found:
        words = set(stems(thing))
        what = words - STOPWORDS - _WEEKDAYS
        if what:
            head = thing.split()[-1].removesuffix("'s") if thing.split() else ""
            days = words & _WEEKDAYS
            out.append(_CalledOff(frozenset(what), frozenset(who), frozenset(days), head))
    return out


# What comes before the question itself: "Quick one - ", "Hey Tierbot, ", "Let's see, ".
_LEADING = re.compile(
    r"^[^?]{0,40}?[,:;\u2013\u2014-]\s+(?=(?:what|where|when|who|whom|whose|how|which|why|is|"
    r"are|do|does|did|can|could)\b)",
    re.I,
)

#: How the lines settling a plan open ("whats the plan?").
PLAN_SO_FAR = "Here is what was settled so far: "
VOTES_SO_FAR = "Votes so far: "
# Asked who is in: "who's in for tuesday", "who's playing?", "how many do we have".
_ROSTER_ASKED = re.compile(
    r"\bwho(?:['\u2019]s|s|\s+is|\s+are)\s+(?:(?:in|out)(?=\s*(?:$|[^\w\s]|\s(?:for|this|"
    r"tonight|tomorrow|on|then|now|so\s+far)\b))|playing|coming|available)\b|"
    r"\bhow\s+many\s+(?:do\s+we\s+have|have\s+we\s+got|we\s+got|are\s+(?:we|in|playing|"
    r"coming)|of\s+us\s+are)\b",
    re.I,
)
# What may follow "in" when it means being in: nothing, a comma, an emoji, "for tuesday".
_IN_ENDS = (
    r"(?=\s*(?:$|[^\w\s]|\s(?:too|again|for|this|tonight|tomorrow|then|now|mate|lads|guys|"
    r"x+)\b))"
)
_SAYS_IN = re.compile(
    rf"^\W*(?:me\s+)?in{_IN_ENDS}|"
    rf"\b(?:i['\u2019]?m|im|i\s+am)\s+(?:(?:definitely|deffo|def|still|now|back)\s+)?in{_IN_ENDS}|"
    r"\bcount\s+me\s+in\b",
    re.I,
)
_SAYS_OUT = re.compile(
    rf"\b(?:i['\u2019]?m|im|i\s+am)\s+(?:(?:definitely|deffo|def|still|now)\s+)?out{_IN_ENDS}|"
    r"\bcan['\u2019]?t\s+(?:do|make|come|play|join)\b|\bcount\s+me\s+out\b|"
    r"\bsit(?:ting)?\s+(?:this\s+one\s+|it\s+)?out\b",
    re.I,
)


def _roster(pool: Sequence[Evidence]) -> str | None:
    """Who said they are in and who out, each by their last word on it ("cant do tues"
    then "actually … i'm in" is in); None when nobody said."""
    said = sorted((e for e in pool if e.kind == "said" and e.author), key=lambda e: e.when or 0)
    status: dict[str, tuple[bool, str]] = {}
    for e in said:
        if is_question(e.text):
            continue
        at_in = [m.start() for m in _SAYS_IN.finditer(e.text)]
        at_out = [m.start() for m in _SAYS_OUT.finditer(e.text)]
        if at_in or at_out:
            status[e.author.lower()] = (max(at_in, default=-1) > max(at_out, default=-1), e.author)
    if not status:
        return None
    ins = [who for is_in, who in status.values() if is_in]
    outs = [who for is_in, who in status.values() if not is_in]
    said_in = f"In: {_and_listed(ins)} ({len(ins)})." if ins else "Nobody has said they're in."
    return said_in + (f" Out: {_and_listed(outs)}." if outs else "")


def _and_listed(names: Sequence[str]) -> str:
    """ "Dev, Gaz and Ruth": names as a sentence lists them."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


# Asked how a vote stands: "whats the vote so far?", "who's winning?", "vote count?".
_VOTES_ASKED = re.compile(
    r"\bwhat(?:['\u2019]s|s|\s+is|\s+are)\s+the\s+votes?\b|\bvotes?\s+(?:so\s+far|count|tally)|"
    r"\bhow\s+many\s+votes\b|^\W*(?:so\s+)?(?:what|who|which)(?:['\u2019]s|s|\s+is)?\s+winning\W*$|"
    r"\bhow\s+(?:is|does)\s+the\s+vote\b",
    re.I,
)
# What a vote is put to: "the shortlist is piranesi, the marriage portrait and demon
# copperhead", "options are …", "vote between …".
_OPTIONS = re.compile(
    r"\b(?:short\s*list|options|choices|candidates)\s+(?:is|are|so\s+far\s+(?:is|are))\s*:?\s+"
    r"(?P<list>.+)$|\b(?:vote|choose|pick)\s+(?:between|from)\s*:?\s+(?P<list2>.+)$",
    re.I,
)
# A vote cast: "i vote piranesi", "my vote is …", "marriage portrait for me", "piranesi
# too", "+1 for piranesi".
_VOTE_CAST = re.compile(
    r"^\W*(?:(?:i|we)\s+(?:vote|am\s+voting|'m\s+voting|m\s+voting)(?:\s+for)?|my\s+vote\s+"
    r"(?:is|goes\s+to)|\+1(?:\s+for)?|vote(?:\s+for)?)\s+(?P<x>[^,.!?;]{2,40}?)\W*$|"
    r"^\W*(?P<y>[^,.!?;]{2,40}?)\s+(?:for\s+me|from\s+me|too|as\s+well|gets\s+my\s+vote)\W*$",
    re.I,
)


def _votes(pool: Sequence[Evidence]) -> str | None:
    """How the latest vote stands: each option with its count and who chose it, each
    voter's last vote counting (the options from the line that put them, when one
    did); None when nobody voted."""
    said = sorted((e for e in pool if e.kind == "said" and e.author), key=lambda e: e.when or 0)
    put = [k for k, e in enumerate(said) if _OPTIONS.search(e.text)]
    start = put[-1] if put else 0
    options: list[str] = []
    if put:
        m = _OPTIONS.search(said[start].text)
        listed = (m["list"] or m["list2"]) if m else ""
        options = [o.strip(" .!?") for o in re.split(r",\s*|\s+and\s+|\s+or\s+", listed)]
        options = [o for o in options if stems(o)]
    chosen: dict[str, tuple[str, str]] = {}  # voter -> (option, voter's name)
    for e in said[start:]:
        m = _VOTE_CAST.match(_LEAD.sub("", e.text))
        if m is None or is_question(e.text):
            continue
        if m["y"] and not options:
            continue  # "i'm coming too" votes for nothing: no options were put
        picked = (m["x"] or m["y"]).strip()
        if re.fullmatch(r"(?:me|same|ditto|this|that|it)", picked, re.I):
            continue
        if options:
            best = max(options, key=lambda o: len(set(stems(o)) & set(stems(picked))))
            if not set(stems(best)) & set(stems(picked)):
                continue
            picked = best
        chosen[e.author.lower()] = (picked, e.author)
    if not chosen:
        return None
    tally: dict[str, list[str]] = {}
    for option, who in chosen.values():
        key = next((k for k in tally if set(stems(k)) == set(stems(option))), option)
        tally.setdefault(key, []).append(who)
    ranked = sorted(tally.items(), key=lambda kv: -len(kv[1]))
    parts = [f"{option} {len(who)} ({_and_listed(who)})" for option, who in ranked]
    if options:
        parts += [f"{o} 0" for o in options if o not in tally]
    return VOTES_SO_FAR + "; ".join(parts) + "."


# Asked for the plan as a whole: "whats the plan?", "what did i miss?", "catch me up",
# "can you tell ben the plan?".
_RECAP = re.compile(
    r"\bwhat(?:['\u2019]s|s|\s+is)\s+the\s+plan\b|\bwhat\s+did\s+(?:i|we)\s+miss\b|"
    r"\b(?:catch|fill)\s+(?:me|us|him|her|them|[a-z]+)\s+(?:up|in)\b|"
    r"\btell\s+(?:me|us|him|her|them|[a-z]+)\s+the\s+plan\b",
    re.I,
)


def _the_plan(pool: Sequence[Evidence], limit: int = 6) -> list[str]:
    """The lines of ``pool`` that settle a plan (a decision, an event, a to-do taken on,
    a fact of it), quoted with what changed them: the newest ``limit``, in the order
    said; none when nothing was settled."""
    picked: list[Evidence] = []
    for e in pool:
        if e.kind in ("branch", "summary") or is_question(e.text) or e.author.endswith(BOT_MARK):
            continue
        kind = e.memory_type or classify(e.text)[0]
        if kind not in ("decision", "event", "todo", "fact"):
            continue
        if any(_part_of(e.text, x.text) for x in picked):
            continue
        picked.append(e)
    picked.sort(key=lambda e: e.when or 0.0)
    return [quoted_with_changes(e, "what is the plan?", pool) for e in picked[-limit:]]


#: How lines saying what someone needs to do open, when no to-do was kept.
NO_TODOS_BUT = "You haven't asked me to remember a to-do, but you said:"
# A thing one needs to do, said in passing: "…, need to order more", "i have to ring them".
_NEED_DONE = re.compile(
    r"\b(?:i\s+|we\s+)?(?:still\s+)?(?:need|needs|have|got|gotta)\s+to\s+(?!be\b|say\b)\w|"
    r"\b(?:i|we)\s+(?:must|should)\s+(?!be\b)\w",
    re.I,
)


def _needs_told(speaker: str, pool: Sequence[Evidence], limit: int = 5) -> list[Evidence]:
    """The asker's lines saying what they need to do (newest last), none of them a
    question, a to-do or called off since."""
    out: list[Evidence] = []
    for e in pool:
        if e.author != speaker or e.kind in ("branch", "summary") or is_question(e.text):
            continue
        if not _NEED_DONE.search(e.text) or said_later(e, "what do i need to do?", pool):
            continue
        if any(_part_of(e.text, x.text) for x in out):
            continue
        out.append(e)
    return out[-limit:]


#: A list whose every line was said to hold no more (what says so follows).
NONE_CURRENT = "Nothing that still holds, as far as I know."
#: How the list of what someone told opens.
ABOUT_YOU = "Here is what you told me: "
#: How the rest of it opens, when asked "what else?".
ABOUT_YOU_MORE = "You also told me: "
ALL_TOLD = "That is everything you told me that I kept."
WHAT_ELSE_OF_WHAT = (
    'What else about what? Ask me the whole question, such as "what else do you know '
    'about me?" or "what else did Ana say about the trip?".'
)
LIST_LOST = (
    "(The list I just gave has already left this conversation's view, so I cannot tell "
    "what I listed: here it is from the top.) "
)
LIST_UNSEEN = (
    "(I cannot see an earlier list in this conversation's view, so here it is from the top.) "
)
_MORE_ITEM = re.compile(r"^and (\d+) more (?:things|thing)\b")
_KNOWN_OF = re.compile(
    r"^(?:(?:What I know|Also) about ([A-Z][\w-]+)|([A-Z][\w-]+) (?:also )?said): "
)
_WHAT_ELSE = re.compile(r"^\W*(?:and\s+)?(?:what|anything)\s+else\W*$", re.I)
_ELSE = re.compile(r"\belse\b", re.I)


def _things(n: int) -> str:
    return "thing" if n == 1 else "things"


def _listed(messages: Sequence[ChatMessage]) -> list[str]:
    """The things the bot's latest replies listed of what the asker told (the list,
    then each "what else?" answer after it), so "what else?" does not repeat them, and
    how many more the newest of them said there were ("and 3 more things")."""
    out: list[str] = []
    for m in reversed(messages):
        if m.role != "assistant" or m.tool_calls:
            continue
        if m.content.startswith(ALL_TOLD):
            continue
        head = next((p for p in (ABOUT_YOU, ABOUT_YOU_MORE) if m.content.startswith(p)), None)
        if head is None:
            break
        items = m.content.removeprefix(head).removesuffix(CUT_SHORT).split("; ")
        # Only the newest page's "and 3 more things" counts what is left.
        out += [i.strip(" .!") for i in items if not (out and _MORE_ITEM.match(i))]
    return out


def _shown_of(messages: Sequence[ChatMessage], name: str) -> set[str]:
    """The sentences the bot's latest replies quoted of ``name`` ("What I know about
    Rin: …", then each "Also about Rin: …"), so "what else?" does not repeat them."""
    out: set[str] = set()
    for m in reversed(messages):
        if m.role != "assistant" or m.tool_calls:
            continue
        of = _KNOWN_OF.match(m.content)
        if of is None or (of[1] or of[2]) != name:
            break
        out.update(re.findall(r"«([^»]+)»", m.content))
        if m.content.startswith("What I know") or m.content.startswith(f"{name} said:"):
            break
    return out


def _last_reply(messages: Sequence[ChatMessage]) -> str:
    """The bot's last reply in ``messages``, or ""."""
    return next(
        (m.content for m in reversed(messages) if m.role == "assistant" and not m.tool_calls),
        "",
    )


def _told_part(e: Evidence) -> Evidence | None:
    """What ``e`` tells, without the questions it asks ("What is my locker code? Also, my
    new phone number is 555-1234." tells the number); None when it only asks."""
    if (
        _ASKS_THE_BOT.match(e.text)
        or _JUST_THANKS.match(e.text)
        or cant_do_asked(_without_the_bot(e.text))
    ):
        return None  # "I would like you to help me keep track of my medicines": no fact
    if not is_question(e.text) and not any(is_question(s) for s in sentences(e.text)[1:]):
        return e  # ("nice one kofi!! how much is it this time" asks, without a "?")
    if _debt_asked(e.text):
        return e  # "can everyone pay me back …, £12.50 each" tells a debt
    told = [t for s in sentences(e.text) if (t := _told_in(s))]
    return replace(e, text=" ".join(told)) if told else None


# "cheers priya, got it": thanks, which tell nothing ("what's wrong with priya?").
_JUST_THANKS = re.compile(
    r"^\W*(?:thanks|thank you|thx|cheers|ty|ta|nice one|legend)\b[\w\s,!.']{0,25}$", re.I
)
# What someone asks the bot to do for them, which tells nothing of them.
_ASKS_THE_BOT = re.compile(
    r"^\W*(?:(?:hi|hello|ok|okay|so)\W+)?(?:i(?:'d|\s+would)\s+like\s+you\s+to|i\s+want\s+you\s+"
    r"to|(?:please\s+)?help\s+me\s+(?:keep\s+track|remember|track|organi[sz]e)|can\s+you\s+"
    r"help\s+me)\b[^.!?]*[.!?]?\s*$",
    re.I,
)


def _told_in(sentence: str) -> str:
    """What ``sentence`` tells: all of it, nothing of a question, what comes before one
    put to someone ("I'm doing flowers and the cake, Rosa can you handle…?")."""
    if not is_question(sentence):
        return sentence
    head = _ASKING_NEXT.split(sentence, maxsplit=1)[0]
    # ("Where did I park, Sam can you remember?" tells nothing.)
    return head if head != sentence and not is_question(head) else ""


# A ticket, a version, a build: a name with a digit in it ("INC-1042", "JIRA-77").
_TICKET = re.compile(r"\b[A-Z][A-Za-z]*-\d+\b")
# Who "he" is not, and who "she" is not (as names stem).
_WOMEN = frozenset(t for w in WOMEN for t in stems(w))
_MEN = frozenset(t for w in MEN for t in stems(w))
# A line said of someone named before it: "He also takes…", "She also asked for…".
_HE_SAID = re.compile(r"^\W*(?:he|she|his|her)\b", re.I)
_NAME_IS = re.compile(r"^\W*(?:his|her) name(?:'s| is)\b", re.I)
#: How far back (lines, seconds) a line may be of the ticket a line before it names.
_THREAD_LINES, _THREAD_SECONDS = 3, 900.0


def _thread_of(pool: Sequence[Evidence], k: int, overlap: Overlap) -> set[str]:
    """The stems of what ``pool[k]`` is of without naming it: the ticket the nearest
    line before it names, when said shortly before it (a line of a thread need not
    repeat its ticket); for a line starting "He"/"She", whom the same person's line
    before it named, a man for "he", a woman for "she"."""
    e, out = pool[k], set[str]()
    if e.when is None:
        return out
    if named := set(_TICKET.findall(e.text)):
        # "Bloom Florist paid INV-041 today!" is of "I invoiced Bloom Florist £1,150,
        # invoice number INV-041": what the line first naming the ticket said of it.
        first = next((x for x in pool[:k] if named & set(_TICKET.findall(x.text))), None)
        if first is not None:
            out.update(overlap.query_stems(first.text))
    for before in reversed(pool[max(0, k - _THREAD_LINES) : k]):
        if _TICKET.search(e.text):
            break  # it names its own
        if before.when is None or not 0 <= e.when - before.when <= _THREAD_SECONDS:
            continue
        if tickets := _TICKET.findall(before.text):
            # the nearest ticket named: "INC-1043: DNS" takes over from INC-1042
            for ticket in tickets:
                out.update(overlap.query_stems(ticket))
            break
    if _HE_SAID.match(_LEAD.sub("", e.text)):
        # "He also takes amlodipine every morning" after "Dad takes metformin…": of Dad,
        # not of "Mum called" said between them.
        she = _LEAD.sub("", e.text).lstrip(" \"'(").lower().startswith(("she", "her"))
        not_them = _MEN if she else _WOMEN
        said = [
            (x, names)
            for x in pool
            if x.author == e.author
            and x.when is not None
            and 0 < e.when - x.when <= _THREAD_SECONDS
            # ("Her name is Biscuit" says who she is; "She also asked…" does not)
            and (not _HE_SAID.match(_LEAD.sub("", x.text)) or _NAME_IS.search(x.text))
            and not is_question(x.text)
            and (names := (_proper(x.text) | _subject_names(x.text)) - not_them)
        ]
        # Whom a line is of: a name it opens with or says is the name ("My neighbour
        # Carol has offered…", "Her name is Biscuit"), over one it only gives ("Our vet
        # is Dr Amelia Fox" is of the vet, a line later "She eats…" of Biscuit).
        subject = [(x, own) for x, _ in said if (own := _subject_names(x.text) - not_them)]
        if subject or said:
            _, names = max(subject or said, key=lambda xn: xn[0].when or 0.0)
            out.update(t for name in names for t in overlap.query_stems(name))
    return out


def _subject_names(text: str) -> set[str]:
    """The names ``text`` opens with, before its verb, or says someone is called."""
    told = _LEAD.sub("", text)
    if (named := _NAME_IS.match(told)) is not None:
        return _proper(told[named.end() :].split(",")[0])
    head = re.split(r"\s+(?:is|are|was|were|has|had|have|will|can|'s)\b|\s+[a-z]+s\b", told)[0]
    # ("My mum is visiting": of Mum, a name or not.)
    return _proper(head) | (set(stems(head)) & _FAMILY)


def best(
    question: str, pool: Sequence[Evidence], strict: bool = False
) -> tuple[Evidence | None, float]:
    """The evidence that best answers ``question``: see :func:`best_all`."""
    found, score, _ = best_all(question, pool, strict)
    return found, score


def best_all(
    question: str,
    pool: Sequence[Evidence],
    strict: bool = False,
    context: frozenset[str] = frozenset(),
) -> tuple[Evidence | None, float, list[Evidence]]:
    """The evidence that best answers ``question`` (questions are never answers); later
    evidence wins ties: it is the most recent thing said about the topic, unless it is a
    long ramble and the other a message of ordinary length (a paragraph that mentions
    "Mia starting school" in passing holds the question's words as well as "Mia starts
    school on September 3rd" does).  ``strict``, for a question that only asks "when?"
    or "where?" of another ("And where?", "What else?"): only a line giving a date, a
    place or a person answers it.  With it, for a question asking for several of a kind
    ("What exams do I have?"), the other lines of that kind that answer it nearly as
    well, oldest first.  ``context``: the stems of what the same message asked just
    before ("the venue" of "What's the venue and how much was the deposit?"); of lines
    answering as well, one sharing them is of that."""
    pool = [told for e in pool if (told := _told_part(e)) is not None]
    if not pool:
        return None, 0.0, []
    question = _CALLED.sub(r"\1's name\2", question)
    # (not "what do we need to do?": that asks of what it is said after)
    needs = _NEED_TO.search(question) is not None and not _TO_DO.search(question)
    if needs:
        # ("what do i need to order?" asks what to order: "i need help tracking custom
        # orders" needs something else)
        question = re.sub(r"\b(?:need|have|got)\s+to\b", "to", question, flags=re.I)
    overlap = Overlap([e.text for e in pool])
    # Who or what the question is about weighs more than what it asks of them: "How
    # old is Sofia?" is about Sofia, not about whatever is old; "my landlord's number"
    # about the landlord, not any number.
    named = _named(question)
    # A day it names counts as a name does: "Who's on call thursday?" is about Thursday
    # (whoever took it), more than about the one line saying "call".
    named |= overlap.query_stems(question) & _DAYS
    # Someone of the chat, their name written small ("when does sam work?"), is named.
    named |= overlap.query_stems(question) & {
        t for e in pool if e.author and e.kind != "summary" for t in stems(e.author)
    }
    scores = overlap.scores(question, boost=named)
    # "What is Emma doing?" is answered by what Emma said of herself ("I'm doing the
    # flowers"): whom it names is its author.
    # "When is ben's party?" (or "bens party") by Ben's "my party is on saturday".
    whose = [
        (m[1].lower(), set(stems(m[2])))
        for m in re.finditer(r"\b([\w-]{2,}?)(?:['\u2019]s|s)\s+([\w-]+)", question)
    ]
    for k, e in enumerate(pool):
        if not e.author or not (of := set(stems(e.author)) & named) - overlap.doc_stems[k]:
            continue
        theirs = {
            t
            # ("my party is…", "my new flat", "party at mine")
            for m in re.finditer(
                r"\bmy\s+(?:([\w-]+)\s+)?([\w-]+)|\b([\w-]+)\s+(?:at|is)\s+mine\b", e.text, re.I
            )
            for w in m.groups()
            if w
            for t in stems(w)
        }
        own = any(who == e.author.lower() and thing & theirs for who, thing in whose)
        # of herself (her ankle too): not "My son is allergic to nuts"
        if own or _I_SAID.search(e.text) or _MY_BODY.search(e.text):
            scores[k] = overlap.score(question, overlap.doc_stems[k], boost=named, held=of)
    # "What games do we play?" is answered by what "we play", over "game night is…".
    # ("What time do I take atorvastatin?" asks of the atorvastatin, not of what I take)
    doing = _DOING.search(question)
    if doing is not None and re.match(r"\s*(?:\w+ly\s*)?\W*$", question[doing.end() :]) is None:
        doing = None
    if doing is not None and doing[1].lower() != "you":
        who, verb = doing[1], stems(doing[2])
        said = re.compile(rf"\b{re.escape(who)}\s+(?:\w+\s+)?{re.escape(doing[2][:3])}", re.I)
        for k, e in enumerate(pool):
            if verb and said.search(e.text) and set(verb) <= overlap.doc_stems[k]:
                scores[k] += overlap.idf.get(verb[0], 1.0)
    # "What is my garage code?" is not answered by "My gym code is 9090", nor "How old
    # is Max?" by Rex's age: see _Asked.fits.
    asked = _Asked.of(question, overlap)
    # "What was the root cause of INC-1042?": a thread about a ticket names it once, in
    # its first line; the lines just after it are of it too.
    near = [_thread_of(pool, k, overlap) for k in range(len(pool))]
    if asked.amount and asked.words & _MONEY:
        # "How much have I spent?": "flights cost $1,450 already" says, in its own word.
        for k, e in enumerate(pool):
            theirs = overlap.doc_stems[k] & _MONEY
            if theirs and not theirs & asked.words and _AN_AMOUNT.search(e.text):
                scores[k] += min(overlap.idf.get(t, 1.0) for t in theirs)
    # A word asked for that a line says in its own way: "What's the address?" of "14
    # Birch Lane, apartment 3B"; "What's the rule for nut products?" of "anything with
    # nuts must go on the blue trays" (of what else the question names, for half weight).
    for words_, says, of_the_rest, weight in _SAID_THEIR_WAY:
        if not (asked_word := asked.words & words_) or (says is _IN_OR_OUT and not asked.confirm):
            continue  # ("where are we playing?" is not "so jay's in then")
        word = next(iter(asked_word))
        rest = asked.words - words_ - _ASKED_OF_IT
        if says is _CLOCK_SAID and rest - _STILL - _NOW_ASKED:
            # "when does the match kick off?" is the match's start, not yoga's 7pm; "what
            # time is kick off now?" in a chat where one thing kicks off is that one.
            continue
        for k, e in enumerate(pool):
            # (an email given and named gives it too: "ruth's email is now ruth@kwax.com"
            # over "contact is ruth, ruth@keralawax.co.uk")
            if (
                says.search(e.text)
                and (word not in overlap.doc_stems[k] or says is _AN_EMAIL)
                and (not of_the_rest or rest & overlap.doc_stems[k])
            ):
                near[k] = near[k] | {word}
                scores[k] += overlap.idf.get(word, 1.0) * weight
    if asked.duration and "long" in asked.words:
        # "How long is Kofi out?": a line giving a duration says "long" its own way.
        for k, e in enumerate(pool):
            if "long" not in overlap.doc_stems[k] and _A_DURATION.search(e.text):
                near[k] = near[k] | {"long"}
                scores[k] += overlap.idf.get("long", 1.0)
    if _WHEN.search(question) and (
        coming := {t for m in _COMING.finditer(question) for t in stems(m[0])}
    ):
        # "when does the flour come?" asks when the flour does ("they deliver every
        # monday"): a line giving a day or a date, of what is asked, says the coming.
        of_what = set(overlap.query_stems(question)) - coming
        for k, e in enumerate(pool):
            held = coming - overlap.doc_stems[k]
            if (
                held
                and of_what & overlap.doc_stems[k]
                and (_DATED.search(e.text) or overlap.doc_stems[k] & _WEEKDAYS)
            ):
                near[k] = near[k] | held
                scores[k] += overlap.score(question, set(), boost=named, held=held)
    # A thing asked by another of its words: "is the game still on?" of "fixture this
    # week is tuesday 8pm".
    for k in range(len(pool)):
        if kin_of := (asked.words & _with_kin(overlap.doc_stems[k])) - overlap.doc_stems[k]:
            near[k] = near[k] | kin_of
            scores[k] += overlap.score(question, set(), boost=named, held=kin_of)
    # A word no line says, where a line says a word of its family: "who's doing the
    # electrics?" of "the electrician is priya", "the inspection" of "building inspector
    # visit is on april 2nd".
    said_anywhere = set().union(*overlap.doc_stems) if overlap.doc_stems else set()
    for word in overlap.query_stems(question) - said_anywhere:
        for k in range(len(pool)):
            if any(kin(word, t) for t in overlap.doc_stems[k]):
                near[k] = near[k] | {word}
                scores[k] += overlap.score(question, set(), boost=named, held={word})
    # "whats going on with order 4419?": a number of three digits or more names the one
    # asked of (an order, a flat, a ticket); a line without it is of another ("costs
    # went up" shares only "go").
    ids = set() if asked.confirm else {n for n in re.findall(r"\d+", question) if len(n) >= 3}
    fits = [
        k
        for k in range(len(pool))
        if asked.fits(pool[k], overlap.doc_stems[k] | near[k])
        # (a thread's line is of the ticket its first line names: see _thread_of)
        and ids
        <= set(re.findall(r"\d+", _DIGIT_RUN.sub("", pool[k].text) + " " + " ".join(near[k])))
    ]
    if not fits:
        return None, 0.0, []
    if asked.when:
        # "When is Lucia back from leave?": a line giving a date ("out on leave until
        # June 2nd") over one that only shares words ("Lucia's replacement during
        # leave is Omar"), unless it shares far fewer.
        top = max(scores[k] for k in fits)
        dated = [k for k in fits if _DATED.search(pool[k].text) and scores[k] >= top / 2]
        fits = dated if strict else dated or fits
    elif asked.who:
        # "Who is our team lead?": a line naming someone ("Our team lead is Priya") over
        # one that only shares words ("I moved to the platform team"), unless it shares
        # far fewer.
        top = max(scores[k] for k in fits)
        # (A name that is the line's subject names no one: "Flat 3 is empty".)
        someone = [
            k
            for k in fits
            if _proper(pool[k].text) - asked.names - _subject(pool[k].text) and scores[k] >= top / 2
        ]
        fits = someone if strict else someone or fits
    elif strict and _WHERE.match(question):
        fits = [k for k in fits if _PLACE.search(pool[k].text)]
    if not fits:
        return None, 0.0, []
    if _MANY.match(question) and (
        of_kind := [k for k in fits if asked.kind & overlap.doc_stems[k]]
    ):
        fits = of_kind  # "What allergies do the kids have?": a line about an allergy
    # "Where do I live?" is asked of the asker: "I live in Porto" over "My sister lives…".
    mine = bool(_ASKED_OF_ME.search(question))
    # Of lines sharing as much with the question: the one about what it asks of ("Flat
    # 2 is rented by Jess", not "The boiler in flat 2 is broken", for "Who lives in flat
    # 2?"), and for "where", one saying where ("at the library", not "before next lesson").
    asked_of = set(overlap.query_stems(question))
    where = _WHERE.match(question) is not None
    money = asked.price or _HOW_MUCH_MONEY.search(question) is not None
    # "who is the gp and what's the number?": a line of the gp's giving a number answers
    # the second part nearly as well as the care agency's "office number is …" does,
    # and it is the one asked about.
    top = max((scores[k] for k in fits), default=0.0)
    who_is = _WHO_IS.match(question)
    # "what do i need to order?": a to-do ("remind me to order more eggs") over a line
    # that needs something else ("i need help tracking custom orders").
    i = max(
        fits,
        key=lambda k: (
            bool(context & overlap.doc_stems[k]) and scores[k] >= _CONTEXT_SHARE * top,
            needs
            and scores[k] >= _CONTEXT_SHARE * top
            and (pool[k].memory_type or classify(pool[k].text)[0]) == "todo",
            # "who is rachel?": the line saying who she is ("the coordinator is called
            # rachel"), over one only naming her ("send rachel the shot list").
            who_is is not None and scores[k] >= top / 2 and _says_who(who_is[1], pool[k].text),
            round(scores[k], 6),
            # "How much are we getting for Sheffield?": a line giving a sum, over its move.
            money and _MONEY_SAID.search(pool[k].text) is not None,
            # "What book are we reading?": a line naming a book, over "I've read it twice".
            bool(asked.kind & overlap.doc_stems[k]),
            # "Where am I staying in Kyoto?": a line naming a hotel, over the tea ceremony
            # in Kyoto.
            bool(asked.words & _STAYING) and _LODGING.search(pool[k].text) is not None,
            where and _PLACE.search(pool[k].text) is not None,
            bool(subject := _subject(pool[k].text)) and subject <= asked_of,
            mine and bool(_I_SAID.search(pool[k].text)),
            len(context & overlap.doc_stems[k]),
            -_rambling(pool[k].text),
            pool[k].when or 0.0,  # recalled memories come first in the pool, not in time
            k,
        ),
    )
    found, score = pool[i], scores[i]
    also: list[Evidence] = []
    if _MANY.match(question):
        unnamed = asked.kind_unsaid or not any(asked.kind & overlap.doc_stems[k] for k in fits)
        for k in sorted(fits, key=lambda k: pool[k].when or 0.0):
            e = pool[k]
            if (
                k != i
                and scores[k] >= _ALSO_SHARE * score
                # ("Which characters are level 4?", no line saying "character": each
                # line answering nearly as well is one)
                and (asked.kind & overlap.doc_stems[k] or unnamed)
                # a message and the memory saved from it are one line
                and not any(_part_of(e.text, x.text) for x in [found, *also])
            ):
                also.append(e)
    # "My PIN is 1234. My door code is 9876.": asked for the door code, quote the
    # sentence that answers, when it holds every word of the question the message does.
    parts = (
        [p.strip() for s in joined(sentences(found.text)) for p in s.split(";") if p.strip()]
        if found.kind != "branch"
        else []
    )
    if len(parts) > 1:
        part = max(parts, key=lambda p: overlap.score(question, p))
        # "We stopped buying eggs from Hollow Farm; we switched to Wyke Farms": what
        # stopped is half the answer, what replaced it follows.
        if overlap.score(question, part) >= score - 1e-9 and not _STOPPED.search(part):
            found = replace(found, text=part)
    return found, score, also


# "who is rachel?", "who's tiago": whom a name is.
_WHO_IS = re.compile(r"^\W*who(?:'s|\s+is|\s+was)\s+([A-Za-z][\w'-]+)\W*$", re.I)


def _says_who(name: str, text: str) -> bool:
    """Whether ``text`` says who ``name`` is: "the coordinator is called rachel", "flat
    agent is tiago", "rachel is our planner", "tiago, the agent"."""
    n = re.escape(name)
    return (
        re.search(
            rf"\b(?:called|named|is|'s)\s+{n}\b(?!\s+(?:is|was|has|had|will|and)\b)|"
            rf"\b{n}\s*(?:is|,)\s+(?:the|my|our|his|her|their|a|an)\s+\w|"
            # "my lab mate kieran is helping me with the R stats"
            rf"^\W*(?:my|our)\s+(?:[\w-]+\s+){{1,2}}{n}\b",
            text,
            re.I,
        )
        is not None
    )


# "What exams do I have?", "Which decisions did we make?": several of a kind asked for.
_MANY = re.compile(
    r"^\W*(?:what|which)\s+(?:[a-z][\w-]*\s+)?[a-z][\w-]*[^s\W]s\s+"
    r"(?:do|does|did|have|has|are|were|is)\b",
    re.I,
)
_TO_DO = re.compile(r"\bto\s+do\b", re.I)
# "what do i need to order?", "what do we have to buy?": a to-do asked for.
_NEED_TO = re.compile(
    r"^\W*what\s+(?:do|does|did|should|must)\s+(?:i|we)\s+(?:still\s+)?(?:need|have|got)\s+to\b",
    re.I,
)
#: How well, against the best, a line of what the message asked before must answer a
#: part that names nothing of its own to be its answer.
_CONTEXT_SHARE = 0.5
#: How well, against the best, another line must answer to be listed beside it, and
#: how many may be.
_ALSO_SHARE, _ALSO_MOST = 0.5, 4
_STOPPED = re.compile(r"\b(?:stopped|quit|dropped|ditched|gave up)\b", re.I)
# "what games do we play", "what does Jess play": who does what the question asks of.
_DOING = re.compile(
    r"\b(?:do|does|did)\s+(we|I|you|they|he|she|[A-Z][\w-]+)\s+(?:\w+ly\s+)?([a-z]{3,})\b"
)


def _current(
    question: str, items: Sequence[Evidence], pool: Sequence[Evidence]
) -> tuple[list[Evidence], list[Evidence]]:
    """Of the lines listed for ``question``, those that still hold, and the lines of
    ``pool`` saying the others hold no more ("Jake cancelled his carrot cake order" of
    "Order from Jake Morris: carrot cake"): a line saying so is no item of the list."""
    by = retired_by(pool)
    asked = set(stems(question))

    def gone(e: Evidence) -> Evidence | None:
        sents = sentences(e.text)
        said = [s for s in sents if asked & set(stems(s))] or sents
        why = [by(e, s) for s in said]
        return why[0] if why and all(why) else None

    retiring = [r for e in pool for s in sentences(e.text) if (r := by(e, s)) is not None]
    kept: list[Evidence] = []
    since: list[Evidence] = []
    for e in items:
        why = gone(e)
        if why is not None or any(r is e or _same_said(r.text, e.text) for r in retiring):
            why = why or e
            if not any(_same_said(why.text, x.text) for x in since):
                since.append(why)
        else:
            kept.append(e)
    return kept, since


def _listed_quotes(quotes: list[str]) -> str:
    """Several quoted answers as one: "you said on 2026-11-27: «A»; «B»" when each was
    said by the same person the same day, else each in full ("…» Also, Ben said …")."""
    heads = [q.split(": «", 1)[0] for q in quotes]
    if len(set(heads)) == 1 and all(q.count("«") == 1 for q in quotes):
        return f"{heads[0]}: " + "; ".join(q[len(heads[0]) + 2 :] for q in quotes)
    return " Also, ".join(quotes)


def _short(said: str, most: int = 30) -> str:
    """What was saved, as the reply says it back: a long text by its first words and an
    ellipsis, so the reply shows it was cut (the memory holds it all)."""
    words = said.split()
    return said if len(words) <= most else " ".join(words[: most - 5]).rstrip(",;:") + " (…)"


def _rambling(text: str) -> int:
    """0 for a message of ordinary length, 1 for a long one, 2 for a paragraph."""
    n = len(text.split())
    return 0 if n <= 40 else 1 if n <= 80 else 2


def _known_name(speaker: str, pool: Sequence[Evidence]) -> str:
    """The name ``speaker`` gave ("I'm Dana"), newest first; else their display name
    unless it is a placeholder like the console's "you"."""
    for e in reversed(pool):
        if (e.author and e.author != speaker) or is_question(e.text):
            continue  # "who said 'I'm Jo'?" gives nobody a name
        if name := _name_given(e.text):
            return name
    return "" if speaker.lower() in ("", "you", "user", "me") else speaker


def _name_given(text: str) -> str:
    """The name ``text`` gives its speaker ("I'm Dana", "hey im jonas"), capitalised,
    or ""."""
    for m in _NAME_SAID.finditer(text):
        word = m[1].lower()
        if word in _NOT_NAMES or word in _NATIONALITIES:
            continue
        if m[1][0].isupper() or _NAMING.match(m[0]) or lower_case_name(text) == m[1]:
            return m[1][:1].upper() + m[1][1:]
    return ""


def _about(
    speaker: str,
    pool: Sequence[Evidence],
    limit: int = 10,
    kinds: Sequence[str] = _SAVABLE,
    more: int = 0,
) -> list[str]:
    """What ``speaker`` told about themselves and kept, said back to them: who they are
    and what they like before their plans and the facts they mentioned, newest first.
    Of several values of one thing ("my locker code is 4411", later "… is 5522"), the
    newest is told.  ``more`` things known but not in ``pool`` are said to be there."""
    found: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    gone = retired_by(pool)
    # A thing moved ("Biscuit's booster vaccine is due on october 3", then "actually
    # the booster moved to october 10"): the move is told in its place, as what it was
    # (a to-do stays on the to-do list), and not again on its own.
    moved: dict[int, str] = {}
    for e in pool:
        if e.author != speaker or e.kind in ("branch", "summary"):
            continue
        by = gone(e, e.text)
        if (
            by is not None
            and (CHANGED.search(by.text) or _RESCHEDULED.search(by.text))
            and not (_CANCEL_VERB.search(by.text) or _no_longer(by.text))
        ):
            moved[id(e)] = by.text
    told_in_place = {bare(t) for t in moved.values()}  # (a line and its memory alike)
    for age, e in enumerate(reversed(pool)):
        if e.author != speaker or e.kind in ("branch", "summary"):
            continue
        if bare(e.text) in told_in_place:
            continue
        # (read as the saves read it: "…, want to keep notes here" is no part of it)
        for sent in joined(sentences(e.text)):
            if e.kind == "said" and not e.memory_type and classify(sent)[0] is None:
                continue  # (not kept as said: "lol my cat keeps sitting on my foam roller")
            sent = _TAIL.sub("", _LEAD.sub("", sent))
            was = e.memory_type or classify(sent)[0]
            if id(e) in moved:
                sent = _TAIL.sub("", _LEAD.sub("", moved[id(e)]))
            elif gone(e, sent) is not None:
                continue  # "I live in Porto", then "I don't live in Porto anymore"
            asked = read_request(sent)  # "Also remember that Sam likes jazz."
            if asked is not None and asked.kind == "remember":
                sent = asked.what
            kind = was if id(e) in moved else e.memory_type or classify(sent)[0]
            if kind is None and (asked is not None or e.requested):
                kind = "fact"
            key = " ".join(sorted(set(stems(sent))))
            # "the flight number is JL 8" is the newer value of "our flight number…"
            subject = _SUBJECT.match(sent) or _THE_SUBJECT.match(sent)
            topic = " ".join(stems(subject[1])) if subject else ""
            if kind is None or kind not in kinds or key in seen or (topic and topic in seen):
                continue
            if kind == "todo" and _done_since(e, sent, pool) is not None:
                continue  # "sent the save the dates yesterday", said after it was asked
            if _OWES.search(sent) and any(
                _settles(r, replace(e, text=sent))
                for r in pool
                if r.when is not None and (e.when is None or r.when > e.when)
            ):
                continue  # "dan owes me £60", then "dan paid me the 60 quid this morning"
            seen.update([key, topic] if topic else [key])
            said = _TODO_LEAD.sub("", sent) if kind == "todo" else sent
            found.append((_SAVABLE.index(kind), age, to_second_person(said)))
    told = [text for _, _, text in sorted(found)]
    # (a memory cut from a line told whole: "Jess starts earlier now" of "Nala's walk
    # moved to 6.45am, jess starts earlier now")
    told = [
        t for t in told if not any(t != u and t.lower().strip(" .!") in u.lower() for u in told)
    ]
    if len(told) > limit or (more and told):
        # Said, not silently cut: the rest can be asked for by name.
        cut = told[: limit - 1] if len(told) > limit else told
        more += len(told) - len(cut)
        return [
            *cut,
            f"and {more} more {_things(more)} (ask me about "
            f"{'it' if more == 1 else 'any of them'}, or what else I know about you)",
        ]
    return told


# "can everyone …", "could you all please …": the asking, said as what they are to do
# ("everyone to pay me back …").
_ASKED_OF_ALL = re.compile(
    r"^\W*(?:(?:hey|ok|okay|so|guys|right|also)\W+)*(?:can|could|would|will)\s+"
    r"(everyone|everybody|you all|you guys|y'?all|all of you)\s+(?:please\s+|pls\s+)?",
    re.I,
)


def _debt_asked(text: str) -> bool:
    """Whether ``text`` asks the others, or one of them by name, to pay its speaker a sum
    it names ("can everyone pay me back …, £12.50 each", "dan can you pay me back the
    £15"): a debt told; not "can you send me £20", asked of the bot."""
    return _PAID_BACK_ASKED.search(text) is not None and (
        _ALL_OF_YOU.search(text) is not None
        or _PUT_TO.match(text) is not None
        or _PUT_TO_KNOWN_SMALL.search(text) is not None
    )


def _plan_saves(
    at: int, m: ChatMessage, tools: set[str], before: Sequence[ChatMessage]
) -> list[ToolCall]:
    """The memory calls one person's message asks for: an explicit request, a
    correction of what they just said, or its durable statements."""
    speaker = m.name or "someone"
    request = read_request(m.content)
    if request is None and _FORGET_IT.match(m.content) and "memory_forget" in tools:
        # "Forget it", right after saying something: that is what to forget.
        said = _last_said(speaker, before)
        return [ToolCall(f"{_FORGET_LAST}{at}", "memory_forget", {"query": said})] if said else []
    if request is None and "memory_forget" in tools and (deleted := _deletes_told(m, before)):
        # "Please delete the sandbox API token", after telling it: a forget.
        return [ToolCall(f"forget-{at}", "memory_forget", {"query": deleted})]
    if request is not None and request.kind == "forget":
        if "memory_forget" not in tools or FORGET_ALL.match(request.what):
            return []  # "Forget everything": the reply says how (one request is one thing)
        prefix = "done" if request.done else "forget"
        # "Forget Joe's inhaler and the school trip": each thing is looked for alone.
        each = things_named(request.what) if not request.done else [request.what]
        forgets = [
            ToolCall(f"{prefix}-{at}" + (f"-{k}" if k else ""), "memory_forget", {"query": what})
            for k, what in enumerate(each)
        ]
        # "actually forget the Hague Blue, we're going for Sulking Room Pink": what holds
        # now is told on the way, and kept (not "…, I've saved it in my phone").
        tail = "" if request.done else _told_after(m.content, request.what)
        if tail and "memory_save" in tools:
            typed = classify(tail)[0] or "fact"  # said in place of what goes: it holds now
            args = {"content": f"{speaker}: {tail}", "memory_type": typed, "importance": 0.8}
            # (saved first: once the request is forgotten, nothing is saved from it)
            forgets.insert(0, ToolCall(f"save-{at}-0", "memory_save", args))
        return forgets
    if request is not None and request.kind == "skip":
        # "Don't remember my bike lock combination", said after it was told: what was
        # kept of it goes too.
        topic = skipped_topic(request.what)
        if "memory_forget" not in tools or not topic:
            return []
        return [ToolCall(f"skip-{at}", "memory_forget", {"query": topic})]
    # "I'm doing flowers and the cake, Rosa can you handle the photographer?": what is
    # told before a question put to someone is told all the same.
    told = [t for s in joined(sentences(split_greeting(m.content)[1])) if (t := _told_in(s))]
    answered = ""
    if len(told) <= 1 and (answered := _answer_to(m, before)):
        told = [answered]
    if "memory_save" in tools and not told and _debt_asked(m.content):
        # "can everyone pay me back for the internet, £12.50 each": asked, it tells a
        # debt owed to the asker, kept as a fact of theirs (no to-do of the asker's).
        args = {"content": f"{speaker}: {m.content.strip()}", "memory_type": "fact"}
        return [ToolCall(f"save-{at}-0", "memory_save", {**args, "importance": 0.7})]
    if "memory_save" not in tools or (is_question(m.content) and not told):
        return []
    if cant_do_asked(_without_the_bot(m.content)):
        return []  # "bot roll a d20 for me" is no note
    if request is not None:
        return [
            ToolCall(f"save-{at}-{k}", "memory_save", args)
            for k, args in enumerate(_requested(request, speaker)[:_SAVES_PER_MESSAGE])
        ]
    if (todo := _done_with(m, before) or _done_with_marked(m, before)) and "memory_forget" in tools:
        # "booked the leave" after "remind me to book annual leave for the exam week":
        # the to-do is done, and crossed off.
        return [ToolCall(f"done-{at}", "memory_forget", {"query": todo})]
    if (taken := _takes_back(m, before)) is not None and "memory_forget" in tools:
        # "actually i cant bring the bibs" after "ill bring the bibs": the job is no
        # longer theirs; what they said of it now is kept in its place.
        old, now = taken
        save = {"content": f"{speaker}: {now}", "memory_type": "event", "importance": 0.7}
        return [
            ToolCall(f"fixold-{at}", "memory_forget", {"query": old}),
            ToolCall(f"fix-{at}", "memory_save", save),
        ]
    if (fix := read_correction(m.content)) is not None:
        target = _corrects(fix, speaker, before)
        if target is None or "memory_forget" not in tools:
            return []
        old, new = target
        # The old value goes first, so the forget cannot take the new one with it.
        save = {"content": f"{speaker}: {new}", "memory_type": classify(new)[0] or "fact"}
        return [
            ToolCall(f"fixold-{at}", "memory_forget", {"query": old}),
            ToolCall(f"fix-{at}", "memory_save", {**save, "importance": 0.8}),
        ]
    calls: list[ToolCall] = []
    # "What is my locker code? Also, my new phone number is 555-1234.": the question
    # is answered, the statement saved.
    for sent in told:
        kind, importance = classify(sent)
        if kind is None and sent == answered:
            kind, importance = "fact", 0.6  # "i've got the pump": the answer to "where's…?"
        if kind is not None and len(calls) < _SAVES_PER_MESSAGE:
            args = {"content": f"{speaker}: {sent}", "memory_type": kind, "importance": importance}
            calls.append(ToolCall(f"save-{at}-{len(calls)}", "memory_save", args))
    return calls


# A to-do as it was asked for: "remind me to book annual leave", "remember to send save
# the dates", "need to order more jars".
_TODO_ASKED = re.compile(
    r"\b(?:remind\s+me\s+to|remember\s+to|don'?t\s+forget\s+to|need\s+to|have\s+to|"
    r"got\s+to|gotta|must)\s+(?P<verb>[a-z]+)\s+(?P<what>[^,.;!?]+)",
    re.I,
)
# A thing said done: "booked the leave", "just sent the save the dates yesterday".
_SAID_DONE = re.compile(
    r"^\W*(?:(?:just|finally|already|i|i've|ive|i\s+have|we|we've|have|so|ok|okay|done)\W+)*"
    r"(?P<past>[a-z]+)\s+(?P<what>[^,.;!?]+)",
    re.I,
)
_PAST = {
    "send": "sent",
    "restring": "restrung",
    "string": "strung",
    "buy": "bought",
    "pay": "paid",
    "make": "made",
    "get": "got",
    "ring": "rang",
    "write": "wrote",
    "take": "took",
    "give": "gave",
    "do": "did",
    "find": "found",
    "tell": "told",
    "bring": "brought",
    "sell": "sold",
    "put": "put",
    "set": "set",
    "cut": "cut",
    "leave": "left",
    "drop": "dropped",
    "fix": "fixed",
}


def _past_of(verb: str) -> set[str]:
    """The past forms ``verb`` may take: "book" booked, "send" sent, "renew" renewed."""
    v = verb.lower()
    if v in _PAST:
        return {_PAST[v]}
    if v.endswith("e"):
        return {v + "d"}
    if v.endswith("y") and len(v) > 2 and v[-2] not in "aeiou":
        return {v[:-1] + "ied"}
    return {v + "ed", v + v[-1] + "ed"}


def _done_with(m: ChatMessage, before: Sequence[ChatMessage]) -> str:
    """The to-do its speaker asked for in view that ``m`` says is done ("booked the
    leave" of "remind me to book annual leave for the exam week"), as it was asked;
    "" when it says no such thing."""
    said = _SAID_DONE.match(_LEAD.sub("", m.content.strip()))
    if said is None or is_question(m.content):
        return ""
    done = set(stems(said["what"])) - STOPWORDS - _CALENDAR_STEMS - {"yesterday", "today"}
    if not done:
        return ""
    for verb, what in _todos_in_view(m.name or "", before):
        if said["past"].lower() in _past_of(verb) and done & set(stems(what)):
            return f"{verb} {what.strip()}"
    return ""


def _done_with_marked(m: ChatMessage, before: Sequence[ChatMessage]) -> str:
    """The to-do in view that ``m`` marks done ("done the oat milk order", "boiler
    serviced yesterday, done", "restrung, done" of "remind me to order more oat milk",
    "… get the boiler serviced …", "… restring my bass …"), as it was asked; ""."""
    if is_question(m.content) or not _DONE_MARK.search(m.content):
        return ""
    todos = _todos_in_view(m.name or "", before)
    best = max(((_marks_done(m.content, v, w), v, w) for v, w in todos), default=(0, "", ""))
    return f"{best[1]} {best[2].strip()}" if best[0] else ""


# "done", "sorted", "✅": a thing said done, without the verb it was asked with.
_DONE_MARK = re.compile(rf"\b(?:{_DONE_WORDS})\b|\u2705|\u2714", re.I)
_DONE_TALK = frozenset(
    stems(
        _DONE_WORDS.replace("|", " ").replace(r"\s+", " ") + " finally just already yesterday today"
    )
)


def _marks_done(text: str, verb: str, what: str) -> int:
    """How well ``text``, marking something done, names the to-do ``verb`` ``what``: the
    words of the to-do it says (its verb in the past counts), 0 when too few: two, or its
    one word when that is the verb's past ("restrung, done")."""
    said = set(stems(text)) - STOPWORDS - _CALENDAR_STEMS - _DONE_TALK
    if not said:
        return 0
    past = {t for v in _past_of(verb) for t in stems(v)}
    wanted = set(stems(f"{verb} {what}")) - STOPWORDS - _CALENDAR_STEMS
    shared = said & (wanted | past)
    if len(shared) >= 2 or (shared and shared <= past and len(said) == 1):
        return len(shared)
    return 0


def _done_since(e: Evidence, todo: str, pool: Sequence[Evidence]) -> Evidence | None:
    """The later line of ``e``'s author in ``pool`` saying the to-do ``todo`` (a
    sentence of ``e``) is done: "sent the save the dates yesterday" of "remind me to
    send save the dates", when the request was no longer in view to cross it off as it
    was said; or None."""
    asked = _TODO_ASKED.search(todo)
    verb, _, what = (
        (asked["verb"], "", asked["what"]) if asked else _TODO_LEAD.sub("", todo).partition(" ")
    )
    wanted = set(stems(what)) - STOPWORDS - _CALENDAR_STEMS
    if not wanted:
        return None
    past = _past_of(verb)
    for r in pool:
        if r.author != e.author or r is e or _same_said(r.text, e.text) or is_question(r.text):
            continue
        if e.when is not None and (r.when is None or r.when <= e.when):
            continue
        if _DONE_MARK.search(r.text) and _marks_done(r.text, verb, what):
            return r  # "done the oat milk order"
        for sent in sentences(r.text):
            said = _SAID_DONE.match(_LEAD.sub("", sent.strip()))
            if said is None or said["past"].lower() not in past:
                continue
            done = set(stems(said["what"])) - STOPWORDS - _CALENDAR_STEMS
            if len(done & wanted) * 2 >= len(wanted):
                return r
    return None


def _todos_in_view(speaker: str, before: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """The to-dos of ``speaker`` that ``before`` shows, newest first, as (verb, the
    rest): asked for in their lines or in a summary's, or listed back to them by the
    bot ("Noted as a to-do: …", "Your to-dos: …" right after their message)."""
    out: list[tuple[str, str]] = []
    for i in range(len(before) - 1, -1, -1):
        b = before[i]
        if b.role == "assistant" and not b.tool_calls:
            asker = next((x for x in reversed(before[:i]) if x.role == "user"), None)
            if asker is None or (asker.name or "") != speaker:
                continue
            for line in b.content.splitlines():
                for head in ("Noted as a to-do: ", TODOS):
                    if line.startswith(head):
                        listed = line[len(head) :].split(". ")[0]
                        for item in re.split(r";\s*(?:and\s+)?", listed):
                            parts = item.strip(" .").split(" ", 1)
                            if len(parts) == 2:
                                out.append((parts[0], parts[1]))
            continue
        if b.role != "user":
            continue
        if is_quoted(b.content):
            lines = [
                text
                for block in blocks(b.content)
                for line in block.text.splitlines()
                for who, text in [_split_speaker(line.lstrip("- "))]
                if who == speaker
            ]
        elif (b.name or "") == speaker:
            lines = [b.content]
        else:
            continue
        for line in lines:
            out += [(a["verb"], a["what"]) for a in _TODO_ASKED.finditer(line)]
    return out


# A job taken back: "actually i cant bring the bibs", "sorry, won't be able to do the
# cake after all".
_CANT_DO = re.compile(
    r"^\W*(?:(?:actually|sorry|ah|oh|ugh|argh|bad news|update|guys|lads)\W+)*(?:i\s+)?"
    r"(?:can'?t|cannot|won'?t\s+be\s+able\s+to|can\s+no\s+longer|am\s+not\s+able\s+to)\s+"
    r"(?:do\s+|make\s+)?(?P<what>[^,.;!?]+)",
    re.I,
)
# The job as it was taken on: "ill bring the bibs", "i'm doing the cake".
_TOOK_ON = re.compile(r"\b(?:i'?ll|ill|i\s+will|i'?m\s+doing|i\s+can)\s+(?P<what>[^,.;!?]+)", re.I)


def _takes_back(m: ChatMessage, before: Sequence[ChatMessage]) -> tuple[str, str] | None:
    """(the job, what ``m`` says of it now) when ``m`` takes back a job its speaker took
    on in one of their last few messages ("actually i cant bring the bibs, car's in the
    garage" of "ill bring the bibs, theyre in my boot anyway"), or None."""
    first = sentences(m.content)[0] if m.content.strip() else ""
    said = _CANT_DO.match(first)
    if said is None:
        return None
    what = set(stems(said["what"])) - STOPWORDS
    if not what:
        return None
    seen = 0
    for b in reversed(before):
        if b.role != "user" or (b.name or "") != (m.name or "") or is_quoted(b.content):
            continue
        seen += 1
        if seen > _CORRECTS_BACK:
            return None
        for sent in sentences(b.content):
            took = _TOOK_ON.search(sent)
            if took is not None and what <= set(stems(took["what"])) and not is_question(sent):
                return sent, _LEAD.sub("", first).strip()
    return None


# "whats jay's number mia?", "legend, what's the door code again?": what is asked for.
_ASKED_FOR = re.compile(
    r"^(?:[^?]*?[,!-]\s*|@?[a-z][\w'-]*\s+)?what(?:'s|s|\s+is|\s+was)\s+(?P<what>[\w' -]+?)"
    # ("… in case i get lost": why it is asked)
    r"(?:\s+again|\s+(?:in\s+case|for\s+when|so|cause|cos|because|just\s+in\s+case)\b[^?]*)?\W*$",
    re.I,
)
# "its 07700 900462", "it's 4411": an answer that says only the value.
_ONLY_VALUE = re.compile(
    r"^\W*(?:(?:it'?s|it\s+is|that'?s)\s+(?P<value>[^,;!?]+?)|"
    # or the number alone: "07700 900 155"
    r"(?P<number>\+?\d[\d ()+.-]{4,}\d))[\s.!]*$",
    re.I,
)


# "who's got the kit?", "where's the pump": a thing someone keeps, asked for.
_WHO_HAS = re.compile(
    r"^(?:[^?]*?[,!]\s*)?(?:who(?:'?s|\s+has)(?:\s+got)?|who\s+got|where(?:'?s|\s+is))\s+"
    r"(?P<what>(?:the|our)\s+[\w' -]{2,30}?)(?:\s+now|\s+again)?\W*$",
    re.I,
)
# "it's at mine", "they're in my boot": where the thing asked for is.
_IT_IS_AT = re.compile(
    r"\b(?:it|they)(?:'?s|'?re|\s+is|\s+are)\s+(?P<where>(?:at|in|on|under|with)\s+[^,.;!?]{2,40})",
    re.I,
)
# "i've got it", "i have them": the one answering keeps it.
_I_HAVE_IT = re.compile(r"\b(?:i'?ve\s+got|i\s+have(?:\s+got)?|i\s+got)\s+(?:it|them)\b", re.I)


def _answer_to(m: ChatMessage, before: Sequence[ChatMessage]) -> str:
    """What ``m`` tells when it answers the question said right before it by someone
    else with the value alone: "its 07700 900462" after "whats jay's number mia?" is
    "jay's number is 07700 900462" (kept as "its 07700 900462", it answers nothing
    later); "" when it is no such answer."""
    last = next(
        (b for b in reversed(before) if b.role == "user" and not is_quoted(b.content)), None
    )
    if last is None or (last.name or "") == (m.name or ""):
        return ""
    if (kept := _WHO_HAS.match(last.content.replace("\u2019", "'").strip())) is not None:
        # "i washed it, it's at mine" after "who's got the kit": "the kit is at mine"
        thing = kept["what"]
        if (at := _IT_IS_AT.search(m.content.replace("\u2019", "'"))) is not None:
            return f"{thing} is {at['where'].strip()}"
        if _I_HAVE_IT.search(m.content.replace("\u2019", "'")):
            return f"i've got {thing}"
        return ""
    said = _ONLY_VALUE.match(m.content.replace("\u2019", "'"))
    value = said and (said["value"] or said["number"])
    if not value or not re.search(r"\d", value) or len(words(value)) > 5:
        return ""
    asked = _ASKED_FOR.match(last.content.replace("\u2019", "'").strip())
    if asked is None:
        return ""
    what = asked["what"].split()
    if what and m.name and what[-1].lower() == m.name.lower():
        what = what[:-1]  # "… mia?": whom it was asked of
    if not what or what[0].lower() in ("it", "that", "this", "up", "my", "happening"):
        return ""
    if what[0].lower() == "your":
        what[0] = "my"  # (hers, as she would say it: "forget my number" finds it)
    return f"{' '.join(what)} is {value.strip()}"


# A clause that only speaks of what was forgotten, or of someone not named in it.
_POINTS_BACK = re.compile(r"\b(?:it|that|this|them|those|he|she|they|him|her)\b", re.I)
_AFTER_FORGET = re.compile(r"^\W*(?:because|since|as|cause|cos|coz|so|and|but)?\W*", re.I)


def _told_after(content: str, what: str) -> str:
    """What a forget request ``content`` says after the thing it names ``what``, when
    that is a statement of its own: "we're going for Sulking Room Pink in the living
    room" of "actually forget the Hague Blue, we're going for …"."""
    at = content.lower().find(what.lower())
    if at < 0 or not what.strip():
        return ""
    tail = content[at + len(what) :]
    # (the word that only pointed at it: "forget the oven service thing, phil …")
    tail = re.sub(r"^\s*(?:thing|stuff|bit|part|business)\b", "", tail, flags=re.I)
    tail = _AFTER_FORGET.sub("", tail, count=1).strip().rstrip(".!")
    tail = re.sub(r"^(?:actually|anyway|tbh)\b[\s,]*", "", tail, flags=re.I)
    if _TELL_THEM.match(tail):
        return ""  # "…, i'll tell jonas myself": why it goes, nothing to keep
    if len(words(tail)) < 4 or _POINTS_BACK.search(tail) or is_question(tail):
        return ""
    return tail if says_something(tail) and not is_chitchat(tail) else ""


# Telling someone oneself, instead of the bot keeping it.
_TELL_THEM = re.compile(
    r"^(?:i'?ll|i\s+will|i\s+can|i'?d\s+rather|i'?m\s+going\s+to)\s+(?:just\s+)?"
    r"(?:tell|let|text|message|email|call|ask|remind)\b",
    re.I,
)
# "Please delete the sandbox API token", "can you remove our door code": deleting a thing.
_DELETE_THING = re.compile(
    r"^\W*(?:please\s+|pls\s+|(?:can|could|would)\s+you\s+(?:please\s+)?)?"
    r"(?:delete|erase|remove|wipe|scrub|purge|get rid of)\s+"
    r"(?P<what>(?:my|the|our|[^\W\d_][\w-]*'s)\s[^.?!\n]{1,60}?)"
    r"(?:\s+from\s+(?:your|the)\s+(?:memory|memories|notes))?"
    r"(?:,?\s+(?:please|pls|thanks|thank you))?\s*[.!?]*$",
    re.I,
)


def _deletes_told(m: ChatMessage, before: Sequence[ChatMessage]) -> str:
    """What ``m`` asks to delete when its author told it earlier in view ("The sandbox
    API token is sk-test-9981", then "Please delete the sandbox API token"); "" for
    anything else ("delete the staging bucket" is a job, unless they told of one)."""
    asked = _DELETE_THING.match(m.content)
    if asked is None:
        return ""
    what = asked["what"]
    speaker = m.name or "someone"
    for b in reversed(before):
        if b.role != "user" or (b.name or "someone") != speaker or is_quoted(b.content):
            continue
        said = split_greeting(b.content)[1]
        if not is_question(said) and any(names(what, s) for s in sentences(said)):
            return what
    return ""


# The id of the forget "forget that" asks for: what the speaker last told.
_FORGET_LAST = "forgetlast-"
_FORGET_IT = re.compile(
    r"^\W*(?:(?:oh|no|actually|wait|sorry|ok|okay|yeah|yes|yep|lol|haha|ah|right|hmm|my bad)"
    r"\W+)*(?:please\s+|pls\s+)?(?:forget|delete|erase|scratch|remove)\s+(?:it|that|this)"
    r"(?:\s+(?:please|pls|then|too|as well|now))*\W*$",
    re.I,
)


def _last_said(speaker: str, before: Sequence[ChatMessage]) -> str:
    """What ``speaker`` last told (not asked) among their latest messages, or ""."""
    for m in reversed(before[-12:]):
        if m.role != "user" or (m.name or "someone") != speaker or is_quoted(m.content):
            continue
        request = read_request(m.content)
        if request is not None and request.kind != "remember":
            return ""  # the last thing they did was ask to forget or keep nothing
        text = request.what if request is not None else split_greeting(m.content)[1]
        # (what was kept is something told: "ravi owes me £15 for the takeaway")
        if not is_question(text) and (
            request is not None or says_something(text) or classify(text)[0] is not None
        ):
            return text.strip()
    return ""


_CORRECTED = "Corrected: "
_HAS_COPULA = re.compile(
    r"\b(?:is|are|was|were|am|has|have|had|'re|'m)\b|\w+(?:s|ed)\s+(?:to|at|in|on)\b",
    re.I,
)
# A value told along with the request ("my PIN, it is 1234"): it is new, not referred back to.
_TELLS = re.compile(r"\d|\b(?:is|are|was|were)\b", re.I)


#: How many of the speaker's latest messages a correction looks back over.
_CORRECTS_BACK = 4


def _corrects(
    fix: Correction, speaker: str, before: Sequence[ChatMessage]
) -> tuple[str, str] | None:
    """(the sentence ``fix`` corrects, that sentence corrected): in the newest of the
    speaker's last few messages that holds what it replaces.  A correction of a
    correction corrects the sentence as the first one left it."""
    seen = 0
    for i in range(len(before) - 1, -1, -1):
        m = before[i]
        if m.role != "user" or (m.name or "someone") != speaker or is_quoted(m.content):
            continue
        seen += 1
        if seen > _CORRECTS_BACK:
            return None
        if (earlier := read_correction(m.content)) is not None:
            base = _corrects(earlier, speaker, before[:i])
            # The sentence it corrected may have left the conversation with its old
            # value: the bot's "Corrected: …" reply to it says what it became.
            now = base[1] if base is not None else _correction_reply(before[i + 1 :])
            if now and (fixed := corrected(now, fix)) is not None:
                return now, fixed
            continue
        request = read_request(m.content)
        if request is not None and request.kind != "remember":
            continue
        text = request.what if request is not None else split_greeting(m.content)[1]
        if is_question(text):
            continue
        for sent in reversed(sentences(text)):
            sent = _LEAD.sub("", sent)  # "Correction: my locker code is 7777."
            if (fixed := corrected(sent, fix)) is not None:
                return sent, fixed
    return None


def _correction_reply(after: Sequence[ChatMessage]) -> str:
    """What the bot's first reply in ``after`` says a correction made of its sentence
    ("Corrected: your dentist appointment is on Thursday."), in the speaker's words; ""
    when that reply corrected nothing."""
    for m in after:
        if m.role == "assistant" and not m.tool_calls:
            for line in m.content.splitlines():
                if line.startswith(_CORRECTED):
                    return to_first_person(line.removeprefix(_CORRECTED).strip())
            return ""
    return ""


def _requested(request: Request, speaker: str) -> list[dict[str, object]]:
    """The saves an explicit request asks for: one per sentence of it ("Remember that
    Sam's birthday is May 3. Also remember that Sam likes jazz." is two; "Remind me to
    call the plumber. Remind me to buy milk." two to-dos)."""
    out: list[dict[str, object]] = []
    for part in sentences(request.what) or [request.what]:
        again = read_request(_LEAD.sub("", part))
        if again is not None and again.kind == "remember":
            todo = again.todo
            part = again.what
        else:
            # "the smoke alarm needs new batteries, remind me": what to be reminded of
            todo = request.todo and request.reminder
        typed = "todo" if todo else classify(part)[0]
        if typed is None and request.todo:
            continue  # "Remind me to call Bo. lol": the to-do, not the laugh
        out.append(
            {
                "content": f"{speaker}: {part.rstrip()}",
                "memory_type": typed or "fact",
                "importance": 0.8,
            }
        )
    return out


def _memory_notes(
    results: Sequence[ChatMessage], asked: dict[str, ToolCall], speaker: str = ""
) -> list[str]:
    """One true sentence per memory call that ran: what was saved or forgotten, or why
    not."""
    saved: list[str] = []
    todo: list[str] = []
    reminded = False  # asked "remind me": it will not come at a time, say so
    notes: list[str] = []
    for r in results:
        call = asked.get(r.tool_call_id or "")
        if call is None or call.name not in _MEMORY_TOOLS:
            continue
        body = tool_json(r)
        body = body if isinstance(body, dict) else {}
        if call.name == "memory_forget" and call.id.startswith("skip-"):
            what = to_second_person(str(call.arguments.get("query", "")))
            if body.get("forgotten"):
                notes.append(
                    "OK: I won't keep that, and I forgot what you had told me about "
                    f"{_short(what.split(',')[0]).rstrip(' .!')}."
                )
            elif "error" in body:
                notes.append(f"I could not forget what you had told me about it: {body['error']}.")
            elif not _TELLS.search(what):
                # "Don't remember Elif's dietary stuff" refers back to something told: say
                # that nothing it names was found, rather than a plain "OK".
                named = _short(what.split(",")[0]).rstrip(" .!")
                notes.append(
                    f"OK: I won't save that. I found nothing you had told me about {named} "
                    'to forget; if you did, tell me what to forget ("forget that …").'
                )
            continue
        if call.name == "memory_forget" and call.id.startswith("fixold-"):
            # The value a correction replaces: the save that follows says what holds now.
            if "error" in body:
                notes.append(f"I could not forget the old value: {body['error']}.")
            continue
        if call.name == "memory_forget":
            what = to_second_person(str(call.arguments.get("query", "")))
            ticked = [
                to_second_person(_TODO_LEAD.sub("", _split_speaker(str(f.get("content")))[1]))
                for f in body.get("forgotten") or []
                if isinstance(f, dict) and f.get("type") == "todo"
            ]
            if call.id.startswith("done-") and ticked:
                notes.append(f"Done: I crossed it off your to-dos ({_join(ticked)}).")
            elif call.id.startswith("done-") and "error" in body:
                notes.append(f"I could not cross it off your to-dos: {body['error']}.")
            elif call.id.startswith("done-") and not body.get("forgotten"):
                notes.append(f"I had no to-do of yours like that to cross off ({what}).")
            elif body.get("forgotten"):
                # The reply is kept and indexed like any other: it names what was
                # forgotten ("your locker code"), not the value that was ("4411").
                topic = _SUBJECT.match(what)
                # "the wifi password at grandma's house" names a thing, it says nothing.
                phrase = not _HAS_COPULA.search(what)
                # "you like flat whites" says something all the same.
                clause = re.match(r"(?:you|we|they|he|she)\b", what, re.I) is not None
                # "where the dinner is" names what was told, it does not tell it.
                wh = _WH_LEAD.match(what) is not None
                if topic is None and call.id.startswith(_FORGET_LAST):
                    # "forget that": the line is not said back ("ravi owes you £15 …").
                    said = "what you just told me"
                elif topic is not None or (phrase and not clause) or wh or not says_something(what):
                    said = f"what you told me about {topic[1] if topic else what}"
                else:
                    said = f"that {what}"
                kept = [
                    to_second_person(_split_speaker(str(k["content"]))[1]).rstrip(" .!")
                    for k in body.get("kept") or []
                    if isinstance(k, dict) and k.get("content") and "error" not in k
                ]
                lost = [k for k in body.get("kept") or [] if isinstance(k, dict) and "error" in k]
                also = f"; I kept the rest: {_join(kept)}" if kept else ""
                notes.append(f"Done: I forgot {said}{also}.")
                if lost:
                    said = _join(
                        [to_second_person(_split_speaker(str(k["content"]))[1]) for k in lost]
                    )
                    notes.append(
                        f"I could not keep the rest of it ({lost[0]['error']}): {said}. "
                        "Tell me again what of it still holds."
                    )
            elif "error" in body:
                notes.append(f"I could not forget that: {body['error']}")
            else:
                note = f"I had nothing of yours about that to forget ({what})."
                # "Forget what Ben said about the ending", by Nina: it is Ben's to ask
                # (said whatever matched, so the reply tells nothing of what Ben said).
                if (by := SAID_ABOUT.match(what)) and by["who"].lower() != speaker.lower():
                    note += f" Only {by['who']} can have me forget what {by['who']} told me."
                elif told := [str(t) for t in body.get("told_by") or [] if t != speaker]:
                    # (what matched is not quoted: the reply tells nothing of it)
                    who = ", ".join(told[:-1]) + " and " + told[-1] if len(told) > 1 else told[0]
                    asks = "one of them" if len(told) > 1 else who
                    note += f" {who} told me of it: only {asks} can have me forget that."
                notes.append(note)
            continue
        if "id" in body:
            said = _LEAD.sub("", _split_speaker(str(call.arguments.get("content", "")))[1])
            said = _TAIL.sub("", said) or said
            kind = str(call.arguments.get("memory_type", ""))
            if call.id.startswith("fix-"):
                notes.append(f"{_CORRECTED}{_short(to_second_person(said)).rstrip(' .!')}.")
            elif kind == "todo":
                todo.append(_short(_said_back(_TODO_LEAD.sub("", said))))
                reminded = reminded or re.search(r"\bremind\b", said, re.I) is not None
            else:
                saved.append(_short(_said_back(said)))
        else:
            why = body.get("skipped") or body.get("error") or "the memory store did not say"
            notes.append(f"I could not save that: {why}.")
    if saved:
        notes.insert(0, _ended(f"Noted: {_join(saved)}"))
        if any(_LOSS.search(x) for x in saved):
            notes.insert(0, "I'm sorry for your loss.")  # not a bare "Noted" for a death
    if todo:
        # What has a time may be expected to be reminded of: say that it will not be
        # ("I'm doing flowers and the cake" expects nothing of the kind).
        timed = reminded or any(_DATED.search(t) for t in todo)
        notes.append(
            _ended(f"Noted as a to-do: {_join(todo)}")
            + (
                " I can't send reminders at a set time, but ask me and I'll tell you."
                if timed
                else ""
            )
        )
    return _forgot_together(notes)


def _said_back(said: str) -> str:
    """What was saved, said back to its speaker: in the second person ("your locker code
    is 4411"), or, when it speaks to someone as "you" ("i paid you back zoe", "i'll tell
    you later"), as they said it: turned round, it would say "you paid you back"."""
    if _SAID_TO_YOU.search(said):
        return f"«{said.strip().rstrip(' .!')}»"
    if _PAID_BACK_ASKED.search(said):
        # "can everyone pay me back …, £12.50 each?": "everyone to pay you back …"
        said = _ASKED_OF_ALL.sub(r"\1 to ", said.strip()).rstrip(" ?")
    return to_second_person(said)


_SAID_TO_YOU = re.compile(r"\b(?:you|yourself|u|ya)\b", re.I)
_FORGOT_ABOUT = "Done: I forgot what you told me about "
# A death told: "My wife Edna passed away two years ago", "our dog Rex died" (not "the
# printer died"): a death word, and someone of the family or a pet.
_RELATIVE = (
    r"(?:wife|husband|partner|mum|mom|mother|dad|father|son|daughter|brother|sister|friend|"
    r"grandma|grandmother|grandpa|grandfather|grandad|granddad|gran|nan|nana|granny|uncle|"
    r"aunt|auntie|cousin|dog|cat)"
)
# Hard times told in passing: "my mum's in hospital", "I feel like an imposter most
# days", "rough week": a word of sympathy, not a bare "OK".
_HARD_TIME = re.compile(
    r"\b(?:in\s+(?:the\s+)?hospital|worried\s+(?:about|sick)|"
    r"(?:really|so|very|super)\s+(?:worried|stressed|anxious)|"
    r"(?:i'?m|i\s+am|feel(?:ing)?)\s+(?:so\s+|really\s+|very\s+|totally\s+|kinda\s+|"
    r"kind\s+of\s+|a\s+bit\s+|pretty\s+|super\s+|quite\s+)?"
    r"(?:exhausted|stressed|anxious|struggling|depressed|lonely|miserable|upset|nervous|"
    r"frustrated|"
    r"burn(?:ed|t)\s+out|overwhelmed|heartbroken|gutted|terrified|scared|petrified|"
    r"homesick)|"
    # "ugh wedding planning is sooo exhausting", "my mum is ill"
    r"(?:so+|really|very|super|such|kinda)\s+(?:exhausting|stressful|overwhelming|draining|"
    r"annoying|frustrating|irritating)|(?:been|was|is)\s+(?:absolutely\s+|so\s+)?brutal|"
    rf"\b{_RELATIVE}\s+(?:is|'s)\s+(?:really\s+|very\s+|quite\s+|so\s+)?"
    r"(?:ill|sick|unwell)\b|"
    r"feel(?:ing)?\s+like\s+(?:an?\s+)?(?:imposter|impostor|failure|fraud)|"
    r"rough\s+(?:week|day|time|month|year)|(?:been|has\s+been)\s+(?:really\s+|so\s+)?hard|"
    r"(?:keep|been|were|are)\s+arguing|broke\s+up|lost\s+my\s+job|laid\s+off|"
    # "honestly so tired today", "my code keeps crashing, R hates me"
    r"(?:so|really|super|very|soo+|absolutely)\s+(?:tired|knackered|shattered|drained|"
    r"frustrated|fed\s+up)|"
    r"knackered|keeps\s+(?:crashing|breaking|failing)|\bhates\s+me\b|"
    # "ugh i've had the worst day"
    r"(?:had|having)\s+(?:the|a|such\s+a)\s+(?:worst|awful|terrible|horrible|horrendous|"
    r"shit|crap|rubbish|nightmare)\s+(?:day|week|morning|night|time)|"
    r"made\s+redundant|poorly|"
    # "pickle bit me again today, my hand is throbbing"
    r"\bbit\s+me\b|\bthrobbing\b|\bin\s+(?:agony|so\s+much\s+pain|pain)\b|"
    # "pulled my hamstring at work", "sprained my ankle"
    r"(?:pulled|tore|torn|strained|sprained|broke|broken|hurt|injured|twisted|dislocated)\s+"
    r"my\s+(?:\w+\s+)?(?:ankle|knee|back|leg|arm|wrist|shoulder|hip|foot|hand|neck|"
    r"hamstring|calf|toe|finger|elbow|groin|achilles|ribs?)|"
    # "im not feeling great", "the interview didnt go well"
    r"not\s+feeling\s+(?:great|good|well|too\s+good|100)|did(?:n'?t|\s+not)\s+go\s+(?:well|great)|"
    # venting: "ugh the card machine has been playing up", "fml", "some days i wonder if
    # it's worth it", "my exams are killing me"; a fall ("dad fell on tuesday")
    r"^\W*(?:ugh+|urgh+|argh+|ffs|sigh)\W*$|fml|killing\s+me|doing\s+my\s+head\s+in|"
    r"playing\s+up|fed\s+up|sick\s+of|can'?t\s+cope|"
    r"wonder\s+if\s+it'?s\s+(?:even\s+)?worth\s+it|barely\s+break(?:ing)?\s+even|"
    rf"{_RELATIVE}\s+had\s+a\s+fall|{_RELATIVE}\s+fell(?!\s+(?:asleep|in\s+love|for)\b))\b|"
    # a trailing groan or a sad face: "my amp is making a weird buzzing noise ugh"
    r"[\s,.]ugh+\W*$|:-?\(|:'\(|"
    # a groan opening a complaint: "ugh mondays. tenants texting me at 7am"
    r"^\W*(?:ugh+|urgh+|argh+)[\s,.!]+(?!(?:fine|ok|okay|whatever|yes|yeah|go\s+on)\b)\w",
    re.I,
)
# Nerves before something ahead: "i'm so nervous for march", "bit anxious about the
# interview tomorrow": wished well, not pitied.
_NERVES_AHEAD = re.compile(
    r"\b(?:nervous|anxious|scared|terrified|petrified|jittery|bricking\s+it)\s+"
    r"(?:for|about|before)\s+(?!(?:my|his|her|their|our)\s+(?:\w+\s+)?(?:health|life)\b)\w",
    re.I,
)
LUCK_REPLY = "Fingers crossed for you."
GLAD_REPLY = "Glad to hear it."
# "not feeling great", "the interview didn't go well": no good news.
_NOT_SO = re.compile(
    r"\b(?:not|never|hardly|no\s+longer|(?:did|do|does|is|was|are|were)n'?t|wish|hope|if)\b",
    re.I,
)
# Good news of one's own: "knee felt fine today on the bike!! small wins".
_GOOD_NEWS = re.compile(
    r"\b(?:small\s+wins?|good\s+news|great\s+news|got\s+the\s+(?:job|offer|place)|"
    r"passed\s+(?:my|the)\s+(?:\w+\s+)?(?:exam|test|interview|assessment|viva)|"
    r"nailed\s+it|smashed\s+it|new\s+pb|personal\s+best|over\s+the\s+moon|"
    r"(?:felt|feels|feeling)\s+(?:fine|good|great|better|amazing)(?!\s+(?:about|if|to)\b)|"
    r"went\s+(?:really\s+|so\s+|super\s+)?well|cleared\s+(?:me|us)\s+(?:for|to)|"
    r"(?:i'?m|i\s+am|we'?re|so)\s+(?:so\s+|really\s+)?(?:happy|thrilled|chuffed|relieved|"
    r"excited))\b",
    re.I,
)
_LOSS = re.compile(
    rf"^(?=.*\b{_RELATIVE}\b).*\b(?:passed\s+(?:away|on)|died|funeral)\b|"
    rf"\blost\s+(?:your|our|my|his|her)\s+{_RELATIVE}\b",
    re.I,
)


def _forgot_together(notes: list[str]) -> list[str]:
    """Several things forgotten at one request, said in one sentence ("… about Joe's
    inhaler and the school trip"), not one "Done" each."""
    out: list[str] = []
    for note in notes:
        if note.startswith(_FORGOT_ABOUT) and out and out[-1].startswith(_FORGOT_ABOUT):
            # (what each one named has no "and" of its own: each is a thing of a list)
            *before, last = out[-1].removeprefix(_FORGOT_ABOUT).rstrip(".").split(" and ")
            named = [*before, last, note.removeprefix(_FORGOT_ABOUT).rstrip(".")]
            out[-1] = _FORGOT_ABOUT + ", ".join(named[:-1]) + " and " + named[-1] + "."
            continue
        out.append(note)
    return out


# "… in March :(": a face or an emoji ends the sentence as a full stop would.
_FACE = re.compile(r"(?:[:;=]'?-?[()\[\]DPpO/\\|]|<3|[\u2600-\u27bf\U0001F300-\U0001FAFF])$")


def _ended(text: str) -> str:
    """``text`` with a full stop, unless a face or an emoji ends it already."""
    return text if _FACE.search(text) else text + "."


def _join(items: Sequence[str]) -> str:
    items = [i.rstrip(" .!") for i in items]
    return items[0] if len(items) == 1 else "; ".join(items[:-1]) + "; and " + items[-1]


# The bot called by name before what is said to it: "bot what do we need to do",
# "tierbot, note that …", "@tierbot is the party still on" (not "bots are …").
_TO_THE_BOT = re.compile(
    r"^\s*@?(?:tier\s?)?bot(?:\s*[,:;!.-]+\s*|\s+(?=(?:what|whats|what's|when|whens|when's|"
    r"where|wheres|where's|who|whos|who's|how|hows|how's|which|why|is|are|do|does|did|can|"
    r"could|will|would|should|remember|remind|note|forget|tell|please|pls|split|add|list|"
    r"show|any|have|has|was|were)\b))(?=\S)",
    re.I,
)


def _unaddressed(m: ChatMessage) -> ChatMessage:
    """``m`` without the bot's name it opens with: what is said to the bot is read as
    said ("bot what do we need to do" asks, "bot, note that …" notes)."""
    if m.role != "user" or not _TO_THE_BOT.match(m.content):
        return m
    return replace(m, content=_without_the_bot(m.content))


def _without_the_bot(text: str) -> str:
    """``text`` without the bot's name it opens with ("bot what do we need to do")."""
    call = _TO_THE_BOT.match(text)
    return text[call.end() :] if call else text


def chat(messages: Sequence[ChatMessage], tools: set[str]) -> tuple[str, list[ToolCall]]:
    """The reply (or the tool calls to make first) to everything since the bot's last
    reply; see the module docstring."""
    # (said to the bot by name: "bot where should we meet?" is the bot's to answer)
    to_bot = {
        i for i, m in enumerate(messages) if m.role == "user" and _TO_THE_BOT.match(m.content)
    }
    messages = [_unaddressed(m) for m in messages]
    since = 1 + max(
        (i for i, m in enumerate(messages) if m.role == "assistant" and not m.tool_calls),
        default=-1,
    )
    new = messages[since:]
    people = [
        (since + i, m) for i, m in enumerate(new) if m.role == "user" and not is_quoted(m.content)
    ]
    results = [m for m in new if m.role == "tool"]
    asked = {c.id: c for m in new for c in m.tool_calls}
    done = conclusions(results)

    # Saving and forgetting come first: what is answered next may depend on it.
    if not any(c.name in _MEMORY_TOOLS for c in asked.values()):
        saves = [
            c for at, m in people for c in _plan_saves(at, _self_named(m), tools, messages[:at])
        ]
        if saves:
            return "", saves
    notes = _memory_notes(results, asked, people[-1][1].name or "" if people else "")

    # "Ugh, what's my garage code again? I always forget" asks, though it ends telling.
    questions = [
        (at, m)
        for at, m in people
        if _asks(m.content)
        and not _asks_someone_else(m, messages[:at])
        and not _asks_the_group(m, messages[:at])
        and (at in to_bot or not _asks_the_group(m, messages[:at], _WE_DECIDE))
    ]
    if not questions and not done:
        told = [(at, _self_named(m)) for at, m in people]
        return _statement_reply(messages, told, notes, results), []

    started = {
        str(asked[m.tool_call_id].arguments.get("task"))
        for m in results
        if m.tool_call_id in asked and isinstance(b := tool_json(m), dict) and "started" in b
    }
    answers: list[tuple[str, str]] = []  # (what was asked, the answer)
    waiting: list[str] = []
    calls: list[ToolCall] = []
    # Each question whole ("And where from?" as where the seed potatoes came from), and
    # what it asks, once: the lookups, and what to show beside each answer ("what editor
    # does she use?", though it is looked up as "what editor does Priya use?").
    wholes = {at: _question_text(at, q, messages) for at, q in questions}
    each = {at: _each_question(wholes[at], _asked_before(at, q, messages)) for at, q in questions}
    asked_each = [
        (at, q, task, str(at) if j == 0 else f"{at}.{j}")
        for at, q in questions
        for j, (task, _) in enumerate(each[at])
    ]
    shown = {
        task: said if wholes[at] == q.content else q.content
        for at, q in questions
        for task, said in each[at]
    }
    for at, q, task, key in asked_each:
        plain = task.replace("\u2019", "'")  # "What’s on my plate?" as "What's…"
        quoted: list[str] = []  # "what else?": what the answer before it quoted
        goes_on = True  # the "else" goes on from the same question (it may run out)
        if plain.startswith(_ELSE_MARK):
            # "What else?" again and again: none of what the answers since quoted.
            times = 0
            while plain.startswith(_ELSE_MARK):
                plain, times = plain.removeprefix(_ELSE_MARK), times + 1
            replies = [
                m.content for m in messages[:at] if m.role == "assistant" and not m.tool_calls
            ]
            said = " ".join(replies[-times:])
            quoted = _quoted(said)
        plain = _LEADING.sub("", plain)  # "Quick one - what car do I drive?"
        plain = spelled_out(plain)  # "what do u know…"
        lost_list = False
        shown_of: set[str] = set()  # what "What I know about Rin: …" just listed
        last = _last_reply(messages[:at]) if _WHAT_ELSE.match(plain) else ""
        if (of := _KNOWN_OF.match(last)) is not None:
            shown_of = _shown_of(messages[:at], of[1] or of[2])
            if of[1]:
                plain = f"what else do you know about {of[1]}?"
            else:  # "Ben said: …", then "What else?"
                plain = f"what else did {of[2]} say?"
        elif _WHAT_ELSE.match(plain):
            # The list it continues, or this turn's recalls for it (a compaction landing
            # in the middle of the turn may take the list out of view).
            in_view = _last_reply(messages[:at]).startswith((ABOUT_YOU, ABOUT_YOU_MORE, ALL_TOLD))
            continued = in_view or bool(_recalls_for(task, asked))
            lost_list = not in_view
            if not continued:
                # Nothing in view it continues (a long list may be compacted already).
                last = _last_reply(messages[:at])
                if last.startswith(TODOS) or last == ALL_TODOS:
                    answers.append((task, ALL_TODOS))
                elif last == ELSE_NOTHING or last.startswith("That is everything"):
                    answers.append((task, ELSE_NOTHING))
                else:
                    answers.append((task, WHAT_ELSE_OF_WHAT))
                continue
            plain = "what else do you know about me?"  # the rest of the list just given
        if task in done:
            answers.append((task, done.pop(task)))
            continue
        if _SMALL_TALK.match(split_greeting(plain)[1]):
            answers.append((task, SMALL_TALK_REPLY))
            continue
        if _REMARK.match(split_greeting(plain)[1]):
            answers.append((task, REMARK_REPLY))
            continue
        if WEB_ASKED.match(plain):
            answers.append((task, OUTSIDE_REPLY))
            continue
        if _FOR_ME.match(plain) or _OF_MINE.match(plain) or CHANCE_ASKED.match(plain):
            answers.append((task, OF_MINE_REPLY if _OF_MINE.match(plain) else FOR_ME_REPLY))
            continue
        if (
            not quoted
            and _ELSE.search(plain)
            and not _WHAT_ELSE.match(plain)
            and not any(r.search(plain) for r in (_ABOUT_ME, _ABOUT_SOMEONE, _SAID_BY, _MY_TODOS))
        ):
            # "What else did I book?": what the answers since it was first asked did not
            # quote.  After another question ("What's my hotel confirmation number?")
            # nothing found is not "all there is".
            replies, first = _answers_since_asked(messages[:at])
            quoted = _quoted(" ".join(replies))
            plain = _ELSE.sub("", plain).replace("  ", " ")
            goes_on = set(stems(first)) == set(stems(plain))
        pool = candidates(messages[:at], results)
        # With nothing gone from the view (no summary or note says so), the memories are
        # asked in this turn first; a branch looks further back (the archive may hold
        # what an earlier life of the channel said) only when they do not answer.
        set_aside = any(
            b.source in ("summary", "note")
            for m in messages[:at]
            if m.role == "user" and is_quoted(m.content)
            for b in blocks(m.content)
        )
        if quoted:
            pool = [e for e in pool if not any(x in bare(e.text) for x in quoted)]
        tried = {
            c.name
            for c in asked.values()
            if task == c.arguments.get("task")
            or str(c.arguments.get("query", "")).startswith(task)
            or c.id == f"recall-{key}"  # "what do you know about Rin?" asks for "Rin"
        }
        speaker = q.name or ""
        recall_ok = "memory_recall" in tools and "memory_recall" not in tried
        # A lookup that failed is not a lookup that found nothing: say which it was.
        # (By the question asked: a compaction in the middle of the turn may shift the
        # position a call's id was made from.)
        mine_ids = list(
            dict.fromkeys(_recalls_for(task, asked) + [i for i in asked if i == f"recall-{key}"])
        )
        failed = next((f for i in mine_ids if (f := _failure(results, i))), None)

        # "What do you know about Elif?": everything said of her, not one line.
        said_by = _SAID_BY.search(plain)
        someone = _ABOUT_SOMEONE.search(plain) or said_by or _ABOUT_SOMEONE_SMALL.search(plain)
        if someone is not None and not _ABOUT_ME.search(plain):
            name = someone[1]
            # "what do you know about pica books": the whole name, found by its first word
            more = plain[someone.end() :].strip(" ?!.").split()
            if 0 < len(more) <= 2 and not any(w.lower() in STOPWORDS for w in more):
                name = f"{name} {' '.join(more)}"
            if recall_ok:
                # By the name alone: "what (else) do you know about" would find every
                # question asked with those words, not what was said of them.
                calls.append(
                    ToolCall(f"recall-{key}", "memory_recall", {"query": name, "limit": 20})
                )
            elif shown_of:
                rest = _about_someone(name, pool, shown=shown_of, by_only=said_by is not None)
                if rest is None and _left_out(results, mine_ids):
                    # The recall found more than the window could bring (hits, some of
                    # them the same lines again): not "everything".
                    rest = (
                        f"There may be more said of {name} than this conversation's window "
                        "could bring at once: ask me about one thing of theirs."
                    )
                if said_by is not None:
                    answers.append((task, rest or f"That is everything {name} said that I kept."))
                else:
                    answers.append((task, rest or f"That is everything I know about {name}."))
            else:
                listed = _about_someone(name, pool, by_only=said_by is not None)
                answers.append((task, listed or _nothing(failed, UNKNOWN)))
            continue
        # What the asker told long ago is in memory, not in view: look there first.
        about_me = bool(_ABOUT_ME.search(plain) or _MY_TODOS.search(plain))
        if (
            _MY_TODOS.search(plain)
            and "memory_recall" in tools
            and not recall_ok
            and (follow := _changes_of(task, key, speaker, pool, asked))
        ):
            # The to-dos found may have moved since ("actually the booster moved to
            # october 10"): a move is said with other words and kept as another kind,
            # and a small window brings only the hits that fit, so it is asked for by
            # what the to-dos say, once they are known.
            calls.append(follow)
            continue
        personal = (
            None
            if about_me and recall_ok
            else _personal_answer(
                plain,
                speaker,
                pool,
                _listed(messages[:at]) if _ELSE.search(plain) else (),
                _left_out(results, mine_ids),
                failed,
            )
        )
        if personal is not None and lost_list and personal.startswith(ABOUT_YOU):
            # What was listed is no longer in view: say why the list starts over.
            personal = LIST_LOST + personal
        elif personal is not None and _ELSE.search(plain) and personal.startswith(ABOUT_YOU):
            # "What else do you know about me?" with no list in view: it starts over too.
            personal = LIST_UNSEEN + personal
        if personal is not None and personal.startswith(TODOS):
            # What moved them could not be looked up: the list may be out of date.
            unchecked = next(
                (
                    f
                    for i in asked
                    if i.endswith(_CHANGES) and i.startswith("recall-")
                    for f in [_failure(results, i)]
                    if f and str(asked[i].arguments.get("query", "")).startswith(task)
                ),
                None,
            )
            if unchecked:
                personal += f" (I could not check whether any of them changed since: {unchecked}.)"
        if personal is not None:
            answers.append((task, personal))
            continue
        if _MY_TODOS.search(plain):
            if recall_ok:
                # To-dos are said with these words more than with the question's.
                query = f"{task} remind need have to do"
                args = {"query": query, "limit": 20, "from_asker": True, "types": ["todo"]}
                calls.append(ToolCall(f"recall-{key}", "memory_recall", args))
            elif (
                not failed
                and "memory_recall" in tools
                and f"recall-{key}{_NEEDS}" not in asked
                and not _needs_told(speaker, pool)
            ):
                # No to-do kept: what they said in passing they need to do, looked for.
                args = {"query": "need to have to", "limit": 5, "from_asker": True}
                args["types"] = ["fact", "event"]
                calls.append(ToolCall(f"recall-{key}{_NEEDS}", "memory_recall", args))
            elif not failed and (needs := _needs_told(speaker, pool)):
                # "gels: i use sis beta fuel, need to order more": no to-do was asked
                # for, but what they said they need to do is theirs to see.
                answers.append((task, " ".join([NO_TODOS_BUT, *(e.quoted() for e in needs)])))
            else:
                said = _nothing(failed, "You have no to-dos that I know of.")
                if not failed and (lost := _failure(results, f"recall-{key}{_NEEDS}")):
                    # (what else they said they need could not be looked for: not "nothing")
                    said += f" (I could not look for what you said you need to do: {lost}.)"
                answers.append((task, said))
            continue
        if _ABOUT_ME.search(plain) or _MY_NAME.search(plain):
            if recall_ok:
                # Who they are, what they like and plan first, in a call of its own: in a
                # small window a recall brings only what fits, and a list of the day's
                # facts must not crowd out their name and their to-dos.
                asks: tuple[tuple[str, list[str]], ...] = (("", _PERSONAL), (".facts", _MENTIONED))
                if not _ABOUT_ME.search(plain):
                    asks = (("", ["identity"]),)  # "what is my name?": who they said they are
                for suffix, kinds in asks:
                    args = {"query": task, "limit": 20, "from_asker": True, "types": kinds}
                    calls.append(ToolCall(f"recall-{key}{suffix}", "memory_recall", args))
            elif _MY_NAME.search(plain) and (name := _known_name(speaker, pool)):
                answers.append((task, f"You go by {name} here; you haven't told me another name."))
            else:
                answers.append(
                    (
                        task,
                        _nothing(
                            failed, "You haven't told me about yourself yet, as far as I know."
                        ),
                    )
                )
            continue
        # "What is my favourite colour?" is answered by what the asker said, not by
        # someone else's "My favourite colour is purple".
        mine = _MINE.search(plain) and speaker
        # "And where?", "What else?": asked of another question, answered only in kind.
        strict = bool(quoted) or wholes[at] != q.content
        theirs = pool
        # ("what did anna say about my knee?" is what Anna said, "my" though it says)
        by = _SAID_ABOUT.search(plain)
        if mine and not by:
            theirs = [e for e in pool if e.author in (speaker, "")]
        elif speaker and not by and _AM_I_DOING.search(plain):
            # "what am i bringing": what the asker said they are bringing, or what was
            # said of them by name, not Lena's "i'll bring crisps and dip"
            theirs = [e for e in pool if e.author in (speaker, "") or _mentions(speaker, e.text)]
        elif by:
            # "What did Maria say about lunch?": her lines about lunch, which need not
            # name her.
            theirs = [e for e in pool if e.author.lower() == by[1].lower()]
            plain = f"what about {by['topic']}?"
            if not theirs:
                # "what did anna say about my knee?", Anna not of the chat: what the asker
                # told of her ("anna says its probably IT band syndrome"), whatever its words.
                of_them = [e for e in pool if e.author == speaker and _mentions(by[1], e.text)]
                if of_them:
                    best, _, _ = best_all(plain, of_them)
                    of_them = [best] if best is not None else of_them[-_ALSO_MOST - 1 :]
                    answers.append((task, _listed_quotes([e.quoted() for e in of_them])))
                    continue
        elif anyone := _ANYONE_SAID.search(plain):
            plain = f"what about {anyone['topic']}?"  # "Did anyone mention the coffee machine?"
        # ("Hiya can you tell me where the party is?": the greeting asks nothing.)
        plain = split_greeting(plain)[1] or plain
        if _ROSTER_ASKED.search(plain) and (roster := _roster(theirs)):
            # "who's in for tuesday?": each player's last word on it, not one line.
            answers.append((task, roster))
            continue
        if _VOTES_ASKED.search(plain) and (votes := _votes(theirs)):
            # "whats the vote so far?": each option's count, not the one vote quoted.
            answers.append((task, votes))
            continue
        if _RECAP.search(plain) and (plan := _the_plan(theirs)):
            # "sorry late to this, whats the plan?": what was settled, newest last.
            answers.append((task, PLAN_SO_FAR + " ".join(plan)))
            continue
        if _SUM_ASKED.search(plain):
            # "whats 2200 minus 500?" quoted «harris deposit was £500»: no line answers a sum.
            answers.append((task, SUMS_REPLY))
            continue
        found, score, also = best_all(plain, theirs, strict, _context_of(key, each[at], plain))
        if found is not None and (priced := _priced_by_its_label(plain, found, theirs)):
            # "how much is fig and cedar?" of "new scent launching 1 november: fig and
            # cedar": the price is told of "the new scent".
            found, score, also = priced, max(score, 0.5), []
        if (general := _GENERAL.search(plain)) and not (
            found is not None and set(stems(general["thing"])) & set(stems(found.text))
        ):
            # "how many carbs in a banana?" is not answered by «ratio is 1 unit per 10g
            # carbs»: only a line about bananas would.
            answers.append((task, OUTSIDE_REPLY))
            continue
        if (
            (strict or _FOLLOWS_ON.match(plain) or _BARE_ASK.match(plain))
            and not quoted
            and (score < 0.34 or _BARE_ASK.match(plain))
            and (just := _in_kind(plain, messages[:at], pool))
        ):
            # "Who is coming on Friday?" quoted Zoe's line; "And where from?" asks it of
            # that line: it answers when it says where ("from Lyon").
            found, score = just, 1.0
        if score < 0.34 and _OUTSIDE.search(plain):
            # "what's the weather going to be like tomorrow?": nothing said here answers
            # it, and nothing can (no lookup goes further back for it).
            answers.append((task, OUTSIDE_REPLY))
            continue
        if (
            score < 0.34
            and not set_aside
            and not recall_ok
            and _YES_NO.match(plain)
            and (subject := _one_named(plain))
            and (known := _about_someone(subject, theirs, limit=3))
        ):
            # "Is Lucia coming to Tokyo?": nothing says so, but what was said of Lucia
            # ("joining me for the Kyoto part only") lets the asker judge.
            answers.append((task, f"Nothing I have says so. {known}"))
        elif (
            score < 0.34
            and "branch" in tools
            and "branch" not in tried
            and not strict
            and (set_aside or not recall_ok)
        ):
            calls.append(ToolCall(f"branch-{key}-{len(calls)}", "branch", {"task": task}))
        elif score < 0.34 and task in started:
            waiting.append(task)
        elif (
            score < 0.34
            or _unsure(plain, found, pool)
            # "what deadlines do i have?" with some of them compacted away: the rest are
            # in memory, not in view
            or (_MANY.match(plain) and set_aside)
        ) and recall_ok:
            # A summary's line carries no date, and may be what its author later said
            # holds no more ("I live in Porto", then "I moved to Lisbon"): the memories
            # of it say when, and what came after.
            args = {"query": recall_query(task), "limit": 5}
            calls.append(ToolCall(f"recall-{key}", "memory_recall", args))
        elif found is None or score < 0.2:
            said = UNKNOWN if not quoted else ELSE_NOTHING if goes_on else ELSE_UNKNOWN
            answers.append((task, _nothing(failed, said)))
        else:
            # "What exams do I have?": each of them, the best first; "What orders do I
            # have?" leaves out the order its author said later was cancelled.
            items, gone = [found, *also], list[Evidence]()
            if _MANY.match(plain):
                items, gone = _current(plain, items, pool)
                if speaker and _ASKED_OF_ME.search(plain):
                    # "What cakes did I order?" in a group: the asker's, not Anna's.
                    items = [e for e in items if e.author in (speaker, "")]
                    gone = [e for e in gone if e.author in (speaker, "")]
            quotes: list[str] = []
            for e in items[: 1 + _ALSO_MOST]:
                # (a line in view and the memory saved from it are one line, and a line
                # quoted before the change it is answered with is not quoted again)
                if not any(bare(e.text) in bare(q) for q in quotes):
                    quotes.append(quoted_with_changes(e, task, pool))
            listed = _listed_quotes(quotes) if quotes else NONE_CURRENT
            if gone:
                listed += " Not listed, since " + " Also, ".join(r.quoted() for r in gone)
            answers.append((task, listed))
    if calls:
        return "", calls
    for task, answer in done.items():  # branches that came back for earlier questions
        # "How much are the subs and who do we pay?": one line answered the second part
        # at once; the first, looked for further back, found the same line.
        quotes = _quoted(answer)
        if quotes and set(quotes) <= set(_quoted(" ".join(_replies_since(task, messages)))):
            answer = SAME_AS_QUOTED
        answers.append((task, answer))
        shown.setdefault(task, _asked_as(task, messages))
    if not answers and not notes:
        return HOLDING, []
    # A late answer to a part of a message ("where does Rui live?" of "where do Ana
    # and Rui live?") says which part it answers.
    whole = {m.content for m in messages if m.role == "user"}
    answers = [(shown.get(task, task), answer) for task, answer in answers]
    # "What time do we meet and where?", both answered by one line: said once.
    # (Quoting the same lines is one answer, a message's "said" or a memory's "told me".)
    same: dict[tuple[str, ...], list[str]] = {}
    as_given: dict[tuple[str, ...], str] = {}
    for asked_, answer in answers:
        quoting = tuple(_quoted(answer)) or (answer,)
        same.setdefault(quoting, []).append(asked_)
        as_given.setdefault(quoting, answer)
    merged = len(same) < len(answers)
    answers = [(" / ".join(asks), as_given[q]) for q, asks in same.items()]
    one = merged and len(questions) == 1  # every part of one question, one answer
    if len(answers) == 1 and not waiting and (answers[0][0] in whole or one):
        lines = [answers[0][1]]
    else:
        lines = [f"«{asked_}» {answer}" for asked_, answer in answers]
        lines += [f"«{shown.get(task, task)}» {HOLDING}" for task in waiting]
    return "\n".join([*notes, *lines]), []


def _self_named(m: ChatMessage) -> ChatMessage:
    """``m`` with its author's own name after a greeting read as an introduction: "Hiya,
    Ben, Freddie's dad." by Ben is "Hiya, Ben here, Freddie's dad." (a name after a
    greeting is otherwise whom it greets: "Hey Dana, …")."""
    if m.role != "user" or not m.name or is_quoted(m.content):
        return m
    own = _OWN_NAME.match(m.content)
    if own is None or own["name"].lower() != m.name.split()[0].lower():
        return m
    return replace(m, content=f"{m.content[: own.end('name')]} here{m.content[own.end('name') :]}")


# A greeting, a name, then more of the sentence: "Hiya, Ben, Freddie's dad."
_OWN_NAME = re.compile(
    r"^\W*(?:hi|hiya|hey|hello|morning|evening|good (?:morning|afternoon|evening))\b[\s,!]*"
    r"(?P<name>[A-Z][\w'-]+)(?=\s*,\s*\S)",
    re.I,
)


def _replies_since(task: str, messages: Sequence[ChatMessage]) -> list[str]:
    """The bot's replies since the message asking ``task`` (a question or a part of one)."""
    # (A part is put as a question of its own: "where is the first match" of "When is
    # the first match and where?" holds no word the question does not.)
    asked = set(stems(task))
    at = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].role == "user" and asked and asked <= set(stems(messages[i].content))
        ),
        None,
    )
    if at is None:
        return []
    return [m.content for m in messages[at + 1 :] if m.role == "assistant" and not m.tool_calls]


def _answers_since_asked(before: Sequence[ChatMessage]) -> tuple[list[str], str]:
    """The bot's replies since the question that "What else did I book?" goes on from
    (the newest one asked without "else"), that question's answer included; and that
    question."""
    replies: list[str] = []
    for m in reversed(before):
        if m.role == "assistant" and not m.tool_calls:
            replies.append(m.content)
        elif m.role == "user" and not is_quoted(m.content) and not _ELSE.search(m.content):
            return replies, m.content
    return replies, ""


# "what days?", "which pitch?": asked of what the answer before told, whatever else
# shares its word ("every 14 days").
_BARE_ASK = re.compile(r"^\W*(?:what|which)\s+(?!else\b)[\w']+\W*$", re.I)
# "and what time are we on?": asked of it too, when nothing answers it better.
_FOLLOWS_ON = re.compile(r"^\W*(?:and|so|but|ok|okay)\b|^\W*(?:when|where|who)\W*$", re.I)


def _in_kind(
    question: str, before: Sequence[ChatMessage], pool: Sequence[Evidence]
) -> Evidence | None:
    """The line the answer before ``question`` quoted, when it gives what ``question``
    asks ("where" a place, "when" a date, "who" a name), or None."""
    quoted = _quoted(_last_reply(before))
    kind = (
        _PLACE
        if _WHERE.match(question)
        else _CLOCK
        if (m := _WHAT_TIME.search(question)) and m[1].lower() == "time"
        else _DATED
        if _WHEN.search(question) or m
        else None
    )
    # ("which pitch?", "what variety?": a line saying it)
    words_ = set(stems(question)) if kind is None else set()
    # (of an answer told with its change, the change first: "Later, …" holds now)
    for x in reversed(quoted):
        for e in pool:
            if x in bare(e.text) and (kind is None or kind.search(e.text)):
                if kind is None and _WHO.match(question) and not _proper(e.text):
                    continue
                if words_ and not words_ <= set(stems(e.text)) | Overlap.stems(e.author):
                    continue  # ("who's my contact at pica?" is not "my contact at brennan…")
                return e
    return None


def _unsure(question: str, found: Evidence | None, pool: Sequence[Evidence] = ()) -> bool:
    """Whether ``found`` answers ``question`` too weakly to stop looking: a summary's
    line, a line naming nobody for "who…?" ("Who is our team lead?" is not "I moved
    to the platform team", when "Our team lead is Priya" has left the view), or a line
    replacing another ("Actually, the dinner is at Mario's instead") when what it
    replaces or calls off is not in ``pool`` (it may be in memory only)."""
    if found is None:
        return False
    if found.kind == "summary" or (_WHO.match(question) is not None and not _proper(found.text)):
        return True
    calls_off = any(_cancelled(sent, once=True) for sent in sentences(found.text))
    return (_restates(found.text) or calls_off) and said_before(found, pool) is None


# "…, and where do I live?": a second question in the same sentence.
_AND_ASKS = re.compile(
    r"\s*(?:,\s*|\s+)(?:and|also|plus)\s+(?=(?:what|where|when|who|whom|whose|how|which|why|"
    r"is|are|was|were|do|does|did|can|could|will|have|has)\b)",
    re.I,
)


# "Where do Ana and Rui live?": two people named, each to be answered.
_BOTH = re.compile(r"(?<=\S )([A-Z][\w-]+),?\s+and\s+([A-Z][\w-]+)\b(?!['\u2019])")
# The verb of the two people asked about, right before them ("where do {} live?"), not
# another's ("what do you know about {}?").
_PLURAL_VERB = re.compile(r"\b(do|are|were|have)\s+(?=\{\})", re.I)
_ONE = {"do": "does", "are": "is", "were": "was", "have": "has"}


def _one(verb: str) -> str:
    """The verb for one person: "does" for "do", "Does" for "Do"."""
    one = _ONE[verb.lower()]
    return (one.capitalize() if verb[0].isupper() else one) + " "


def _each_named(question: str) -> list[str]:
    """``question`` asked of each of two people it names ("where does Ana live?" and
    "where does Rui live?" for "where do Ana and Rui live?"), or ``question`` alone."""
    m = _BOTH.search(question)
    if m is None or {m[1].lower(), m[2].lower()} & (_NOT_ASKED_NAMES | _NOT_NAMES):
        return [question]
    frame = question[: m.start()] + "{}" + question[m.end() :]
    frame = _PLURAL_VERB.sub(lambda v: _one(v[1]), frame, count=1)
    return [frame.replace("{}", m[1]), frame.replace("{}", m[2])]


_BARE_WH = re.compile(r"^(when|where|who|why|how|what time|how much|how long)\s*\??$", re.I)
_WH_OPENS = re.compile(
    r"^(?:when|where|who|why|how|what time|how much|how long|what|which)\b(?:['\u2019]s)?"
    r"(?=\s+\w)",
    re.I,
)


def _each_question(text: str, person: str = "") -> list[tuple[str, str]]:
    """The questions one message asks, each to be answered: "What is my locker code
    and where do I live?" is two, and so are "Where does Ana live? When is my
    birthday?" and "Where do Ana and Rui live?". A message asking one question about
    one thing comes back whole.  Each comes as (what to look up, what was asked): a
    pronoun stands for the one person named before it ("what editor does she use?"
    after "Where does Priya sit", or ``person``, named by the question before)."""
    said = sentences(text)
    parts = [p.strip() for sent in said for p in _AND_ASKS.split(sent) if p.strip()]
    written: dict[str, str] = {}  # a part made whole, and how it was asked
    for i in range(1, len(parts)):
        # "where is anna's wedding and when": "when is anna's wedding".
        bare, before = _BARE_WH.match(parts[i]), _WH_OPENS.match(parts[i - 1])
        if bare and before:
            whole = bare[1] + parts[i - 1][before.end() :]
            # ("who gave us the quest and where?" is looked up as "where gave us the
            # quest", and said back as it was asked: "where?")
            written[whole] = parts[i]
            parts[i] = whole
    asked = [(q, p) for p in parts if is_question(p) for q in _each_named(p)]
    # One question alone comes back whole; beside statements, the question alone.
    if not (len(asked) > 1 or (asked and len(asked) < len(parts))):
        asked = [(text, text)]
    out = []
    for q, part in asked:
        out.append((with_person(q, person), written.get(q, q) if q == part else q))
        if people_named(part):
            person = person_named(part)  # "where do Ana and Rui live?": "they" is both
    return out


def _context_of(key: str, parts: Sequence[tuple[str, str]], plain: str) -> frozenset[str]:
    """What the parts of one message asked before part ``key`` ("3.1": the second) were
    about, when that part names no one of its own: "how much was the deposit?" after
    "What's the venue" is the venue's deposit, "where does Rui live?" after "Where does
    Ana live?" is nothing of Ana's."""
    j = int(key.partition(".")[2] or 0)
    if not j or _named(plain) or _ASKED_OF_ME.search(plain):
        return frozenset()
    before = {t for task, _ in parts[:j] for t in Overlap.stems(task)}
    return frozenset(before - Overlap.stems(plain))


def _asked_as(task: str, messages: Sequence[ChatMessage]) -> str:
    """What was asked that ``task`` looks up (a question of an earlier turn, its
    pronoun standing for a name), or ``task`` itself."""
    for at in range(len(messages) - 1, -1, -1):
        q = messages[at]
        if q.role == "user" and not is_quoted(q.content) and is_question(q.content):
            whole = _question_text(at, q, messages)
            for looked_up, said in _each_question(whole, _asked_before(at, q, messages)):
                if looked_up == task:
                    return said if whole == q.content else q.content
    return task


# "And where from?", "When is that?": a question asking only what of the one before.
_FOLLOW_UP = re.compile(
    r"^\W*(?:(?:and|so|but|ok|okay|oh)\b\W*)?(?P<wh>when|where|who|whom|why|what time|"
    r"how much|how many|how long|how|where from|from where|since when|until when|"
    r"till when|before when|by when|who with|with whom|what for)"
    r"(?:\s+(?:is|was|are|were|does|did|do|will)\b)?(?:\s+(?:it|that|this|they|he|she|them)\b)?"
    r"(?:\s+(?:from|with|for|to|at)\b)?\W*$",
    re.I,
)
_WH_LEAD = re.compile(
    r"^\W*(?:(?:and|so|but|ok|okay|oh)\b\W*)?(?:what|which|who|whom|whose|where|when|why|"
    r"how(?:\s+(?:much|many|long|old|often))?)\b\s*",
    re.I,
)


# "What else?" after an answer quoting a line: the question before, asked again for
# what was not quoted (a list about someone, or about the asker, is continued instead).
_ELSE_MARK = "what else: "
ELSE_NOTHING = "That is all I found on that."
#: "What else is open?", going on from no question it could run out of.
ELSE_UNKNOWN = "Nothing else I can see or remember covers that."
ALL_TODOS = "That is all your to-dos."
ALL_DONE = "You have no to-dos left that I know of; the last you said was done: "
TODOS = "Your to-dos: "


def _quoted(reply: str) -> list[str]:
    """What ``reply`` quoted «…», each :func:`bare`, to find it again in a line."""
    return [b for t in re.findall(r"«(.+?)»", reply, re.S) if (b := bare(t))]


def _question_text(at: int, q: ChatMessage, messages: Sequence[ChatMessage]) -> str:
    """What ``q`` (at ``at``) asks, whole: "And where from?" after "Which seed potatoes
    did I order?" asks where the seed potatoes were ordered from (a few such questions
    back); "What else?" after a quoted answer asks that question again
    (:data:`_ELSE_MARK` before it); any other question as it was typed."""
    if _WHAT_ELSE.match(q.content):
        last = _last_reply(messages[:at])
        if "«" not in last or last.startswith((ABOUT_YOU, ABOUT_YOU_MORE)) or _KNOWN_OF.match(last):
            return q.content
        before = _asked_just_before(at, messages)
        return f"{_ELSE_MARK}{before}" if before else q.content
    if _AND_ME.match(q.content) and (before := _asked_just_before(at, messages)):
        # "what about me?" after Ben's "what do i need to do?": asked again, of the asker.
        if re.search(r"\b(?:i|my|me|mine|i'm|im)\b", before, re.I):
            return before
    if (place := _AND_PREP.match(q.content)) is not None:
        # "and at pica?" after "who's my contact at brennan": the same, at Pica.
        before = _asked_just_before(at, messages)
        said = list(re.finditer(rf"\b{place['prep']}\s+(?:the\s+)?[\w'&-]+", before, re.I))
        if said:
            was = said[-1]
            return f"{before[: was.start()]}{place['prep']} {place['what']}{before[was.end() :]}"
    if (other := _AND_WHO.match(q.content)) is not None and not (
        set(other["who"].lower().split()) & _NOT_WHO
    ):
        # "And ruby?" after "what is leo allergic to?": the same asked of Ruby.
        before = _asked_just_before(at, messages)
        return _asked_of(before, other["who"]) or q.content
    follow = _FOLLOW_UP.match(q.content)
    if follow is None:
        return q.content
    for i in range(at - 1, max(-1, at - 8), -1):
        m = messages[i]
        if m.role != "user" or is_quoted(m.content):
            continue
        if not is_question(m.content):  # (in a group, whoever asked it: "And where?")
            return q.content
        before = _question_text(i, m, messages) if _FOLLOW_UP.match(m.content) else m.content
        if before is m.content and _FOLLOW_UP.match(m.content):
            return q.content  # nothing before it to ask of
        return f"{follow['wh']} {_WH_LEAD.sub('', before)}"
    return q.content


# "and at pica?", "what about in leeds?": the question before, of another place or firm.
_AND_PREP = re.compile(
    r"^\W*(?:and|what\s+about|how\s+about)\s+(?P<prep>at|in|for|from|with)\s+"
    r"(?P<what>[\w'&-]+(?:\s+[\w'&-]+)?)\s*\?*\s*$",
    re.I,
)
# "and me?", "what about me?": the question before, asked by the asker of themselves.
_AND_ME = re.compile(r"^\W*(?:and|what\s+about|how\s+about)\s+(?:me|mine|myself)\W*$", re.I)
# "And ruby?", "what about Juno?": the question before, asked of someone else.
_AND_WHO = re.compile(
    r"^\W*(?:and|what about|how about)\s+(?P<who>[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)\s*\?+\s*$",
    re.I,
)
_NOT_WHO = frozenset(
    "you u me yours mine then so why what how when where who whom which ok okay else the "
    "rest everyone anyone them us from with for since until till their his her my your our "
    "its a an this that these those".split()
)
# Whom a question asks of: "leo's" of "when is leo's trip?", "Leo", or the word after its
# verb ("what is leo allergic to?", "where does ravi work?").
_ASKED_WHO = re.compile(
    r"\b(?!(?:what|who|where|when|how|why|that|it|there|here|he|she|let)['\u2019]s)"
    r"(?P<own>[a-z][\w-]*)['\u2019]s\b|(?<=\S )(?P<name>(?!I\b)(?-i:[A-Z])[\w-]+)|"
    r"^\W*(?:what|where|when|who|how\s+\w+|which\s+\w+)\s+(?:is|are|was|does|did|do|has)\s+"
    r"(?P<after>(?!(?:the|my|your|our|a|an|it|this|that|there|he|she|they|we|i|you)\b)[a-z][\w-]*"
    # ("how much do tom and jess pay?": both are whom it asks of)
    r"(?:\s+and\s+(?!(?:the|my|your|our|a|an|it|this|that|i|you)\b)[a-z][\w-]*(?=\s+[a-z]))?)",
    re.I,
)


def _asked_of(question: str, who: str) -> str:
    """``question`` asked of ``who`` in place of whom it asks of, or "" when it names
    no one ("what's the wifi password?")."""
    m = _ASKED_WHO.search(question)
    if m is None:
        return ""
    group = "own" if m["own"] else "name" if m["name"] else "after"
    return question[: m.start(group)] + who + question[m.end(group) :]


def _asked_just_before(at: int, messages: Sequence[ChatMessage]) -> str:
    """The question asked right before the message at ``at`` (by whoever asked it),
    whole, or ""."""
    for i in range(at - 1, max(-1, at - 8), -1):
        m = messages[i]
        if m.role != "user" or is_quoted(m.content):
            continue
        if not is_question(m.content):
            return ""
        return _question_text(i, m, messages)
    return ""


def _asked_before(at: int, q: ChatMessage, messages: Sequence[ChatMessage], back: int = 3) -> str:
    """The one person the asker's question right before ``q`` (at ``at``) was about:
    "Where does she sit?" after "What editor does Priya use?" is about Priya, and so is
    "what do you know about her?" after that (up to ``back`` questions back); "" when
    the message before was not their question, or named nobody or several."""
    for i in range(at - 1, -1, -1):
        m = messages[i]
        if m.role != "user" or is_quoted(m.content):
            continue
        if (m.name or "") != (q.name or "") or not is_question(m.content):
            return ""
        if people_named(m.content) or not refers(m.content) or back <= 1:
            return person_named(m.content) or _whom_asked(m.content)
        return _asked_before(i, m, messages, back - 1)
    return ""


def _whom_asked(question: str) -> str:
    """The name "who is tiago?" asks about, written as chat is, in lower case: "whats
    his number?" after it is tiago's number.  Not a word that names no one ("who is
    coming?", "who's in?")."""
    m = _WHO_IS.match(question)
    if m is None:
        return ""
    word = m[1].removesuffix("'s").lower()
    if word in _NOT_WHOM or word.endswith(("ing", "ed")) or refers(word):
        return ""
    return m[1]


# Words after "who is" that are no one's name: "who's in?", "who is free?".
_NOT_WHOM = frozenset(
    "in out up on off free here there around about next it this that the a an we you i "
    "me us left late first last driving available able".split()
)


def _failure(results: Sequence[ChatMessage], call_id: str) -> str | None:
    """The error the tool call ``call_id`` came back with, if it failed."""
    for m in results:
        if m.tool_call_id == call_id and isinstance(body := tool_json(m), dict):
            return str(body["error"]) if "error" in body else None
    return None


def _nothing(failed: str | None, answer: str) -> str:
    """``answer`` (nothing was found), or why nothing could be looked up."""
    return f"I could not look further back: {failed}." if failed else answer


_ABOUT_SOMEONE = re.compile(
    r"(?i:\b(?:(?:what|anything)\s+(?:else\s+)?(?:do|did)\s+you\s+(?:know|remember)\s+"
    r"(?:about|of)|tell\s+me\s+(?:everything\s+|all\s+|what\s+you\s+know\s+)?about|"
    # "What did I say about Tom?", "Did I tell you anything about Kim?"
    r"(?:what\s+(?:else\s+)?|anything\s+)?(?:did|have)\s+(?:I|we)\s+(?:say|said|tell|told|"
    r"mention|mentioned)\s+(?:you\s+|to\s+you\s+)?(?:anything\s+)?about)\s+)"
    r"(?!(?:Me|Myself|Us|You|It|Them|Him|Her|That|This|The|My|Our)\b)"
    # ("aunt jo", "Dr Patel": a title and the name)
    r"((?:(?i:aunt|auntie|aunty|uncle|cousin|nana|nan|gran|granny|grandma|grandpa|dr|mr|mrs|"
    r"ms|miss|prof)\.?\s+)?[A-Z][\w-]+)\b"
)
# A title before a name: "aunt jo", "Dr Patel" (whose lines are the name's).
_TITLE = re.compile(
    r"^(?:aunt|auntie|aunty|uncle|cousin|nana|nan|gran|granny|grandma|grandpa|dr|mr|mrs|ms|"
    r"miss|prof)\.?\s+(?=\w)",
    re.I,
)


# "What did Ben say?", "what else has Ana told you": everything they said worth keeping.
# The same, the name written small: "what do you know about dan?".
_ABOUT_SOMEONE_SMALL = re.compile(_ABOUT_SOMEONE.pattern, re.I)
_SAID_BY = re.compile(
    r"(?i:\bwhat\s+(?:else\s+)?(?:did|has|have)\s+)"
    r"(?!(?:I|You|We|They|He|She|It)\b)([A-Z][\w-]+)"
    r"(?i:\s+(?:say|said|tell|told|mention|mentioned)(?:\s+(?:you|us|me))?)\W*$"
)


# "What did Maria say about lunch?", "what did anna say about my knee?" (a name written
# small too): what one person said of a thing.
_SAID_ABOUT = re.compile(
    r"\bwhat\s+(?:else\s+)?(?:did|has|have)\s+"
    r"(?!(?:I|You|We|They|He|She|It)\b)([A-Z][\w-]+)"
    r"\s+(?:say|said|tell|told|mention|mentioned|write|wrote)(?:\s+(?:you|us|me))?"
    r"\s+(?:about|of|on)\s+(?P<topic>.+?)\W*$",
    re.I,
)


# "Did anyone mention the coffee machine?": whatever was said of a thing, by anyone.
_ANYONE_SAID = re.compile(
    r"^\W*(?:did|has|have)\s+(?:anyone|anybody|someone|somebody|any of you|you guys|"
    r"people)\s+(?:ever\s+)?(?:mention(?:ed)?|say|said|talk(?:ed)?|bring|brought)"
    r"(?:\s+(?:anything|something))?(?:\s+(?:about|of|on|up))?\s+(?P<topic>.+?)\W*$",
    re.I,
)


def _one_named(question: str) -> str:
    """The one name ``question`` asks about, as written ("Lucia" of "Is Lucia coming to
    Tokyo?" is the first; a place named after it is what is asked of her), or ""."""
    found = [
        m.group(0)
        for m in _NAMED.finditer(question)
        if m.group(0).lower() not in _NOT_ASKED_NAMES and m.group(0)[0].isupper()
    ]
    return found[0] if found else ""


# A request to pass something on: "tell dan what we're reading", "can you tell ben the
# plan?".
_TELL_SOMEONE = re.compile(
    r"^\W*(?:(?:can|could|would)\s+you\s+|please\s+|pls\s+)?tell\s+[a-z][\w'-]*\s+"
    r"(?:what|where|when|who|how|which|the|about)\b",
    re.I,
)


def _about_someone(
    name: str,
    pool: Sequence[Evidence],
    limit: int = 8,
    shown: Collection[str] = (),
    by_only: bool = False,
) -> str | None:
    """What was said of ``name`` (a sentence naming them, or one they said that is worth
    keeping: "We decided the launch is on 9 March"), or with ``by_only`` only what they
    said, newest first, each with who said it and when, but for what was ``shown``
    already (then opening "Also about …"); None when nothing (more) was."""
    key = stems(_TITLE.sub("", name).split()[0])
    found: list[tuple[float, str]] = []
    seen: set[str] = set()
    overlap = Overlap([e.text for e in pool])
    for at, e in enumerate(pool):
        if (
            e.kind == "branch"
            or is_question(e.text)
            or _TELL_SOMEONE.match(e.text)
            or cant_do_asked(_without_the_bot(e.text))
        ):
            continue  # ("tell dan what we're reading" asks; it tells nothing of Dan)
        author = set(stems(e.author))
        by_them = any(k in author or any(_same_name(k, w) for w in author) for k in key)
        # "She eats Royal Canin…" after "Her name is Biscuit": of Biscuit too.
        of = _thread_of(pool, at, overlap) if _HE_SAID.match(_LEAD.sub("", e.text)) else set()
        for sent in sentences(e.text):
            said = set(stems(sent)) | of
            named = any(k in said or any(_same_name(k, w) for w in said) for k in key)
            theirs = by_them and classify(sent)[0] is not None
            if not key or not (theirs or (named and not by_only)):
                continue
            if is_question(sent) or (k := " ".join(sorted(said))) in seen or sent in shown:
                continue
            seen.add(k)
            date = f", {datetime.fromtimestamp(e.when, UTC).strftime('%Y-%m-%d')}" if e.when else ""
            found.append((e.when or 0.0, f"«{sent}» ({e.author or 'someone'}{date})"))
            # "actually the lockbox code is 4417 not 4471", of Moose's "code 4471" without
            # naming him: what set it right is known of him too.
            for f in pool:
                if (
                    f.author == e.author
                    and f.when is not None
                    and e.when is not None
                    and f.when > e.when
                    and f.text not in shown
                    and _corrects_word(f.text, sent)
                    and (k := " ".join(sorted(stems(f.text)))) not in seen
                ):
                    seen.add(k)
                    day = datetime.fromtimestamp(f.when, UTC).strftime("%Y-%m-%d")
                    found.append((f.when, f"«{f.text}» ({f.author or 'someone'}, {day})"))
    if not found:
        return None
    told = [text for _, text in sorted(found, key=lambda f: -f[0])]
    more = f"; and {len(told) - limit} more" if len(told) > limit else ""
    if by_only:
        head = f"{name} also said: " if shown else f"{name} said: "
    else:
        head = f"Also about {name}: " if shown else f"What I know about {name}: "
    return head + "; ".join(told[:limit]) + more + "."


def _changes_of(
    task: str, key: str, speaker: str, pool: Sequence[Evidence], asked: dict[str, ToolCall]
) -> ToolCall | None:
    """The recall asking what changed the asker's to-dos that ``pool`` brought from
    memory, or None when there are none or it was asked already this turn."""
    if any(
        c.id.endswith(_CHANGES) and str(c.arguments.get("query", "")).startswith(task)
        for c in asked.values()
    ):
        return None
    todos = [
        e.text
        for e in pool
        if e.kind == "memory" and e.memory_type == "todo" and e.author == speaker
    ]
    if not todos:
        return None
    query = f"{task} {_CHANGE_WORDS} " + " ".join(todos[:8])
    # (Not the to-dos again: they would fill the room the change needs.)
    kinds = [k for k in _SAVABLE if k != "todo"]
    args = {"query": query, "limit": 6, "from_asker": True, "types": kinds}
    return ToolCall(f"recall-{key}{_CHANGES}", "memory_recall", args)


_CHANGES = ".changes"
_NEEDS = ".needs"
# The words a change of plan is said with, to ask the memories for one.
_CHANGE_WORDS = "actually moved changed postponed"


def recall_query(task: str) -> str:
    """What the memories are asked for ``task``: the question, and, for a word a line
    says its own way, the words that way is said with ("what meds does dad take?": a
    line says "takes madopar 3 times a day", not "meds")."""
    asked = set(stems(task))
    more = [said for words_, said in _LOOKED_UP_AS if asked & words_]
    return " ".join([task, *more])


# A word asked for, and the words a line saying it its own way is said with.
_LOOKED_UP_AS = ((_MEDS, "takes mg times a day tablet"),)


def _recalls_for(task: str, asked: dict[str, ToolCall]) -> list[str]:
    """The ids of the recalls made for the question ``task``."""
    return [
        c.id
        for c in asked.values()
        if c.name == "memory_recall" and c.arguments.get("query") == task
    ]


def _left_out(results: Sequence[ChatMessage], call_ids: Sequence[str]) -> int:
    """How many hits the recalls ``call_ids`` found but could not bring (the window had
    no room for them)."""
    return sum(
        int(h["left_out"])
        for m in results
        if m.tool_call_id in call_ids and isinstance(hits := tool_json(m), list)
        for h in hits
        if isinstance(h, dict) and "left_out" in h
    )


def _personal_answer(
    question: str,
    speaker: str,
    pool: Sequence[Evidence],
    shown: Sequence[str] = (),
    left_out: int = 0,
    failed: str | None = None,
) -> str | None:
    """ "What is my name?" and "What do you know about me?" from what the asker said;
    None when it is another question, or nothing in ``pool`` answers it.  What the
    replies just before listed (``shown``) is not listed again: "what else?" gets the
    rest, or is told there is no more; what a recall found but could not bring
    (``left_out``) is said to be there, and a recall that ``failed`` is never passed
    off as all there is."""
    if _MY_NAME.search(question):
        name = _known_name(speaker, pool)
        # The message that gave the name, not any "I'm thinking…".
        said = [e for e in pool if e.author == speaker and _name_given(e.text) == name]
        if name and said:
            return f"Your name is {name}: {said[-1].quoted()}"
        return None
    if _MY_TODOS.search(question):
        todos = _about(speaker, pool, limit=10, kinds=("todo",))
        if todos:
            return TODOS + "; ".join(todos) + "."
        done = [
            r
            for e in pool
            if e.author == speaker and e.kind == "memory" and e.memory_type == "todo"
            for r in [_done_since(e, e.text, pool)]
            if r is not None
        ]
        if done:
            # Every to-do kept was said done since: none is left, and the asker is told
            # why, not sent to look again.
            return ALL_DONE + max(done, key=lambda r: r.when or 0).quoted()
        return None
    if _ABOUT_ME.search(question):
        facts = _about(
            speaker, pool, limit=40 if _EVERYTHING.search(question) else 10, more=left_out
        )
        if shown and facts:
            rest = [f for f in facts if f.strip(" .!") not in shown]
            new = [f for f in rest if not _MORE_ITEM.match(f)]
            # The count the list before gave ("and 14 more things") is the one to go on
            # from: this page's recall (another query, the room left) counts another set.
            before = next((int(m[1]) for f in shown if (m := _MORE_ITEM.match(f))), None)
            left = int(m[1]) if rest and (m := _MORE_ITEM.match(rest[-1])) else 0
            if before is not None and before > len(new):
                left = before - len(new)
            if new:
                tail = [
                    f"and {left} more {_things(left)} (ask me about "
                    f"{'it' if left == 1 else 'any of them'}, or what else I know about you)"
                ]
                return ABOUT_YOU_MORE + "; ".join(new + (tail if left else [])) + "."
            if left:
                # The recall brought back what was listed; the rest did not fit.
                one = left == 1
                return (
                    f"There {'is' if one else 'are'} {left} more {_things(left)} "
                    "you told me that I could not bring into this conversation at once: ask "
                    f"me about {'it' if one else 'one of them'} by name."
                )
            return _nothing(failed, ALL_TOLD) if failed else ALL_TOLD
        if facts:
            if failed and (more := _MORE_ITEM.match(facts[-1])):
                # A recall failed beside one that left some out: the count is a floor.
                at_least = f"and at least {more[1]} more {_things(int(more[1]))}"
                facts[-1] = facts[-1].replace(more[0], at_least, 1)
                return ABOUT_YOU + "; ".join(facts) + "."
            maybe = f" (There may be more: {_nothing(failed, '')})" if failed else ""
            return ABOUT_YOU + "; ".join(facts) + "." + maybe
    return None


# Words that open a question with a comma without naming whom it is put to.
_NOT_ADDRESSED = frozenset(
    "tierbot bot ok okay so also and but hey hi hello well sorry btw anyway right oh yes no "
    "quick question please thanks listen wait hmm um actually guys everyone everybody all team "
    "folks people friends question update reminder note also".split()
)
# "Sam, can you drive instead?": a question put to someone by name.
_PUT_TO = re.compile(r"^\W*@?([A-Z][\w'-]+)\s*[,:]\s+\S")
_PUT_TO_KNOWN = re.compile(
    r"(?:^\W*|,\s*)@?(?!(?i:what|where|when|who|whom|whose|why|how|which|so|and|but|then|"
    r"or|if|what's|where's|when's|how's)\b)([A-Z][\w'-]+)\s+(?:can|could|would|will|do|are)\s+"
    r"(?:you|u)\b"
)
# A question opening with whom it is put to, written small: "lena whats your number",
# "dan you're hosting in may right?".
_PUT_TO_FIRST = re.compile(
    r"^\W*@?([a-z][\w'-]+),?\s+(?:what|whats|what's|where|wheres|where's|when|whens|when's|"
    r"who|whos|who's|how|hows|how's|which|why|did|do|are|have|will|can|could|would|"
    r"you|you're|youre|your|u)\b",
    re.I,
)
# The same, the name written small ("ben can you take them?"): it must be someone's.
_PUT_TO_KNOWN_SMALL = re.compile(_PUT_TO_KNOWN.pattern, re.I)
# "my ankle is still a bit dodgy": of the speaker herself, as "I" is.
_MY_BODY = re.compile(
    r"\bmy\s+(?:\w+\s+)?(?:ankle|knee|back|leg|arm|wrist|shoulder|hip|foot|hand|head|neck|eye|"
    r"ear|tooth|teeth|stomach|chest|hamstring|calf|toe|finger|elbow|health)s?\b",
    re.I,
)
_PUT_TO_LAST = re.compile(
    r"(?:,\s*|(?<!\bwith)(?<!\babout)(?<!\bfor)(?<!\bto)(?<!\bof)(?<!\bfrom)(?<!\bat)(?<!\bby)"
    r"(?<!\band)(?<!\bor)(?<!\bis)(?<!\bare)(?<!\bwas)(?<!\bsee)(?<!\bask)(?<!\btell)(?<!\bcall)"
    r"(?<!\btext)(?<!\bpay)(?<!\bowe)(?<!\bmeet)(?<!\binvite)(?<!\bgive)(?<!\bthan)(?<!\blike)"
    r"(?<!\bbeat)(?<!\bplay)(?<!\bvs)\s+)@?([A-Za-z][\w'-]+)\s*\?+\W*$"
)
# Where a statement ends and a question put to someone starts in one sentence.
# (a name written small too: "ill bring wine, omar can you bring snacks?")
_ASKING_NEXT = re.compile(
    r",\s*(?=@?(?!(?i:what|where|when|who|how|which|why|so|and|but|then|or|if)\b)[A-Za-z][\w'-]+"
    r"\s+(?:can|could|would|will)\s+(?:you|u)\b)"
)


# "hmm what else... the oven service is booked for the 20th": thinking aloud.
_ALOUD = re.compile(r"(?:\.\.\.|…)\s*$")
# The group, named: "can everyone pay me back …", "what are you guys doing?".
_ALL_OF_YOU = re.compile(r"\b(?:everyone|everybody|you guys|y'?all|you all|all of you)\b", re.I)
# Something asked of all of them: "can everyone pay me back …" (not "what did everyone
# decide?", which asks the bot what was said).
_ASKS_ALL_OF_YOU = re.compile(
    rf"^\W*(?:(?:ok|okay|so|hey|guys|right)\W+)*(?:(?:can|could|would|will)\s+)?"
    rf"{_ALL_OF_YOU.pattern}",
    re.I,
)
# A question for the others of a group: "what's everyone eating before Leeds?", "did
# anyone see the match?", "lol who ate my sandwich"; not "did anyone mention the
# coffee machine?" (what was said: the bot's to look up).
_TO_THE_GROUP = re.compile(
    r"^\W*(?:lol|lmao|rofl|haha\w*|hehe\w*|omg)\b|"
    # "party at ours?", "pizza after?": a plan put to the others, no question word in it
    r"^(?!\W*(?:and|or|so|but|also|then)\b)(?![^?]*\b(?:what|whats|what's|where|wheres|when|"
    r"whens|who|whos|who's|how|hows|which|why|is|are|was|were|do|does|did|can|could|will|would|"
    r"should|has|have|any|anyone|my|mine|me|i|you|bot|tierbot)\b)[^?]{2,40}\?+\W*$|"
    rf"{_ALL_OF_YOU.pattern}|"
    # "can we drop paper moon, i keep messing up the bridge": put to the band
    r"^\W*(?:(?:so|ok|okay|hey|guys|actually|hmm|um|also|wait)\W+)*(?:can|could|should|shall)\s+we\b|"
    r"^\W*(?:(?:did|has|have|is|are|was|were|will|would|can|could)\s+)?"
    r"(?:anyone|anybody|someone|somebody)\b(?!\s+(?:say|said|mention|mentioned|tell|told|"
    r"know|remember|ask|asked)\b)",
    re.I,
)


def _asks(content: str) -> bool:
    """Whether ``content`` asks something (a question in it, not one thought aloud)."""
    if cant_do_asked(content):
        return True  # "search spotify for bands like us": asked, though not as a question
    parts = sentences(content)
    real = [x for x in parts if not (_ALOUD.search(x) and "?" not in x)]
    if len(real) == len(parts):
        return is_question(content) or any(is_question(x) for x in parts[:-1])
    return bool(real) and (is_question(" ".join(real)) or any(is_question(x) for x in real[:-1]))


def _asks_the_group(
    m: ChatMessage, before: Sequence[ChatMessage], put: re.Pattern[str] = _TO_THE_GROUP
) -> bool:
    """Whether ``m``, in a group, asks the others, not the bot ("what's everyone
    eating before Leeds?"), or asks them as ``put`` says."""
    me = (m.name or "").lower()
    asks = [x for x in sentences(m.content) if is_question(x)]
    # ("can everyone pay me back …" says it is a group before anyone else speaks)
    said_to_all = bool(asks) and _ASKS_ALL_OF_YOU.match(asks[0]) is not None
    others = {(x.name or "").lower() for x in before if x.role == "user"} - {me, ""}
    if not said_to_all and not others:
        return False
    # (the first question says whom: "what's everyone eating? pizza?")
    return (
        bool(asks) and bool(put.search(asks[0])) and not any(_TOLD_OF_BOT.search(x) for x in asks)
    )


# "how many pizzas should we order for friday": the group's to decide, unless it is put
# to the bot by name ("bot where should we meet?").
_WE_DECIDE = re.compile(r"\b(?:should|shall)\s+we\b", re.I)
_TOLD_OF_BOT = re.compile(r"\b(?:tierbot|bot|you remember|do you know)\b", re.I)


def _asks_someone_else(m: ChatMessage, before: Sequence[ChatMessage]) -> bool:
    """Whether ``m`` asks another person of the conversation by name ("Sam, can you drive
    instead?"), not the bot: theirs to answer."""
    me = (m.name or "").lower()
    people = {(x.name or "").lower() for x in before if x.role == "user"} - {me, ""}
    asks = [x for x in sentences(m.content) if is_question(x)]
    put = _PUT_TO.match(asks[0]) if asks else None
    if put is None and asks:
        # "Ben can you take them?", "…, Rosa can you handle the photographer?": put to
        # someone of the chat without a comma after their name.
        # ("Pls can you…", "Morning can you…": to the bot; the name must be someone's.)
        put = _PUT_TO_KNOWN.search(asks[0]) or _PUT_TO_KNOWN_SMALL.search(asks[0])
        if put is not None and put[1].lower() not in people:
            put = None
    if put is None and asks:
        # "legend, whats jay's number mia?": put to someone of the chat, named last.
        put = _PUT_TO_LAST.search(asks[-1])
        if put is not None and put[1].lower() not in people:
            put = None
    if put is None and asks:
        # "lena whats your number in case i get lost": put to her, named first.
        put = _PUT_TO_FIRST.match(asks[0])
        if put is not None and put[1].lower() not in people:
            put = None
    if put is None or put[1].lower() in _NOT_ADDRESSED:
        return False
    # "Maria, what time is lunch? Also where is it?": all of it hers.  A name not yet
    # heard from counts in a group (people join a chat before they speak).
    return bool(people)  # a group: someone else is here


def _statement_reply(
    messages: Sequence[ChatMessage],
    people: Sequence[tuple[int, ChatMessage]],
    notes: Sequence[str],
    results: Sequence[ChatMessage],
) -> str:
    """The reply to statements: a greeting when greeted, what was saved, or a short
    acknowledgement that claims nothing."""
    if not people:
        return " ".join(notes) or "Hello! I'm listening."
    current = people[-1][1]
    speaker = current.name or ""
    greeting, rest = split_greeting(current.content.strip())
    name = _known_name(speaker, candidates(messages, results))
    parts: list[str] = []
    if greeting:
        hello = greeting[0].upper() + greeting[1:] if greeting else "Hello"
        parts.append(f"{hello}, {name}!" if name else f"{hello}!")
        if not rest.strip() and not notes:
            parts.append("Ask me anything about this conversation.")
    parts.extend(notes)
    request = read_request(rest) if rest.strip() else None
    if not parts and request is not None and request.kind == "skip":
        parts.append(
            "OK: I won't save that as a memory. The message itself stays in this "
            "conversation's history."
        )
    if request is not None and request.kind == "forget" and FORGET_ALL.match(request.what):
        parts.append(
            "I can't forget everything at once from a message: tell me what to forget "
            '("forget my locker code"), one thing at a time. To erase everything you said '
            "here, an admin can run /forget --author with your name."
        )
    if not parts and read_correction(rest) is not None:
        parts.append(
            'I can\'t tell what that corrects: tell me the whole thing again ("my … is …") '
            "and I'll note it."
        )
    if _LOSS.search(rest) and not any(p.startswith("I'm sorry") for p in parts):
        parts.insert(1 if greeting else 0, "I'm sorry for your loss.")
    elif (
        _NERVES_AHEAD.search(rest)
        # (not when it tells a hard time besides: "mum's in hospital, so nervous about…")
        and not _HARD_TIME.search(_NERVES_AHEAD.sub(" ", rest))
        and not any(p.startswith("I'm sorry") for p in parts)
    ):
        parts.insert(1 if greeting else 0, LUCK_REPLY)
    elif _HARD_TIME.search(rest) and not any(p.startswith("I'm sorry") for p in parts):
        parts.insert(1 if greeting else 0, "I'm sorry to hear that.")
    elif _GOOD_NEWS.search(rest) and not _NOT_SO.search(rest):
        parts.insert(1 if greeting else 0, GLAD_REPLY)
    if not parts:
        thanks = _THANKS.match(rest)
        # "Thanks Sarah, that's a huge help": not the bot's to answer; nor, where others
        # talk too, "cheers gaffer" (a coach, a mate: one of them).
        to = _THANKED.match(rest[thanks.end() :]) if thanks else None
        others = {(m.name or "").lower() for m in messages if m.role == "user"} - {
            speaker.lower(),
            "",
        }
        after = rest[thanks.end() :] if thanks else ""
        titled = thanks is not None and bool(others) and _TITLED.match(after) is not None
        # "thanks aisha!": one of the chat, their name written small
        named = re.match(r"[\s,]+([a-z][\w'-]*)\b", after, re.I)
        titled = titled or (named is not None and named[1].lower() in others)
        if thanks and not titled and (to is None or to[1].lower() in _NOT_ADDRESSED | STOPWORDS):
            parts.append("You're welcome.")
        else:
            parts.append(f"OK, {name}." if name else "OK.")
    return " ".join(parts)
