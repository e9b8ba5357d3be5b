"""Small text utilities shared by the offline provider: words, stems, sentences, overlap."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

import Stemmer

# Letters and digits of any script ("café", "暗証番号"), with inner apostrophes and hyphens.
_WORD = re.compile(r"[^\W_][\w'\-]*")
# A stop, "!" or "?" that ends a word ("The prefix is ! and…" is no sentence end).
_SENTENCE_END = re.compile(r"((?<=\S[.!?])[^\S\n]+(?=\S)|\s*\n\s*)")
# A piece ending like this does not end a sentence: "Dr. Patel", "St. Mary St.", "9 a.m."
_ABBREVIATION = re.compile(
    r"(?:\b(?:dr|mr|mrs|ms|mx|st|prof|jr|sr|vs|etc|e\.g|i\.e|mt|no|approx|ave|rd|inc|ltd|"
    r"dept|fig|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|co|corp|bros)|(?<!\w)[^\W\d_])\.$",
    re.I,
)

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    i'm it's that's don't didn't what's let's i've i'd i'll you're we're they're much
    many""".split()
)

_stemmer = Stemmer.Stemmer("english")


# Bounded small: chat vocabulary keeps growing (names, ids, typos) and each entry costs
# ~250 bytes; the few thousand most recent words take nearly every hit (Zipf).
@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(_PRESENT.get(word, word)))


# Irregular past forms as their verb: "I bought the milk" is about "buy milk".
_PRESENT = dict(
    pair.split(":")
    for pair in (
        "bought:buy brought:bring paid:pay sent:send took:take taken:take made:make "
        "got:get gotten:get wrote:write written:write rang:ring gave:give given:give "
        "went:go gone:go met:meet sold:sell told:tell found:find kept:keep "
        "fed:feed built:build drove:drive driven:drive ate:eat eaten:eat drank:drink "
        "swam:swim ran:run won:win lost:lose spent:spend caught:catch taught:teach "
        "thought:think chose:choose chosen:choose flew:fly flown:fly sang:sing sung:sing "
        "began:begin begun:begin wore:wear worn:wear threw:throw thrown:throw grew:grow "
        "grown:grow knew:know known:know seen:see spoke:speak spoken:speak "
        "broke:break broken:break fallen:fall held:hold "
        "stood:stand understood:understand forgot:forget forgotten:forget lent:lend"
    ).split()
)


# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, Han, and
# half-width katakana.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff66-\uff9f]+"
)


_ACCENT = re.compile("[\u0300-\u036f]")


def split_unspaced(word: str) -> list[str]:
    """``word`` as search tokens: a run of a script written without spaces becomes its
    overlapping character pairs ("ロッカー番号" gives ロッ ッカ カー ー番 番号), as search
    engines' CJK analysers do, so a question finds a sentence that shares part of the run;
    anything else stays whole."""
    if word.isascii() or not _UNSPACED.search(word):
        return [word]
    out: list[str] = []
    pos = 0
    for m in _UNSPACED.finditer(word):
        if m.start() > pos:
            out.append(word[pos : m.start()])
        run = m[0]
        out += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
        pos = m.end()
    if pos < len(word):
        out.append(word[pos:])
    return out


def words(text: str) -> list[str]:
    """Lower-cased word tokens, accents folded ("Café" and "cafe" are one word); text of
    scripts without spaces as character pairs (:func:`split_unspaced`)."""
    if text.isascii():
        return [w.lower().strip("'-_") for w in _WORD.findall(text)]
    # Accents off ("é" is "e"); other marks, such as kana's voicing marks, are kept.
    text = unicodedata.normalize("NFKD", text.replace("\u2019", "'"))
    text = unicodedata.normalize("NFC", _ACCENT.sub("", text))
    return [
        piece
        for w in _WORD.findall(text)
        for piece in split_unspaced(w.lower().strip("'-_"))
        if piece
    ]


