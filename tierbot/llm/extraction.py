"""Rule-based reading of chat lines: what kind of memory a sentence holds, if any.

The offline provider saves memories with these rules, and reads explicit requests
("Remember that…", "Forget that…") and greetings with them.  The types:

* ``identity``: who the speaker is: name, pronouns, age, job or role, team, where
  they live or come from, their family ("I'm Dana", "I lead the platform team",
  "I have two kids");
* ``preference``: what they like, dislike, favour, or how they want things done;
* ``decision``: what someone decided, agreed or chose, and rules set from now on;
* ``goal``: what someone wants, plans or hopes to do, with no deadline;
* ``todo``: something to do, with or without a deadline ("I need to…", "don't forget
  to…", "send the invoice by Friday");
* ``event``: something that happened or is scheduled, at a time;
* ``fact``: any other durable, specific statement (codes, numbers, names, places);
* nothing: chit-chat (greetings, thanks, laughter, "back in 10"), passing states
  ("I'm tired"), questions, and lines too short or vague to recall later.

Rules are patterns of phrasing (first person + verb classes, modal verbs, time
expressions), tried most specific first; they do not know any particular sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tierbot.llm.text import STOPWORDS, says_something, sentences, stems, unshout, words
from tierbot.llm.transcript import BOT_MARK, TranscriptEntry

__all__ = [
    "CHANGED",
    "NOT_THAT",
    "NO_LONGER",
    "RESTATING",
    "THIS_NOT_THAT",
    "ExtractedMemory",
    "Request",
    "classify",
    "extract_memories",
    "is_chitchat",
    "is_question",
    "lower_case_name",
    "read_request",
    "says_something",
    "split_greeting",
    "to_second_person",
]


class _Folded:
    """A case-insensitive pattern for a yes/no test, matched against the lowercased
    text by a case-sensitive pattern: the same answer as ``re.compile(pattern, re.I)``
    on chat text, two to three times faster, as Python's ``re`` folds the case of every
    character it tries and these patterns try many at every position.  The pattern must
    be written in lower case (``[A-Z]`` stands for any letter, as it does under re.I);
    an upper-case letter elsewhere is refused at import, so an edit cannot silently
    stop matching."""

    __slots__ = ("_re", "pattern")

    def __init__(self, pattern: str) -> None:
        folded = pattern.replace("[A-Z]", "[a-z]")
        if re.search(r"[A-Z]", re.sub(r"\\.", "", folded)):
            raise ValueError(f"a folded pattern is written in lower case: {pattern[:60]!r}")
        self.pattern = pattern
        self._re = re.compile(folded)

    def search(self, text: str) -> bool:
        return self._re.search(text.lower()) is not None

    def match(self, text: str) -> bool:
        return self._re.match(text.lower()) is not None


_QUESTION_START = _Folded(
    r"^(what|when|where|who|whom|whose|why|how|which|does|did|is|are|was|were|"
    # Typed without the apostrophe: "whats my door code".
    r"whats|wheres|whos|hows|whens|whys|wats|wat|wut|wen|whn|"
    # "anything else", typed without its "?", asks for the rest.
    r"anything else|"
    # ("can cross train on the bike though": told, its "I" left off)
    r"can(?!'?t\b|not\b)(?! (cross|bring|do|make|take|go|come|get|pick|drive|run|train|swim|"
    r"walk|ride|cycle|help|cover|host|only|still|also|now|definitely|probably|just)\b)|"
    # ("will do", "should be fine", "have done": told, its "I" or "it" left off)
    r"(could(?!n'?t\b)|will|should|(have|has|had)(?! (to|a|an|the|my|our|some|no|two|three|"
    r"\d+)\b))(?! (be|been|do|done|have|go|get|try|check|send|look|sort|call|come|bring|pick|"
    r"give|make|take|need|pop|drop|grab|let|keep|text|ring|email)\b)|tell me|"
    r"recall|any ?one|anybody|"
    # "Do the exercises daily" tells; "Would love to…" wishes: neither asks.
    r"do(?! (the|a|an|your|some|it|this|that|these|those|not)\b)|"
    r"would(?! (love|like|be (great|nice|good|amazing|cool|awesome|lovely|brilliant)) "
    r"(for \w+ )?to\b)(?! (be|do|have)\b))\b",
)

# "so what do u know about me", "ok and when is it": words that lead into a question.
_LEAD_IN = re.compile(
    r"^(?:(?:so|ok|okay|k|and|but|also|btw|anyway|um+|uh+|hm+|oh|well|right|alright|lol)\b"
    r"[,.]*\s+)+",
    re.I,
)
# "What a week, honestly." / "How lovely!": an exclamation, unless it ends with "?".
_EXCLAIMS = re.compile(
    r"^(?:what an?\b|how (?:nice|cool|lovely|fun|great|sweet|sad|awful|annoying|funny|"
    r"exciting|weird|strange|cute|kind|rude|typical)\b)",
    re.I,
)
# "Did you know croissants are Austrian?" tells; "did you know my name?" asks.
_DID_YOU_KNOW = re.compile(
    r"^did (?:you|u) know (?:that )?(?!(?:my|our|what|who|when|where|"
    r"how|which|if|whether)\b)\w",
    re.I,
)

# "Remind me what the wifi password is" asks; "Remind me: renew the passport" does not.
_ASKING = _Folded(
    r"^(please )?(remind me|remember|tell me)\s+(what|when|where|who|whom|whose|how|which|why|"
    r"if|whether)\b",
)
_GREETING = re.compile(
    r"^\s*(hi|hello|hey|hiya|yo|howdy|heya|hullo|greetings|gm|"
    # "evening carer is kwame": a bare "morning" or "evening" before a word of the
    # sentence, with nothing between, is that sentence's ("morning all", "morning i …"
    # and "morning! …" greet)
    r"(?:morning|evening)(?!\s+(?!(?:i|i'm|im|we|we're|my|our|so|just|all|everyone|folks|"
    r"team|guys|there|y'all|you|again|mate|lads|peeps)\b)(?-i:[a-z]))|"
    r"good (morning|afternoon|evening|day))\b(\s+(there|all|everyone|folks|team|tierbot|"
    r"bot|you|guys|y'all))?\s*[!,.:;-]*\s*",
    re.I,
)

# "Remember that…", "Note: …", "Don't forget that…", "Remind me: …", "Forget that…".
_REMEMBER = re.compile(
    r"^\s*(?:please\s+|pls\s+|hey\s+\w+,?\s+)?(?:also\s+|and\s+)?(?P<verb>remember|"
    r"note(?: for (?:the log|later|the record|everyone)| to self)?|make a note|take a note|"
    r"keep in mind|don'?t forget|do not forget|never forget|remind me|save|memorize|memorise|"
    # Typed in a hurry: "pls remeber that…".
    r"remeber|rember|remmber|remembr|rmember|rememebr)"
    r"(?:\s+(?:also|too|as\s+well|please|pls))?"
    r"(?:\s+(?:that|this|the fact that))?\s*[:,-]?\s+(?P<rest>\S.*)$",
    re.I | re.S,
)
_FORGET = re.compile(
    # ("actually forget the Hague Blue, …", "also forget what I said about the van")
    r"^\s*(?:(?:actually|also|oh|and|ok|okay|btw|so|but|sorry|wait)\b[\s,.!:-]*)*"
    r"(?:please\s+|pls\s+)?(?:forget(?:\s+(?:about|that|the fact that|what i (?:said|told "
    r"you) about))?|(?:delete|erase|remove)\s+(?:that|the fact that|what i (?:said|told you) "
    r"about|the memory (?:of|about|that)))\s+(?P<rest>\S.*)$",
    re.I | re.S,
)
# "Please delete the cabin wifi password", "remove my address from your memory": what
# someone told, to be forgotten ("delete the staging bucket" is a job, not this).
_INFO = (
    r"(?:password|passcode|passphrase|pin|code|combination|number|phone|address|e-?mail|"
    r"birthday|birth ?date|details|info|information|login|username|card|iban|"
    r"postcode|zip(?: code)?|location|secret)s?"
)
_DELETE = re.compile(
    r"^\s*(?:please\s+|pls\s+)?(?:delete|erase|remove|wipe|scrub|purge|get rid of)\s+"
    rf"(?P<rest>(?:my|the|our|[^\W\d_][\w-]*'s)\b[^.?!\n]{{0,60}}?\b{_INFO}\b[^\n]*?|[^\n]*?(?=\s+from\s+"
    r"(?:your|the)\s+(?:memory|memories)\b))(?:\s+from\s+(?:your|the)\s+(?:memory|memories))?"
    r"(?:,?\s+(?:please|pls|thanks|thank you))?\s*[.!]*$",
    re.I,
)
# "Forget everything", "forget all about me": more than one request should do at once.
FORGET_ALL = re.compile(
    r"^(?:everything|all|it all|all of it|all (?:that|this)|everything (?:about me|(?:that )?i"
    r"(?:'ve| have)? (?:ever )?(?:told|said to|said) you|you know(?: about me)?|i said)|"
    r"all about me|(?:about )?me)\W*$",
    re.I,
)
# "Can you remember that…?", "Could you please note…": a request, asked politely.
_POLITE = re.compile(
    r"^\s*(?:(?:can|could|would|will)\s+you\s+(?:please\s+|pls\s+|kindly\s+|also\s+)?|"
    r"(?:please|pls|kindly)\s+)(?=(?:remember|note|save|make a note|take a note|keep in mind|"
    r"memori[sz]e|forget|delete|erase|remove)\b)|"
    # "can someone forget my ankle stuff": in a group, only the bot forgets
    r"^\s*(?:can|could|would|will)\s+(?:someone|somebody|anyone|anybody)\s+(?:please\s+|pls\s+)?"
    r"(?=(?:forget|delete|erase)\b)",
    re.I,
)
# "/remember …" typed as if it were a command.
_SLASH = re.compile(r"^\s*/(?=(?:remember|forget|note|save)\b)", re.I)
# "Please don't remember my PIN": nothing to keep.
# "Please don't remember my PIN", "Oh, and don't save this: …", "Just between us, don't…".
_DONT_KEEP = re.compile(
    r"^\s*(?:[\w\s']{0,30}[,:;]\s*)?(?:(?:please|pls|and|so|also|but)\s+)*"
    r"(?:don'?t|do not|never)\s+"
    r"(?:remember|save|store|record|keep|note|write down|memori[sz]e)\b(?!\s+to\b)",
    re.I,
)
# "Please keep Elif's passport number private", "keep this between us": nothing to keep
# either (what it names is the part after "keep").
_KEEP_PRIVATE = re.compile(
    r"^\s*(?:[\w\s']{0,30}[,:;]\s*)?(?:(?:please|pls|and|so|also|but)\s+)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?keep\s+(?P<what>.+?)\s+"
    r"(?:private|secret|confidential|to yourself|between (?:us|you and me|ourselves)|"
    r"off the record|under wraps|quiet)\b(?:,?\s+(?:please|pls|thanks|thank you))?"
    r"(?:\W*$|\s*[:,-]\s*(?P<told>\S.*)$)",
    re.I | re.S,
)


def _straight(text: str) -> str:
    """Chat text with typographic apostrophes made plain ("Don’t" is "Don't"), and the
    question and exclamation marks of other scripts ("番号は？", "؟") as "?" and "!"."""
    return text.translate(_PLAIN_MARKS)


_PLAIN_MARKS = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\uff1f": "?", "\u061f": "?", "\uff01": "!"}
)


_WH = re.compile(r"^(what|when|where|who|whom|whose|how|which|why|if|whether)\b", re.I)
# "remember to X" is an instruction to the reader, and a to-do for the speaker.
_REMEMBER_TO = re.compile(r"^(to|about)\s+", re.I)

_CHITCHAT = _Folded(
    r"^\s*(lol|lmao|rofl|haha+|hehe+|ok(ay)?|k|kk|cool|nice|great|awesome|sweet|neat|wow|"
    r"yes|yeah|yep|yup|no|nope|nah|sure|thanks?( you)?( so much)?( all| everyone)?|thx|ty|"
    r"np|no problem|you'?re welcome|cheers|congrats|congratulations|sounds good|"
    r"good (idea|point|call|stuff|job|night)|same|same here|me too|agreed|\+1|brb|afk|"
    r"gtg|g2g|ttyl|bye|see (you|ya)( later| tomorrow| soon)?|night|gn|oops|sorry|my bad|"
    r"omg|ugh|hmm+|ah+|oh+|yay|welcome( back)?|good luck|have fun|enjoy|makes sense|"
    r"fair enough|true|indeed|exactly|right|done|noted|got it|i see|interesting|"
    r"happy (birthday|new year|holidays|friday|monday|anniversary|easter|diwali|eid)|"
    r"merry christmas|well done|nice (one|work|job))\b"
    r"[\s!.?,:;)(*\-]*(\S+[\s!.?,)]*){0,2}$",
)
_AWAY = _Folded(
    r"\b(brb|afk|be right back|back in \d{1,2}|back soon|stepping (away|out)|(coffee|lunch|"
    r"smoke|tea|bio) break|grabbing (a )?(coffee|lunch|food|tea)|heading (out|off|home)|"
    r"logging off|signing off|gotta (go|run)|off to (bed|lunch)|"
    r"see (you|ya|yous|y'all)( all)? (on the other side|later|soon|in a bit|shortly)|"
    r"(done|finished|wrecked|dead|knackered|shattered|cooked) for (today|tonight|the day)|"
    r"(going|off|heading|gone|went) (to|for) (lunch|dinner|breakfast|brunch|bed|sleep|a nap|"
    r"a walk|a smoke|the (gym|loo|toilet|bathroom|shop|store|kitchen)|get (a )?(coffee|"
    r"food|lunch|snack|drink|tea)))\b",
)
# Passing states and small talk: true now, not worth recalling next month.
_PASSING = _Folded(
    r"^\s*(i'?m|i am|we'?re|feeling|feel|it'?s|its|so|this is|that'?s|that was|what a)\s+"
    r"(so |really |pretty |kinda |a bit |quite |super |very |totally |just )*"
    r"(tired|sleepy|hungry|bored|busy|sick|exhausted|stressed|excited|happy|sad|cold|hot|"
    r"late|back|here|online|around|confused|lost|done|fine|good|ok|okay|great|hilarious|"
    r"funny|awesome|amazing|wild|crazy|nice|rough|brutal|annoying|weird|raining|sunny|"
    r"freezing|snowing|a long day|a good one|one of those days)\b[\s\w,']{0,50}[^\w]*$|"
    # Venting about a thing: "ugh wedding planning is sooo exhausting honestly".
    r"^\s*((ugh|argh|urgh|omg|man|god|honestly|tbh)\W+)*[\w' -]{1,40}? (is|are|'s|has been|"
    r"have been|was) ((so+|really|super|very|such|totally|absolutely|incredibly|soo+) )+"
    r"(exhausting|stressful|draining|tiring|overwhelming|frustrating|annoying|boring|"
    r"a nightmare|a pain|a drag)\b[\s\w,']{0,30}[^\w]*$|"
    # Said without a subject: "freezing this morning, my fingers are numb".
    r"^\s*(so |really )?(freezing|boiling|exhausted|knackered|starving|shattered|soaked|"
    r"drenched|wiped out)\b[\s\w,']{0,50}[^\w]*$|"
    # Praise of the moment: "Great energy at rehearsal tonight", "good shift everyone".
    r"^(great|good|amazing|brilliant|lovely|fab|fantastic|awesome|solid) (energy|job|work|"
    r"session|rehearsal|show|game|effort|run|shift|practice|class|day|night|turnout)\b|"
    # How busy a place is right now: "Lobby is packed", "the bar's dead tonight".
    r"^(the )?[\w-]+( [\w-]+)? (is|are|'s) (so |really |absolutely |totally )?(packed|rammed|"
    r"heaving|mobbed|dead|quiet|chaos|manic|mental|slammed)\b|"
    # "5:30 it is, thanks", "Tuesday it is": agreeing to what someone proposed.
    r"^[\w:.]+( \w+)? it is\b[^\w]*((thanks?|cheers|then)\b)?[^\w]*$|"
    r"\d+ (hours?|hrs|mins?|minutes) to go\b",
)

# Cheering someone on: warm, and nothing to recall later.
_ENCOURAGING = _Folded(
    r"\b(keep (it up|going|pushing|chasing|at it|believing|on|plugging|working)|"
    r"(don'?t|never|won'?t|will not|not going to|gonna) (quit|give up|stop|let (you|anything|"
    r"it|them|that) (down|get|hold|stop))|believe in yourself|you('ve| have)? got this|"
    r"rock on|take care|stay (positive|motivated|strong|focused|safe)|"
    r"let'?s (keep|make|do this|go for it|live|chase|celebrate|support)|"
    r"check (it|this|that|'em|them) out|here'?s a (pic|photo|picture)|"
    r"(means|meant) (a lot|the world|so much|a ton)|proud of you|go for it|you can do it|"
    r"good luck|fingers crossed|break a leg|sending (hugs|love|good vibes|strength)|"
    r"chase (your|our|my) dreams?|follow (your|our) dreams?)\b|\bcome on\b[^\w]*$",
)
_I = r"(?:i|i'm|i am|i've|i have|i'd|i'll|we|we're|we've|we'll)"

# Words ending like a role noun that are not one ("under", "better", "floor", "exist").
_NOT_ROLES = frozenset(
    "after another bitter better bigger clever corner eager either error ever faster "
    "favor favour floor further higher horror honor honour humor humour indoor longer "
    "lower major matter mirror minor neither never number older other outdoor over "
    "poorer proper rather sober sooner super terror together under whatever wider worse "
    "younger assist consist exist insist persist resist twist wrist disaster monster "
    "character weather water letter paper dinner winter summer power order answer border "
    "center centre computer chapter river flower finger cancer danger hunger anger fever "
    "silver copper tower shower butter burger liver poster folder cluster filter layer "
    "wonder murder thunder whisper temper trigger sticker spider clearer closer slower "
    "quicker louder smarter safer stronger weaker warmer colder cooler hotter darker lighter "
    "harder tougher calmer fitter keener bolder braver wiser later sooner".split()
)
# Role nouns the suffixes below miss.
_ROLE_WORDS = (
    r"student|resident|assistant|consultant|accountant|attendant|agent|president|parent|"
    r"tenant|applicant|participant|sergeant|lieutenant|merchant|analyst|nurse|doctor|"
    r"chef|cook|lead|head|chair|captain|coach|intern|admin|vet|pilot|clerk|medic|mechanic|"
    r"paramedic|midwife|mom|mum|dad|mother|father|wife|husband|partner|son|daughter|"
    r"sister|brother|cousin|aunt|uncle|niece|nephew|grandma|grandpa|fianc[ée]e?|"
    r"roommate|flatmate|housemate|neighbou?r|friend|boss|colleague|coworker|co-founder|"
    r"founder|owner|member|volunteer|trainee|employee|retiree|referee|attendee|mentee|"
    r"actress|waitress|hostess|surgeon|dentist|pharmacist|therapist|guide|rep|"
    r"secretary|treasurer|deputy|chief|host|staff|crew|liaison|point of contact"
)
_ROLE_NOUN = re.compile(
    rf"^(?:(?:{_ROLE_WORDS})|[a-z]{{3,}}(?:er|or|ist|ian|eer|ographer|smith|wright))s?$"
)
_THING_AFTER = (
    r"(?=\s+(?:of|for|at|on|in|with|from|who|that|and|here|there|since|to|by|"
    r"around|across)\b|\s*[,.!;:)]|\s*$)"
)
_FUNCTION_WORD = (
    r"(?:the|a|an|of|under|over|in|on|at|to|for|with|from|by|my|your|our|their|his|her|"
    r"its|this|that|bit|lot|little|tad|kind|sort|one)"
)
# "I'm [also] a/the/one of the [three words] <role>", "I'm Noor's partner".
_ROLE_PHRASE = re.compile(
    r"\b(?:i'?m|i am)\s+(?:also\s+|now\s+|currently\s+|still\s+|actually\s+)?"
    r"(?:an?|the|our|their|his|her|one of (?:the|our|their|its|two|three|several|"
    r"the few|[\w-]+'s)|[\w-]+'s|the [\w-]+'s)\s+"
    rf"(?:(?!{_FUNCTION_WORD}\b)[\w-]+\s+){{0,3}}?(?P<role>[\w\u00e9-]+){_THING_AFTER}"
)


# Typed all in lower case, the name opens the message, followed by a comma, "and" or
# nothing: "hey im jonas, 2nd year comp sci", "i'm priya", not "i'm starving" nor "im
# sooo tired" (the states and moods a name is not are left out).
_LOWER_NAME = re.compile(
    r"^(?:i'm|i am|im)\s+(?!(?:so|very|just|not|also|still|really|back|here|done|fine|"
    r"good|going|off|out|on|in|at|ok|okay|sure|sorry|glad|tired|bored|busy|sick|hungry|"
    r"starving|sleepy|late|home|away|ready|free|new|lost|stuck|broke|sad|hungover|"
    r"confused|happy|excited|exhausted|stressed|annoyed|cold|hot|dead|sooo+)\b)"
    r"(?!\w{3,}(?:ed|ing)\b)([a-z][a-z'-]+)(?=\s*[,.!;]|\s*$|\s+(?:and|from|here)\b)"
)


def lower_case_name(text: str) -> str:
    """The name a message typed in lower case opens by giving ("hey im jonas, …" gives
    "jonas"), or ""."""
    m = _LOWER_NAME.match(split_greeting(_straight(text.strip()))[1])
    return m[1] if m else ""


class _IdentityShape:
    """Self-description by its shape, where the word lists of the identity rule above
    cannot enumerate it: a name said with its capital ("I'm Felix, …", "I'm
    Canadian"), a relation to someone named ("I'm Noor's partner"), a role noun known
    by its suffix ("an amateur astronomer", "the club's outreach coordinator", "one of
    the core maintainers"), a role by what one does ("the one who books our gigs", "I
    handle sales"), and a tenure ("I've been on this ward for six years")."""

    # Case matters here: a capital after "I'm" marks a name or a nationality.
    _NAME = re.compile(
        r"\b(?:I'm|I am|Im|i'm|i am)\s+(?!I\b|A\b|An\b|The\b|So\b|Not\b|Just\b|Also\b|"
        r"Really\b|Very\b|Still\b|Sorry\b|Here\b|Back\b|Done\b|Fine\b|Good\b|Going\b|"
        r"Off\b|Out\b|On\b|In\b|At\b|OK\b|Ok\b|Okay\b|Sure\b)[A-Z][a-z]+(?:'s\s+\w+)?"
        # "I'm Omar Haddad.": a family name after the given one.
        r"(?:\s+[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?)?"
        r"(?=\s*[,.!;:)]|\s*$|\s+(?:and|from|by|here|,|of|the)\b|'s\s)"
    )
    _DOER = _Folded(
        r"\b(i'?m|i am) (also |usually |always )?the (one|person|guy|girl|woman|man|"
        r"people) (who|that) (?!always\b|is\b|was\b|has\b)\w{2,}s\b|"
        r"\b(i'?m|i am) (also |now |currently )?(in charge of|responsible for|head of)\b|"
        r"\bi (also |mainly |mostly |usually )?(handle|oversee|coordinate|organi[sz]e|"
        r"supervise|chair|host|edit|maintain|cover|represent|moderate) (the |our |"
        r"all |most |all the |every )?(?!(it|that|this|them|him|her|you|things|stuff|"
        r"myself)\b)[\w-]+\b|"
        r"\bi'?ve been (on|at|with|in|part of|working (at|in|for|on)|living in|"
        r"doing|running|leading|playing|singing|riding|rowing|volunteering)\b"
        r"[\w\s',-]{0,40}? (for [\w\s]{1,20}?(years?|decades?)|since (19|20)\d\d)\b"
    )

    # "Mateo here, just joined the club": a name introducing itself.
    _HERE = re.compile(
        r"^(?!(?:Nobody|Everyone|Everybody|Somebody|Someone|Anyone|Anybody|Who|Not|Is|Are|"
        r"Same|Still|Also|Over|Out|Right|Back|Nothing|Something|Sign|Click|Look|Come|Stay|"
        r"Sit|Wait|Up|Down|In|Check|Park|Meet|Start|Stop|Turn|Put|Just|Only|Get|Go|Be)\b)"
        r"[A-Z][a-z]+(?: [A-Z][a-z]+)? here(?=\s*[,.!;:-]|\s*$)"
    )

    # "I've been head nurse here for nine years": a role held for years.
    _TENURE = re.compile(
        r"\bi'?ve been (?:an? |the )?(?:[\w-]+ ){0,2}?(?P<role>[\w-]+) (?:here |there )?"
        r"for [\w\s]{1,20}?(?:years?|decades?)\b",
        re.I,
    )

    # "I'm team leader on B shift", "I'm head chef at …": a role noun without an article.
    _BARE_ROLE = re.compile(
        r"\b(?:i'?m|i am)\s+(?:[\w-]+\s+)?(?P<role>[\w-]+)\s+(?:on|at|for|of|in)\s", re.I
    )
    # "Kofi — PhD student at Durham", "Ines, pastry chef": a name, then what they are.
    _NAME_ROLE = re.compile(
        r"^(?:[A-Z][a-z]+\s*(?:[—–-]|,)\s*|[\w\s]{0,30}:\s*[A-Z][a-z]+\s*[—–,-]\s*)"
        r"(?:an? |the )?(?:[\w-]+\s+){0,2}?(?P<role>[\w-]+)(?=\s+(?:at|on|in|for|of|here|"
        r"with)\b|\s*[,.!;]|\s*$)"
    )

    # "My wife is Sofia": a relative named with a capital ("my son is in hospital" is not).
    _FAMILY_NAME = re.compile(
        r"\b[Mm]y (?:wife|husband|partner|boyfriend|girlfriend|fianc[ée]+|son|daughter|kids?|"
        r"mom|mum|dad|mother|father|brother|sister|dog|cat) (?:is|are) (?!I\b)[A-Z]\w*"
    )

    def search(self, text: str) -> bool:
        if (
            self._NAME.search(text)
            or self._HERE.match(text)
            or self._DOER.search(text)
            or lower_case_name(text)
        ):
            return True
        if self._FAMILY_NAME.search(text):
            return True
        for m in (self._BARE_ROLE.search(text), self._NAME_ROLE.match(text)):
            role = m["role"].lower().strip("-") if m else ""
            if (
                role
                and role not in _NOT_ROLES
                and not role.endswith("ier")
                and _ROLE_NOUN.match(role)
            ):
                return True
        if (m := self._TENURE.search(text)) and _ROLE_NOUN.match(m["role"].lower()):
            return True
        for m in _ROLE_PHRASE.finditer(text.lower()):
            role = m["role"].strip("-")
            if role not in _NOT_ROLES and _ROLE_NOUN.match(role):
                return True
        return False


# (memory type, default importance, pattern); first match wins, most specific first.
_RULES: tuple[tuple[str, float, _Folded | _IdentityShape], ...] = (
    (
        "decision",
        0.8,
        _Folded(
            r"\b((we|they|team|i|you|everyone|management|leadership|the group|the board|"
            r"the committee|the council|the club|the owners?|coach|the boss)\b"
            r"[\w\s,']{0,30}\b(decided|agreed|chose|chosen|settled on|settled|voted|committed to|"
            r"signed off on|approved|picked|opted)\b|^(agreed|decided|settled|it'?s settled|"
            r"confirmed)\b[\s,:;-]+(then\b[\s,:;-]*)?\S+ \S+|(has|have|'ve|had) "
            r"(decided|agreed|chosen|opted|voted)\b|\b(agreed|decided|voted) (to|that|on)\b|"
            r"decided to|decision( is|:)|let'?s go with|it'?s settled|"
            r"((we'?re|we are) (dropping|scrapping|cutting|switching|changing|moving|raising|"
            r"lowering|adding|replacing)|(i'?m|i am) (dropping|scrapping|cutting|switching|"
            r"changing|raising|lowering|replacing))\b[\w\s,'£$€]{0,60}\b(from (now|today|"
            r"tomorrow|next \w+|this \w+|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
            r"[a-z]*|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|only now|"
            r"(is|are) out|instead)|going up to\b[^.]{0,30}\bfrom\b|"
            r"(we'?re|we are|i'?m) going with|(we'?ll|we will) (go with|use|stick with|switch to|"
            r"move to|standardi[sz]e on)|(we'?ll|we will) (do|hold|meet|have|run|rotate|"
            r"alternate|keep|start|switch)\b[\w\s,'-]{0,60}\b(every|weekly|monthly|each|"
            r"on (mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekdays))\b|"
            r"that'?s the (rule|plan|deal|policy)\b|the plan is|final (answer|call|decision)|"
            # "Committee agreed: …", "Decided: …".
            r"^([\w-]+ ){0,2}(agreed|decided|voted|confirmed)\s*:\s*|"
            # "Ok sorted, we'll split the delivery 50/50", "Right, we'll fish the bank Tuesday".
            r"^(ok|okay|right|alright|sorted|fine|deal)\b[\s,.!:;-]+((sorted|then|so)\b"
            r"[\s,.!:;-]+)?(we'?ll|we will|we'?re going to)\b|"
            r"(we'?ll|we will|we'?re|we are|i'?ll|i will) (stop|start|no longer|only)\b"
            r"[\w\s,'-]{0,40}\bfrom (now|today|tomorrow|next \w+|monday|tuesday|wednesday|"
            r"thursday|friday|saturday|sunday|the \d)|"
            r"from now on|going forward|starting (today|now|next \w+)|it'?s official|"
            r"is the new (default|standard|policy|rule)|(we|i) ended up (going with|choosing|"
            r"picking)|no more \w+ (on|after|before)|(will|shall) be (held|moved) (on|to)|"
            r"(new |our |the )(policy|rule|convention|process) (is|:)|"
            r"(we|i) (booked|took|chose|picked|went with|bought|used|are taking|'re taking)"
            r"\b[\w\s,']{0,40}\binstead of)\b",
        ),
    ),
    (
        "preference",
        0.7,
        _Folded(
            r"\b(i|we) (really |truly |do |absolutely |kind of |kinda |much |still |always |"
            r"usually |generally |honestly |genuinely |personally |definitely )?(like|love|prefer|"
            r"enjoy|hate|dislike|adore|detest|despise|loathe|"
            r"can'?t stand|cannot stand|don'?t (like|enjoy|care for|eat|drink)|"
            r"would rather|am into|'m into|'m not into|am not into|"
            r"'m obsessed with|am obsessed with)\b|"
            r"\b(i|we)('d| would) rather\b|\b(i|we) (always|never|usually) (book|order|"
            r"choose|pick|take|play|sit|eat|drink|drive|fly|use|go for|wear)\b|"
            r"\bmy (absolute |all-time |all time )?favou?rite\b|\bmy go-to\b|"
            r"\b(i'?m|i am) (a (big|huge|massive|die-?hard) )?(fan of|not a fan of)\b|"
            r"\b(i'?m|i am) (a |now |strictly |mostly )?(vegetarian|vegan|pescatarian|"
            r"teetotal|halal|kosher|gluten[- ]free|dairy[- ]free|plant[- ]based|keto|paleo|"
            r"night owl|morning person|dog person|cat person)\b|"
            r"\bplease (always|never|don'?t ever|stop)\b|^(not|never) (a )?(fan of|keen on|"
            r"into|big on)\b|\b(i'?m|i am) (not |really |quite |very |so )?(keen on|big on)\b|"
            r"\bsuits me\b|\b(can'?t|cannot) stand\b|\b(sick|fed up) (of|with)\b|"
            # "No florals for me", "I'm a tea girl", "I'm not a morning person".
            r"^(no|not) [\w\s-]{1,25} for me\b|\b(i'?m|i am) (not )?(a|an) ([\w-]+ ){0,2}?"
            r"(girl|guy|gal|person|type|fan|lover|nerd|snob|addict)\b|"
            # How someone wants to be treated: "please don't book me before 11".
            r"\b(don'?t|do not|never) (put|book|schedule|roster|rota|give|assign|pair|send|"
            r"seat|stick) me\b|\b(much|far) prefer\b|"
            # Someone else's: "Mr Okafor always wants feather-free pillows".
            r"\b(always|never|usually) (wants|asks for|orders|prefers|likes|has|takes|"
            r"drinks|eats)\b|"
            r"^(love|hate|adore|prefer|enjoy|loving)\s+\S+\s+\S+\s+\S+|"
            r"\b(i|we)('d| would) (much |really |far |honestly )rather\b|"
            r"\b(please )?(don'?t|do not|never) (text|call|ring|ping|email|message|phone|tag|dm|"
            r"wake) me\b|\b(always|never) (call|ping|email|"
            r"message|text|schedule) me\b|\bworks best for me\b|\bi'?d appreciate\b",
        ),
    ),
    (
        "goal",
        0.8,
        _Folded(
            rf"\b{_I} (really |still |eventually |finally |also )?(want|plan|hope|intend|aim|"
            r"wish|mean|like|hoping|planning|aiming|trying|determined|am hoping|'m hoping|"
            r"am planning|'m planning|am aiming|'m aiming|am trying|'m trying) to\b|"
            r"\b(i|we) (really |still |so )?wanna\b|^(really |still |so )?(wanna|want to)\b|"
            r"^(really |still |so |just )?hoping (we|i|to|that|for)\b|"
            r"\b(i|we)('d| would) (really |so |just )?(love|like) (for )?((us|them|him|her|"
            r"everyone|the \w+) )?to\b|\b(i|we) (really |still )?want (us|them|him|her|"
            r"everyone|the \w+) to\b|^(really |still |also |so )?(hoping|planning|aiming|"
            r"looking|working|dying|itching) to\b|^(it )?(would|'d) (be )?(love|like|great|"
            r"nice|amazing|good|cool|awesome|brilliant) (for us )?to\b|"
            r"\bto \w+\b[\w\s,']{0,50}\b(someday|some day|one day|eventually|at some point|"
            r"one of these (days|years)|in the long run|long term|in the future|"
            r"some ?time (this|next) (year|season|summer|spring|autumn|winter)|"
            r"before i retire|in (a few|the next few|five|ten) years)\b|"
            r"^(long|longer)[- ]term\b|\bthe (dream|goal|plan|hope|aim|idea|ambition) is "
            r"(to|that)\b|\b(i'?m|i am|we'?re|we are) (really |still )?hoping (we|i|to|that)\b|"
            r"^(working|saving|training|studying) (up )?(towards?|for)\b|"
            r"\bi hope (we|i) (can|will|'ll|get to)\b|"
            r"\b(he|she|they|[A-Z][a-z]+) (wants|plans|hopes|intends|aims|is planning|"
            r"is hoping|is trying) to\b|"
            r"\b(i'?m|i am|we'?re|we are) going to (?!the\b|a\b|an\b|my\b|our\b|be late\b)|"
            r"\bmy (main |big |new |long-term |personal |real )?(goal|dream|ambition|aim|"
            r"resolution|plan|target|objective|aspiration|hope|mission)( (for|this|next) "
            r"\w+)? (is|this|for)\b|\bdream(ing)? of\b|"
            r"\b(i'?m|i am|we'?re|we are) (saving|training|studying|working) (up )?(for|"
            r"towards|toward|to (become|be|get|qualify))\b|\bsomeday i\b|"
            r"\bone day i('ll| will| want)\b|"
            r"\b(this|next) year i('ll| will| want)\b|\bbucket list\b",
        ),
    ),
    (
        "todo",
        0.75,
        _Folded(
            # (not what someone else says one should: "my wife says I should sell up")
            rf"(?<!says )(?<!said )(?<!thinks )(?<!reckons )(?<!suggests )"
            # ("I must not take ibuprofen" is a rule kept, not a task)
            rf"\b{_I} (really |still |also |definitely |urgently |just )?((need|needs|have|"
            r"has|got|ought) to|gotta|must(?! not\b)|should(?! not\b))\b|"
            r"\b(need|needs|have|has) to be (done|"
            r"sent|fixed|reviewed|merged|signed|paid|renewed|submitted|booked|shipped)\b|"
            r"\b(someone|somebody|anyone|everyone|you|you all|y'all|we all)\b"
            r" (still |really |also )?((has|have|need|needs|got) to|must|should)\b|"
            # "they must be gluten-free" is what a thing is to be, not a task
            r"\bthey (still |really |also )?((has|have|need|needs|got) to|must|should)"
            r"(?! be\b)\b|"
            r"^\s*((have|need|got) to|gotta|must|need)\b|^need (someone|somebody|a volunteer|"
            r"volunteers|help|a hand) (to|with)\b|\b(don'?t|do not) forget (it'?s|that|the|"
            r"your)\b|"
            r"\b(don'?t|do not) forget to\b|\bremember to\b|\bremind (me|us|\w+) to\b|"
            r"\bto-?do\b|\bdeadline\b|\bdue (on|by|date|tomorrow|today|next)\b|"
            r"\bbefore (the )?(deadline|end of (the )?(day|week|month|sprint))\b|"
            r"\b(by|before) (eod|eow|monday|tuesday|wednesday|thursday|friday|"
            r"saturday|sunday|mon|tues?|wed|thu|thurs|fri|sat|sun|tomorrow|tonight|noon|"
            r"next week|end of)\b|"
            r"^\s*((\w+ ){0,2}(please|pls|plz) (someone |somebody |everyone |all )?|"
            r"someone |somebody )?(send|book|renew|review|clear (out|up|away|the|your|our|all)|"
            r"empty|refill|top up|swap|"
            r"fix|merge|"
            r"submit|file|pay|call(?! me\b)|email|ping|update|order|buy|pick up|schedule|prepare|"
            r"finish|ship|write|check|sign|cancel|reply|follow up|clean|water|feed|bring|do|"
            r"remind|take|get|grab|print|read|register|sign up|return|collect|drop off|"
            r"install|upgrade|back up|test|deploy|post|share|invite|confirm|"
            r"make sure|double-check|learn|label|wash|fill (in|out)|upload|tidy|put|leave|"
            r"lock|unlock|turn off|switch off|charge|pack|move|sort|restock|mark|"
            # (a name like a verb: "Mark isn't a firefighter", "Bill has left")
            r"practi[sc]e|rehearse|wear|bring|text|message|don'?t)\b"
            r"(?!\s+(?:is|isn'?t|was|wasn'?t|has|hasn'?t|had|does|doesn'?t|did|said|says|"
            # "Order from Jake: carrot cake…", "Update from the team: …": a heading;
            # "Schedule change: …", "Return flight is …": a noun, not an order
            r"from)\b|\s+[a-z]+(:|\s+(is|are|was|were)\b))|"
            r"^(everyone|everybody|all|folks|team|guys|people|y'all)\b[,:]?\s+(please |pls |"
            r"just |also )?(?!(i|we|is|was|has|had|says|said|agrees|knows|loves|loved|thinks|"
            r"wants|needs|seems|looks|got|gets|here|else|okay|ok)\b)[a-z]+(?<!ed)(?<!s)\b|"
            r"^reminder\b|\b(is|are) on you\b",
        ),
    ),
    (
        "identity",
        0.9,
        _Folded(
            r"\b(my name is|my name's|call me|people call me|my pronouns|pronouns (are|:)|"
            # What someone plays, speaks, sings or wears: "I play the cello", "I speak
            # Portuguese", "I sing in a choir", "I wear glasses".
            r"i (also |still |mostly |mainly |usually )?(play|speak|sing|wear) (?!(it|that|"
            r"this|them|him|her|you|too|so|very|really|well|badly|fast|slow|loud|to|for|"
            r"with|on|at|up|out|around|about|home|back|like|along|games?|a (lot|bit|game|"
            r"role|part)|many|the (game|fool|field|role|part|same|truth))\b)(the |a |an |some |"
            r"with |in (a |an |the |our |my )?)?[\w-]{3,}|"
            r"i go by|for a living|"
            r"my (day )?(job|role|title|position) (is|here is|at)|"
            r"^(grew up in|born and raised|originally from|based in|born in)|"
            r"^(the )?new (\w+ )?(intern|hire|member|starter|recruit|volunteer|joiner|guy|"
            r"girl|lad|person|face)\b|"
            # Pronouns: "Zoë, she/her", "they/them".
            r"\b(she|he|they|xe|ze)/(her|him|them|they|she|he|xem|hir)\b|"
            # A tenure said without "I": "been tattooing 6 yrs", "been here since 2016".
            r"(^|[,;]\s*)been (here |there |\w+ing )(for )?([\w\s]{1,15})?(\d+|a few|"
            r"many|several|two|three|four|five|six|seven|eight|nine|ten) (years?|yrs|decades?)\b|"
            r"(^|[,;]\s*)been (here|there|with (us|them|the \w+)) since (19|20)\d\d\b|"
            # Family: "my daughter Lian does long-arm quilting in Leeds".
            r"\bmy (wife|husband|partner|son|daughter|kids?|mom|mum|dad|mother|father|brother|"
            r"sister|twin|grandson|granddaughter|nephew|niece|aunt|uncle|cousin)( [A-Z]\w+)? "
            r"(works|lives|teaches|studies|runs|plays|does|is (a|an|studying|training))\b|"
            r"i('ve| have)( got)? (asthma|diabetes|epilepsy|arthritis|adhd|migraines|"
            r"c(o)?eliac|tinnitus|dyslexia|autism|lupus|hay fever|allergies|"
            r"an? (\w+ )?allergy|an? (bad|dodgy|weak|bad|broken) (back|knee|hip|shoulder|"
            r"ankle|wrist)|a heart condition|a disability|a stammer|a stutter)|"
            r"(i'?m|i am) (type [12] )?diabetic|"
            r"i was born|i grew up in|i'?m originally from|i am originally from|"
            r"i (live|work|head|own|run|volunteer) ((full|part)[ -]time )?"
            r"(in|at|as|for|on|with|the|a|an|our|my)\b|"
            r"i (teach|coach|study|tutor|lead|manage|look after|take care of|mentor)\b|"
            r"i work remotely|i'?ve been (a|an|the|teaching|working|living|coding|"
            r"coaching|nursing)\b|"
            r"(i'?m|i am) (from|based in|\d+ (years|yrs) old|\d+\b|"
            r"(an? |the )([\w-]+ ){0,3}([\w-]+(ist|ian|eer|keeper|smith|ographer)|engineer|"
            r"developer|designer|manager|nurse|doctor|"
            r"teacher|student|lead|lawyer|chef|artist|writer|analyst|scientist|"
            r"researcher|consultant|founder|ceo|cto|intern|admin|maintainer|"
            r"moderator|mom|dad|mother|father|parent|grandparent|vet|pilot|"
            r"accountant|architect|musician|photographer|programmer|sre|pm|owner|"
            r"member|volunteer|coach|librarian|paramedic|electrician|plumber|"
            r"mechanic|farmer|baker|barista|officer|professor|tutor|editor|"
            r"journalist|translator|therapist|pharmacist|dentist|surgeon|"
            r"marketer|recruiter|contractor|freelancer|veteran|native|retiree|"
            r"newcomer|beginner|on the \w+ team|in charge))|"
            r"(i'?m|i am) (not )?(a |an )?(left-handed|right-handed|colou?r-?blind|deaf|"
            r"diabetic|asthmatic|dyslexic|autistic|al+er+gic to|married|single|"
            r"divorced|engaged|widowed|retired|pregnant|twins?)\b|"
            r"i('ve got| have got| have) (a|an|\d+|two|three|four|five|one|twin) (\w+ )?(kids?|"
            r"children|sons?|toddlers?|babies|baby|teenagers?|twins|"
            r"daughters?|brothers?|sisters?|siblings?|dogs?|cats?|pets?|grandkids|"
            r"grandchildren|husband|wife|partner|boyfriend|girlfriend)\b|"
            r"my (wife|husband|partner|boyfriend|girlfriend|fianc[ée]+|son|daughter|kids?|"
            r"mom|mum|dad|mother|father|brother|sister|dog|cat)('s name is|'s names are| is "
            r"called| are called| is named) \w+|"
            r"(i'?m|i am) (married|engaged) to)\b",
        ),
    ),
    ("identity", 0.9, _IdentityShape()),
    (
        "event",
        0.5,
        _Folded(
            r"\b(yesterday|(?<!same as )(?<!as of )last (week|month|year|night|weekend|summer|"
            r"winter|spring|fall|"
            r"autumn|time|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|"
            r"february|march|april|may|june|july|august|september|october|november|"
            r"december)|"
            r"this (morning|afternoon|past \w+)|earlier today|(\w+ )?(days?|weeks?|months?|"
            r"years?) ago|in (19|20)\d\d|went to|visited|attended|graduated|got (married|"
            r"engaged|promoted|hired|fired|sick|back)|moved (to|into|out)|we met|i met|"
            r"(turns?|turned) \d+|birthday|anniversary|wedding|funeral|"
            r"('s|is|are|was|were) (scheduled|planned|booked|set|held|reserved) (for|on|at|"
            r"from)|\d{1,2}(st|nd|rd|th)? (of )?(january|february|march|april|may|june|july|"
            r"august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|"
            r"sept|oct|nov|dec)\b|"
            r"(is|are|'s) ((on|this|next) )?(monday|tuesday|wednesday|thursday|friday|saturday|"
            r"sunday)|(is|are) (on|this|next) \d|next (week|month|monday|tuesday|wednesday|"
            r"thursday|friday|saturday|"
            r"sunday|weekend)|tomorrow|tonight|on (monday|tuesday|wednesday|thursday|friday|"
            r"saturday|sunday)|(launch|release|meetup|meeting|party|trip|flight|"
            r"appointment|exam|interview|game|concert|conference|deploy|outage|incident)\b"
            r"[\w\s]{0,30}\b(on|at|is on|was on|happened|went|starts|started|ended|"
            r"lands|landed)\b|(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)"
            r"[a-z]* \d{1,2}\b|in (january|february|march|april|may|june|july|august|september|"
            r"october|november|december)|\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}(/\d{2,4})?\b|"
            # "I booked a holiday to Crete", "we've reserved a table": a plan made, kept.
            rf"{_I} (just |finally |already |also )?(booked|reserved|ordered|pre-?ordered|"
            r"rented)\b|"
            r"(started|finished|completed|launched|shipped|released|won|broke|"
            r"lost(?! property| and found| luggage)|"
            r"adopted|bought|sold|ran|climbed|hiked|flew|drove|signed up|hired|opened|"
            r"reopened|arrived|returned|celebrated)|"
            # "boarded us Thursday off Peterhead": something done on a day.
            r"[a-z]{3,}ed\b[\w\s,']{0,30}\b(?<!every )(?<!each )(?<!first )(?<!last )"
            r"(on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?!s)|"
            # "Friday the 13th", "Sat 4th".
            r"(mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)[a-z]* (the )?\d{1,2}(st|nd|rd|th)\b)\b",
        ),
    ),
)

# A durable, specific statement: numbers, codes, names, places, or "X is Y" about a thing.
_SPECIFIC = re.compile(
    r"\b(\d[\d.,:/-]*|\d+[A-Za-z]{1,3}|[A-Za-z]+\d+\w*|[A-Z]{2,}[-_]?\d*|"
    r"[a-z]+[-_.][a-z0-9_.-]+|#\d+|v\d+(\.\d+)*)\b|"
    r"\b(?<!^)[A-Z][a-z]+\b|https?://\S+"
)
_PREDICATION = _Folded(
    r"\b(is|are|was|were|has|have|lives|runs|uses|costs|takes|holds|sits|means|drive|"
    r"drives|ride|rides|"
    r"belongs|contains|requires|supports|opens|closes|starts|ends)\b",
)
# Numbers and codes: "4411", "BA117", "14C", "v2-rc", "#512".
_IDENTIFIER = re.compile(
    r"\b(\d[\d.,:/-]*|\d+[A-Za-z]{1,3}|[A-Za-z]+\d+\w*|[A-Z]{2,}[-_]?\d+|"
    r"[a-z]+[-_][a-z0-9_-]+|#\d+)\b"
)


# "The compost bins are behind the shed": a thing, a present-tense verb, a complement.
_DECLARATIVE = re.compile(
    r"^(?!(i|i'm|i'll|i've|i'd|we|we're|we'll|you|you're|you'll|let's|it|it's|that|"
    r"that's|this|there|they|he|she|just|keep|stay|don't|do)\b)"
    r"(the|our|my|your|his|her|their|its|[A-Z][\w.'-]*)\b[\w\s'.,/&-]{0,40}?\b(is|are|"
    r"has|have|needs?|costs?|runs?|lives?|opens?|closes?|holds?|takes?|uses?|sits?|"
    r"starts?|expires?|came out|was built|means|goes|keeps?|belongs?|owns?|includes?|"
    r"stays?|answers?|accepts?|serves?|sells?|delivers?|go out)\b"
)
# "The spore test results are in the red folder": where something is kept.
_KEPT_AT = _Folded(
    r"^(?!(i|i'm|we|we're|you|you're|he|she|they|it|it's|that|this|there)\b)[a-z][\w\s'-]{2,40}"
    r"\b(is|are) (kept |stored |filed |hung |hanging |locked )?(in|on|under|behind|inside|"
    r"next to|beside|above|below|on top of|at the back of) (the|a|our|my|your|his|her|their)\b"
)
# "lol the guy in 308 just asked…": an anecdote told laughing.
_LAUGH_START = _Folded(r"^\W*(lol|lmao|rofl|haha+|hehe+|omg)\b")
# "…was amazing", "…is so long": an opinion of the moment, not a fact to keep.
_EVALUATIVE = _Folded(
    r"\b(is|are|was|were|looks?|seems?|feels?)\s+(so |really |pretty |very |kinda |a bit |"
    r"quite |super |totally |just )*(fine|good|great|ok|okay|nice|fun|boring|bad|awful|"
    r"terrible|cool|awesome|amazing|long|short|hard|easy|funny|weird|slow|fast|lovely|"
    r"beautiful|ugly|crazy|wild|insane|brutal|rough|perfect|broken|down|up|back|late|early|"
    r"packed|heaving|rammed|quiet|dead|mental|chaos|chaotic|manic|empty|here)"
    r"\b[\s\w]{0,12}[.!]*$",
)


# Warmth, praise and opinion ("Art is such a source of joy", "It was amazing, Caroline"):
# worth a reply, not a fact to recall.  Only the fallback to ``fact`` checks it.
_OPINION = _Folded(
    # "so it stays" joins two clauses; "so good" is an opinion.
    # ("so back to 86", "so now it's 92": a count said again)
    r"\b(so(?! (it|we|i|you|they|he|she|that|the|there|far|everyone|everybody|each|back|now|"
    r"then)\b)|such|"
    r"really|"
    r"too(?=\s+(?!(but|and|as|though)\b)\w)|awesome|"
    # ("a great dane", "my great aunt": a breed, a relation)
    r"amazing|great(?![ -](danes?|britain|aunts?|uncles?|grand\w*|nephews?|nieces?)\b)|cool|"
    r"lucky|glad|happy|proud|inspiring|"
    r"incredible|wow|special|fun|beautiful|nice|brave|vital|crucial|important|"
    r"best(?! (friend|mate|man|seller|buddy|pal)s?\b)|worst|"
    r"lovely|wonderful|fantastic|stoked|excited|thrilled|means a lot|appreciate|thankful|"
    r"grateful|blessed|sorry|awful|terrible|hard|tough|rough|keep it up|proud of|annoying|"
    r"frustrating|irritating|overrated|underrated)\b",
)
# A name said to someone ("…, Caroline!", "Wow, Mel, …") is an address, not a fact.
_VOCATIVE = re.compile(r",\s*[A-Z][a-z]+\s*[!.?]*$|^\W*\w+,\s*[A-Z][a-z]+,")


# Sayings and general remarks ("Being organized is key", "It keeps me motivated"): true
# of everyone, about nothing in particular.
_GENERIC = _Folded(
    r"\b(is|are) (key|everything|life|the best|the way|worth it|like|all about|just)\b|"
    r"\b(keeps?|helps?|makes?|gives?|takes?) (me|us|you|them|people|one)\b|"
    r"^(being|having|taking|staying|getting|doing|making|tracking|attending|growing|"
    r"running|dancing|setbacks|challenges|failures|life|things|everything)\b",
)


# "Remind me my locker code", "tell me about my passport": asked, though not said as a
# question (with a verb it is a request: "remind me my flight is at 9").
_REMIND_ME_OF = re.compile(
    r"^\s*(?:please\s+|pls\s+)?(?:remind me|tell me)\s+(?:of\s+|about\s+|again\s+)?"
    r"(?P<what>(?:my|our|the|his|her|their)\s+[^.!?\n]*)[.!?]*$",
    re.I,
)


def _reminded_of(text: str) -> bool:
    m = _REMIND_ME_OF.match(text)
    # "my wife's birthday" names something; "my wife's birthday is May 3" says it.
    return m is not None and not says_something(re.sub(r"(?<=\w)'s\b", "", m["what"]))


def is_question(text: str) -> bool:
    """A question (ends with "?" or opens like one); "Remember that…" is not one."""
    t = _straight(text.strip())
    t = split_greeting(t)[1].strip() or t  # "Hi! Can you remember that…?"
    if _DONT_KEEP.match(t) or _KEEP_PRIVATE.match(t):
        return False
    if _reminded_of(t):
        return True
    plain = _plain(t)
    if plain != t:  # "Can you remember that my seat is 14C?" asks for a save
        return bool(_ASKING.match(plain)) or _polite_question(t, plain)
    led = _LEAD_IN.sub("", t)
    if _DID_YOU_KNOW.match(led) or (_EXCLAIMS.match(led) and not t.endswith("?")):
        return False
    return (
        t.endswith("?")
        or bool(_QUESTION_START.match(led) or _ASKING.match(led))
        or _NAMED_ASK.search(led)
        or _SUM_ORDERED.match(led) is not None
    )


# A sum asked for as an order: "split 184 four ways", "work out 15% of 340"; or after
# an "if": "if i do 3 walks for bramble and 5 for biscuit how much is that".
_SUM_ORDERED = re.compile(
    r"^(?:please\s+|pls\s+|can\s+you\s+|could\s+you\s+)?(?:(?:split|divide)\s+[£$€]?\d[\d,.]*\s+"
    r"(?:between|among|by|in|into|\w+\s+ways)\b|(?:work\s+out|calculate|add\s+up)\s+\S)|"
    r"^if\b.*\d.*\b(?:how\s+(?:much|many)|what\s+percent(?:age)?)\s+(?:is|would|will|does|do)\b|"
    r"\d.*=\s*\?",
    re.I,
)


# A question put to someone by name, its "?" left off: "lena whats your number in case i
# get lost" ("ellie can you forget my work hours, …" asks, and tells, as it is).
_NAMED_ASK = _Folded(
    r"^@?[a-z][\w'-]+,? (whats|what's|what is|wheres|where's|where is|whens|when's|when is|"
    r"whos|who's|hows|how's|how much|how many|do you|did you|are you|have you) "
)


def _polite_question(text: str, plain: str) -> bool:
    """ "Can you remember my seat number?": asked, with nothing to save in it ("Could
    you forget my locker code?" asks for the forget)."""
    if _FORGET.match(plain) or _DELETE.match(plain):
        return False
    rest = re.sub(r"^\S+\s+(?:that\s+)?", "", plain)
    return text.rstrip().endswith("?") and not says_something(rest)


def _plain(text: str) -> str:
    """``text`` without a polite or slash lead: "Can you remember that X?" gives
    "remember that X"; any other text comes back as it is."""
    t = _SLASH.sub("", text, count=1)
    m = _POLITE.match(t)
    if m is not None:
        return t[m.end() :].rstrip().rstrip("?").rstrip()
    return t if t != text else text


# "Can someone wash the pump after the drill?": asked, but a job for the group.
_GROUP_REQUEST = _Folded(
    r"^(please |pls )?(can|could|would|will) (someone|somebody|anyone|anybody|everyone|"
    r"everybody|you all|y'all|you guys|one of you)( please| pls)? "
    r"(?!(tell (me|us)|recommend|explain|"
    r"remind|remember|hear|see|guess|believe|think|imagine|suggest|point|help me "
    r"(understand|find)|know|say|confirm if|confirm whether)\b)[a-z]+\b",
)
# "Lovely rehearsal tonight, thank you all" / "yum, see you tomorrow": a word or two of
# warmth around thanks or a goodbye.
# "Tariq, can you call the guy about the refund before Monday?": a job for someone named.
_NAMED_REQUEST = re.compile(
    r"^[A-Z][a-z]+,? (?:can|could|would|will) you (?:please |pls )?(?!(?:tell|remind|remember|"
    r"believe|imagine|guess|see|hear|think|explain|recommend|help me)\b)[a-z]+\b"
)
_THANKS_TAIL = _Folded(
    r"^[^\d]{0,40}\b(thanks?|thank you)( (all|everyone|so much|guys|folks|"
    r"team))?[\s!.]*$"
)
_THANKS_FOR = _Folded(r"^\s*(thanks|thank you|thx|ty)( so much| again| all)? for\b")
_INTERJECTION = re.compile(r"^\W*[A-Za-z]+[,!.]+\s+")


def is_chitchat(sentence: str) -> bool:
    """Greetings, thanks, laughter, acknowledgements, "back in 10", passing states, and
    encouragement ("Keep going!", "I won't give up")."""
    s = sentence.strip()
    rest = split_greeting(s)[1]
    if not rest.strip(" !.?,"):
        return True
    tail = _INTERJECTION.sub("", rest, count=1)
    if _THANKS_FOR.match(rest) and not re.search(r"\d", rest) and len(words(rest)) <= 10:
        return True  # "thanks for waiting for me yesterday"
    return bool(
        _CHITCHAT.match(rest)
        or (tail != rest and _CHITCHAT.match(tail))
        or (
            _THANKS_TAIL.match(rest)
            and len(words(rest)) <= 6
            and (len(words(rest)) <= 3 or _OPINION.search(rest))
        )
        or _AWAY.search(rest)
        or _PASSING.match(rest)
        or _ENCOURAGING.search(rest)
        or _WELCOME.match(rest)
    )


# "Welcome to the Year 3 trip chat!": a greeting to a place, nothing to keep.
_WELCOME = _Folded(
    r"^\s*welcome( back| aboard| all| everyone| everybody)?( to (the|our|this|my) "
    r"[\w' -]{1,40})?[\s!.]*$"
)


# Something that held changed: a move, a job left, a thing sold, a switch.
CHANGED = re.compile(
    r"\b(?:moved|relocated|moving)\s+(?:from|to|into|back\s+to|out\s+of|away)\b|"
    r"\b(?:quit|quitting|left|leaving|lost|resigned\s+from)\s+(?:my|the|his|her|our|their)\s+"
    r"(?:\w+\s+)?(?:job|role|position|team|company|firm|band|club|course|school|cafe|café|shop|"
    r"restaurant|bar|pub|store|office|choir)\b|"
    r"\b(?:sold|gave\s+away|got\s+rid\s+of|cancell?ed|called\s+off|postponed)\s+"
    r"(?:my|the|our|his|her|their)\s+\w+|"
    r"\b(?:switched|switching|changed|changing|migrated|upgraded|downgraded)\s+(?:\w+\s+){0,3}?"
    r"(?:from|to)\b|"
    # "I've stopped the atorvastatin", "Marcus swapped laptops with Greg"
    r"\b(?:stopped|stopping|came\s+off)\s+(?:taking\s+)?(?:my|the|his|her|our|their)\s+\w+|"
    r"\bstopped\s+taking\s+\w+|\bswapped\s+(?:\w+\s+){1,3}?with\s+[A-Za-z]|"
    # "Mark's quote went up to £13,100", "croissants are going up to £2.40"
    r"\b(?:went|gone|goes|going|come|came)\s+(?:up|down)\s+to\b|"
    r"\b(?:increased|decreased|raised|lowered|reduced|dropped|rose|risen)\s+(?:\w+\s+){0,2}?to\s+\S*\d",
    re.I,
)
# Talk of the bot itself, why it is used: "i added the bot so we stop arguing about
# bills", "need somewhere to keep all the details" (nothing of the speaker's to keep).
_OF_THE_BOT = _Folded(
    r"\b(added|invited|using|trying|testing|set up|installed) (the|this|a|our) bot\b|"
    r"^(i |we )?(need|want|wanted|am looking for|was looking for) (somewhere|a place|a way|"
    r"something|help) to (keep|store|remember|write down|note) (all )?(the |my |our |of )?"
    r"(details|info|information|things|stuff|everything|it all)\b|"
    r"^(i |we )?(need|want|wanted) (somewhere|a place|a way|something|help) to keep track\b"
)
# Work of the web, asked: "can you look up reviews for kowalski builders", "search
# spotify for bands like us", "can you check what flour prices are at makro this week".
WEB_ASKED = re.compile(
    r"^\W*(?:(?:tier)?bot\W+)?(?:"
    # asked of the bot: "can you check what flour prices are at makro"
    r"(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+)?(?:search|google|look\s+up|"
    r"check|browse)\b[^?]*?\b(?:spotify|google|youtube|amazon|ebay|online|the\s+web|"
    r"the\s+internet|reviews?|prices?\s+(?:are\s+)?(?:at|in|on)\s+(?!my\b|our\b)[a-z])|"
    # told the bot to: "search spotify for bands like us" (not "check in online", a to-do)
    r"(?:please\s+|pls\s+)?(?:search|google|look\s+up)\b[^?]*?\b(?:spotify|google|youtube|"
    r"amazon|ebay|online|the\s+web|the\s+internet|reviews?))",
    re.I,
)
# Chance, asked: "roll a d20 for me", "flip a coin" (the bot has no hand in it).
CHANCE_ASKED = re.compile(
    r"^\W*(?:(?:tier)?bot\W+)?(?:(?:can|could|would|will)\s+(?:you|u)\s+)?(?:please\s+|pls\s+)?"
    r"(?:roll|flip|toss)\s+(?:a|an|the|some|two|2)?\s*(?:d\d+|dice|die|coin)\b",
    re.I,
)


def cant_do_asked(text: str) -> bool:
    """Whether ``text`` asks the bot for work of the web or chance, which it cannot do."""
    return bool(WEB_ASKED.match(text) or CHANCE_ASKED.match(text))


# "not chess club, its coding club": a correction opening with what it takes back.
NOT_THAT = re.compile(
    r"^\W*(?:no\W+)?not\s+(?:the\s+|a\s+|an\s+|on\s+)?(?P<old>\d[\d:.]*|[a-z][\w-]{2,}"
    r"(?:\s+[a-z][\w-]{2,})?)\s*[,;-]\s*\S",
    re.I,
)
# A value a correction takes back: "14th", "2pm", "6-7", "4:30".
_VALUE = r"\d[\d:.]*(?:st|nd|rd|th|am|pm)?(?:\s*[-\u2013]\s*\d+(?:st|nd|rd|th)?)?"
# "she wants raspberry not lemon", "dan wants 36 cupcakes not 24": one that ends with it
# (not "I'm not sure", "it is not": no verb before "not").
THIS_NOT_THAT = re.compile(
    rf"(?<!\bis)(?<!\bare)(?<!\bwas)(?<!\bam)(?<!'m)(?<!\bdo)(?<!\bdid)(?<!\bwill)(?<!\bcan)"
    r"(?<!\bcould)(?<!\bwould)(?<!\bshould)(?<!\bhave)(?<!\bhas)(?<!\bdoes)(?<!\bwere)"
    rf"\s*,?\s+not\s+(?:the\s+|a\s+|an\s+|on\s+)?(?P<old>{_VALUE}|[a-z][\w-]{{2,}})"
    # ("it's friday not thursday now": when it holds from, not the value)
    r"(?:\s+(?:now|then|instead|anymore))?\s*[.!]?$",
    re.I,
)
# "… no longer …", "… not … anymore": something that held and stopped (the chat reads it
# too: what a later statement says holds no more).
NO_LONGER = re.compile(
    r"\bno\s+longer\b|\b(?:not|never|(?:do|does|did|is|are|was|were|has|have|had|ca|wo)"
    r"n['\u2019]?t)\b.*\b(?:anymore|any\s+more|any\s+longer)\b",
    re.I,
)
# The words that say it stopped, and what "I don't work…" is without them ("I work…").
_STOPPED_WORDS = re.compile(
    r"\bno\s+longer\s+|\b(?:do|does|did)(?:n'?t|\s+not)\s+|\b(is|are|was|were)n'?t\b|"
    r"\b(?:not|never)\s+|,?\s*\b(?:anymore|any\s+more|any\s+longer)\b",
    re.I,
)


def _unsaid(m: re.Match[str]) -> str:
    return m[1] or ""


#: Words that say a statement replaces what was told before ("Correction: …",
#: "Actually, swap that: …"); the chat reads them too.
RESTATING = r"correction|update|(?:swap|change|scratch|update|correct) that"
_FILLER = re.compile(
    rf"^(?:(?:sorry|oops|whoops|no wait|wait|actually|yes|yeah|yep|ugh fine|fine|ok|okay|well|"
    rf"oh and|and also|also|"
    rf"so(?=,|\s+(?:our|the|my|i|we|next|first|this|that)\b)|{RESTATING})\b[,:;!.-]*\s+|"
    # (a word of its own, with its comma: "sweet. i can bring…", not "great energy")
    r"(?:sweet|cool|nice|great|no worries|perfect|awesome)[,:;!.-]+\s+)+",
    re.I,
)


def _cased(s: str) -> str:
    """A sentence typed all in lower case as it would be written: "I" for "i", and its
    first letter a capital ("lotte is my ex now" is read as "Lotte is my ex now")."""
    s = re.sub(r"\bi(?=\b(?!-))", "I", s)
    first = re.match(r"([a-z][\w'-]+)\s+(?:is|was|has|and)\b", s)
    if first is None or first[1] in STOPWORDS:  # "that headline is…" names no one
        return s
    return s[:1].upper() + s[1:]


# "need help keeping track of everything": what the bot is asked to be for.
_HELP_WANTED = re.compile(
    r"^\W*(?:(?:ok|so|and)\W+)*(?:i\s+)?(?:need|want|would\s+like)\s+(?:some\s+)?help\s+"
    r"(?:with\s+)?(?:keeping\s+track|tracking|organi[sz]ing|remembering|keeping\s+on\s+top)",
    re.I,
)
# A date put off or brought forward, and what still makes it a job.
_PUT_OFF = re.compile(
    r"\b(?:pushed\s+back|put\s+back|postponed|brought\s+forward|rescheduled)\b", re.I
)
_STILL_TO_DO = re.compile(r"\b(?:remind|need\s+to|have\s+to|must|don'?t\s+forget)\b", re.I)


def classify(sentence: str) -> tuple[str | None, float]:
    """The memory type and default importance of one sentence; (None, 0) for nothing.
    A sentence that says nothing durable as a whole may in its consequence ("sofia
    switched groups so my lab partner is now tariq"): then it is kept as that says; or
    in its first clause, a remark after it ("My budget is now 3,500 euros, I spent too
    much in Tokyo")."""
    if _HELP_WANTED.match(sentence):
        return None, 0.0  # "need help keeping track of everything": asks the bot, tells nothing
    found = _classify(sentence)
    if found[0] == "todo" and _PUT_OFF.search(sentence) and not _STILL_TO_DO.search(sentence):
        return "event", 0.5  # "move date pushed back, now may 2": a plan moved, not a to-do
    if found[0] is None:
        for clause in _SO.split(sentence)[1:]:
            if (found := _classify(clause))[0] is not None:
                return found
        first = _REMARK_AFTER.split(sentence)[0]
        if first != sentence and len(words(first)) >= 4 and (found := _classify(first))[0]:
            return found
        # "he's allergic to penicillin, very important", "evening carer is kwame, he
        # comes at 7pm, hes lovely": a remark after what was told is no reason to drop it.
        clauses = _REMARK_AFTER.split(sentence)
        while len(clauses) > 2 and _OPINION.search(clauses[-1]):
            clauses.pop()
            head = ", ".join(clauses)
            if len(words(head)) >= 4 and (found := _classify(head))[0]:
                return found
        s = sentence.strip()
        if (
            (m := NOT_THAT.search(s) or THIS_NOT_THAT.search(s))
            and stems(m["old"])
            and len(stems(s)) >= 3
            and not is_question(s)
            and read_correction(s) is None  # (the chat saves the sentence it corrects)
        ):
            # "not thursday, ellie just said its friday now", "nina's coming saturday
            # not friday": something said is set right, naming what it takes back (the
            # chat reads it as a change of the line that said that).
            return "event", 0.6
    return found


# Where a remark may follow what was told: "…, I spent too much in Tokyo".
_REMARK_AFTER = re.compile(r"\s*[,;:]\s+|\s+-\s+")


# A quoted word and what it means: '"barrio" means neighbourhood', '"madrugada" = the
# early hours' (lower case, as _Folded patterns are written).
WORD_MEANS = (
    r"[\"\u201c][\w' -]{1,30}[\"\u201d]\s+(means|=|is (spanish|french|german|italian|slang) "
    r"for)\s+\w"
)


# Shapes the rules above miss, each a whole kind of statement: someone else's taste
# ("Marcella prefers updates in Slack threads"), a plan being weighed ("I'm thinking
# of doing a master's"), a thing got, bought or paid back ("Rin got a new PC", "i paid
# pieter back today", "dropped the linear algebra course"), a role to come ("my thesis
# supervisor will be dr. van der berg").
_MORE_SHAPES: tuple[tuple[str, float, _Folded], ...] = (
    (
        "preference",
        0.7,
        _Folded(
            r"^([a-z][\w'-]+|(my|our|his|her|their) [a-z][\w'-]+( [a-z][\w'-]+)?) "
            r"(prefers|likes|loves|hates|dislikes|can'?t stand|adores) "
            r"(?!(it|that|this|them|him|her|you|me|us)\b)\w"
        ),
    ),
    (
        "goal",
        0.7,
        _Folded(
            r"\b(i'?m|i am|we'?re|we are) (thinking of|considering|planning on|looking into) "
            r"\w+ing\b"
        ),
    ),
    (
        "event",
        0.6,
        _Folded(
            r"\b(i|we|[a-z]+) (paid [\w ]{1,20} back|got (a|an|my|our|his|her|their) new|"
            r"bought (a|an|my|our|the|some)) \w|"
            r"^(i |we )?(dropped|quit|ditched) (the|my|our) [\w ]{1,30}(course|class|module|"
            r"subject|job|gym|team|club)\b|"
            # "leo quit swimming, he's doing chess club instead"
            r"^([a-z]+|my [a-z]+|i|we) (quit|dropped|stopped|gave up) [a-z]+ing\b"
        ),
    ),
    ("fact", 0.6, _Folded(r"^(my|our) [\w' -]{1,30} will be [a-z]")),
    # A job taken on: "i'm bringing pizza, pepperoni obvs", "i'm doing the slides".
    (
        "todo",
        0.7,
        _Folded(
            r"^((ok|okay|sick|cool|right|sure|yeah|fine)\W+)*(i'?m|i am|we'?re|we are) "
            r"(bringing|making|baking|cooking|doing|sorting|booking|buying|getting|organising|"
            r"organizing) (the |some |a |an |my |our )?"
            r"(?!(great|fine|well|ok|okay|good|better|worse|alright|there|progress|it|that|this|"
            r"nothing|something|things|stuff|fun|sure|my best|ready|home|back|bored|tired)\b)"
            r"[a-z]\w+(?! (up|out|off|on|ok|okay|well|fine|great|good|alright)\b)"
        ),
    ),
    # Someone's word of what another will do: "lena said she'd do snacks".
    (
        "fact",
        0.55,
        _Folded(r"^((nah|no|ok|okay|well)\W+)*[a-z]+ said (s?he|they)('d| would| will|'ll) \w"),
    ),
    # A note under a label: "setlist idea: open with …", "gift idea: a kindle".
    ("fact", 0.55, _Folded(r"^[a-z][\w' -]{1,25} (idea|ideas|plan|note|notes) ?: ?\S")),
    # News of someone named with a title, written small: "mrs patel ordered a lemon drizzle".
    (
        "event",
        0.5,
        _Folded(
            r"^(mrs|mr|ms|miss|dr|prof)\.? [a-z]+ (just |finally |already |also )?([a-z]{3,}ed|"
            r"paid|sent|gave|won|sold|bought|caught|brought|took) (a|an|the|his|her|their|two|"
            r"three|some|\d)"
        ),
    ),
    # Health told: "mum's been diagnosed with copd", "he was admitted to hospital",
    # "my sister has asthma".
    (
        "fact",
        0.7,
        _Folded(
            r"\b(diagnosed with|prescribed|(admitted|taken) (to|into) hospital|in hospital|"
            r"discharged from|had (a|an|her|his|their) (operation|op|stroke|fall|heart attack|"
            r"surgery|seizure)|(has|have|got) (asthma|diabetes|copd|dementia|epilepsy|"
            r"arthritis|cancer|adhd|autism|long covid|migraines|eczema|high blood pressure))\b"
        ),
    ),
    # A shift or a day off: "this week i'm on nights tues wed thurs", "she's off friday".
    (
        "event",
        0.5,
        _Folded(
            r"\b(i'?m|i am|we'?re|we are|s?he'?s|s?he is|they'?re|they are) (on|off|working|"
            r"doing) (nights|days|lates|earlies|a late|an early|a night|call|leave|"
            r"annual leave|holiday|the (night|day|late|early) shift|(mon|tue|wed|thu|fri|sat|"
            r"sun)[a-z]*)\b"
        ),
    ),
    # A thing of one's own done, named: "paid priya just now", "i've done safeguarding
    # already" (not "done it", "sent!").
    (
        "event",
        0.5,
        _Folded(
            # (not a debt: "i paid the electric bill, so everyone owes me £21" is a fact)
            r"^(?!.*\bow(e|es|ed|ing)\b)((i'?ve|i have|i|we'?ve|we have|we) )?"
            r"((just|already|finally) )?(done|finished|"
            r"paid|sent|booked|ordered|posted|submitted|renewed|cancell?ed|returned|completed|"
            r"passed|signed|emailed|rang|called) (?!(it|that|this|them|one|so|too|lol|haha|him|"
            r"her|you|me|up|out|off|for|with|now|today|yet|work|early|late)\b)[a-z0-9£€$]"
        ),
    ),
    # A plan called off: "party's off, my parents are visiting", "the game is off".
    (
        "event",
        0.6,
        _Folded(
            r"\b(party|game|match|gig|trip|meeting|dinner|drinks|session|class|lesson|training|"
            r"practice|rehearsal|show|wedding|holiday|fixture|booking|bbq|quiz|sleepover|"
            r"appointment)('s| is| are) (now |definitely |officially |all )?off\b"
            r"(?! (to|for|work|sick|school|the|on|at|in|with)\b)"
        ),
    ),
    # An allergy of someone else ("he's allergic to penicillin"); someone given by a
    # title, written small ("leo's teacher is mrs okafor"); when one is open or closed
    # ("also i'm closed on mondays").
    (
        "fact",
        0.6,
        _Folded(
            r"\b(he|she|they|[a-z]+)('s| is| are) (severely |very |mildly |badly )?"
            r"(allergic|intolerant) to \w|"
            r"^([a-z]+'s |(my|our|his|her|their|the) )?[\w -]{2,30} (is|are) "
            r"(mrs|mr|ms|miss|dr|prof)\.? [a-z]+|"
            r"\b(i'?m|i am|we'?re|we are) (closed|open|shut) (on|every|at|from|until|till) \w"
        ),
    ),
    # A routine: "I go to yoga every Tuesday", "I see a cardiologist every six months",
    # "Mia has swimming on Tuesdays".
    (
        "fact",
        0.6,
        _Folded(
            r"^(i|we|my [a-z]+|our [a-z]+|[a-z]+) (also |usually |always |normally |still )?"
            r"(go|goes|see|sees|visit|visits|have|has|take|takes|do|does|play|plays|train|"
            r"trains|work|works|run|runs|swim|swims|walk|walks|meet|meets|call|calls|"
            r"attend|attends|teach|teaches)\b([^.?!]|\b(dr|mr|mrs|ms|st)\.){0,60}"
            r"\b(every|each) ((other|two|three|four|six|few|couple of|\d+) )?"
            r"(day|night|morning|afternoon|evening|week|weekend|"
            r"fortnight|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b"
        ),
    ),
    # "My doctor says I should cut down on salt": advice someone gave, kept as said.
    (
        "fact",
        0.55,
        _Folded(
            r"^((my|our|the) [a-z]+|[a-z]+( [a-z]+)?) (says|said|thinks|reckons|suggests|suggested|"
            r"told (me|us)) (that )?(i|we) (should|must|need to|have to|ought to)\b"
        ),
    ),
    # Someone's view or word, with a number or a plan in it: "marcus thinks 780 is too low,
    # suggested 825", "tom from mill lane said they want to renew the lease", "my partner
    # sam thinks i work too much".
    (
        "fact",
        0.55,
        _Folded(
            r"^[a-z]+ (thinks|reckons|says|said|suggested|suggests|recommended|recommends)\b"
            r"[^.?!]*\d|"
            # "kieran says its a memory issue, use data.table instead"
            r"^[a-z]+ (says|said|reckons|suggests|suggested) (its|it'?s|to|use|try|we should)\b|"
            r"^[a-z]+( from [\w ]{2,20})? (said|says|told (me|us)) (that )?(they|he|she)"
            r"( are| is|'re|'s)? (want|wants|will|'ll|going to|can|cant|can't|need|needs)\b|"
            r"^my (partner|wife|husband|boyfriend|girlfriend|fiancee?|mum|mom|dad|sister|"
            r"brother|son|daughter|flatmate|housemate|boss|manager) [a-z]+ (thinks|says|reckons|"
            r"is|has|wants|works|lives)\b"
        ),
    ),
    # Someone by their role, its article left off: "club coach is gav, hes really
    # supportive", "letting agent is marcus".
    (
        "fact",
        0.6,
        _Folded(
            r"^(?!(the|a|an|my|our|your|his|her|their) )([a-z]+ )?"
            r"(coach|teacher|agent|manager|boss|landlord|landlady|plumber|electrician|"
            r"builder|doctor|gp|dentist|vet|physio|contact|supervisor|tutor|captain|organi[sz]er|"
            r"lead|rep|accountant|lawyer|solicitor|mechanic|cleaner|nanny|childminder) "
            r"(is|'s) (?!(great|good|nice|lovely|amazing|awesome|brilliant|rubbish|bad|terrible|"
            r"ok|fine|away|off|here|late|ill|sick|new|busy|free|so|really|very|on|in|out)\b)"
            r"[a-z]+\b"
        ),
    ),
    # A secret kept from someone: "nana must NOT find out, its a surprise".
    (
        "fact",
        0.6,
        _Folded(
            r"\b(must|mustn'?t|can'?t|cannot) (not )?(find out|know)\b|"
            r"\b(it'?s|its|it is) a surprise\b"
        ),
    ),
    # "Jess recommended a ramen place called Ichiran": what someone pointed to.
    (
        "fact",
        0.55,
        _Folded(
            r"^([a-z][\w'-]+|(my|our) [a-z][\w'-]+( [a-z][\w'-]+)?) (recommended|suggested|"
            r"swears by|told (me|us) about) (a|an|the|this|that|[a-z]+ing|[a-z][\w'-]+ [a-z])"
        ),
    ),
    # "Tom changed his order", "we moved the booking": a plan someone changed; "the
    # venue cancelled on us".
    (
        "event",
        0.6,
        _Folded(
            r"\b(changed|updated|moved|rebooked|cancell?ed|swapped) (my|his|her|their|our|the) "
            r"([a-z]+ )?(order|booking|reservation|appointment|flight|plans?|date|time|shift|"
            r"meeting|delivery|session)\b|\b(cancell?ed|pulled out|bailed) on (us|me|them)\b|"
            # "the okafors cancelled", "scratch the isrs abstract, decided not to go"
            r"^(the )?[a-z]+s? (cancell?ed|pulled out|bailed)\W*$|"
            r"^(scratch|scrap) (that about |the |my |our )[a-z]|"
            # (its "scratch that" taken off as a lead: "about uncle ray, he's in spain")
            r"^about [\w' ]{2,30}, (he|she|they)('s| is| are|'re| can'?t| cant| won'?t| wont|"
            r" isn'?t| aren'?t)\b"
        ),
    ),
    # "I'll bring snacks next time": a thing promised to the others, a to-do of one's own.
    (
        "todo",
        0.7,
        _Folded(
            r"^(i'?ll|i will|ill) (also )?(bring|send|book|buy|pick up|organi[sz]e|host|cover|"
            r"pay for|make|cook|bake|print|order|drive|collect|arrange|sort|grab) \w|"
            r"^(i'?ll|i will) (also )?(do|handle|take care of|sort out) (the|our|[a-z]+s\b)|"
            # "i can do the cake": a job offered
            r"^(i can|i could) (do|bring|make|bake|sort|organi[sz]e|host|drive|pick up|grab|"
            r"cover|book) (the|a|an|some|our) \w|"
            # "I'm doing flowers and the cake": a share of the work taken on (not "a PhD").
            r"^(i'?m|i am) (also )?(doing|handling|taking care of|sorting( out)?|"
            r"organi[sz]ing|in charge of|looking after) (the|our|[a-z]+s\b|[a-z]+ and )"
        ),
    ),
    # Someone or something in or out of what the group does: "so jay's in then", "ok
    # paper moon's out", "count me in", "im out for saturday" (not "we're out again": of
    # milk).
    (
        "decision",
        0.6,
        _Folded(
            r"^((so|ok|okay|right|yeah|then|fine) )?(the )?"
            # (not "vote's in", "word's out": news, not someone in or out)
            r"(?!(vote|votes|results?|verdict|news|word|jury|it|that|what|who|this|there|"
            r"here|today|everything|nothing)('s| is)\b)([a-z]+ )?([a-z]+'s|[a-z]+ is|"
            r"i'?m|i am) (definitely |def |deffo |still |now )?(in|out)"
            r"( then| now| too| for (it|this|that|the [a-z]+|[a-z]+day)| this (time|week|"
            r"weekend))?( then)?(\W*$|,)|"
            r"^((so|ok|okay|yeah) )?count (me|him|her|us|them) (in|out)\b|"
            # "i vote piranesi": a choice put to the group
            r"^((so|ok|okay|yeah|and) )?(i|we) (vote|voted|pick|picked) (for )?[a-z]"
        ),
    ),
    # A sum split or priced: "£60 for the hour so £15 each", "3 hours, £54 total".
    (
        "fact",
        0.6,
        _Folded(
            r"[£$€] ?\d[\d,.]*( ?k)? (each|a head|per (person|head|hour|night|month|week)|total)\b|"
            r"\b\d+ (quid|pounds|euros|dollars|bucks) (each|a head)\b"
        ),
    ),
    # What someone is called by all: "everyone calls her sandy", "he goes by Bash".
    (
        "fact",
        0.6,
        _Folded(
            r"\b(everyone|everybody|people|we all) calls? (him|her|them) [a-z]|"
            r"\b(he|she|they) goes? by [a-z]"
        ),
    ),
    # What a carer of one's health said: "my physio said no football for 2 weeks".
    (
        "fact",
        0.6,
        _Folded(
            r"\bmy (physio|physiotherapist|doctor|gp|nurse|dentist|vet|consultant|surgeon|"
            r"midwife|therapist|optician) (said|says|told me|reckons|wants me to)\b"
        ),
    ),
    # A change of who does what: "jess cant do it, so dan is second shooting instead";
    # a choice ruled out: "too noisy at night, crossing it off".
    (
        "decision",
        0.6,
        _Folded(
            r"\bso [a-z]+ (is|are|will|'s|'ll)\b[^.!?]*\binstead\b|"
            r"\b(crossing|crossed|ruling|ruled) (it|that|them|this) (off|out)\b"
        ),
    ),
    # What befell a crop, a car, a house: "the broad beans got hit by blackfly".
    (
        "event",
        0.55,
        _Folded(r"\bgot (hit|eaten|attacked|damaged|destroyed|flooded|stolen|broken into) (by|\w)"),
    ),
    # What a team or a trade takes on: "I can bring the PA speakers in my van", "my mate
    # Ollie can fill in on bass", "Priya does thursday to saturday mornings", "the eggs
    # come from Brook Farm, wednesdays".
    ("todo", 0.7, _Folded(r"^(i|we) can (also )?(bring|cover|host|lend|pick up|collect) \w")),
    # A place one can take in a team: "I can play left back if Kofi's out".
    ("fact", 0.6, _Folded(r"^i can (also )?play (left|right|centre|center|in) [a-z]")),
    # A word and what it means: '"barrio" means neighbourhood', 'fav word: "madrugada" =
    # the early hours'; who owes or has paid: "Mateo's paid", "just Dan and Rhys owe".
    (
        "fact",
        0.6,
        _Folded(
            WORD_MEANS
            + r"|^(yeah |ok |okay |so )*(?!(that|it|this|what|he|she|who)\b)[a-z]+('s| has) "
            r"(paid|settled up)\b|"
            r"^(just |only )?[a-z]+(, [a-z]+)*( and [a-z]+)? (still )?owes?\b( us| me| you)?"
            r"( from| for| \W*$)"
        ),
    ),
    (
        "fact",
        0.6,
        _Folded(
            r"^((my|our) (mate|friend|cousin|brother|sister|colleague) )?[a-z]+ "
            r"(can|will|could) (fill in|cover|sub|stand in|step in|dep)\b|"
            r"^[a-z]+ (does|works|covers|takes|has) (the )?(mon|tue|wed|thu|fri|sat|sun)[a-z]*"
            r"( (to|through|and|-) (mon|tue|wed|thu|fri|sat|sun)[a-z]*)?\b|"
            r"^(the |our |my )?[a-z]+s? (come|comes|came|is delivered|are delivered) from \w"
        ),
    ),
    # "the cert expired on the load balancer, not the gateway": what holds, said against
    # what does not.
    (
        "fact",
        0.6,
        _Folded(
            r"^(the|my|our|it) [\w' -]{4,60} (is|was|are|were|[a-z]+ed) [\w' -]{2,40}, "
            r"not (the |a |an )?[\w-]+( [\w-]+)?[.!]?$"
        ),
    ),
    # "setlist for Leeds: Neon, Falling Down, Glasswork, Static": a named list.
    ("fact", 0.6, _Folded(r"^[a-z][\w' -]{2,30}: [^,:.!?]{1,30}(, [^,:.!?]{1,30}){2,}$")),
    # "skirting boards will be white eggshell": what a thing is to be.
    (
        "decision",
        0.6,
        _Folded(
            r"^[a-z]+( [a-z]+)? (boards?|walls?|floors?|tiles?|doors?|"
            r"kitchen|bathroom|room|ceiling|paint|colou?r) will be [a-z]"
        ),
    ),
    # "The pond will go by the greenhouse", "Bed one will be potatoes": where a thing goes.
    (
        "fact",
        0.55,
        _Folded(
            r"^(the|my|our|[a-z]+ (one|two|three|four|five|six|seven|eight|nine|ten|\d+)) "
            r"[\w' -]{0,30}?will (be|go|stay|move|come) (in|at|on|by|to|into|next to|near|"
            r"behind|a|an|the|[a-z]+s\b)"
        ),
    ),
    # "My neighbour Geoff lends me his rotavator": what a person the speaker knows does.
    (
        "fact",
        0.55,
        _Folded(
            r"^(my|our) (neighbou?r|sister|brother|mum|mom|mother|dad|father|wife|husband|"
            r"partner|friend|boss|manager|son|daughter|aunt|uncle|cousin|niece|nephew|"
            r"grandma|grandpa|granny|colleague|landlord|landlady|tenant|teacher|coach|"
            r"doctor|dentist|accountant|lodger|flatmate|roommate)( [a-z][\w-]+)? "
            r"(?!(says|said|thinks|asks|wishes|sends|is|was|has|had)\b)[a-z]{3,}s\b"
        ),
    ),
)
# A payment due on a day of every month: "rent is 850 pounds a month, due on the 1st".
_STANDING_DUE = _Folded(
    r"\b(rent|payment|fee|fees|bill|subscription|mortgage|salary|wages|allowance)\b[^.]{0,60}"
    r"\bdue (on )?the \d{1,2}(st|nd|rd|th)\b(?! (of )?(jan|feb|mar|apr|may|jun|jul|aug|sep|"
    r"oct|nov|dec))"
)
# Something done by a person named, or by someone's or the thing: "Arjun twisted his
# ankle", "The plumber fixed the boiler", "Bloom Florist paid INV-041" (not "I", "we",
# "it" or "this": the speaker's own doings and remarks have shapes of their own).
_NEWS_OF = re.compile(
    r"^(?:(?:[Tt]he|[Mm]y|[Oo]ur) [a-z]+|(?!(?:I|We|You|They|He|She|It|This|That|There|"
    r"What|Who|Why|How|Just|So|Well|Also|Still|Maybe|Please|Lol|Haha|Omg|Wow|Oh|Ah|Aw|Ugh|"
    r"Yay|Honestly|Literally|Totally|Really|Seriously)\b)[A-Z][a-z]+"
    r"(?: [A-Z][a-z]+)?) (?:just |finally |already |also )?"
    r"(?:[a-z]{3,}ed|paid|broke|hurt|sent|gave|won|fell|sold|bought|caught|split|tore|"
    r"brought|took) "
    r"(?:his|her|their|my|our|the|two|three|[A-Z0-9])"
)
# A change under way: "Ollie's moving out", "We're switching her food to Purina".
_CHANGING = re.compile(
    r"\b(?:is|are|'s|'re) (?:moving (?:out|in|away|to)|switching|changing (?:to|from|"
    r"his|her|their|our|my)|retiring|quitting|leaving (?:the|his|her|their|us|our|at|on|in))\b",
    re.I,
)
_SO = re.compile(r",?\s+so\s+(?=(?:my|our|the|i|we)\b)|;\s+", re.I)


# "Freddie's a large youth", "Sam's in Leeds now": a name's "is" written short (an
# article or a place word cannot follow a possessive "Freddie's").  Not words that are no
# one's name ("That's a shame", "Today's a big day").
_NAME_IS_SHORT = re.compile(
    r"^(?!(?:That|It|There|What|Here|Who|He|She|Where|How|Let|This|Today|Tonight|Tomorrow|"
    r"Yesterday|Everyone|Everything|Everybody|Nobody|Somebody|Someone|Something|Nothing|"
    r"Life|Mine|Yours|Which|When|Why)'s)([A-Z][a-z]+)'s (?=(?:a|an|the|in|at|from|allergic|"
    r"now|still|our|my|his|her|their) \w)"
)


# A date or a plan moved: "got pushed to 14 July", "has been moved to Friday".
_PUSHED = re.compile(
    r"\b(?:got|was|were|been|is|are|has been|have been)\s+(?:pushed|moved|postponed|delayed|"
    r"rescheduled|brought forward|bumped)\s+(?:back\s+|forward\s+|up\s+)?(?:to|till|until)\b",
    re.I,
)
# An instruction, which a change word does not make a change: "please move the call to 3".
_ASKS_TO = re.compile(r"^\W*(?:please|pls|can you|could you|let'?s|remind|don'?t)\b", re.I)


def _classify(sentence: str) -> tuple[str | None, float]:
    s = _cased(split_greeting(_straight(sentence))[1].strip())
    s = _NAME_IS_SHORT.sub(r"\1 is ", s)  # "Freddie's a large youth": "Freddie is a …"
    # "sorry, the flight number is JL 8": what follows the apology is the statement
    # (unless it is a correction, "sorry, 4412": see below).
    if read_correction(s) is None:
        s = _FILLER.sub("", s) or s
    if _GROUP_REQUEST.match(s) or _NAMED_REQUEST.match(s):
        return "todo", 0.75
    if s.endswith("?") and not _QUESTION_START.match(s):
        # "I'm deaf in my left ear, so could I sit on the right?": the statement before
        # the question still holds.
        s = re.split(
            r",\s*(?:so|but|and|because|could|can|would|is|are|do|any)\b|"
            r"\s+so (?=if|could|can|would|will|is|are|do|any)\b",
            s,
        )[0]
    if not s or is_question(s) or is_chitchat(s) or _OF_THE_BOT.search(s) or cant_do_asked(s):
        return None, 0.0
    if read_correction(s) is not None:
        # "No wait, it's 4412" means nothing alone: the chat saves the sentence it
        # corrects, corrected, when it is said.
        return None, 0.0
    if _STANDING_DUE.search(s):
        return "fact", 0.6  # "rent 920 pounds, due on the 5th": every month, not a to-do
    # "the ch2 deadline got pushed to 14 July", "Mark's quote went up to £13,100": what
    # held changed, not a thing to do (its "deadline" or "Mark" no to-do's words).
    changed = (CHANGED.search(s) or _PUSHED.search(s)) and not _ASKS_TO.match(s)
    for kind, importance, pattern in _RULES:
        if pattern.search(s):
            return ("event", 0.6) if kind == "todo" and changed else (kind, importance)
    for kind, importance, pattern in _MORE_SHAPES:
        if pattern.search(s):
            return kind, importance
    if (_NEWS_OF.match(s) or _CHANGING.search(s)) and not _OPINION.search(s):
        # "Arjun twisted his ankle at school", "Bloom Florist paid INV-041 today!",
        # "We're switching her food to Purina": news of someone or something, kept.
        return "event", 0.5
    if CHANGED.search(s) and len(stems(s)) >= 3:
        # "Tariq moved from Glasgow to Edinburgh", "I quit the library job", "We sold
        # the Honda": what held changed; kept, so an answer can add it.
        return "event", 0.6
    stopped = next((c for c in re.split(r"\s*[,;]\s*", s) if NO_LONGER.search(c)), "")
    if stopped and (still := _STOPPED_WORDS.sub(_unsaid, stopped)) != stopped:
        # "I don't work at the bank anymore" is kept as what it undoes would be: the
        # chat reads it as retiring "I work at the bank"; "Rui doesn't work for us
        # anymore", what it undoes not typed, as a change (an event).
        undone = classify(still)
        if (
            undone[0] is None
            and len(stems(still)) >= 2
            and not _OPINION.search(s)
            and not _LAUGH_START.match(s)
        ):
            return "event", 0.5
        return undone
    if len(words(s)) < 3 or _OPINION.search(s) or _LAUGH_START.match(s):
        return None, 0.0
    if s.rstrip().endswith("!") and not says_something(s):
        return None, 0.0  # "Nat 20 on the floor though!": a cheer, not a fact
    s = _VOCATIVE.sub(" ", s)
    if _KEPT_AT.search(s):
        return "fact", 0.6
    if len(stems(s)) >= 2 and _SPECIFIC.search(s) and _PREDICATION.search(s):
        return "fact", 0.6
    if _IDENTIFIER.search(s) and len(stems(s)) >= 2:
        return "fact", 0.6
    if (
        len(words(s)) >= 5
        and _DECLARATIVE.match(s)
        and not _EVALUATIVE.search(s)
        and not _GENERIC.search(s)
    ):
        return "fact", 0.55
    return None, 0.0


def split_greeting(text: str) -> tuple[str, str]:
    """(the greeting a message opens with, the rest): "Good morning! My wife…" gives
    ("Good morning", "My wife…"); a message without one gives ("", text)."""
    m = _GREETING.match(text)
    if m is None:
        return "", text
    rest = text[m.end() :]
    # "Hey Dana, …" / "Hi tierbot! …": a name right after the greeting belongs to it.
    name = re.match(r"^([A-Z][\w'-]*)\s*[!,.:;]+\s*", rest)
    if name and not re.match(r"^(I|My|We|Our|The)\b", name.group(1)):
        rest = rest[name.end() :]
    greeting = m.group(1)
    # A word like "Hi" glued into a sentence ("Hey, I need…") keeps the sentence whole.
    return greeting, rest.lstrip()


@dataclass(frozen=True, slots=True)
class Request:
    """An explicit request about memory: ``kind`` "remember", "forget" or "skip" (keep
    nothing: "Please don't remember my PIN"), and what."""

    kind: str
    what: str
    reminder: bool = False
    #: "Remember to…", "Don't forget to…": something to do.
    todo: bool = False
    #: A forget that ticks a to-do off: "I watered the plants, cross it off my list".
    done: bool = False


_LIST = r"(?:\s+(?:my|the|our|your)\s+(?:to-?do\s+|shopping\s+)?list)?"
# "I watered the plants, please cross it off my to-do list"; "tick the milk off the
# list"; "mark the invoice as done": a to-do done.
_DONE_TODO = (
    re.compile(
        r"^(?P<what>.*?\w.*?)[\s,;.!-]+(?:(?:so|please|pls|plz|you can|can you|and)\s+)*"
        rf"(?:cross|tick|take|strike|scratch|knock)\s+(?:it|that|this|them)\s+off{_LIST}"
        r"\s*[.!]*$",
        re.I | re.S,
    ),
    re.compile(
        r"^(?:(?:please|pls|plz|you can)\s+)?(?:cross|tick|take|strike|scratch|knock)\s+"
        rf"(?P<what>.+?)\s+off{_LIST}\s*[.!]*$",
        re.I | re.S,
    ),
    re.compile(
        r"^(?:(?:please|pls|plz)\s+)?mark\s+(?P<what>.+?)\s+(?:as\s+)?(?:done|complete|"
        r"completed|finished)\s*[.!]*$",
        re.I | re.S,
    ),
    re.compile(
        r"^(?:(?:please|pls|plz|can you|could you)\s+)?(?:remove|delete|drop|clear)\s+"
        r"(?P<what>.+?)\s+(?:from|off)\s+(?:my|the|our)\s+(?:to-?do\s+)?list\b[\s.!?]*$",
        re.I | re.S,
    ),
)
# "Done with the stamps, tick it off": what was done, without the words saying so.
_DONE_LEAD = re.compile(
    r"^(?:i'?m\s+|i am\s+|i\s+)?(?:done with|finished(?: with)?|completed|did)\s+", re.I
)


# "I'm allergic to penicillin, please remember that": the request after what to keep.
_REMEMBER_AFTER = re.compile(
    r"^(?P<what>.*?\w.*?)[\s,;.!-]+(?:(?:so\s+)?(?:please|pls|plz)\s+|and\s+)?"
    r"(?:remember|remeber|rember|note|save|keep in mind|memori[sz]e|don'?t forget)\s+"
    r"(?:that|this|it)\s*[.!]*\s*$",
    re.I | re.S,
)

# "the smoke alarm needs new batteries too, remind me": a reminder asked for after it.
_REMIND_AFTER = re.compile(
    r"^(?P<what>.*?\w.*?)[\s,;.!-]+(?:(?:so\s+)?(?:please|pls|plz)\s+|and\s+|"
    r"(?:can|could|will)\s+(?:you|u)\s+)?remind\s+me(?:\s+(?:about|of)\s+(?:it|that))?"
    r"(?:\s+(?:later|tomorrow|please|pls|plz))?\s*[.!]*\s*$",
    re.I | re.S,
)


def skipped_topic(text: str) -> str:
    """What a "don't remember" request names ("my bike lock combination" of "Please
    don't remember my bike lock combination"), or "" when it names nothing ("don't
    save this")."""
    private = _KEEP_PRIVATE.match(_straight(text.strip()))
    if private is not None:
        what = re.sub(r"^(?:that|this|it)$", "", private["what"].strip(), flags=re.I)
        what = what or (private["told"] or "").strip().rstrip(".!")
        return what if words(what) else ""
    m = _DONT_KEEP.match(_straight(text.strip()))
    if m is None:
        return ""
    rest = re.sub(r"^\s*(?:that|this|it|the fact that)?\s*[:,-]?\s*", "", text[m.end() :])
    rest = rest.strip().rstrip(".!")
    return rest if words(rest) else ""


# "Forget that I'm mentoring Chidi, Oksana took that over": after the comma, why.
_WHY = re.compile(r"\s*(?:,|;|\s[-\u2013\u2014]\s|\s(?:because|since|as)\s)\s*")
# A reason after a comma that opens a clause of its own: "my wife, it makes me sad".
_CLAUSE_OPENS = re.compile(
    r"^(?:it|it's|i|i'm|i've|he|he's|she|she's|they|they're|we|we're|that|that's|this|"
    # (as chat writes them: "…, its paid by the project")
    r"its|im|ive|hes|shes|theyre|thats|"
    r"there|so|but|because|since|cos|cuz)\s+\w",
    re.I,
)


# "Forget everything about Tom", "all you know of Ida": the one named is the topic.
_ALL_ABOUT = re.compile(
    r"^(?:everything|all|anything|whatever)\s+(?:(?:i|you)\s+(?:'ve\s+|have\s+)?(?:said|told"
    r"(?:\s+you)?|know)\s+)?(?:about|of|on|regarding)\s+(?=\S)",
    re.I,
)


_POINTING = re.compile(
    r"^(?:(?:that|the|this)\s+)?(?:thing|stuff|bit|part)\s+(?:about|of|with)\s+|"
    r"(?<=\w)\s+(?:thing|stuff)\b(?=\s+(?:for|of|about|with)\b|\s*$)|"
    r"(?:\s+(?:then|too|as well|please|pls|now|actually|entirely|completely|altogether|"
    r"totally|for good|forever|permanently))+\s*$",
    re.I,
)


# "Cancel the tea ceremony, forget it completely", "The sumo tickets are cancelled, so
# forget about them": what is called off, and to be forgotten.
_CALL_OFF_AND_FORGET = re.compile(
    r"^\s*(?:(?:please|pls|ok|okay|so|actually)\W+)*(?:(?:cancel|scrap|drop|ditch)\s+"
    r"(?P<what>[^,;.!]+?)|(?P<off>[^,;.!]+?)\s+(?:is|are|was|were|got|has been|have been)\s+"
    r"(?:cancell?ed|called off|scrapped|off))\s*(?:,|;|\.|\s[-\u2013\u2014]|\s+and)\s*"
    r"(?:so\s+|just\s+|please\s+)*forget\s+(?:about\s+)?(?:it|that|this|them|all that)\b",
    re.I,
)


# "…, not relevant", "…, no longer needed": a reason said without a verb.
_NOT_WANTED = re.compile(r"(?:not|no longer|no need|not needed|irrelevant|pointless)\b", re.I)
# "…, just email me instead", "…, just pay me cash": what to do instead, no thing of it.
_DO_INSTEAD = re.compile(r"^(?:just|only)\s+[a-z]|^[^,;]*\binstead\b", re.I)


def _why_cut(what: str) -> str:
    """What a forget names, without the reason given after it (a clause of its own:
    "…, Oksana took that over"); a list ("my address, phone and email") stays whole."""
    parts = _WHY.split(what, maxsplit=1)
    if (
        len(parts) == 2
        and (
            says_something(parts[1])
            or _CLAUSE_OPENS.match(parts[1])
            or _NOT_WANTED.match(parts[1])
            or _DO_INSTEAD.match(parts[1])
        )
        and words(parts[0])
    ):
        return parts[0]
    return what


# "Joe's inhaler and the school trip": two things, each named as a thing is (its
# article, a possessive, "my"); "fish and chips" or "Tom and Ana's wedding" is one.
_THING_OPENS = r"(?:the|my|our|his|her|their|that|[A-Z][\w-]*'s)\s+\w"
_EACH_THING = re.compile(rf"\s*(?:,\s*(?:and\s+)?|\s+and\s+)(?={_THING_OPENS})")


def things_named(what: str) -> list[str]:
    """The things a forget names, each on its own: "Joe's inhaler and the school trip"
    is two requests; "my address, phone and email" and "fish and chips" one."""
    if not re.match(_THING_OPENS, what):
        return [what]
    parts = [p for p in _EACH_THING.split(what) if p.strip()]
    return parts if all(re.match(_THING_OPENS, p) for p in parts) else [what]


def read_request(text: str) -> Request | None:
    """The explicit memory request ``text`` makes ("Remember that my locker code is
    4411.", "Remind me: …", "Forget that …", "…, please remember that"), or None."""
    t = split_greeting(_straight(text.strip()))[1]
    if _DONT_KEEP.match(t) or _KEEP_PRIVATE.match(t):
        return Request("skip", t)
    for done in _DONE_TODO:
        if (m := done.match(t)) is not None and words(m["what"]):
            return Request("forget", _DONE_LEAD.sub("", m["what"].strip()), done=True)
    if (
        (m := _REMEMBER_AFTER.match(t)) is not None
        and len(words(m["what"])) >= 3
        and says_something(m["what"])
        and not is_question(m["what"])
    ):
        return Request("remember", m["what"].strip())
    if (
        (m := _REMIND_AFTER.match(t)) is not None
        and len(words(m["what"])) >= 3
        and says_something(m["what"])
        and not is_question(m["what"])
    ):
        return Request("remember", m["what"].strip(), reminder=True, todo=True)
    plain = _plain(t)
    if plain != t:
        if _ASKING.match(plain) or _polite_question(t, plain):
            return None
        t = plain
    if is_question(t) and (_reminded_of(t) or not t.lower().startswith(("remember", "remind"))):
        return None
    if t.endswith("?"):
        return None
    if (m := _DELETE.match(t)) is not None and words(m["rest"]):
        return Request("forget", m["rest"].strip())
    if (m := _CALL_OFF_AND_FORGET.match(t)) is not None:
        # "cancel the tea ceremony, forget it completely": the ceremony is to go.
        return Request("forget", (m["what"] or m["off"]).strip())
    if (m := _FORGET.match(t)) is not None:
        # "that thing about puppy breath", "the discount thing for Kindred then": what
        # it is about, without the words that only point at it.
        rest = m["rest"].strip().rstrip(".!")
        if len(things_named(rest)) == 1:  # (a list of things has commas of its own)
            rest = _why_cut(rest)
        # (" then" too: "forget that then" points back, as "forget that" does)
        what = " ".join(_POINTING.sub(" ", f" {rest}" if " " not in rest else rest).split())
        if not FORGET_ALL.match(what):
            what = _ALL_ABOUT.sub("", what)  # "everything about Tom": Tom
        if len(words(what)) >= 1 and not re.match(r"^(it|that|this)$", what, re.I):
            return Request("forget", what)
        return None
    if (m := _REMEMBER.match(t)) is None:
        return None
    verb = m["verb"].lower()
    what = m["rest"].strip()
    if _WH.match(what):
        return None
    if _REMEMBER_TO.match(what) and not verb.startswith(("note", "save", "make", "take")):
        # "Don't forget to water the plants": a to-do, said as it was said.
        return Request("remember", t.rstrip(), todo=True)
    if len(words(what)) < 2:
        return None
    return Request("remember", what, reminder=verb.startswith("remind"))


# "Sorry, I meant Thursday, not Tuesday", "no wait, it's 4412", "oops, 4412 not 4411",
# "not Tuesday, Thursday": a short correction of something the speaker just said.
_FIX_LEAD = (
    r"(?:(?:sorry|oops|whoops|no|nope|wait|hang on|actually|correction|my bad|typo|"
    r"err+|erm|um+|uh+)\b[\s,.!:;-]*)"
)
_FIX_SAY = r"(?:i meant|i mean|meant|make (?:that|it)|(?:that |it )?should (?:be|have said))\b"
_FIX_IS = r"(?:it'?s|it is|it was|that'?s|that is)\b"
_FIX_SPAN = r"[^,!?;]{1,40}?"
# A value (and what it takes back), then why: "26, costs went up".
_FIX_THEN_WHY = (
    rf"[\s:]*(?P<new>{_FIX_SPAN})(?:\s*,?\s*not\s+(?P<old>{_FIX_SPAN}))?"
    r"\s*[,;]\s*(?P<why>[a-z][^?]{2,60}?)[\s.!]*$"
)
_CORRECTION = (
    re.compile(
        rf"^\W*(?P<lead>{_FIX_LEAD}+)?(?:(?P<say>{_FIX_SAY})|(?P<is>{_FIX_IS}))?[\s:]*"
        rf"(?P<new>{_FIX_SPAN})(?:\s*,?\s*(?:not|instead of|rather than)\s+"
        rf"(?P<old>{_FIX_SPAN}))?[\s.!]*$",
        re.I,
    ),
    re.compile(
        rf"^\W*(?P<lead>{_FIX_LEAD}+)?not\s+(?P<old>{_FIX_SPAN})\s*[,;-]\s*"
        rf"(?:but\s+|(?P<is>{_FIX_IS})\s*)?(?P<new>{_FIX_SPAN})[\s.!]*$",
        re.I,
    ),
    # "actually make that 26, costs went up": the value, then why.
    re.compile(rf"^\W*(?P<lead>{_FIX_LEAD}+)?(?P<say>{_FIX_SAY}){_FIX_THEN_WHY}", re.I),
    # "actually it's thursdays now, she changed jobs": the same, said as what it is.
    re.compile(rf"^\W*(?P<lead>{_FIX_LEAD}+)(?P<is>{_FIX_IS}){_FIX_THEN_WHY}", re.I),
)
# A word every correction has (a cheap test before the patterns above).
_FIX_HINT = re.compile(
    r"\b(?:sorry|oops|whoops|no|nope|wait|hang|actually|correction|bad|typo|err+|erm|um+|"
    r"uh+|mean|meant|make|should|not|instead|rather)\b",
    re.I,
)
_WEEKDAY = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tues?|wed|thu|thurs|"
    r"fri|sat|sun)"
)
_MONTH_NAME = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)"
)
# What a correction's new value can stand for in the sentence it corrects, by shape.
#: A time of day written with digits: "7pm", "10:30", "9.15 a.m.".
CLOCK_TIME = r"\b\d{1,2}(?:[:.]\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d\d\b"
_SHAPES = (
    ("day", re.compile(rf"\b{_WEEKDAY}s?\b", re.I)),
    # "Oct 14", "March 15th", "5 May", "the 3rd of June": one value, not a month and a
    # number ("oops, it's Oct 16" made "Oct 16 14" of "Oct 14").
    (
        "date",
        re.compile(
            rf"\b{_MONTH_NAME}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|"
            rf"\b(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAME}\b",
            re.I,
        ),
    ),
    ("month", re.compile(rf"\b{_MONTH_NAME}\b", re.I)),
    ("time", re.compile(CLOCK_TIME, re.I)),
    # "the 15th": a day of the month.
    ("ordinal", re.compile(r"\b(?:the\s+)?\d{1,2}(?:st|nd|rd|th)\b", re.I)),
    ("number", re.compile(r"(?<![\w.])[#]?\d[\d.,:/-]*[A-Za-z]{0,3}\b|\b[A-Za-z]+\d[\w-]*\b")),
    # Not a sentence's first word ("My locker code…").
    ("name", re.compile(r"(?<=\S )(?!I\b)[A-Z][a-z]+(?: [A-Z][a-z]+)?\b")),
)


