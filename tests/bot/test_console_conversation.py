"""The first conversation a newcomer has: `tierbot chat` in a pseudo-terminal, offline.

A scripted conversation of more than 30 turns with several people's worth of facts,
explicit remember and forget requests, greetings carrying facts, chit-chat, and
questions asked after the facts were compacted out of the live context.  Every answer
is read off the terminal as the user would see it, and checked.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROMPT = "dana> "
_MAIN = "import sys; from bot.cli import main; sys.exit(main())"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Terminal:
    """`tierbot chat` on a pseudo-terminal: type a line, read what the screen shows."""

    def __init__(self, config: Path, log: Path) -> None:
        master, slave = pty.openpty()
        self._err = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "chat", "--config", str(config)],
            stdin=slave,
            stdout=slave,
            stderr=self._err,
            cwd=config.parent,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.db = config.parent / "bot.db"
        self.screen = ""  # everything shown, raw (escape sequences included)
        self.seen = 0  # where the last answer read ended

    def _read(self, until: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            return False
        self.screen += data.decode("utf-8", "replace")
        return bool(data)

    def wait_for(self, pattern: str, start: int, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern, re.S)
        while (m := rx.search(self.screen, start)) is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                if not self._read(time.monotonic() + 0.2):
                    raise AssertionError(
                        f"waited for {pattern!r}; the screen shows:\n{self.tail()}"
                    )
            else:
                self._read(deadline)
        return m

    def say(self, line: str) -> str:
        """Type ``line`` and Enter; the bot's answer (reply text, or a command's output),
        once the prompt is back."""
        start = len(self.screen)
        os.write(self.master, (line + "\n").encode())
        m = self.wait_for(re.escape(line) + r"\r?\n(.*?)" + re.escape(PROMPT), start)
        self.seen = m.end()
        return clean(m[1])

    def late(self) -> str:
        """The reply that arrives while the prompt waits, after a "let me look" note; the
        prompt line is cleared first, and drawn again after it."""
        m = self.wait_for(r"\r\x1b\[Ktierbot> (.*?)\r?\n" + re.escape(PROMPT), self.seen)
        self.seen = m.end()
        return clean(m[1])

    def tail(self, n: int = 3000) -> str:
        return _ANSI.sub("", self.screen)[-n:]

    def close(self) -> int:
        """Type /quit; the exit status once the process ended (the screen read to the end)."""
        start = len(self.screen)
        os.write(self.master, b"/quit\n")
        self.wait_for("Bye\\.", start, timeout=30)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        os.close(self.master)
        self._err.close()
        return code


def clean(text: str) -> str:
    text = _ANSI.sub("", text).replace("\r", "")
    return "\n".join(line.removeprefix("tierbot> ") for line in text.strip().splitlines())


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[storage]
path = "{tmp_path / "bot.db"}"
synchronous = "normal"
[memory]
enabled = true
[adapters.console]
user = "dana"
[defaults]
context_window = 2200
"""
    )
    term = Terminal(config, tmp_path / "stderr.log")
    term.wait_for(re.escape(PROMPT), 0)
    yield term
    if term.proc.poll() is None:
        os.killpg(term.proc.pid, signal.SIGKILL)
        term.proc.wait()
    if not term._err.closed:  # a failed test: close what quit() would have
        with contextlib.suppress(OSError):  # the test may have closed it
            os.close(term.master)
        term._err.close()