def stems(text: str) -> list[str]:
    """Stemmed content words (stopwords dropped)."""
    return [_stem(w) for w in words(text) if w and w not in STOPWORDS]


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (and lines); empty pieces dropped.  A period after
    an abbreviation or an initial ends no sentence; a lower-case start may begin one."""
    out: list[str] = []
    glue = False
    parts = _SENTENCE_END.split(text)  # text, separator, text, separator, ...
    for i in range(0, len(parts), 2):
        piece = parts[i].strip()
        if piece:
            if glue and out:
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
        separator = parts[i + 1] if i + 1 < len(parts) else "\n"
        # A line break ends a sentence whatever came before it.
        glue = bool(out) and "\n" not in separator and bool(_ABBREVIATION.search(out[-1]))
    return out


#: Of a request's content words, the share a text must hold to be what it names.
NAMES_SHARE = 0.6
# A phone's words (stemmed): "phone", "mobile", … name a number, "number" alone does not.
_PHONE = frozenset({"phone", "mobil", "cell", "tel"})


# "Dana: …": the author a memory's content starts with.
_AUTHOR = re.compile(r"^[^:\n]{1,60}:\s+")


def unshout(text: str) -> str:
    """``text`` in lower case when it is all capitals ("REMEMBER THAT MY PIN IS 7788"),
    except words with digits ("14C") and "I"; other text as it is."""
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 4 or any(c.islower() for c in letters):
        return text
    return re.sub(r"\b[^\W\d_]+\b", lambda m: m[0] if m[0] == "I" else m[0].lower(), text)


def bare(text: str) -> str:
    """``text`` in lower case without spaces or punctuation, to find one text in another."""
    return re.sub(r"\W+", "", text).lower()


# "what Ben said about the ending": a forget of someone's words, whose, and what about.
SAID_ABOUT = re.compile(
    r"^(?:what|everything|all)\s+(?P<who>[A-Z][\w'-]*)\s+(?:said|told you|wrote|says|"
    r"thinks|thought)\s+(?:about|of|on)\s+(?P<topic>\S.*)$"
)


def without_author(content: str) -> str:
    """What a memory or message says, without the "Dana: " its content starts with."""
    return _AUTHOR.sub("", content, count=1)


# "my locker code is 4411" -> "my locker code"; "my locker code" alone is a topic.
_THING = re.compile(
    r"^\s*(?:that\s+|about\s+|what i (?:said|told you) about\s+)?"
    r"((?:my|our|your|his|her|their|the|(?:[^\W\d][\w.]*\s)?[^\W\d][\w.]*'s)\s+"
    r"[^\W\d][\w' .-]{0,40}?)"
    r"(?:(?P<copula>\s+(?:is|are|was|were|'s)\b)|\s*[.!]?\s*$)",
    re.I,
)
# A request that states something ("that Mum takes metformin"): up to its verb.  Not
# one asked with a question word ("where Ana lives"), which names a thing, not its value.
_STATED = re.compile(
    r"^\s*(?:that\s+)?(?!(?:what|where|when|who|whom|which|how|why)\b)"
    r"(?P<subject>(?:[^\W\d][\w'-]*\s+){1,4}?)(?:(?:do|does|did)(?:n't)?\s+)?"
    # (not a noun after "my", "the" or a name's "'s": "my kids names", "Mum's meds info")
    r"(?<!\bmy\s)(?<!\bour\s)(?<!\bthe\s)(?<!\bhis\s)(?<!\bher\s)(?<!\byour\s)(?<!'s\s)"
    r"(?:[a-z]+s|[a-z]{3,}ed|need|want|like|love|hate|have|has|take|took|go|went|work)\b",
    re.I,
)
_VAGUE = re.compile(r"\s*\b(?:names|info|information|details|stuff|thing|things)\b", re.I)
# A phone number: eight digits or more, grouped or not ("07700 900789", "555-0142" is
# seven, said with "phone"); not an amount ("£2,850").
PHONE_NUMBER = re.compile(r"(?<![\w£$€.,])\+?\d(?:[ ()-]?\d){7,}\b")
# A name written as one (not a sentence's first word).
_PROPER = re.compile(r"(?<=\S )(?!I\b)[A-Z][a-z][\w-]*")


# A phone number as a line gives it, with the words that say it is one.
_NUMBER_SAID = re.compile(
    r"(?:^|\s*[,;]\s*|\s+)(?:(?:(?:his|her|their|my|the)\s+)?(?:phone|mobile|cell|tel|number)"
    r"(?:\s+(?:number|no\.?))?\s*(?:is\s+|:\s*)?)?" + PHONE_NUMBER.pattern,
    re.I,
)


def _code_said(request: str, text: str) -> re.Match[str] | None:
    """Where ``text`` gives the number of another kind that ``request`` names alone ("the
    policy number" of "…, policy number PG-44821"; "my account number" of "sort code
    20-45-67 account 33445566"), when the number ends its clause; None otherwise (the
    clause then goes whole: "His NHS number is 485 777 3929 and his GP is …")."""
    owners = _owners(request)
    plain = re.sub(r"\b(?:his|her|their|my|our|the)\b|[\w-]+'s\b", " ", request, flags=re.I)
    said = plain.split()
    if (
        len(said) != 2
        or said[1].lower() not in ("number", "no", "no.")
        or set(stems(said[0])) & (owners | _PHONE)
    ):
        return None  # (a phone's number is what PHONE_NUMBER finds, or its clause)
    kind = re.escape(said[0])
    return re.search(
        rf"(?:^|\s*[,;:]\s*|\s+)(?:(?:his|her|their|my|our|the)\s+)?{kind}\s+"
        r"(?:number\s+|no\.?\s+|#\s*)?(?:is\s+|:\s*)?(?=[\w/-]*\d)[\w/-]+(?=\s*(?:$|[,;.]))",
        text,
        re.I,
    )


# What is left of a clause whose number went: "my phone number for photo stuff is",
# "phone:"; and a condition with nothing to hang on ("if anyone needs a lift").
_HUSK = re.compile(r"(?:\b(?:is|are|was|were|number|phone|mobile|no)|:)$", re.I)
_DANGLING = re.compile(r"^(?:if|when|whenever|in case|so|because|since)\b", re.I)


def _left_of(text: str) -> str:
    """``text`` once a number went from it, as a sentence: its clauses but those left
    saying nothing; "" when none says something."""
    parts = [p.strip(" .") for p in re.split(r"\s*;\s*|\s*,\s+", text.strip(" ,;.:"))]
    parts = [p for p in parts if p and not _HUSK.search(p)]
    if parts and _DANGLING.match(parts[0]):
        parts = []
    left = ", ".join(parts)
    # ("my bank details: sort code 20-45-67": a label and its value say something too)
    told = says_something(left) or re.match(r"^[^:]{3,}:\s*\w", left) is not None
    return f"{left[:1].upper()}{left[1:]}." if left and told else ""


def _owners(request: str) -> set[str]:
    """The stems of whose thing ``request`` names ("the plumber's number": plumber)."""
    return {t for w in re.findall(r"([\w-]+)'s\b", request) for t in stems(w)}


def _asks_phone(request: str) -> bool:
    """Whether ``request`` names someone's phone number and nothing else: "the plumber's
    number", "Tom's phone number" (not "his NHS number")."""
    owners = _owners(request)
    asked = set(stems(re.sub(r"\b(?:his|her|their|my|our)\b", "", request, flags=re.I)))
    return bool(asked & (_PHONE | {"number"})) and not asked - _PHONE - {"number"} - owners