@dataclass(frozen=True, slots=True)
class Correction:
    """A short correction: the value meant, the value it replaces ("" when unsaid) and
    the shape the new value has ("day", "date", "month", "time", "ordinal", "number",
    "name"; "" for other words)."""

    new: str
    old: str
    shape: str


def value_shape(value: str) -> str:
    """The shape of a short value: what a correction can replace it with."""
    v = value.strip()
    for shape, pattern in _SHAPES:
        m = pattern.search(f"x {v}")
        if m is not None and len(m.group(0).strip()) >= len(v) / 2:
            return shape
    return ""


# A correction's new value that is a sentence of its own: a name or a thing, then "is".
_OWN_CLAUSE = re.compile(
    r"^(?:(?:the|my|our|his|her|their)\s+)?[A-Za-z][\w'-]*\s+(?:is|are|was|were)\s+\S", re.I
)


def read_correction(text: str) -> Correction | None:
    """The correction ``text`` makes of something said just before ("Sorry, I meant
    Thursday, not Tuesday"), or None.  A lone value needs a word saying it corrects
    ("sorry", "no wait", "I meant"); plain words (not a day, time, number or name)
    need one whatever else is said, so "Thanks, not now" corrects nothing."""
    t = text.strip()
    if len(t) > 120 or "\n" in t or t.count(" ") > 14 or not _FIX_HINT.search(t):
        return None
    t = _straight(t)
    for pattern in _CORRECTION:
        m = pattern.match(t)
        if m is None:
            continue
        if is_question(t):
            return None
        # ("thursdays now": the value, not when it holds from)
        new = re.sub(r"\s+(?:now|then|instead)$", "", m["new"].strip(" .!'\""), flags=re.I)
        old = (m["old"] or "").strip(" .!'\"")
        if not new or len(words(new)) > 4 or len(words(old)) > 4 or new.lower() == old.lower():
            return None
        if not words(new) and not re.search(r"\d", new):
            return None
        if re.search(r"\b(?:is|are|was|were|am|be)$", new, re.I):
            return None  # "sorry my english is not so good": a sentence, no value
        if _OWN_CLAUSE.match(new):
            # "Actually, Grim is a ranger, not a rogue" says all it means: a statement
            # (restating another), not a value to put in a sentence said before.
            return None
        marked = bool(m["lead"]) or bool(m.groupdict().get("say"))
        shape = value_shape(new)
        if old and value_shape(old) != shape:
            return None
        if not marked and not (old and shape):
            return None
        if not old and not shape:
            return None
        return Correction(new, old, shape)
    return None


