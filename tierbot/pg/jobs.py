"""The shared job queue's tables: procrastinate's queue and the results its jobs hand back.

With ``[workers] queue = "shared"`` a channel's owner does not summarize in its own
process: it defers a job on procrastinate's PostgreSQL queue, any process that runs
jobs (``tierbot run`` with ``run_jobs``, or ``tierbot worker``) takes it, and the
worker writes the outcome into ``job_results`` and ``NOTIFY tierbot_jobs_done``.
Only the owner that deferred a job takes its result, with ``DELETE ... RETURNING``,
so a result is handed over once; a job run twice (a worker thought dead that was
not) keeps its first result.

The ``jobs`` component's first step is procrastinate's own schema, pinned with the
library's minor version in ``pyproject.toml``: upgrading procrastinate means adding
its migration scripts as the next steps here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import asyncpg
import structlog

from tierbot.errors import StoreError
from tierbot.migrations import Migrations

__all__ = [
    "JOBS_DONE_CHANNEL",
    "job_states",
    "job_tables",
    "put_result",
    "queue_depths",
    "sweep_results",
    "take_results",
]

log = structlog.get_logger("tierbot.jobs")

#: The NOTIFY channel on which a finished job wakes the process that deferred it.
JOBS_DONE_CHANNEL = "tierbot_jobs_done"

_RESULTS = """
CREATE TABLE job_results (
    job_id BIGINT PRIMARY KEY,
    channel TEXT NOT NULL,
    result JSONB NOT NULL,
    created TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
"""


def job_tables() -> Migrations:
    """The ``jobs`` component: procrastinate's schema and ``job_results``."""
    from procrastinate.schema import SchemaManager

    return Migrations("jobs", (SchemaManager.get_schema() + "\n" + _RESULTS,))


def _failed(where: str, exc: BaseException) -> StoreError:
    return StoreError(f"the job queue at {where} cannot be used: {exc}")


async def put_result(
    pool: asyncpg.Pool, job_id: int, channel: str, result: dict[str, Any], *, where: str
) -> bool:
    """Keep a job's result and wake its owner; False when the job had one already (it
    ran twice: the first result stands)."""
    try:
        async with pool.acquire() as conn, conn.transaction():
            status = await conn.execute(
                "INSERT INTO job_results (job_id, channel, result) VALUES ($1, $2, $3::jsonb) "
                "ON CONFLICT (job_id) DO NOTHING",
                job_id,
                channel,
                json.dumps(result),
            )
            await conn.execute("SELECT pg_notify($1, $2)", JOBS_DONE_CHANNEL, str(job_id))
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise _failed(where, exc) from exc
    return bool(status.endswith(" 1"))


async def take_results(
    pool: asyncpg.Pool, job_ids: Sequence[int], *, where: str
) -> dict[int, dict[str, Any]]:
    """The results of ``job_ids`` that are in, removed as they are read."""
    try:
        rows = await pool.fetch(
            "DELETE FROM job_results WHERE job_id = ANY($1::bigint[]) RETURNING job_id, result",
            list(job_ids),
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise _failed(where, exc) from exc
    return {int(r["job_id"]): json.loads(r["result"]) for r in rows}


async def job_states(pool: asyncpg.Pool, job_ids: Sequence[int], *, where: str) -> dict[int, str]:
    """procrastinate's status of each job still in its table (a succeeded job may be
    deleted already)."""
    try:
        rows = await pool.fetch(
            "SELECT id, status::text AS status FROM procrastinate_jobs "
            "WHERE id = ANY($1::bigint[])",
            list(job_ids),
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise _failed(where, exc) from exc
    return {int(r["id"]): str(r["status"]) for r in rows}


async def sweep_results(pool: asyncpg.Pool, older_than: float, *, where: str) -> int:
    """Delete results nobody took for ``older_than`` seconds (their owner died)."""
    try:
        status = await pool.execute(
            "DELETE FROM job_results WHERE created < clock_timestamp() - make_interval(secs => $1)",
            older_than,
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise _failed(where, exc) from exc
    return int(status.rsplit(" ", 1)[-1])


async def queue_depths(pool: asyncpg.Pool, *, where: str) -> dict[str, Any]:
    """Jobs waiting and running per queue, and the job workers with a recent heartbeat
    (``tierbot status``); empty when the queue was never set up."""
    try:
        if await pool.fetchval("SELECT to_regclass('procrastinate_jobs')") is None:
            return {}
        rows = await pool.fetch(
            "SELECT queue_name, count(*) FILTER (WHERE status = 'todo') AS todo, "
            "count(*) FILTER (WHERE status = 'doing') AS doing "
            "FROM procrastinate_jobs GROUP BY queue_name ORDER BY queue_name"
        )
        workers = await pool.fetchval(
            "SELECT count(*) FROM procrastinate_workers "
            "WHERE last_heartbeat > clock_timestamp() - interval '1 minute'"
        )
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise _failed(where, exc) from exc
    return {
        "queues": {r["queue_name"]: {"todo": r["todo"], "doing": r["doing"]} for r in rows},
        "workers": int(workers or 0),
    }