def _grown(a: str, b: str) -> bool:
    """ "weight" and "weigh": a stem of five letters or more and one a letter longer."""
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 5 and len(long_) == len(short) + 1 and long_.startswith(short)


_PRONOUN_SUBJECT = frozenset("i you he she we they it".split())
# Digits written apart ("4,411", "44 11", "555-0101") are one number.
_DIGIT_GAP = re.compile(r"(?<=\d)[,\s.-](?=\d)")


_MONEY = re.compile(r"\b(?:money|cash)\b", re.I)
#: A sum of money said: "£15", "12 quid", "4k", "20 dollars".
MONEY_AMOUNT = re.compile(
    r"[£$€¥]\s?\d|\d\s?(?:p|k|pence|quid|pounds?|dollars?|euros?|bucks|usd|gbp|eur)\b", re.I
)


def kin(a: str, b: str) -> bool:
    """Whether two stems are of one family: the shorter, of five letters or more,
    begins the longer, at most five letters shorter ("electr" and "electrician",
    "inspect" and "inspector", "allerg" and "allergi")."""
    short, long_ = sorted((a, b), key=len)
    return (
        len(short) >= 5
        and short != long_
        and len(long_) - len(short) <= 5
        and long_.startswith(short)
    )


def names(request: str, text: str) -> bool:
    """Whether ``text`` is what ``request`` ("forget that my locker code is 4411") names.

    When both say what thing they are about ("my locker code"), the things must be
    the same ("my sister's locker code" and "my gym code" are not), or, for a request
    naming a topic, hold it ("my bike lock" names "my bike lock combination is …");
    otherwise the text
    must hold at least :data:`NAMES_SHARE` of the request's stemmed content words.
    Either way it must hold every number the request gives ("my locker code is 5522" is
    another value), however the digits are grouped, and most words of the value a
    request states ("… is on Thursday" is not "… is on Tuesday")."""
    text = without_author(text)
    # "my kids names", "Mum's meds info": the kids, the meds (unless a name is told of)
    # (not when the text says the same word: "the kids names" of "the kids names are …";
    # "my allergy thing" of "… so no peanut stuff" is the allergy)
    said_vague = {m[0].strip().lower() for m in _VAGUE.finditer(text)}
    asked_vague = {m[0].strip().lower() for m in _VAGUE.finditer(request)}
    if (vague := _VAGUE.sub("", request).strip()) and not asked_vague & said_vague:
        request = vague
    if len(said := sentences(text)) > 1 and any(names(request, x) for x in said):
        return True  # "My NHS number is 123. Dad's NHS number is 456." names "his"
    if _MONEY.search(request) and not _MONEY.search(text) and MONEY_AMOUNT.search(text):
        # "that i owe jonas money" of "i owe jonas 12 quid": the amount is the money.
        request = " ".join(_MONEY.sub(" ", request).split())
    wanted = set(stems(_DIGIT_GAP.sub("", request)))
    have = set(stems(_DIGIT_GAP.sub("", text)))
    if not wanted or any(ch.isdigit() for ch in "".join(wanted - have)):
        return False
    if wanted & (_PHONE | {"number"}) and have & _PHONE:
        # "Karen's phone number" of "her mom is Karen, phone 555-0142": one thing.
        wanted = (wanted - _PHONE - {"number"}) | (have & _PHONE)
    elif wanted & (_PHONE | {"number"}) and PHONE_NUMBER.search(text):
        # "the plumber's number" of "the plumber is Dave Reilly, 07700 900789".
        wanted = wanted - _PHONE - {"number"} or wanted
    # "the weight thing" of "I weigh 72kg": a word and the one it is made from.
    have |= {w for w in wanted for h in have if _grown(w, h)}
    # "the hotel name" of "the hotel in Lisbon is Hotel Alfama Garden": the name given.
    if "name" in wanted and "name" not in have and _PROPER.search(text):
        wanted.discard("name")
        request = re.sub(r"\s*\bname\b", "", request, flags=re.I)
    asked, told = _THING.match(request), _THING.match(text)
    if (verb := _STATED.match(request)) and not (asked and asked["copula"]):
        # "that Mum takes metformin": what it says of its subject must be there too
        # ("Mum takes aspirin and lisinopril" is another thing said of her).
        value = set(stems(_DIGIT_GAP.sub("", request[verb.end() :])))
        # A line saying less than the request ("Mum takes metformin" of "that Mum takes
        # metformin for her diabetes") is named by it.
        said_less = bool(have) and have <= wanted
        if value and len(value & have) < NAMES_SHARE * len(value) and not said_less:
            return False
        # ... and it is said of the same one: "Dad takes metformin" is not Mum's.
        subject = set(stems(verb["subject"])) - _PRONOUN_SUBJECT
        if subject and not subject <= have:
            return False
    if asked and asked["copula"]:
        # "my dentist appointment is on Tuesday at 3pm": the value told must be there
        # too, its words as well as its numbers ("on Thursday at 3pm" is another value).
        value = set(stems(_DIGIT_GAP.sub("", request[asked.end() :])))
        if value and len(value & have) < NAMES_SHARE * len(value):
            return False
    # A thing is what comes before "is": two sentences without one ("my brother moved to
    # Berlin") name no thing to compare, only words.
    if asked and told and asked["copula"]:
        return set(stems(asked[1])) == set(stems(told[1]))
    if asked and told and told["copula"]:
        # A topic ("forget my bike lock") names the things it is part of ("my bike lock
        # combination is 3719"); "my locker" does not name "my gym code", nor "my locker
        # code" someone else's ("my sister's locker code").
        whose = {w.lower() for w in re.findall(r"([\w-]+)'s\b", told[1])}
        # "his NHS number" is anyone's ("Dad's NHS number"): who he is was said before.
        anyones = re.match(r"(?i)(?:his|her|their)\b", asked[1])
        # "Karen's phone number" of "Mia's best friend is Zoe, her mom is Karen, phone
        # 555-0142": the line is Mia's friend's, and tells Karen's number on the way.
        owners = {w.lower() for w in re.findall(r"([\w-]+)'s\b", asked[1])}
        if owners and owners <= {w.lower() for w in re.findall(r"[\w-]+", text)} - whose:
            return wanted <= have
        if not anyones and whose - {w.lower() for w in re.findall(r"[\w-]+", asked[1])}:
            return False
        if anyones and not _may_be_his(anyones[0].lower(), asked[1], told[1]):
            return False  # the asker's own NHS number is not his, nor Mum's
        # "forget the address" names the sentence that gives one, whatever it is of.
        return set(stems(asked[1])) <= set(stems(told[1])) or (
            not asked["copula"] and wanted <= have
        )
    return len(wanted & have) >= NAMES_SHARE * len(wanted)