def corrected(sentence: str, fix: Correction) -> str | None:
    """``sentence`` with ``fix`` applied, or None when it holds nothing to replace: the
    old value where it is said; else a value of the new one's shape, the one sharing
    the longest start with it ("4412" replaces "4411", not the "1234" after it), the
    last one of those."""
    padded = f" {sentence}"
    if fix.old:
        found = list(re.finditer(rf"(?<!\w){re.escape(fix.old)}(?!\w)", padded, re.I))[:1]
    else:
        pattern = dict(_SHAPES).get(fix.shape)
        same = [
            m
            for m in (pattern.finditer(padded) if pattern is not None else ())
            if value_shape(m.group(0)) == fix.shape
        ]
        new = fix.new.lower()

        def shared(m: re.Match[str]) -> int:
            said = m.group(0).lower()
            pairs = zip(said, new, strict=False)
            return next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(said), len(new)))

        if fix.shape == "number":
            # "no wait, it's 4412" corrects a number like it ("4411"), not the 3 of
            # "March 3" said after it.
            same = [m for m in same if len(m.group(0)) == len(new) or shared(m) >= 2]
        found = sorted(same, key=lambda m: (shared(m), m.start()))[-1:]
        if not found and re.fullmatch(r"\d{1,2}[.:]\d\d", fix.new):
            # "no wait, 6.45" of "nala's walk moved to 6.30am": a time of the same hour,
            # its "am" kept.
            hour = re.split(r"[.:]", fix.new)[0]
            times = list(re.finditer(rf"(?<![\d.:]){hour}[.:]\d\d(?=\s*(?:am|pm)\b)", padded, re.I))
            if times:
                at = times[-1]
                return (padded[: at.start()] + fix.new + padded[at.end() :])[1:]
    if not found:
        return None
    at = found[0]
    rest = padded[at.end() :]
    if re.match(r"['\u2019]s\b", rest) and re.search(r"['\u2019]s$", fix.new):
        rest = rest[2:]  # "Luigi's" corrected to "Mario's", not "Mario's's"
    return (padded[: at.start()] + fix.new + rest)[1:]


