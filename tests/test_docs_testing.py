"""docs/testing.md's examples run as written: the test kit's documentation cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_guide_has_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_each_example_runs_and_its_assertions_hold(source: str) -> None:
    """Each example is a whole program (it calls asyncio.run itself) whose asserts pass."""
    exec(compile(source, f"{DOC.name} example", "exec"), {"__name__": "__example__"})