# Who "his" or "her" cannot be: the asker ("my NHS number"), or someone of the other sex.
WOMEN = frozenset(
    "mum mom mother mam sister wife daughter aunt grandma granny grandmother girlfriend niece "
    "she her woman girl lady".split()
)
MEN = frozenset(
    "dad father papa brother husband son uncle grandpa grandad grandfather boyfriend nephew "
    "he him man boy".split()
)


def _may_be_his(pronoun: str, asked: str, thing: str) -> bool:
    """Whether ``thing`` ("Dad's NHS number", "My sister's phone number") may be what
    ``asked`` ("his NHS number") is: not the asker's own ("My NHS number"), nor, for
    "his", a woman's ("Mum's"), nor, for "her", a man's.  ("My boss" is another thing
    altogether, said in the same message.)"""
    words = [w.lower() for w in re.findall(r"[\w-]+", thing)]
    owners = {w.lower() for w in re.findall(r"([\w-]+)'s\b", thing)}
    same = set(stems(asked)) <= set(stems(thing))
    if same and words[:1] in (["my"], ["our"]) and not owners:
        return False  # "My NHS number": the asker's own
    other = WOMEN if pronoun == "his" else MEN if pronoun == "her" else frozenset()
    return not owners & other


_NOT_WHO = frozenset("he she they it we you this that also note remember actually".split())


def said_of(text: str, before: str) -> str:
    """``text`` with a "He"/"She" it starts with read as whom ``before`` (the same
    person's line just before it) named: "He also takes amlodipine" after "Dad takes
    metformin" is "Dad also takes amlodipine".  Unchanged when it starts otherwise or
    ``before`` names no one who may be meant ("he" is no "Mum")."""
    bare = without_author(text)
    he = _HE.match(bare)
    if he is None or he[0].lower().startswith("they"):
        return text
    other = MEN if he[0].lower().startswith("she") else WOMEN
    who = [
        n
        for n in _NAME.findall(without_author(before))
        if n.lower() not in other and n.lower() not in _NOT_WHO and n.lower() not in STOPWORDS
    ]
    return _told_of(who[0], he, bare) if who else text


def _told_of(who: str, he: re.Match[str], text: str) -> str:
    """``text``, which starts with ``he`` ("He's", "she"), said of ``who`` instead: "Ben is
    a nurse" of "he's a nurse"."""
    verb = _CONTRACTED[he["verb"].lower()] + " " if he["verb"] else ""
    return f"{who} {verb}{text[he.end() :].strip()}"


# A verb: "remember my seat is 14C" says something; "remember my seat number?" asks.
HAS_VERB = re.compile(
    r"\b(is|are|was|were|am|be|has|have|had|do|does|did|will|can|'s|'re|'m|'ve|'ll|"
    r"should|must|could|would|might|shall|cannot|(?:should|must|could|would|ca|wo|do|does|"
    r"did|is|are|was|were)n't|"
    r"[a-z]{3,}ed|(like|love|hate|prefer|live|work|need|want|go|get|take|meet|turn|cost|"
    r"open|close|start|end|own|use|run)s?|goes|got|took|met)\b",
    re.I,
)


def says_something(text: str) -> bool:
    """Whether ``text`` holds a verb: "your locker code is 4411" is a statement, "your
    locker code" a topic."""
    return HAS_VERB.search(text) is not None