def test_a_thirty_turn_offline_conversation_remembers_forgets_and_answers(
    terminal: Terminal,
) -> None:
    """Facts told in passing, with greetings and explicit requests, are saved at once and
    acknowledged truthfully; questions are answered with who said what and when, also
    after compaction; "forget that" forgets; chit-chat is neither saved nor quoted."""
    t = terminal
    said = t.say("Good morning! My wife Sofia turns 40 on 2025-09-14.")
    assert said.startswith("Good morning")
    assert "Noted: your wife Sofia turns 40 on 2025-09-14." in said

    said = t.say("I'm Dana, I lead the platform team.")
    assert said == "Noted: you're Dana, you lead the platform team."

    assert t.say("Hello") == "Hello, Dana! Ask me anything about this conversation."
    assert t.say("Remember that my locker code is 4411.") == "Noted: your locker code is 4411."
    assert t.say("My locker is on the third floor.") == "Noted: your locker is on the third floor."
    said = t.say("Remind me: I need to renew my passport before June 15.")
    assert said.startswith("Noted as a to-do: you need to renew your passport before June 15.")
    assert t.say("coffee break, back in 10") == "OK, Dana."
    assert t.say("lol") == "OK, Dana."
    assert t.say("thanks!") == "You're welcome."

    said = t.say("What is my locker code?")
    assert re.fullmatch(r"dana said on \d{4}-\d\d-\d\d: «my locker code is 4411\.»", said), said
    said = t.say("What is my name?")
    assert said.startswith("Your name is Dana: dana said on "), said
    assert "I'm Dana, I lead the platform team." in said
    said = t.say("When does Sofia turn 40?")
    assert "2025-09-14" in said and said.startswith("dana said on "), said

    assert t.say("We decided to deploy the billing service on Thursdays.") == (
        "Noted: we decided to deploy the billing service on Thursdays."
    )
    assert t.say("I prefer tea over coffee.") == "Noted: you prefer tea over coffee."
    memory = t.say("/memory locker code")
    first = memory.splitlines()[0]
    assert re.match(r"- \S+ \((fact|identity)", first), memory
    assert "4411" in first
    assert "(an admin can /forget ID)" in memory

    history = t.say("/history 4")
    assert len(history.splitlines()) == 4
    assert "memory_save" not in history and '{"' not in history
    everything = t.say("/history 6 --all")
    assert "(tool call) memory_save" in everything or "(tool result) memory_save" in everything
    assert t.say("/history abc").startswith("'abc' is not a number of messages. Usage: /history")
    assert t.say("/history 0").startswith("'0' is not a number of messages.")
    assert "/quit or /exit" in t.say("/help")

    said = t.say("Forget that my locker code is 4411.")
    assert said == "Done: I forgot what you told me about your locker code."
    said = t.say("What is my locker code?")
    assert "4411" not in said, said

    # Enough talk to push the early facts out of the live context, at a person's pace:
    # each note waits for a summary in progress, however slow this machine writes it.
    # (How many notes that takes depends on what the replies and memory tools leave in
    # the window; at least ten, until a summary has landed.)
    compactions = None
    for i in range(40):
        t.say(f"Note for the log: the nightly build number {i} went green on runner r{i}.")
        deadline = time.monotonic() + 60
        while "(running:" in (status := t.say("/status")) and time.monotonic() < deadline:
            time.sleep(0.1)
        compactions = re.search(r"compactions: background (\d+), aggressive (\d+)", status)
        if i >= 9 and compactions and int(compactions[1]) + int(compactions[2]) >= 1:
            break
    assert compactions is not None and int(compactions[1]) + int(compactions[2]) >= 1, status

    said = t.say("When is Sofia's birthday?")
    if said.startswith("Let me look further back"):
        said = t.late()
    assert "2025-09-14" in said, said
    assert "tierbot said" not in said and "Noted" not in said, said

    said = t.say("What do you know about me?")
    if said.startswith("Let me look further back"):
        said = t.late()
    assert "tea over coffee" in said, said
    assert "passport" in said, said
    assert "4411" not in said and "coffee break" not in said, said

    said = t.say("What is my name?")
    assert said.startswith("Your name is Dana"), said

    # A late answer is drawn on its own line, and the prompt comes back after it.
    assert f"{PROMPT}tierbot>" not in _ANSI.sub("", t.screen)
    assert t.close() == 0
    assert "Bye." in t.tail()


def test_lines_pasted_in_one_go_are_one_message(terminal: Terminal) -> None:
    """A list pasted into the terminal is one message with its line breaks, answered
    once; lines typed one by one stay separate messages."""
    t = terminal
    start = len(t.screen)
    os.write(t.master, b"Shopping list for Saturday:\neggs\nflour\n2 lemons\n")
    t.wait_for(r"tierbot> .*?" + re.escape(PROMPT), start)
    t.say("My bike is green.")
    history = t.say("/history")
    assert "dana: Shopping list for Saturday:\neggs\nflour\n2 lemons\n" in history, history
    assert history.count("dana: ") == 2, history
    assert t.close() == 0


def test_closing_the_terminal_ends_the_chat_and_frees_the_store(terminal: Terminal) -> None:
    """The window is closed (the terminal hangs up) after a message: the process exits
    within seconds instead of living on with the store locked, and what was said is
    stored."""
    t = terminal
    t.say("My cat is called Biscuit.")
    os.write(t.master, b"Remember that my bike lock is 2468.\n")
    os.close(t.master)
    code = t.proc.wait(30)
    t._err.close()
    assert code == 0, code
    store = sqlite3.connect(t.db)
    said = [r[0] for r in store.execute("SELECT text FROM messages WHERE role = 'user'")]
    assert said[:1] == ["My cat is called Biscuit."], said


@pytest.mark.parametrize("name", ["Ctrl-D", "Ctrl-C"])
def test_ending_the_chat_with_a_key_says_bye_on_a_line_of_its_own(
    terminal: Terminal, name: str
) -> None:
    """Ctrl-D or Ctrl-C at the prompt ends the chat as /quit does: "Bye." on its own
    line (the shell's prompt no longer lands after ours), exit status 0, and the message
    said before is in the store."""
    t = terminal
    t.say("My cat is called Biscuit.")
    start = len(t.screen)
    if name == "Ctrl-D":
        os.write(t.master, b"\x04")
    else:
        # The pseudo-terminal is not the process's controlling terminal: its Ctrl-C
        # would only echo. A terminal's Ctrl-C is this signal.
        os.kill(t.proc.pid, signal.SIGINT)
    t.wait_for(r"Bye\.", start, timeout=30)
    assert t.proc.wait(30) == 0, name
    t.wait_for(r"Bye\.\r?\n", start, timeout=5)
    # Exit 0, and what was said before it is stored.
    store = sqlite3.connect(t.db)
    said = [r[0] for r in store.execute("SELECT text FROM messages WHERE role = 'user'")]
    store.close()
    assert said == ["My cat is called Biscuit."], said
    assert re.search(re.escape(PROMPT) + r"(\^D)?\r?\nBye\.", t.tail()), (name, t.tail())
