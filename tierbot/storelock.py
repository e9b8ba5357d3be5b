"""The store's writer lock: one process at a time may write a tierbot database.

SQLite itself would let two processes write the same file, but two tierbot
writers would each run their own actor for the same channel (two "only
writers"), so a second writer is refused at once instead.  The lock is an OS
file lock (``flock``) on ``<database>.lock`` beside the database: the kernel
drops it when the holder exits, even on SIGKILL, so a crash never leaves a
stale lock.  The holder writes who it is (pid, command, host, since when) into
the file so the refused process can name it.  Read-only commands take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from tierbot.errors import StoreError, StoreLockedError

__all__ = ["WriterLock", "describe_holder", "lock_path"]


def lock_path(db_path: Path) -> Path:
    """Where the writer lock of ``db_path`` lives."""
    return db_path.with_name(db_path.name + ".lock")


def _me() -> dict[str, Any]:
    argv = [os.path.basename(sys.argv[0]) if sys.argv else "python", *sys.argv[1:]]
    return {
        "pid": os.getpid(),
        "command": " ".join(argv)[:300],
        "host": socket.gethostname(),
        "since": time.time(),
    }


def describe_holder(holder: dict[str, Any]) -> str:
    """``pid 123 (tierbot run) on host h since 2026-01-01 10:00:00 UTC``, or a fallback."""
    if not holder.get("pid"):
        return "another process (it has not written its details yet)"
    since = holder.get("since")
    when = ""
    if isinstance(since, int | float):
        when = " since " + datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    command, host = holder.get("command", "?"), holder.get("host", "?")
    return f"pid {holder['pid']} ({command}) on host {host}{when}"


class WriterLock:
    """An exclusive, non-blocking writer lock on a database; a context manager.

    ``acquire`` raises :class:`~tierbot.errors.StoreLockedError` naming the holder when
    another process has it.  Safe to ``release`` twice.  The lock is per open file,
    so a second ``WriterLock`` on the same database in the same process is refused too.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.path = lock_path(db_path)
        self._fd: int | None = None

    def acquire(self) -> WriterLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: the holder's details are written into this file and it is emptied
            # on release; a symlink planted in its place must not aim that at another file.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot create the writer lock {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreLockedError(
                f"the store at {self.db_path} is in use by {describe_holder(holder)}: only one "
                "tierbot process may write a store. Stop that process first; read-only commands "
                "(history export, memory search/show/export, channel show, status) work beside it",
                holder=holder,
            ) from None
        try:
            data = json.dumps(_me()).encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        except OSError:
            pass  # the lock holds all the same; a refused process just cannot name us
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


_HOLDER_WAIT = 2.0


def _read_holder(fd: int) -> dict[str, Any]:
    """The holder's details. A holder that has just taken the lock writes them a moment
    later (and a killed one leaves its own behind), so wait briefly for a live pid."""
    deadline = time.monotonic() + _HOLDER_WAIT
    data: Any = {}
    while True:
        try:
            data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        if _plausible(data) or time.monotonic() > deadline:
            return data
        time.sleep(0.02)


def _plausible(holder: dict[str, Any]) -> bool:
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return False
    if holder.get("host") != socket.gethostname():
        return True  # cannot check another host's processes
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, owned by another user
    return True