_SECOND_PERSON = (
    # "I'm Rosa, your planner", said to the others: theirs is not the listener's own.
    (r"\byour\b", "the"),
    (r"^call me(?= \S+[.!]?$)", "you go by"),
    (r"\bI am\b", "you are"),
    (r"\bI'm\b", "you're"),
    (r"^im\b", "you're"),  # "im jonas, 2nd year…", typed without the apostrophe
    # "she waters for me when im away", "ive booked pitch 3", "so ill grab them"
    (r"\b(?-i:im)\b(?=\s+[a-z])", "you're"),
    (r"\b(?-i:ive)\b(?=\s+[a-z])", "you've"),
    (
        r"(?:^|(?<=[,;] )|(?<=\bso )|(?<=\band )|(?<=\bthen )|(?<=\bfine )|(?<=\bok ))ill\b"
        r"(?=\s+(?:bring|send|book|buy|pick|grab|get|do|call|tell|pay|sort|make|check|ask|text|"
        r"email|drop|come|have|cover|host|order)\b)",
        "you'll",
    ),
    (r"^([A-Z][\w'-]+) here\b", r"you're \1"),  # "Sam here, Leo's dad"
    (r"\bI was\b", "you were"),
    (r"\bI've\b", "you've"),
    (r"\bI'll\b", "you'll"),
    (r"\bI'd\b", "you'd"),
    (r"\bmyself\b", "yourself"),
    (r"\bmine\b", "yours"),
    (r"\bmy\b", "your"),
    (r"\bme\b", "you"),
    (r"\bI\b", "you"),
)