# Where a sentence may be cut into clauses: a comma, semicolon or dash (with the "and"
# or "but" after it), or "and" / "but" alone.
_CLAUSE_GAP = re.compile(r"\s*(?:[,;]|\s[-–]\s)\s*(?:(?:and|but)\s+)?|\s+(?:and|but)\s+", re.I)
# A clause tied to the one before it: "…, which is also my phone code", "…, and so does
# her ex-husband", "…, that he lives in Leeds", "…, it is hard for my throat".
_LINKED = re.compile(
    r"^(?:which|who|whom|whose|that|this|it|it's|its|neither|nor|so\s+(?:do|does|did|is|are|was|were|has|"
    r"have|can|will)\b)",
    re.I,
)
# "…, the party doesn't know", "…, so keep it quiet": a clause whose object is the one
# before it.
_ENDS_BACK = re.compile(
    r"\b(?:it|this|that|them|about\s+it|(?:know|knows|knew|think|thinks|mind|minds|care|"
    r"cares|agree|agrees|understand|understands|remember|remembers|see|sees|noticed))\W*$",
    re.I,
)
# "…, we don't talk about it in front of him": a clause that speaks of the one before.
_SPEAKS_OF_IT = re.compile(
    r"\b(?:about|of|on|with|mention|mentions|mentioned|tell|told)\s+(?:it\b|(?:this|that)\b(?!\s+[a-z]+\s))",
    re.I,
)
# A clause of its own: one that starts with a person ("she works as a dentist").
_PERSON_START = re.compile(r"^(?:i|you|he|she|we|they|it)\b(?:'\w+)?\s+\S", re.I)
# Who a clause starting "he"/"his" is about: the subject of the clause before it.
_HE = re.compile(r"^(?:he|she|they)(?:'(?P<verb>s|re|ll|d|ve))?\b", re.I)
_CONTRACTED = {"s": "is", "re": "are", "ll": "will", "d": "would", "ve": "have"}
_HIS = re.compile(r"^(?:his|her|their)\b", re.I)
# A subject ends at a comma or a dash: "My password, which is …", "Carla - who lives …".
_SUBJECT_END = re.compile(r"\s*(?:,|\s[-–]\s)")
_NAME = re.compile(r"\b(?!(?:My|Our|The|His|Her|Their|An)\b)([A-Z][a-z][\w-]*?)(?:'s)?\b")
# A sentence that goes on telling of what the one before told: "He bruised his hip…".
_GOES_ON = re.compile(r"^\W*(?:he|she|they|it|this|that|then|afterwards|after that)\b", re.I)
_WH = re.compile(r"^\s*(?:what|where|when|who|whom|which|how|why)\b", re.I)
# Several things asked to be forgotten at once: "where Ana lives and what she does".
_AND_ASKED = re.compile(r"\s*(?:,|\band)\s+(?=(?:what|where|when|who|whom|which|how)\b)", re.I)


def clauses(sentence: str) -> list[str]:
    """``sentence`` cut where what stands on both sides says something: "My sister
    Ana lives in Porto and works as a dentist" is two clauses; "Ana, my sister, lives
    in Porto" and "the address is 14 Elm Road, Leeds" are one."""
    cuts = [(m.start(), m.end()) for m in _CLAUSE_GAP.finditer(sentence)]
    pieces, start = [], 0
    for a, b in cuts:
        pieces.append((start, a, b))
        start = b
    pieces.append((start, len(sentence), len(sentence)))
    out: list[tuple[int, int]] = []  # (start, end) of each clause in ``sentence``
    for s, e, _ in pieces:
        text = sentence[s:e]
        whole = says_something(text) or _PERSON_START.match(text) is not None
        if out and (not whole or not says_something(sentence[out[-1][0] : out[-1][1]])):
            out[-1] = (out[-1][0], e)  # a phrase belongs to the clause it stands in
        else:
            out.append((s, e))
    return [sentence[s:e].strip() for s, e in out if sentence[s:e].strip()]


def _subject_of(clause: str) -> str:
    """What ``clause`` is said of: the words before its verb, up to a comma or dash."""
    verb = HAS_VERB.search(clause)
    return _SUBJECT_END.split(clause[: verb.start()])[0].strip() if verb else ""


def _said_whole(parts: list[str]) -> list[str]:
    """Each clause of ``parts`` with the subject it shares with the one before: "lives in
    Porto" after "Ana works as a dentist" is "Ana lives in Porto"; "he is a nurse" after
    "Ben is 34" is "Ben is a nurse", "his PIN is 4821" after "My brother Tom lives in
    Leeds" "Tom's PIN is 4821"."""
    out, subject = [], ""
    for p in parts:
        if subject and (he := _HE.match(p)):
            p = _told_of(subject, he, p)
        elif subject and HAS_VERB.match(p):
            p = f"{subject} {p}"
        elif subject and _HIS.match(p) and (name := _NAME.search(subject)):
            # "his GP" after "His NHS number is …" names no one new: it stays "his GP"
            p = f"{name[1]}'s {_HIS.sub('', p).strip()}"
        subject = _subject_of(p) or subject
        out.append(p)
    return out


# The items of a list a clause ends with: "I need to buy milk, eggs, and condoms".
_ITEM_GAP = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+", re.I)
_ITEM_WORDS = 4
_COUNTS = re.compile(
    r"^(?:a|an|the|some|my|our|your|his|her|their|two|three|four|five|six|\d+)$", re.I
)


def _says(item: str) -> bool:
    """Whether a list item says something: "Nando's" and "Joe's inhaler" do not (a name's
    "'s" is whose, not "is"), "please keep it quiet" does."""
    return says_something(re.sub(r"(?<=\w)'s\b", "", item)) or bool(
        re.search(r"\b(?:please|it|them|nobody|anyone|me|us)\b", item, re.I)
    )


def _without_items(asks: list[str], clause: str) -> str | None:
    """``clause`` without the items of the list it ends with that ``asks`` name ("forget
    the condoms" of "I need to buy milk, eggs, and condoms" leaves "I need to buy milk
    and eggs"), or None when it ends with no list, when the asks name no item alone or
    every item, or when they say more than the clause's lead and its items do."""
    body = clause.rstrip(" .!;,")
    pieces = [p for p in _ITEM_GAP.split(body) if p]
    tail = pieces[1:]
    if not tail or any(len(p.split()) > _ITEM_WORDS or _says(p) for p in tail):
        return None
    # A list ends "…, and X" or "… or X": "I have a gambling problem, please keep it
    # quiet" is a sentence and a plea, not a list of two.
    if not re.search(rf"\b(?:and|or)\s+{re.escape(tail[-1])}$", body, re.I):
        return None
    # The first item is the last word before the list goes on, with what counts it.
    head = pieces[0].split()
    size = 1
    while size < len(head) and _COUNTS.match(head[-size - 1]):
        size += 1
    lead, items = " ".join(head[:-size]), [" ".join(head[-size:]), *tail]
    if not lead or _says(items[0]):
        return None
    item_stems = [set(stems(i)) for i in items]
    told = set(stems(lead)).union(*item_stems)
    gone = [
        k
        for k, mine in enumerate(item_stems)
        if mine and any(mine <= set(stems(a)) and set(stems(a)) <= told for a in asks)
    ]
    if not gone or len(gone) == len(items):
        return None
    left = [i for k, i in enumerate(items) if k not in gone]
    joint = " or " if re.search(rf"\bor\s+{re.escape(items[-1])}$", body, re.I) else " and "
    listed = left[0] if len(left) == 1 else ", ".join(left[:-1]) + joint + left[-1]
    return f"{lead} {listed}"


