"""The data set of `bench/scale.py`: a team's database after a few months, bulk-loaded with
INSERT ... SELECT over generate_series (no rows travel through Python).

The few configuration rows (users, providers, models, a remote endpoint, ten agents and
their published versions, an API token) are made with the application's own ORM and
services, in a fixed order, so two databases set up this way get the same ids. Everything
else is generated in SQL from two plan tables (threads, runs) that fix each row's time,
status and agent; every other table is derived from them, so the rows agree with each
other: a waiting run has its pending ticket and suspended tool call, `last_event_seq`
is the last of its gap-free event seqs, a thread's `message_count` is the number of its
messages, a decided ticket closed before its run finished.

Only Django's connection is used (one connection). Secondary indexes and unique
constraints of the loaded tables are dropped for the load and rebuilt afterwards, and
foreign-key triggers are off for the session (`session_replication_role = replica`): a
bulk load builds an index once from sorted input instead of maintaining it row by row.
Nothing here imports Django at module level (see bench/common.py).

The modules: `dataset` (counts, names, sizes, what a load leaves), `config_rows` (the
configuration rows, through the ORM), `sql` (helpers, indexes off and back), `text` (the
messages' words), `context` (one load's facts and timed steps), `plan` (the plan tables),
`conversations` (threads, runs, messages, events), `approvals` (tool calls, tickets,
decisions, audit log), `bulk_load` (the steps in order), `meta` (row counts, the meta row).
"""

from __future__ import annotations

from bench.scale_data.bulk_load import load
from bench.scale_data.config_rows import config_ids, ensure_config
from bench.scale_data.dataset import (
    ABSENT_WORD,
    ADMIN,
    AGENTS,
    AUDIT_ENTRIES,
    BIG_THREAD_RUNS,
    COMMON_WORD,
    DAYS,
    ENDPOINT,
    FILTER_AGENT,
    HUGE_RUN_EVENTS,
    HUGE_THREAD_EARLIER_RUNS,
    LOADED_TABLES,
    META_TABLE,
    OPERATORS,
    POST_AGENT,
    PROVIDER_OPENAI,
    PROVIDER_SCRIPTED,
    RARE_WORD,
    RUNS,
    THREADS,
    Loaded,
    LoadError,
    Sizes,
)
from bench.scale_data.meta import read_meta, table_counts, write_meta

__all__ = [
    "ABSENT_WORD",
    "ADMIN",
    "AGENTS",
    "AUDIT_ENTRIES",
    "BIG_THREAD_RUNS",
    "COMMON_WORD",
    "DAYS",
    "ENDPOINT",
    "FILTER_AGENT",
    "HUGE_RUN_EVENTS",
    "HUGE_THREAD_EARLIER_RUNS",
    "LOADED_TABLES",
    "META_TABLE",
    "OPERATORS",
    "POST_AGENT",
    "PROVIDER_OPENAI",
    "PROVIDER_SCRIPTED",
    "RARE_WORD",
    "RUNS",
    "THREADS",
    "LoadError",
    "Loaded",
    "Sizes",
    "config_ids",
    "ensure_config",
    "load",
    "read_meta",
    "table_counts",
    "write_meta",
]
