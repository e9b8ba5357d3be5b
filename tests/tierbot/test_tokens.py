"""Exact, offline token counting."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from tierbot.errors import TokenizerError
from tierbot.tokens import MESSAGE_OVERHEAD, TokenCounter, encoding_for_model, seed_encoding


def test_counts_are_tiktokens_not_estimates() -> None:
    """Counts are real BPE tokens (o200k_base), not characters / 4."""
    c = TokenCounter("o200k_base")
    assert c.count("hello world") == 2
    assert c.count("supercalifragilisticexpialidocious") > 3
    assert c.count_message("hello world") == 2 + MESSAGE_OVERHEAD
    assert c.count("") == 0


def test_seeded_cache_file_is_the_one_tiktoken_verifies(tmp_path: Path, monkeypatch) -> None:
    """The packaged encoding is written under tiktoken's cache name with its expected hash."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    path = seed_encoding("cl100k_base")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert path.name == hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    )


def test_corrupt_cache_is_replaced(tmp_path: Path, monkeypatch) -> None:
    """A corrupt cached file is replaced by the verified packaged copy."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    path = seed_encoding("o200k_base")
    path.write_bytes(b"garbage")
    assert seed_encoding("o200k_base") == path
    assert len(path.read_bytes()) > 1_000_000


def test_unknown_encoding_is_a_clear_error() -> None:
    """An encoding with no packaged copy fails loudly instead of estimating."""
    with pytest.raises(TokenizerError, match="no packaged copy"):
        TokenCounter("p50k_base")


def test_encoding_follows_the_model() -> None:
    """Older OpenAI models use cl100k_base; everything else o200k_base."""
    assert encoding_for_model("gpt-4-turbo") == "cl100k_base"
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("llama3.1") == "o200k_base"


SAMPLES = [
    "hello world",
    "Ünïcödé — emoji 🎉 and CJK 漢字かな",
    "<|endoftext|> is counted as plain text",
    "def f(x):\n    return x ** 2  # code\n\n\n",
    "a" * 5000,
]


def reference(name: str) -> list[list[int]]:
    import tiktoken

    seed_encoding(name)  # tiktoken's own loader, from the verified file
    enc = tiktoken.get_encoding(name)
    return [enc.encode_ordinary(t) for t in SAMPLES]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_fast_loaded_encoding_gives_tiktokens_tokens(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first start writes the ranks in a quick form beside the verified file; the next
    start loads that form; both count exactly as tiktoken does."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    expected = reference(name)
    first = TokenCounter(name)
    cached = list(tmp_path.glob("*.ranks"))
    assert len(cached) == 1
    second = TokenCounter(name)
    for counter in (first, second):
        assert [counter._enc.encode_ordinary(t) for t in SAMPLES] == expected


def test_a_damaged_ranks_file_is_rebuilt_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    expected = reference("o200k_base")
    TokenCounter("o200k_base")
    (ranks,) = tmp_path.glob("*.ranks")
    good = ranks.read_bytes()
    for damaged in (good[: len(good) // 2], b"garbage", good.replace(b"446a", b"0000", 1)):
        ranks.write_bytes(damaged)
        counter = TokenCounter("o200k_base")
        assert [counter._enc.encode_ordinary(t) for t in SAMPLES] == expected
        assert ranks.read_bytes() == good, "the damaged file was written anew"


def test_ranks_in_a_folder_others_can_write_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared folder is not trusted with the ranks: a planted file that would change
    every count is neither read nor replaced."""
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(shared))
    TokenCounter("o200k_base")
    (ranks,) = shared.glob("*.ranks")
    data = ranks.read_bytes()
    head = data.index(b"\n") + 1 + 64 + 8
    n = int.from_bytes(data[head - 8 : head], "little")
    # The same tokens with their ranks reversed: a well-formed file that counts wrongly.
    lengths, blob = data[head : head + n], data[head + n :]
    ends = list(itertools.accumulate(lengths, initial=0))
    tokens = [blob[a:b] for a, b in itertools.pairwise(ends)]
    planted = data[:head] + bytes(reversed(lengths)) + b"".join(reversed(tokens))
    ranks.write_bytes(planted)
    shared.chmod(0o777)
    expected = reference("o200k_base")
    counter = TokenCounter("o200k_base")
    assert [counter._enc.encode_ordinary(t) for t in SAMPLES] == expected
    assert ranks.read_bytes() == planted
