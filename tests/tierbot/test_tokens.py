"""Exact, offline token counting."""

from __future__ import annotations

import hashlib
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