# Words that open a sentence but are lower-case inside one ("Noted: we decided…").
_LOWER_FIRST = frozenset(
    "your you you're you've you'll you'd we we're we've we'll our the a an this that these "
    "those it it's its they they're their there he he's his she she's her".split()
)


def to_second_person(text: str) -> str:
    """``text`` said back to its speaker: "my locker code is 4411" → "your locker code is
    4411" (first person singular only; "we" stays "we").  Text in capitals is said back
    in lower case, its codes ("MY SEAT IS 14C") kept."""
    out = unshout(text.strip())
    for pattern, repl in _SECOND_PERSON:
        out = re.sub(pattern, repl, out, flags=re.I)
    if out and out[0].isupper() and not re.match(r"^[A-Z][a-z]*[A-Z]|^[A-Z]{2}", out):
        first = out.split(" ", 1)[0]
        if first.lower() in _LOWER_FIRST:
            out = out[0].lower() + out[1:]
    return out.rstrip(" .!?")


_FIRST_PERSON = (
    (r"^you are\b", "I am"),
    (r"^you're\b", "I'm"),
    (r"^you were\b", "I was"),
    (r"^you've\b", "I've"),
    (r"^you'll\b", "I'll"),
    (r"^you'd\b", "I'd"),
    (r"^you\b", "I"),
    (r"\byourself\b", "myself"),
    (r"\byours\b", "mine"),
    (r"\byour\b", "my"),
)


