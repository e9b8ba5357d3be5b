"""The console adapter: a terminal chat with one channel (``console:local`` by default).

``/quit`` and ``/exit`` (or the end of input) end the chat.  In a terminal, a reply that
arrives while the prompt waits for input clears the prompt line, prints, and draws the
prompt again: a late answer never ends up glued to ``you> ``.  Lines pasted in one go
are one message (a shopping list is not five messages).
"""

from __future__ import annotations

import asyncio
import errno
import re
import select
import sys
import threading
import time
from typing import IO

from bot.adapters.base import Capabilities, Dispatcher, Outbound
from bot.commands import COMMANDS
from tierbot.config import ConsoleAdapterConfig
from tierbot.messages import InboundMessage

#: What ends the chat (besides the end of input).
QUIT = frozenset({"/quit", "/exit"})
#: A line that looks like a command: "/" and a word alone ("/stauts", not "/etc/hosts");
#: "/remember …" is a memory request the bot reads as such.
_COMMAND_LIKE = re.compile(r"^/(?!(?:remember|note|save)\b)[A-Za-z][\w-]*(?:\s|$)", re.I)


#: Lines that reach the terminal within this long of each other were pasted together.
PASTE_SECONDS = 0.03


def _more_typed(stream: IO[str]) -> bool:
    """Whether another line is already waiting on the terminal (a paste), within
    :data:`PASTE_SECONDS`; a person typing takes far longer between Enters."""
    try:
        ready, _, _ = select.select([stream.fileno()], [], [], PASTE_SECONDS)
    except (OSError, ValueError):
        return False
    return bool(ready)


class _NoProgress:
    async def done(self) -> None:
        return None


class ConsoleAdapter:
    """Reads lines from ``stdin``, prints replies to ``stdout``; the local user is an admin.

    ``finished`` is set once input ends and every reply to it has been printed, or
    once reading stopped on an error, which ``failure`` then holds.
    """

    name = "console"
    capabilities = Capabilities(max_message_chars=1_000_000)

    def __init__(
        self,
        config: ConsoleAdapterConfig,
        *,
        channel: str | None = None,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
    ) -> None:
        self.config = config
        self.channel = channel or config.channel
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._interactive = bool(getattr(self._in, "isatty", lambda: False)())
        self._task: asyncio.Task[None] | None = None
        self._seq = 0
        #: Whether the prompt is on screen, waiting for input (interactive only).
        self._prompted = False
        self._said_bye = False
        self.finished = asyncio.Event()
        #: Why reading input stopped early (then ``finished`` is set too), else None.
        self.failure: Exception | None = None

    def connected(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self, dispatcher: Dispatcher) -> None:
        """Start reading input (idempotent)."""
        if self._task is not None:
            return
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str | None] = asyncio.Queue()

        def reader() -> None:
            pasted: list[str] = []
            try:
                for line in self._in:
                    pasted.append(line.rstrip("\n"))
                    if self._interactive and _more_typed(self._in):
                        continue  # lines pasted in one go are one message, as in a chat app
                    loop.call_soon_threadsafe(lines.put_nowait, "\n".join(pasted))
                    pasted = []
            except OSError as exc:
                # EIO: the terminal was closed (a window shut, an ssh session dropped).
                # That ends the chat like Ctrl-D; anything else is a failure.  Either
                # way the chat ends and the process exits, never holding the store.
                if exc.errno != errno.EIO:
                    self.failure = exc
            except Exception as exc:  # a decoding error: the chat cannot go on
                self.failure = exc
            if pasted:
                loop.call_soon_threadsafe(lines.put_nowait, "\n".join(pasted))
            loop.call_soon_threadsafe(lines.put_nowait, None)

        threading.Thread(target=reader, name="console-stdin", daemon=True).start()
        self._print(f"tierbot is listening on {self.channel}. Type /help for commands.")
        self._prompt()
        self._task = asyncio.create_task(self._consume(dispatcher, lines), name="console")

    async def _consume(self, dispatcher: Dispatcher, lines: asyncio.Queue[str | None]) -> None:
        try:
            await self._consume_lines(dispatcher, lines)
        except Exception as exc:
            self.failure = exc
        finally:
            # Also on failure: `tierbot chat` waits for this and must end, not hang.
            self.finished.set()

    async def _consume_lines(
        self, dispatcher: Dispatcher, lines: asyncio.Queue[str | None]
    ) -> None:
        while (line := await lines.get()) is not None:
            self._prompted = False  # the user pressed Enter: the cursor is on a new line
            text = line.strip()
            if not text:
                self._prompt()
                continue
            if text.split()[0].lower() in QUIT:
                break
            self._seq += 1
            msg = InboundMessage(
                channel=self.channel,
                platform_id=f"console-{time.time_ns()}-{self._seq}",
                author_id=self.config.user,
                author_name=self.config.user,
                text=text,
                addressed=True,
            )
            answer = await dispatcher.command(msg, is_admin=True)
            if answer is not None:
                self._print(answer)
                self._prompt()
                continue
            if _COMMAND_LIKE.match(text) and text.split()[0].lower() not in COMMANDS:
                # Not a command ("/r/python is great" is talk): said, and sent as talk.
                self._print(
                    f"({text.split()[0]} is not a command, so it goes to the bot as a message;"
                    " /help lists the commands.)"
                )
            delivery = await dispatcher.submit(msg)
            if delivery.too_long:
                self._print(f"(not sent: {delivery.reason})")
                self._prompt()
        # The answers still coming (a piped script's, a late one from further back) are
        # printed before "Bye.", which is the chat's last line.
        drain = getattr(dispatcher, "drain", None)
        if drain is not None:
            await drain()
        self.goodbye()  # /quit, or Ctrl-D: the prompt's line ends either way

    def goodbye(self) -> None:
        """The chat ends without /quit (Ctrl-D, Ctrl-C): end the prompt's line and say
        so, once, rather than leaving the shell's prompt glued to ours."""
        if self._said_bye:
            return
        self._said_bye = True
        try:
            self._out.write("\nBye.\n" if self._prompted else "Bye.\n")
            self._out.flush()
        except OSError:
            pass  # the terminal hung up: there is no one to say it to
        self._prompted = False

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def send(self, out: Outbound) -> list[str]:
        self._print(f"tierbot> {out.text}")
        self._prompt()
        return [out.reply_to or ""]

    async def progress(self, channel: str, message_id: str | None) -> _NoProgress:
        return _NoProgress()

    def _print(self, text: str) -> None:
        if self._prompted:
            # Clear the waiting prompt (and what was typed after it) before printing.
            self._out.write("\r\x1b[K")
            self._prompted = False
        self._out.write(text + "\n")
        self._out.flush()

    def _prompt(self) -> None:
        if self._interactive:
            self._out.write(f"{self.config.user}> ")
            self._out.flush()
            self._prompted = True
