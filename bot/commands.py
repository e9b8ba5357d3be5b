"""Admin and chat commands, the same on every platform and in the console.

``/status`` ``/history [N]`` ``/help`` ``/memory QUERY`` are open to everyone;
``/compact`` and ``/forget ...`` change state and need an admin.

Each command is one small handler in :data:`REGISTRY`, registered with
:func:`command` together with its help text and whether it needs an admin;
``/help`` is generated from the registry.  A handler gets a
:class:`Invocation`: the message, its argument, and the runtime's parts it may
use.

Only these names are commands: any other text, including text that merely starts
with ``/`` ("/etc/hosts is ...", "/r/python", "/shrug"), is conversation.  Whether a
platform message may run a command at all (it must be addressed to the bot) is
decided by :func:`bot.adapters.base.route_inbound`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from channels import ChannelSnapshot
from channels.memory import ForgetOutcome, plural
from tierbot.llm.extraction import is_question
from tierbot.llm.text import stems, without_author
from tierbot.messages import InboundMessage, Message, Role
from tierbot.store import CompactionRecord
from tierbot.vocab import Outcome

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = structlog.get_logger("tierbot.commands")

__all__ = [
    "COMMANDS",
    "HELP",
    "REGISTRY",
    "Command",
    "Invocation",
    "command",
    "command_name",
    "render_status",
    "run_command",
    "usage_bar",
]

#: The most messages one /history answer lists.
HISTORY_MAX = 200
MEMORY_DISABLED = "Memory is disabled in config.toml ([memory] enabled = false)."


@dataclass(frozen=True, slots=True)
class Invocation:
    """One command being run: who asked where, with what argument, on which runtime."""

    runtime: Runtime
    message: InboundMessage
    name: str
    arg: str

    @property
    def channel(self) -> str:
        return self.message.channel


Handler = Callable[[Invocation], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Command:
    """A command: its name, its lines in /help, whether admins alone may run it, and
    which arguments make the line talk instead ("/forget that my PIN is 1234")."""

    name: str
    help: str
    handler: Handler
    admin: bool = False
    talk: Callable[[str], bool] | None = None


#: Every command by name, in the order /help lists them.
REGISTRY: dict[str, Command] = {}


def command(
    name: str, help: str, *, admin: bool = False, talk: Callable[[str], bool] | None = None
) -> Callable[[Handler], Handler]:
    """Register the decorated handler as ``name``; ``help`` is its text in /help; ``talk``
    tells the arguments that make the line conversation, not the command."""

    def register(handler: Handler) -> Handler:
        REGISTRY[name] = Command(name, help, handler, admin, talk)
        return handler

    return register


def command_name(text: str) -> str | None:
    """The known command ``text`` invokes (lower-cased), or None when it is conversation."""
    words = text.strip().split(maxsplit=1)
    name = words[0].lower() if words else ""
    cmd = REGISTRY.get(name)
    if cmd is None or (cmd.talk is not None and cmd.talk(words[1] if len(words) > 1 else "")):
        return None
    return name


def usage_bar(usage: float, thresholds: dict[str, float], width: int = 40) -> str:
    """A text bar of ``usage`` with each threshold marked ``|``."""
    marks = {min(width - 1, int(t * width)) for t in thresholds.values()}
    filled = min(width, round(usage * width))
    cells = ["|" if i in marks else ("#" if i < filled else ".") for i in range(width)]
    return f"[{''.join(cells)}] {usage * 100:5.1f}%"


def render_last(record: CompactionRecord | None, now: float) -> str:
    """The /status line naming how the channel's last compaction ended, as ``channel show``
    records it."""
    if record is None:
        return "last compaction: none yet"
    ago = max(0, round(now - record.started - record.duration))
    outcome = Outcome.of(record.outcome)
    line = f"last compaction: {record.tier} {outcome} {ago}s ago"
    if outcome == "ok":
        line += f", freed {record.tokens_before - record.tokens_after} tokens"
    return line + (f": {record.reason}" if record.reason else "")


def render_status(
    snap: ChannelSnapshot, memories: int | None, last: CompactionRecord | None = None
) -> str:
    th = snap.thresholds
    marks = ", ".join(f"{k} {v:.0%}" for k, v in th.items())
    running = snap.compaction_running
    lines = [
        f"channel {snap.channel}",
        f"context {usage_bar(snap.usage, th)}  ({snap.live_tokens}/{snap.context_window}"
        f" tokens; thresholds: {marks})",
        f"live messages {snap.live_messages}, summaries {snap.summaries}, "
        f"peak usage {snap.peak_usage * 100:.1f}%",
        "compactions: "
        + ", ".join(f"{k} {v}" for k, v in snap.compactions.items())
        + (f" (running: {running})" if running else ""),
    ]
    lines.append(render_last(last, time.time()))
    if memories is not None:
        lines.append(f"memories {memories}")
    for run in snap.background:
        lines.append(
            f"{run['kind']} {run['id']} {run['status']} {run['seconds']:.0f}s: {run['task'][:60]}"
        )
    return "\n".join(lines)


async def run_command(rt: Runtime, msg: InboundMessage, *, is_admin: bool) -> str | None:
    """Run the command in ``msg.text``; None when it is not a known command."""
    name = command_name(msg.text)
    if name is None:
        return None
    cmd = REGISTRY[name]
    if cmd.admin and not is_admin:
        return f"{name} is for admins only."
    words = msg.text.strip().split(maxsplit=1)
    arg = words[1].strip() if len(words) > 1 else ""
    return await cmd.handler(Invocation(rt, msg, name, arg))


#: "/compact now please": words a command does not take are not silently dropped.
_NO_ARGUMENTS = "Usage: {name}  (it takes no arguments; nothing was done)"

# -- the commands, in /help order ------------------------------------------------------------


@command("/status", "  /status          context usage, compactions, memories")
async def _status(inv: Invocation) -> str:
    if inv.arg:
        return _NO_ARGUMENTS.format(name=inv.name)
    rt = inv.runtime
    actor = await rt.registry.actor(inv.channel)
    memory = inv.runtime.memory
    memories = await memory.count(inv.channel) if memory is not None else None
    last = await rt.store.compactions(inv.channel, limit=1)
    return render_status(actor.snapshot(), memories, last[0] if last else None)


HISTORY_USAGE = (
    f"Usage: /history [N] [--all]  (the last N messages, 1 to {HISTORY_MAX}, default 10; "
    "--all includes the bot's tool calls)"
)
_TOOL_ROLES = (Role.TOOL_CALL, Role.TOOL_RESULT)


def history_line(m: Message, width: int = 120) -> str:
    """One /history line; a tool call or result is one short readable line, not JSON."""
    if m.role is Role.TOOL_CALL:
        calls = m.meta.get("calls") or []
        names = ", ".join(str(c.get("name", "?")) for c in calls) or m.text
        text = f"(tool call) {names}: {_one_line(m.text, width)}"
    elif m.role is Role.TOOL_RESULT:
        text = f"(tool result) {m.meta.get('tool', 'tool')}: {_one_line(m.text, width)}"
    else:
        text = m.text
    return f"[{m.state.value}] {m.author_name or m.role.value}: {text}"


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@command(
    "/history", "  /history [N] [--all]  the last N messages (default 10; --all: tool calls too)"
)
async def _history(inv: Invocation) -> str:
    words = inv.arg.split()
    show_all = "--all" in words
    rest = [w for w in words if w != "--all"]
    n = 10
    if len(rest) > 1:
        return HISTORY_USAGE
    if rest:
        # isdigit() is true for "²" and 5,000-digit strings, which int() refuses: only
        # ASCII digits count, and N is capped so the answer stays a chat message.
        arg = rest[0]
        if not (arg.isascii() and arg.isdigit() and len(arg) < 7) or int(arg) < 1:
            return f"{arg!r} is not a number of messages. {HISTORY_USAGE}"
        if int(arg) > HISTORY_MAX:
            return f"{arg} is more than {HISTORY_MAX} messages. {HISTORY_USAGE}"
        n = int(arg)
    # Only the last N are kept: a channel's whole history need not fit in memory.
    lines: deque[str] = deque(maxlen=n)
    async for m in inv.runtime.store.export(inv.channel):
        if show_all or m.role not in _TOOL_ROLES:
            lines.append(history_line(m))
    return "\n".join(lines) or "(no messages yet)"


@command("/memory", "  /memory QUERY    what I remember about QUERY")
async def _recall(inv: Invocation) -> str:
    memory = inv.runtime.memory
    if memory is None:
        return MEMORY_DISABLED
    if not inv.arg:
        return "Usage: /memory QUERY"
    # A question asked is no memory of anything ("/memory pond" listed "Where is the
    # pond going?"): only what was told is shown.
    found = await memory.search(inv.arg, channel=inv.channel, limit=10)
    hits = [h for h in found if not is_question(without_author(str(h["content"])))]
    semantic = not memory.graph.embedder.identity.startswith("hashing")
    hits = _of_the_query(inv.arg, hits, semantic)[:5]
    if not hits:
        return "I remember nothing about that."
    lines = [f"- {h['id']} ({h['type']}, {h['score']:.2f}) {h['content']}" for h in hits]
    return "\n".join([*lines, "(an admin can /forget ID)"])


def _of_the_query(
    query: str, hits: list[dict[str, object]], semantic: bool
) -> list[dict[str, object]]:
    """The hits about ``query``: sharing a word with it, or, with a ``semantic``
    embedder (which finds what shares no word), scoring close to the best; "/memory
    florist" listed the cat's name and three other lines after the florist's deadline,
    to fill five places, and "/memory tea" a line saying "instead" (the default
    embedder hashes parts of words).  A message quoted by a memory listed above it is
    not listed again."""
    asked = set(stems(query))
    top = max((float(str(h["score"])) for h in hits), default=0.0)
    kept: list[dict[str, object]] = []
    said: set[str] = set()
    for h in hits:
        text = without_author(str(h["content"]))
        if h.get("type") == "episode" and text in said:
            continue
        if asked & set(stems(text)) or (semantic and float(str(h["score"])) >= 0.6 * top):
            kept.append(h)
            said.add(text)
    return kept


@command("/compact", "  /compact         summarize the oldest messages now (admins)", admin=True)
async def _compact(inv: Invocation) -> str:
    if inv.arg:
        return _NO_ARGUMENTS.format(name=inv.name)
    actor = await inv.runtime.registry.actor(inv.channel)
    result: str = await actor.call(lambda a: a.force_compaction())
    return result


def _forget_in_words(arg: str) -> bool:
    """ "/forget that my PIN is 1234" is a request in words, which anybody may make of
    their own memories: it goes to the bot as a message.  A memory id is one word, and
    "--author USER" starts with a dash."""
    words = arg.split()
    return len(words) > 1 and not words[0].startswith("-")


@command(
    "/forget",
    "  /forget ID       forget one memory and what repeats it here (admins)\n"
    "  /forget --author USER   forget USER's messages and what came from them, in this\n"
    "                   workspace (admins)",
    admin=True,
    talk=_forget_in_words,
)
async def _forget(inv: Invocation) -> str:
    memory = inv.runtime.memory
    if memory is None:
        return MEMORY_DISABLED
    rt = inv.runtime
    who = inv.arg.split()
    if (
        len(who) == 2
        and who[0] == "--author"
        and who[1] not in memory.graph.display_names
        and await rt.store.count_author_messages(who[1]) == 0
    ):
        # A mistyped id would be forgotten for good (later messages too) and report "0".
        return (
            f"No one with the id {who[1]!r} has said anything I keep: nothing was forgotten. "
            "/forget --author takes the id a person speaks as (/history shows who said what)."
        )
    outcome = await memory.forget_command(inv.arg, channel=inv.channel)
    text, touched = outcome.text, outcome.messages
    author = memory.forgotten_author(inv.arg)
    if (touched or author) and not rt.config.memory.keep_messages_on_forget:
        deleted = await rt.store.delete_messages(touched) if touched else 0
        if author:
            # Messages not indexed yet are in no graph provenance: delete them by
            # author, in the channels this one can see (as the graph forget did).
            seen = memory.visible_from(inv.channel)
            deleted += await rt.store.delete_author_messages(author, seen)
        # Channels holding those messages reload their context from the store.
        await rt.registry.evict_idle(0.0)
        text += f" Deleted {deleted} of their messages (keep_messages_on_forget = false)."
    elif author:
        try:
            aside = await _set_aside_author(inv, author)
        except Exception as exc:
            log.warning("command.forget_set_aside_failed", channel=inv.channel, error=repr(exc))
            text += (
                f" Their messages could not be taken out of the conversation"
                f" ({type(exc).__name__}: {exc}): I may still repeat them until they are"
                " summarized."
            )
        else:
            if aside:
                text += (
                    f" {plural(aside, 'message', 'messages')} of theirs left the"
                    " conversation (archived: /history --all shows them)."
                )
    elif outcome.said:
        try:
            aside = await _set_aside(inv, outcome, {inv.channel, outcome.channel})
        except Exception as exc:
            log.warning("command.forget_set_aside_failed", channel=inv.channel, error=repr(exc))
            text += (
                " The messages that said it could not be taken out of the conversation"
                f" ({type(exc).__name__}: {exc}): I may still repeat them until they are"
                " summarized."
            )
        else:
            if aside:
                text += (
                    f" {plural(aside, 'message', 'messages')} that said it left the"
                    " conversation (archived: /history --all shows them)."
                )
    return text


async def _set_aside_author(inv: Invocation, author: str) -> int:
    """Take what a forgotten author said out of the live context of the channels loaded
    here that this one can see (their messages stay archived)."""
    rt = inv.runtime
    memory = rt.memory
    assert memory is not None  # the caller forgot an author
    seen = memory.visible_from(inv.channel)
    n = 0
    for key, actor in sorted(rt.registry.actors.items()):
        if seen(key) and not actor.done:
            n += await actor.call(lambda a: a.set_aside_author(author))
    return n


async def _set_aside(inv: Invocation, forgot: ForgetOutcome, channels: set[str]) -> int:
    """Take the live messages that repeat a forgotten memory out of the context of the
    channels that hold it (this one, and the memory's own if its actor runs here), and
    out of recall."""
    rt = inv.runtime
    memory = rt.memory
    assert memory is not None  # the caller forgot a memory
    n = 0
    for key in sorted(channels):
        actor = rt.registry.actors.get(key)
        if actor is None or actor.done:
            continue  # not loaded: the forgotten memory's sources are out of recall already
        pids: list[str] = await actor.call(
            lambda a: a.set_aside_repeating(forgot.said, forgot.author_id)
        )
        await memory.forget_messages(key, pids)
        n += len(pids)
    return n


@command("/help", "  /help            this text")
async def _help(inv: Invocation) -> str:
    return HELP


HELP = (
    "Commands:\n"
    + "\n".join(c.help for c in REGISTRY.values())
    + """
In the terminal chat, /quit or /exit (or Ctrl-D) ends the chat.
On Discord and Slack, address me: "@tierbot /status", a direct message, or Slack's
own slash command ("/tierbot status"). Other text starting with "/" is conversation."""
)
#: The names that are commands (any other text starting with "/" is conversation).
COMMANDS = frozenset(REGISTRY)