def to_first_person(text: str) -> str:
    """What :func:`to_second_person` said back, as its speaker said it: "your locker
    code is 1234" → "my locker code is 1234" (a sentence said back, not any text)."""
    out = text.strip()
    for pattern, repl in _FIRST_PERSON:
        out = re.sub(pattern, repl, out, flags=re.I)
    return out[:1].upper() + out[1:]


@dataclass(frozen=True, slots=True)
class ExtractedMemory:
    """A rule-based memory: its type, importance, content and source message id."""

    memory_type: str
    importance: float
    content: str
    source_id: str


# The offline chat's replies that say back what people told ("Here is what you told me:
# …; we decided to use Postgres 16; …"): what they repeat is never the bot's own.
_REPORTING = re.compile(
    r"^\s*(«|earlier,|i remember|from an earlier summary|noted|hello|i don't know|"
    r"let me look|sorry|you told me|done:|i forgot|on \d{4}-|here is what|you also told me|"
    r"that is everything|your to-dos|your name is|you go by|corrected:|ok: i won't|"
    r"i had nothing|i could not|i can't|nothing i could find|\S+ (said|told me) on \d{4}-|"
    r"i'm a bot|i'm well, thanks|what i know about|also about|there may be more|"
    r"what else about what|\(the list|\(i cannot see|there (?:are|is) \d+ more|"
    r"i'll take your word|that is all)",
    re.I,
)
_BOT_COMMITMENT = _Folded(
    r"\b(i will|i'll|i shall|i promise|i decided|i've decided|i have decided|i am going to|"
    r"i'm going to|i won't|i will not|we (decided|agreed))\b",
)
_BOT_DECISION = _Folded(r"\b(decided|agreed)\b")
# What the bot quotes of others («...»): never a memory of its own.
_QUOTED_SPAN = re.compile(r"«[^»]*»?|\"[^\"]*\"|\{.*\}", re.S)


