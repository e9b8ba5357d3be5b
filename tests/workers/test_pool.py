"""The compaction worker pool: jobs run most urgent first, and closing it always returns."""

from __future__ import annotations

import asyncio

from workers import WorkerPool


async def test_regression_close_returns_when_a_job_swallows_its_cancellation() -> None:
    """A job that catches CancelledError and returns (as 3.11's wait_for does when the job
    ends just as it is cancelled) no longer keeps aclose() and so the process alive."""
    pool = WorkerPool(1)
    pool.start()
    started = asyncio.Event()
    results: list[object] = []

    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "swallowed"
        return "finished"

    pool.submit("c", stubborn, lambda result, error: results.append(result))
    await started.wait()
    # A hang here is the bug; 30 s is only a bound so the suite does not wait forever.
    await asyncio.wait_for(pool.aclose(), 30)
    assert results == []  # a cancelled job's result is not handed to its channel
    assert pool.running == 0