def _without_tail(asks: list[str], clause: str) -> str | None:
    """``clause`` without the thing it adds at its end with "and" that only ``asks``
    name ("forget the atorvastatin" of "I take metformin 500 mg twice a day, and
    atorvastatin 20 mg at bedtime" leaves "I take metformin 500 mg twice a day"), or None
    when its end says something of its own or the asks name what comes before too."""
    body = clause.rstrip(" .!;,")
    ands = list(re.finditer(r",?\s+and\s+(?=\S)", body))
    if not ands:
        return None
    m = ands[-1]
    head, tail = body[: m.start()], body[m.end() :]
    if _says(tail) or HAS_VERB.match(tail) or not _says(head):
        return None
    have_head, have_tail = set(stems(head)), set(stems(tail))
    for a in asks:
        wanted = set(stems(a))
        if wanted and wanted <= have_tail and not wanted <= have_head:
            return head
    return None


def without_named(request: str, text: str) -> str:
    """``text`` without what ``request`` ("forget where Ana lives") names of it: the
    sentences, or in a sentence the clauses, that :func:`names` it, said whole (see
    :func:`_said_whole`), and with them what only points back at them ("…, which is
    also my phone code").  A request naming only someone ("what Ana does") takes every
    sentence it names whole.  Empty when nothing else is left, or when no sentence or
    clause names it alone (the text as a whole does: it all goes)."""
    asks = [a for a in _AND_ASKED.split(request) if a.strip()] or [request]
    plain = without_author(text)
    if all(_asks_phone(a) for a in asks) and PHONE_NUMBER.search(plain):
        # "forget the plumber's number" of "the plumber is Dave Reilly, 07700 900789,
        # quote £2,850": the number goes, who the plumber is and the quote stay.
        return _left_of(_NUMBER_SAID.sub("", plain))
    if len(asks) == 1 and (code := _code_said(asks[0], plain)):
        return _left_of(plain[: code.start()] + plain[code.end() :])
    named_only = any(
        not set(stems(a)) - {t for n in _NAME.findall(a) for t in stems(n)} for a in asks
    )
    kept: list[str] = []
    cut = told_of = False
    who = ""  # the name the sentence before was said of, when it went
    for sentence in sentences(without_author(text)):
        if not any(names(a, sentence) for a in asks) and not names(request, sentence):
            if told_of and _GOES_ON.match(sentence):
                continue  # "Dad had a fall. He bruised his hip…": the fall's, told on
            if who and (he := _HE.match(sentence)) and not he[0].lower().startswith("they"):
                # "Ana lives in Porto. She works as a dentist.": Ana works as a dentist
                sentence = _told_of(who, he, sentence)
            kept.append(sentence)
            told_of, who = False, ""
            continue
        cut = True
        named_as = _NAME.search(_subject_of(sentence))
        who = named_as[1] if named_as else ""
        if named_only:
            # "forget what Ana does": which clause says it cannot be told; "forget Joe"
            # of "My kids are Sam, Lily and Joe" takes him off the list.
            if len(parts := clauses(sentence)) == 1 and (short := _without_items(asks, parts[0])):
                kept.append(f"{short}.")
            continue
        parts = clauses(sentence)
        rest, gone, fewer, told_of = [], False, False, False
        for p, whole in zip(parts, _said_whole(parts), strict=True):
            named = any(names(a, whole) or names(a, p) for a in asks)
            if named and (short := _without_items(asks, whole) or _without_tail(asks, whole)):
                rest.append(short)  # "forget the condoms": the milk and eggs stay
                fewer = True
            elif (
                named
                or (gone and (_LINKED.match(p) or _ENDS_BACK.search(p) or _SPEAKS_OF_IT.search(p)))
                # "He had a fall and bruised his hip": what he did goes with the fall
                # (not what he did at another time: "…and moved in with us in May")
                or (told_of and whole != p and HAS_VERB.match(p) and not _WHEN_SAID.search(p))
            ):
                if named:
                    # the thing asked is not what the clause is said of: it is told of
                    told_of = not set(stems(_subject_of(whole))) & {
                        t for a in asks for t in stems(a)
                    } and not any(_WH.match(a) for a in asks)
                gone = True
            else:
                rest.append(whole.rstrip(" .!;,"))
        if len(rest) == len(parts) and not fewer and len(parts) > 1:
            # No clause names it alone ("Zoe's mom's phone number" of "Mia's best friend
            # is Zoe, her mom is Karen, phone 555-0142"): the clauses holding most of
            # what it asks besides names go ("her mom is Karen, phone …"), not the rest.
            asked = {t for a in asks for t in stems(a)} - {
                t for a in asks for n in _NAME.findall(a) for t in stems(n)
            }
            holding = [
                len(asked & set(stems(p))) >= NAMES_SHARE * len(asked) if asked else False
                for p in parts
            ]
            if any(holding) and not all(holding):
                rest = [
                    w.rstrip(" .!;,")
                    for w, h in zip(_said_whole(parts), holding, strict=True)
                    if not h
                ]
                fewer = True
        if not rest or (len(rest) == len(parts) and not fewer):
            continue  # it is the whole sentence, or no clause of it alone
        clause = ", ".join(rest)
        kept.append(f"{clause[:1].upper()}{clause[1:]}.")
    return " ".join(kept) if cut else ""