# "… moved their date! its now may 24 not may 17": a sentence going on with the last.
_GOES_ON = re.compile(
    r"^\W*(?:it'?s|its|it\s+is|they'?re|that'?s|which\s+is)\s+(?:now|actually)\b", re.I
)


def joined(pieces: Sequence[str]) -> list[str]:
    """Sentences that say one thing together, as one: an exclamation of two or three
    words (no greeting) with what it announces ("first harvest! 400g of radishes on may 12"), a
    change with the value it goes on to give ("the patel couple moved their date! its
    now may 24 not may 17")."""
    out: list[str] = []
    for p in pieces:
        if out and (
            (
                2 <= len(words(out[-1])) <= 3
                and out[-1].rstrip().endswith("!")
                and not split_greeting(out[-1])[0]
            )
            or _GOES_ON.match(p)
        ):
            out[-1] = f"{out[-1]} {p}"
        else:
            out.append(p)
    # "…, want to keep notes here": what the bot is for is no part of what was told.
    return [kept if len(words(kept := _FOR_THE_BOT.sub("", p))) >= 3 else p for p in out]


# A closing clause saying what the bot will be used for: "… and i need somewhere to dump
# all my booking stuff lol", "…, want to keep notes here", "… so i can keep track".
_FOR_THE_BOT = re.compile(
    r"(?:\s*[,;-]\s*|\s+(?:and|so)\s+)(?:i\s+|i'?m\s+|im\s+)?(?:just\s+|really\s+)?"
    r"(?:need|want|wanna|would\s+like|thought\s+i'?d|can)\s+(?:to\s+)?"
    r"(?:somewhere|a\s+place|keep\s+track\b|(?:keep|jot|dump|store|log|put)\s+"
    r"(?:notes|stuff|things|it\s+all|everything|all\s+(?:my|the|this)\b)|use\s+(?:this|you)\b|"
    # ("…, want to keep notes here", not "… and i want to stay here")
    r"(?:keep|jot|dump|store|log|put|write|track|save)\b[^.!?,]*\bhere\W*$)"
    r"[^.!?]*?(?:\s+(?:lol|haha|tbh))?\W*$",
    re.I,
)


