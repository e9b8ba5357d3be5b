"""The runtime keeps what startup loaded out of the garbage collector's full passes, runs
those passes itself when no message arrives, and gives the collector back as it found it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.collector import DEFERRED, GC_YOUNG_THRESHOLD

pytestmark = pytest.mark.slow

# Runs in a fresh interpreter: the freeze is process-wide and happens once per process.
SCRIPT = """
import asyncio, gc, json, sys, weakref
from tierbot.config import validate_config
from tierbot.messages import InboundMessage
from tierbot.testing.scripted import ScriptedLLM
from bot.runtime import Runtime

class Node:
    pass

class Cycle:
    def __init__(self):
        self.me = self

def config(path):
    return validate_config({
        "memory": {"enabled": False},
        "adapters": {"console": {"enabled": False}},
        "storage": {"path": path},
        "runtime": {"full_collection_seconds": 1.0},
    }, "<gc-test>")

async def main():
    # Garbage already in the oldest generation when the runtime starts: a cycle the
    # collector's frequent young passes never look at.
    node = Node()
    node.me = node
    gone = weakref.ref(node)
    gc.collect()
    del node
    gc.set_threshold(700, 10, 10)  # Python's own
    async with Runtime.open(config(sys.argv[1]), llm=ScriptedLLM()) as rt:
        tracked = {id(o) for o in gc.get_objects()}
        first = {
            "frozen": gc.get_freeze_count(),
            "store_scanned": id(rt.store) in tracked,
            "garbage_kept": gone() is not None,
            "threshold": gc.get_threshold(),
        }
        # Garbage that outlived a young pass, while messages arrive: only the runtime's
        # full pass reclaims it, once no message came for a second.
        cycle = Cycle()
        cycle_gone = weakref.ref(cycle)
        gc.collect(0)
        del cycle
        for n in range(5):
            await rt.submit(InboundMessage(channel="chat:gc", platform_id=str(n),
                                           author_id="u", author_name="u", text="hi"))
        first["cycle_kept_at_first"] = cycle_gone() is not None
        for _ in range(100):
            await asyncio.sleep(0.1)
            if cycle_gone() is None:
                break
        first["cycle_reclaimed_when_quiet"] = cycle_gone() is None
    first["threshold_after"] = gc.get_threshold()
    gc.set_threshold(100_000, 10, 10)  # an embedding application's own, higher
    async with Runtime.open(config(sys.argv[2]), llm=ScriptedLLM()) as rt:
        second = {"frozen": gc.get_freeze_count(), "store_scanned": id(rt.store) in
                  {id(o) for o in gc.get_objects()}, "threshold": gc.get_threshold()}
    print(json.dumps({"first": first, "second": second}))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the script saw, in one fresh interpreter for the module's tests."""
    tmp = tmp_path_factory.mktemp("gc")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp / "a.db"), str(tmp / "b.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_runtime_freezes_startup_objects_once_and_keeps_no_garbage(seen: dict) -> None:
    """Once a process's first runtime is up, its startup objects (the store among them) are no
    longer walked by full collections, garbage from before is reclaimed rather than frozen,
    and a second runtime in the same process freezes nothing more."""
    first, second = seen["first"], seen["second"]
    assert first["frozen"] > 0
    assert not first["store_scanned"]
    assert not first["garbage_kept"]
    # Frozen objects are still freed when their last reference goes (the first runtime's
    # closed store among them): the count can only shrink if nothing is frozen again.
    assert second["frozen"] <= first["frozen"]
    assert second["store_scanned"]


def test_runtime_collects_young_objects_less_often_and_never_more_often(seen: dict) -> None:
    """A runtime raises the collector's young threshold from Python's 700 (a collection
    every few messages under a burst), and leaves a higher one an application set alone;
    Python's middle passes wait for the runtime's full one.  Once the runtime stops, the
    thresholds are what they were."""
    assert seen["first"]["threshold"] == [GC_YOUNG_THRESHOLD, DEFERRED, 10]
    assert seen["first"]["threshold_after"] == [700, 10, 10]
    assert seen["second"]["threshold"] == [100_000, DEFERRED, 10]


def test_runtime_runs_the_full_pass_once_no_message_arrives(seen: dict) -> None:
    """Garbage that outlived a young pass waits while messages arrive, and is reclaimed
    within seconds once they stop (``[runtime] full_collection_seconds`` = 1)."""
    assert seen["first"]["cycle_kept_at_first"]
    assert seen["first"]["cycle_reclaimed_when_quiet"]