#: Days, months and near dates: capitalised without naming anyone or anything.
CALENDAR_WORDS = (
    "monday tuesday wednesday thursday friday saturday sunday january february march april "
    "may june july august september october november december today tomorrow tonight "
    "yesterday"
).split()
# A time of its own: "in May", "on Friday", "last year", "at 10".
_WHEN_SAID = re.compile(
    r"\b(?:in|on|at|since|until|last|next|this)\s+(?:\d|(?:"
    + "|".join([*CALENDAR_WORDS, *"week month year spring summer autumn winter".split()])
    + r")\b)",
    re.I,
)

# Chat shorthand a question may use for a word the answer spells out; text-speak too
# ("what do u know abt me"), not "r" nor "ya", which are also R and a yes.
_SPELLED = {
    "u": "you",
    # "whats dan's number?": the apostrophe left out
    "whats": "what's",
    "wheres": "where's",
    "whos": "who's",
    "whens": "when's",
    "hows": "how's",
    "wen": "when",
    "wat": "what",
    "wut": "what",
    "whn": "when",
    "ur": "your",
    "abt": "about",
    "bout": "about",
    "bday": "birthday",
    "b-day": "birthday",
    "bdays": "birthdays",
    "addy": "address",
    "pw": "password",
    "pwd": "password",
    "passwd": "password",
    "num": "number",
    "nr": "number",
    "tel": "phone",
    "fone": "phone",
    "appt": "appointment",
    "mtg": "meeting",
    "bro": "brother",
    "sis": "sister",
}
_SHORTHAND = re.compile(r"\b(?:" + "|".join(map(re.escape, _SPELLED)) + r")\b(?!')", re.I)


# "what time's kickoff?": "'s" is "is", not whose (no time owns a kickoff).
_KIND_IS = re.compile(
    r"\b((?:what|which)\s+(?:time|day|date|year|month|size|colou?r|room|pitch|floor))['\u2019]s\b",
    re.I,
)


def spelled_out(text: str) -> str:
    """``text`` with chat shorthand and text-speak spelled out ("whats my bday" ->
    "whats my birthday", "what do u know" -> "what do you know", "what time's" ->
    "what time is")."""
    return _KIND_IS.sub(r"\1 is", _SHORTHAND.sub(lambda m: _SPELLED[m[0].lower()], text))


# A numbered part written short: "ch2" is "chapter 2", "wk 3" "week 3".
_SHORT_FOR = {
    "ch": "chapter",
    "chap": "chapter",
    "sec": "section",
    "fig": "figure",
    "vol": "volume",
    "ep": "episode",
    "wk": "week",
    "pg": "page",
    "pt": "part",
    "sev": "severity",
}
# Days written short, alone ("fri", "thurs") or as a range ("mon-wed", "fri-sun"): a
# range holds each day in it.  ("sun", "sat" and "wed" alone are other words.)
_DAYS = CALENDAR_WORDS[:7]  # monday … sunday
_DAY = r"(mon|tues?|wed|thu(?:rs?)?|fri|sat|sun)(?:day)?"
_DAY_SHORT = re.compile(
    rf"\b{_DAY}\s*(?:-|–|to|through|thru)\s*{_DAY}\b|\b(mon|tues?|thu(?:rs?)?|fri)\b", re.I
)


def _day(short: str) -> int:
    return next(i for i, d in enumerate(_DAYS) if d.startswith(short[:3].lower()))


def _days_spelled(m: re.Match[str]) -> str:
    if m[3]:
        return _DAYS[_day(m[3])]
    first, last = _day(m[1]), _day(m[2])
    span = (last - first) % 7
    return " ".join(_DAYS[(first + k) % 7] for k in range(span + 1))


_NUMBERED_SHORT = re.compile(r"\b(" + "|".join(_SHORT_FOR) + r")\.?\s?(\d+)\b", re.I)
_INNER_HYPHEN = re.compile(r"(?<=[A-Za-z])-(?=[A-Za-z])")
# Spellings and family words that name the same thing, by stem.
_VARIANTS = {
    "favourit": "favorit",
    "fave": "favorit",
    "colour": "color",
    "mum": "mother",
    "mom": "mother",
    "mam": "mother",
    "mommi": "mother",
    "mummi": "mother",
    "dad": "father",
    "daddi": "father",
    "papa": "father",
    "grandma": "grandmoth",
    "granni": "grandmoth",
    "grandpa": "grandfath",
    "grandad": "grandfath",
    "mobil": "phone",
    # "Which kid has the egg allergy?" asks of "Mia is allergic to eggs".
    "allerg": "allergi",
    "decis": "decid",
    "med": "medic",
    # "Which deadlines do I have?" asks of "ch3 methods draft is due 15 August".
    "deadlin": "due",
    "medicin": "medic",
    # "Where am I flying home from?" asks of "my flight home is from Osaka".
    "fli": "flight",
    # "Where is Anna's wedding?" asks of "Anna is getting married in June".
    "wed": "marri",
    "marriag": "marri",
    # "How long can I cycle for?" asks of "can cross train on the bike, max 45 min".
    "cycl": "bike",
    "bicycl": "bike",
    # "Who's doing the flowers?" asks of "florist is Flores da Rita".
    "florist": "flower",
}


def is_english(word: str) -> bool:
    """Whether ``word`` is among the ~30,000 English words people write most (wordfreq's
    small list, packaged, the one recall's word priors load too; the full list would
    add ~36 MB to the process): "locker" is, "lokcer" is not."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en", wordlist="small") > 0


def _one_typo(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one typo: a letter changed, added, dropped, or
    two neighbours swapped."""
    if a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    if len(long_) - len(short) != 1:
        return False
    i = next((k for k in range(len(short)) if short[k] != long_[k]), len(short))
    return short[i:] == long_[i + 1 :]