def extract_memories(entries: Sequence[TranscriptEntry], limit: int = 40) -> list[ExtractedMemory]:
    """Typed memories found by rules in ``entries``, most important first.

    The bot's own lines (author marked :data:`BOT_MARK`) give only what it decided
    or promised itself; whatever it quotes of others is never saved again.  An
    explicit "Remember that…" saves what follows it.
    """
    found: list[ExtractedMemory] = []
    seen: set[str] = set()
    for e in entries:
        bot = e.author.endswith(f" {BOT_MARK}")
        author = e.author.removesuffix(f" {BOT_MARK}")
        text = _QUOTED_SPAN.sub(" ", e.text) if bot else e.text
        request = None if bot else read_request(text)
        if request is not None and request.kind in ("forget", "skip"):
            continue
        pieces = (
            [request.what] if request is not None else joined(sentences(split_greeting(text)[1]))
        )
        for sent in pieces:
            if bot:
                kind, importance = _classify_bot(sent)
            elif request is not None and request.todo:
                kind, importance = "todo", 0.75
            else:
                kind, importance = classify(sent)
                if kind is None and request is not None:
                    kind, importance = "fact", 0.7
            if kind is None:
                continue
            content = f"{author}: {sent}"[:500]
            key = " ".join(stems(sent))
            if key in seen:
                continue
            seen.add(key)
            found.append(ExtractedMemory(kind, importance, content, e.id))
    found.sort(key=lambda m: -m.importance)
    return found[:limit]


def _classify_bot(sentence: str) -> tuple[str | None, float]:
    """The bot's own sentence: a decision or a promise it made, else nothing."""
    if _REPORTING.match(sentence) or not _BOT_COMMITMENT.search(sentence):
        return None, 0.0
    return ("decision", 0.8) if _BOT_DECISION.search(sentence) else ("todo", 0.75)
