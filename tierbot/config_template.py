"""The commented ``config.toml`` every bot starts from, generated from the config models.

:func:`render` walks :class:`tierbot.config.Config` (its sections and keys, in order, with
their defaults) and writes each key as TOML with the notes below beside or above it.  The
repository's ``config.toml`` is this output (a test holds them equal; ``make config``
rewrites it), and ``tierbot init`` writes the same text, so the template in a wheel can
never miss a key, show a stale default, or describe a key that no longer exists.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from tierbot.config import Config, _section

__all__ = ["BEFORE", "NOTES", "render"]

HEADER = (
    "tierbot configuration. Every key is shown with its default; delete what you do not change.",
    "Secrets never live here: keys ending in _env name environment variables.",
    "Any value can be overridden from the environment: TIERBOT__SECTION__KEY, for example",
    "  TIERBOT__LLM__PROVIDER=openai  or  TIERBOT__DEFAULTS__COMPACTION__BACKGROUND_THRESHOLD=0.7",
    "Check a file with: tierbot config check --config config.toml",
)

#: A short note written after a key's value.
NOTES: dict[str, str] = {
    "defaults.context_window": "tokens a channel's live context may use (counted with tiktoken)",
    "defaults.respond": "always | mention (only when addressed or in a DM) | listen (record, never reply)",
    "defaults.max_reply_tokens": "cap on one reply; less is asked when the prompt leaves less of context_window",
    "defaults.idle_evict_seconds": "an idle channel leaves memory after this; it rehydrates from SQLite",
    "defaults.mailbox_size": "inbound batches a channel may have queued before senders wait",
    "defaults.compaction.branch_preflight_threshold": "branches compact their own copy above this before their first call",
    "defaults.compaction.background_threshold": "summarize the oldest background_fraction of live messages, in the background",
    "defaults.compaction.aggressive_threshold": "summarize the oldest aggressive_fraction, in the background",
    "defaults.compaction.emergency_threshold": "set the oldest emergency_fraction aside at once, behind a marker (no LLM)",
    "defaults.compaction.min_messages_between": "loop guard: new messages needed before the next compaction (emergencies bypass it)",
    "defaults.compaction.loop_guard_seconds": "...or this long: then a quiet channel still over background_threshold compacts again",
    "defaults.compaction.parallel_compactions": "passes in flight per channel, on disjoint ranges swapped in order (1 = one at a time)",
    "defaults.compaction.predictive_start": "start background passes early (at most a quarter below the threshold) when a pass would land too late",
    "defaults.compaction.rescue_chunk_messages": "what an emergency set aside is summarized in chunks of at most this many messages",
    "defaults.compaction.max_summary_tokens": "cap on one summary (also at most half of summary_share of the room)",
    "defaults.compaction.summary_share": "when summaries fill more than this share of the room the system prompt and tools leave, the oldest are merged",
    "defaults.compaction.notice": "post a short note in the conversation when a compaction happened",
    "defaults.branches.max_concurrent": "branches running at once in one channel (0 = no branch tool)",
    "defaults.branches.max_turns": "LLM calls one branch may make; the last one is offered no tools",
    "defaults.branches.timeout_seconds": "wall clock; a branch past it fails and the channel is told",
    "defaults.branches.max_overflow_retries": "on a context-overflow error: force-compact and retry at most this often, then fail",
    "defaults.task_workers.max_concurrent": "task workers running at once in one channel (0 = no spawn_worker tool)",
    "defaults.task_workers.turns_per_segment": "tool turns a worker runs between two compaction checks",
    "defaults.task_workers.max_segments": "segments per worker; then it must report what it has",
    "defaults.task_workers.segment_compact_threshold": "between segments a worker above this usage drops its oldest tool turns behind a recap",
    "defaults.task_workers.timeout_seconds": "wall clock of one worker (time queued for a process-wide slot excluded)",
    "llm.provider": "offline (no key, no network) | openai (any OpenAI-compatible server) | anthropic",
    "llm.model": 'e.g. "gpt-4o-mini", "llama3.1" (Ollama), "claude-sonnet-4-5"',
    "llm.summary_model": "model for compaction summaries; empty = model",
    "llm.base_url": 'e.g. "http://localhost:11434/v1" for Ollama; empty = the provider\'s default',
    "llm.api_key_env": 'e.g. "OPENAI_API_KEY"; empty = no key (local servers)',
    "llm.encoding": "tiktoken encoding; empty = follows the model (o200k_base by default)",
    "llm.max_retries": "for rate limits (honouring Retry-After) and transient errors",
    "llm.retry_base_seconds": "capped exponential backoff: base * 2^attempt ...",
    "llm.retry_max_seconds": "... never more than this",
    "storage.backend": "sqlite (embedded, one file) | postgres (a shared server)",
    "storage.path": "SQLite file; relative to this file's folder",
    "storage.synchronous": "full: survives power loss; normal: survives process crashes only",
    "storage.commit_batch": "writes grouped into one commit at most",
    "storage.busy_timeout_seconds": 'how long a write waits for another program\'s lock on the file before it fails with "database is locked"',
    "storage.dsn_env": "environment variable holding postgresql://user:pass@host/db",
    "storage.pool_min": "connections kept open",
    "storage.pool_max": "connections at most",
    "storage.connect_timeout_seconds": "an unreachable server is a startup error after this long",
    "storage.statement_timeout_seconds": "a statement running longer fails (0: no limit)",
    "logging.level": "debug | info | warning | error",
    "logging.format": "auto (pretty on a terminal, JSON lines otherwise) | pretty | json",
    "workers.compaction_concurrency": "compaction workers running at once, process-wide",
    "workers.retry_base_seconds": "backoff after a failed compaction ...",
    "workers.retry_max_seconds": "... capped here",
    "workers.branch_concurrency": "branches running at once, process-wide (more wait for a slot)",
    "workers.task_worker_concurrency": "task workers running at once, process-wide (more wait, shown as queued)",
    "workers.queue": '"local": summaries run in this process; "shared": on a PostgreSQL job queue',
    "workers.run_jobs": 'with "shared": this process also runs queued jobs (tierbot worker always does)',
    "workers.queue_wait_seconds": "a job no worker took this long is withdrawn and retried later",
    "workers.stalled_job_seconds": "a job whose worker went silent this long goes back to the queue",
    "runtime.max_message_chars": "a longer message is refused where it enters (its author is told), never stored cut short",
    "runtime.full_collection_seconds": "Python's full garbage collection waits for a quiet second, and runs at least this often",
    "memory.embedder": "offline | sentence-transformers (embedder_model = a local path) | openai",
    "memory.index_dir": "vector index folder, relative to this file's folder; empty = next to the database",
    "memory.scope": "workspace: visible across a Discord guild / Slack team; channel: only where said",
    "memory.private_scope": "channel | workspace",
    "memory.dedupe_threshold": "near-duplicates above this similarity merge",
    "memory.association_threshold": "maintenance links memories this similar",
    "memory.prune_importance": "maintenance prunes faded memories below this importance ...",
    "memory.prune_age_days": "... not accessed for this long (identity memories are never pruned)",
    "memory.keep_messages_on_forget": "forgetting a user keeps their raw messages archived",
    "memory.index_live_messages": "index messages as they arrive, so memory search finds recent ones too; false = when compaction archives them",
    "memory.index_drain_seconds": "at shutdown, keep indexing for at most this long; what is left is indexed after the next start",
    "memory.index_max_lag_seconds": "while messages wait to be stored, live indexing waits too, until its oldest unindexed message has waited this long; 0 = never wait",
    "adapters.console.enabled": "the terminal chat `make run` opens; false for a service with no terminal",
    "adapters.discord.allowed_guilds": "empty = no restriction",
    "adapters.discord.admins": "user ids allowed to run /compact and /forget",
    "adapters.discord.shard_count": "gateway shards of the whole bot (required past 2,500 guilds); 0 = unsharded",
    "adapters.discord.shard_ids": "the shards this process runs; empty = all (split them over a cluster)",
    "adapters.slack.mode": "socket (no public URL) | http (Events API behind your own URL)",
    "adapters.slack.host": "http mode only",
    "adapters.slack.slash_command": 'register it under Slash Commands in the Slack app ("/tierbot status"); "" = off',
    "ops.host": "/status names channels: keep it on loopback unless the port is firewalled",
    "ops.metrics_top_channels": "per-channel usage gauges only for the N fullest channels (bounded cardinality)",
    "ops.allowed_hosts": 'Host header names accepted besides host, localhost, 127.0.0.1, [::1] (e.g. ["tierbot"] for a scraper container); others get 403 (DNS rebinding)',
    "ops.status_task_text": "true: /status shows branch and worker task text (words from conversations)",
    "cluster.process_id": "this process's name in `tierbot status`; empty = host:pid",
    "cluster.lease_seconds": "a dead process's channels get a new owner within this long",
    "cluster.heartbeat_seconds": "leases renewed (and orphaned channels looked for) this often",
}

#: Comment lines written above a key (or above a section, keyed by its path).
BEFORE: dict[str, tuple[str, ...]] = {
    "defaults.compaction.branch_preflight_threshold": (
        "Thresholds are fractions of context_window and must satisfy",
        "0 < branch_preflight < background < aggressive < emergency < 1.",
    ),
    "defaults.branches.max_concurrent": (
        "The `branch` tool: a fork of the live context that thinks and hands back one conclusion.",
        "(These keys used to sit under [defaults.compaction]; the old names still work, with a warning.)",
    ),
    "defaults.task_workers.max_concurrent": (
        "The `spawn_worker` tool: a long tool loop on its own context, run in segments.",
    ),
    "storage.dsn_env": ('PostgreSQL only (backend = "postgres"):',),
    "runtime.drain_seconds": (
        "On SIGTERM/SIGINT tierbot stops starting turns (messages that arrive meanwhile are stored and",
        "answered after the restart), gives running turns this long to finish and post their replies,",
        "then disconnects. A reply that still could not be posted is kept and posted at the next start.",
    ),
    "memory.private_scope": (
        "What is said in a private conversation (Slack private channel or group DM, Discord private channel",
        'or thread, any DM) is remembered only there (a private channel\'s threads included); "workspace" lets',
        "the rest of its workspace recall it too. Restart required; applies to memories already saved.",
    ),
    "memory.vector_index_limit": (
        "The newest memories kept in the in-RAM vector index (~0.8 KB each with the offline embedder); older",
        "ones are still found by their words and scored with their stored vectors. 0 = all (RAM grows with them).",
    ),
    "memory.vector_search": (
        'Where memories\' vectors are searched: "memory" = the in-RAM index above (either backend; the',
        'vectors stay in the database); "database" = pgvector\'s HNSW index (backend = "postgres" only):',
        "no index in RAM or on local disk, but each save costs the server an index insertion.",
    ),
    "memory.background_rows": (
        "Search judges how rare a word is as if this many rows of ordinary English were indexed too, so a",
        "young index weighs words sensibly; 0 = the index alone (do that for a bot that does not speak English).",
    ),
    "ops.enabled": (
        "A local HTTP endpoint for operators: /health, /metrics (Prometheus), /status (`tierbot status`).",
    ),
    "cluster.enabled": (
        'Several processes, one bot (backend = "postgres" only): each channel is leased to one process,',
        'any process stores what it receives and wakes the owner. See README, "Scaling out".',
    ),
}

#: The ``[[channels]]`` list: explained and shown commented out (its default is empty).
CHANNELS = (
    "Per-channel overrides: any [defaults] key (and a [channels.compaction] table), for channels whose",
    "key matches the glob `match`. When several match, the most specific pattern wins.",
    "[[channels]]",
    'match = "slack:T0123:C0456*"',
    "context_window = 8000",
    'respond = "always"',
    "[channels.compaction]",
    "background_threshold = 0.7",
)

#: Column the inline notes start at (a longer ``key = value`` gets one space).
_NOTE_COLUMN = 32


def toml_value(value: Any) -> str:
    """One default as a TOML value (strings as basic strings, JSON's escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for a default of type {type(value).__name__}")


def _comment(lines: tuple[str, ...]) -> list[str]:
    return [f"# {line}".rstrip() for line in lines]


def _walk(model: type[BaseModel], instance: BaseModel, path: str, out: list[str]) -> None:
    """Write the plain keys of one section, then each sub-section under its own header."""
    subsections: list[tuple[str, type[BaseModel], BaseModel]] = []
    for name, info in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        section = _section(info.annotation)
        if section is not None:
            subsections.append((key, section, getattr(instance, name)))
            continue
        if key == "channels":
            continue
        out += _comment(BEFORE.get(key, ()))
        line = f"{name} = {toml_value(getattr(instance, name))}"
        note = NOTES.get(key)
        if note:
            line = f"{line:<{_NOTE_COLUMN - 1}} # {note}"
        out.append(line)
    for key, section, value in subsections:
        plain = any(_section(i.annotation) is None for i in section.model_fields.values())
        if plain:
            out += ["", f"[{key}]", *_comment(BEFORE.get(key, ()))]
        _walk(section, value, key, out)


def render() -> str:
    """The whole commented ``config.toml`` with every key at its default."""
    out = _comment(HEADER)
    _walk(Config, Config(), "", out)
    out += ["", *_comment(CHANNELS)]
    return "\n".join(out) + "\n"