# A question's word that chat says another way: "Who is hosting?" of "meeting is at
# my place" (only when no line says the word itself).
_SAID_AS = {"host": "place house"}
# A name written short: two to five capitals ("NYC"), or one to four before a number
# ("M365", "W11"); never a word shouted whole, which is longer.
_SHORT_NAME = re.compile(r"\b([A-Z]{2,5}|[A-Z]{1,4}(?=\d))(\d{0,4})\b")


@lru_cache(maxsize=256)
def _initials(letters: str, number: str) -> re.Pattern[str]:
    """The words, capitalised, whose initials are ``letters``, then ``number`` if any."""
    spelled = r"\s+".join(rf"{c}[a-z]+" for c in letters)
    return re.compile(rf"\b{spelled}" + (rf"\s+{number}\b" if number else r"\b"))


class Overlap:
    """IDF-weighted stem overlap between a query and a set of documents."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.doc_stems = [self.stems(d) for d in documents]
        df: Counter[str] = Counter()
        for s in self.doc_stems:
            df.update(s)
        n = max(len(documents), 1)
        self.idf = {t: math.log(1 + n / c) for t, c in df.items()}
        self._asked: dict[str, set[str]] = {}
        self._words: dict[str, str] | None = None  # a document word -> its stem
        self._documents = documents

    @staticmethod
    def stems(text: str) -> set[str]:
        """The stems both sides are compared in: "Wi-Fi" is "wifi", "favourite" and
        "favorite" one word, "Mum" and "mother" one person."""
        plain = _NUMBERED_SHORT.sub(lambda m: f"{_SHORT_FOR[m[1].lower()]} {m[2]}", text)
        plain = _DAY_SHORT.sub(_days_spelled, plain)
        plain = _INNER_HYPHEN.sub("", plain)
        return {_VARIANTS.get(t, t) for t in stems(plain)}

    def query_stems(self, query: str) -> set[str]:
        """``query``'s stems, chat shorthand spelled out ("bday") and a word none of the
        documents holds read as the one they hold one typo away ("lokcer" as "locker")."""
        if (found := self._asked.get(query)) is not None:
            return found
        spelled = _INNER_HYPHEN.sub("", spelled_out(query))
        q = self.stems(spelled)
        for word in words(spelled):
            word = word.removesuffix("'s")  # "wief's name"
            t = _VARIANTS.get(_stem(word), _stem(word))
            if len(word) < 4 or t not in q or any(c.isdigit() for c in word):
                continue  # (a number or an id is no typo of another: INV-042, INV-041)
            # Compared as written ("grage" is one typo from "garage", not from its stem).
            # A word spelled right may be what a document misspelled ("databases" for
            # "databses"), never another word ("docker" is not a typo of "locker").
            english = is_english(word)
            near = {
                k
                for w, k in self._vocabulary().items()
                if _one_typo(word, w) and not (english and is_english(w))
            }
            if len(near) == 1 and t in self.idf:  # said right elsewhere, misspelled here
                q = q | near
            elif len(near) == 1:  # a typo of one word, not a guess among several
                q = (q - {t}) | near
        for joined in re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)+", query):
            # "add-on" asks of "a drone add on", written apart
            t, apart = _stem(joined.replace("-", "").lower()), self.stems(joined.replace("-", " "))
            if t in q and t not in self.idf and apart and apart <= self.idf.keys():
                q = (q - {t}) | apart
        for t, said_as in _SAID_AS.items():
            held = self.stems(said_as) & self.idf.keys()
            if t in q and t not in self.idf and held:
                q = (q - {t}) | held
        for short in _SHORT_NAME.finditer(spelled):
            t = _stem(short[0].lower())
            if t in self.idf or t not in q:
                continue
            # "M365" asks of "Microsoft 365", "NYC" of "New York City": the one name
            # the documents spell out with those initials (and that number).
            spelled_names = {
                m[0] for d in self._documents for m in _initials(short[1], short[2]).finditer(d)
            }
            if len(spelled_names) == 1:
                q = (q - {t}) | self.stems(spelled_names.pop())
        self._asked[query] = q
        return q

    def _vocabulary(self) -> dict[str, str]:
        if self._words is None:
            self._words = {
                w: _VARIANTS.get(_stem(w), _stem(w))
                for d in self._documents
                for w in words(_INNER_HYPHEN.sub("", d))
                if len(w) >= 3 and w not in STOPWORDS
            }
        return self._words

    def scores(self, query: str, boost: AbstractSet[str] = frozenset()) -> list[float]:
        return [self.score(query, d, boost) for d in self.doc_stems]

    def score(
        self,
        query: str,
        doc: str | set[str],
        boost: AbstractSet[str] = frozenset(),
        held: AbstractSet[str] = frozenset(),
    ) -> float:
        """``query``'s overlap with one text (or its stems), weighted by these documents'
        idf (twice for the stems in ``boost``): a part of a document scores what the
        document scores when it holds every query word the document holds.  ``held``
        are stems the text holds without saying them (its author's name)."""
        q = self.query_stems(query)
        if not q:
            return 0.0
        d = self.stems(doc) if isinstance(doc, str) else doc
        unseen = math.log(1 + len(self.doc_stems))

        def weight(t: str, default: float) -> float:
            return self.idf.get(t, default) * (2.0 if t in boost else 1.0)

        norm = sum(weight(t, unseen) for t in q)
        return (
            sum(weight(t, 0.0) for t in q & d) + sum(weight(t, unseen) for t in (q & held) - d)
        ) / norm
