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
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

# Counts at scale 1 (a team's database after ~90 days).
THREADS = 200_000
RUNS = 1_000_000  # regular runs, 5 per thread; plus the special threads' runs below
# Messages: 4 on 79 of every 80 regular threads (790,000) + the big thread's 10,000.
AUDIT_ENTRIES = 500_000
DAYS = 90
# Special objects (scaled by `special_scale`, kept at full size in the real bench).
BIG_THREAD_RUNS = 2_500  # the big thread: 2,500 runs and 4 messages each = 10,000 messages
HUGE_RUN_EVENTS = 20_000  # one run with 20,000 events
HUGE_THREAD_EARLIER_RUNS = 3  # the huge run's thread has 3 earlier runs

COMMON_WORD = "invoice"  # in ~40 % of messages
RARE_WORD = "zeppelin"  # in 5 messages
ABSENT_WORD = "xylophone"  # in none: a search that finds nothing

OPERATORS = ("alice", "bob", "carol", "dave")
ADMIN = "bench-admin"
PROVIDER_SCRIPTED = "bench-scripted"
PROVIDER_OPENAI = "bench-openai"
ENDPOINT = "bench-partner-a2a"
POST_AGENT = "note-taker"

# slug, model slug (None: the remote endpoint), two published versions?
AGENTS: tuple[tuple[str, str | None, bool], ...] = (
    ("support-triage", "bench-scripted-small", True),
    ("note-taker", "bench-scripted-small", False),
    ("scheduler", "bench-scripted-small", True),
    ("research-assistant", "bench-gpt-large", False),
    ("billing-assistant", "bench-gpt-large", True),
    ("sales-outreach", "bench-gpt-mini", False),
    ("code-review", "bench-gpt-mini", True),
    ("hr-helpdesk", "bench-scripted-small", False),
    ("partner-bridge", None, True),
    ("data-analyst", "bench-gpt-large", False),
)
FILTER_AGENT = "research-assistant"

# Tables the load writes, child tables last (indexes are rebuilt in this order too).
LOADED_TABLES = (
    "runs_thread",
    "runs_run",
    "runs_message",
    "runs_runevent",
    "runs_toolcall",
    "runs_ticket",
    "runs_decision",
    "runs_auditentry",
)
META_TABLE = "bench_scale_meta"


class LoadError(RuntimeError):
    """The data set could not be loaded (a schema the loader does not know, say)."""


@dataclass
class Sizes:
    threads: int
    runs: int
    audit: int
    big_thread_runs: int
    huge_run_events: int

    @classmethod
    def for_scale(cls, scale: float, special_scale: float) -> Sizes:
        def scaled(n: int, factor: float, least: int) -> int:
            return max(least, round(n * factor))

        threads = scaled(THREADS, scale, 80)
        return cls(
            threads=threads,
            runs=5 * threads,
            audit=scaled(AUDIT_ENTRIES, scale, 400),
            big_thread_runs=scaled(BIG_THREAD_RUNS, special_scale, 3),
            huge_run_events=scaled(HUGE_RUN_EVENTS, special_scale, 20),
        )


@dataclass
class Loaded:
    """What the measurements need to know about a loaded database."""

    t0: dt.datetime
    scale: float
    load_seconds: float
    fixtures: dict[str, str]
    counts: dict[str, int] = field(default_factory=dict)
    stats: str = ""
    pruned: bool = False
    prepare_seconds: float = 0.0  # migrate + SQL load + counters + ANALYZE

    def to_json(self) -> dict[str, Any]:
        return {
            "t0": self.t0.isoformat(),
            "scale": self.scale,
            "load_seconds": self.load_seconds,
            "fixtures": self.fixtures,
            "counts": self.counts,
            "stats": self.stats,
            "pruned": self.pruned,
            "prepare_seconds": self.prepare_seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Loaded:
        return cls(
            t0=dt.datetime.fromisoformat(data["t0"]),
            scale=float(data["scale"]),
            load_seconds=float(data["load_seconds"]),
            fixtures=dict(data["fixtures"]),
            counts=dict(data.get("counts") or {}),
            stats=str(data.get("stats") or ""),
            pruned=bool(data.get("pruned")),
            prepare_seconds=float(data.get("prepare_seconds") or 0.0),
        )


# --- configuration rows, through the application ------------------------------------------


def ensure_config() -> dict[str, Any]:
    """Users, providers, models, the remote endpoint and the agents with their versions,
    made through the ORM and `agent_publish` in a fixed order (same ids in every fresh
    database). Idempotent. Returns ids the SQL load needs."""
    from django.contrib.auth import get_user_model

    from agents.models import Agent, Model, ModelProvider, RemoteEndpoint
    from agents.services import agent_publish
    from runs.services.audit import Actor

    actor = Actor(label="bench", source="cli")
    users = get_user_model()
    if not users.objects.filter(username=ADMIN).exists():
        users.objects.create_superuser(ADMIN, "admin@bench.invalid", "bench-password")
    for name in OPERATORS:
        if not users.objects.filter(username=name).exists():
            users.objects.create_user(name, f"{name}@bench.invalid", "bench-password")
    scripted, _ = ModelProvider.objects.get_or_create(
        slug=PROVIDER_SCRIPTED,
        defaults={"name": "Scripted (offline)", "kind": ModelProvider.Kind.SCRIPTED},
    )
    openai, _ = ModelProvider.objects.get_or_create(
        slug=PROVIDER_OPENAI,
        defaults={
            "name": "OpenAI-compatible gateway",
            "kind": ModelProvider.Kind.OPENAI,
            "base_url": "https://llm.example.com/v1",
            "api_key_env": "BENCH_LLM_API_KEY",
        },
    )
    models = {
        "bench-scripted-small": (scripted, "", None, None),
        "bench-gpt-large": (openai, "gpt-large", "2.5000", "10.0000"),
        "bench-gpt-mini": (openai, "gpt-mini", "0.1500", "0.6000"),
    }
    for slug, (provider, upstream, price_in, price_out) in models.items():
        Model.objects.get_or_create(
            slug=slug,
            defaults={
                "provider": provider,
                "upstream_model": upstream,
                "input_price_per_million_usd": price_in,
                "output_price_per_million_usd": price_out,
            },
        )
    endpoint, _ = RemoteEndpoint.objects.get_or_create(
        slug=ENDPOINT,
        defaults={"name": "Partner agent (A2A)", "base_url": "https://partner.example.com/a2a"},
    )
    permission = {
        "default_behavior": "allow",
        "rules": [
            {"tool": "write_note", "behavior": "ask"},
            {"tool": "send_email", "behavior": "ask"},
        ],
    }
    for slug, model_slug, two_versions in AGENTS:
        agent = Agent.objects.filter(slug=slug).first()
        if agent is not None:
            continue
        agent = Agent.objects.create(
            slug=slug,
            name=slug.replace("-", " ").capitalize(),
            description=f"The team's {slug.replace('-', ' ')}.",
            model=Model.objects.get(slug=model_slug) if model_slug else None,
            endpoint=None if model_slug else endpoint,
            system_prompt=f"You are the {slug.replace('-', ' ')} of the team.",
            tools=["calculator", "current_time", "write_note", "send_email"],
            permission=permission,
        )
        agent_publish(agent=agent, actor=actor, note="first version")
        if two_versions:
            agent.system_prompt += " Keep answers short."
            agent.save(update_fields=["system_prompt"])
            agent_publish(agent=agent, actor=actor, note="shorter answers")
    return config_ids()


def config_ids() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from agents.models import Agent, Model

    agents = []
    for index, (slug, _, _) in enumerate(AGENTS):
        agent = Agent.objects.get(slug=slug)
        numbers = list(agent.versions.order_by("number").values_list("pk", flat=True))
        model = Model.objects.filter(pk=agent.model_id).first()
        agents.append(
            {
                "idx": index,
                "id": agent.pk,
                "slug": slug,
                "v1": numbers[0],
                "v2": numbers[-1],
                "price_in": model.input_price_per_million_usd if model else None,
                "price_out": model.output_price_per_million_usd if model else None,
            }
        )
    users = get_user_model().objects
    operators = [users.get(username=name).pk for name in OPERATORS]
    return {"agents": agents, "operators": operators}


# --- SQL helpers ----------------------------------------------------------------------------


def q(text: str) -> str:
    """A SQL string literal for text this module controls."""
    return "'" + text.replace("'", "''") + "'"


def sql_array(words: list[str] | tuple[str, ...]) -> str:
    return "ARRAY[" + ", ".join(q(w) for w in words) + "]"


def _execute(sql: str, params: list[Any] | None = None) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if params:
            cursor.execute(sql, params)
        else:
            cursor.execute(sql)
        return cursor.rowcount


def _scalar(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
        return row[0] if row else None


def insert_select(model: Any, exprs: dict[str, str], source: str) -> int:
    """INSERT INTO <model's table> (...) SELECT <exprs> <source>. Columns not in `exprs`
    get the model field's default (Django defaults live in Python, not in the schema),
    so a column added by a new migration does not break the load; a required column
    without a default does, with its name."""
    from django.db import connection

    fields = {f.column: f for f in model._meta.concrete_fields}
    unknown = sorted(set(exprs) - set(fields))
    if unknown:
        raise LoadError(f"{model._meta.db_table} has no column(s) {', '.join(unknown)}")
    columns, values, params = [], [], []
    for column, f in fields.items():
        if column in exprs:
            columns.append(column)
            values.append(exprs[column])
            continue
        if f.primary_key and f.get_internal_type() in ("AutoField", "BigAutoField"):
            continue  # the sequence
        default = f.get_default()
        if default is None:
            if f.null:
                continue
            raise LoadError(
                f"{model._meta.db_table}.{column} is required and has no default: "
                "bench/scale_data.py must generate it"
            )
        columns.append(column)
        values.append("%s")
        params.append(f.get_db_prep_save(default, connection))
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} {source}"
    return _execute(sql, params or None)


def has_column(model: Any, name: str) -> bool:
    return any(f.column == name for f in model._meta.concrete_fields)


# --- index and constraint handling ----------------------------------------------------------


@dataclass
class DroppedDefinitions:
    constraints: list[tuple[str, str, str]]  # table, name, definition
    indexes: list[tuple[str, str]]  # name, CREATE INDEX statement


def drop_secondary_indexes() -> DroppedDefinitions:
    """Drop the loaded tables' unique constraints and non-constraint indexes (primary
    keys stay); returns what `restore_indexes` recreates."""
    from django.db import connection

    tables = list(LOADED_TABLES)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT cl.relname, co.conname, pg_get_constraintdef(co.oid) FROM pg_constraint co"
            " JOIN pg_class cl ON cl.oid = co.conrelid"
            " WHERE co.contype = 'u' AND cl.relname = ANY(%s) ORDER BY cl.relname, co.conname",
            [tables],
        )
        constraints = [(t, n, d) for t, n, d in cursor.fetchall()]
        cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i"
            " WHERE i.schemaname = current_schema() AND i.tablename = ANY(%s)"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint co WHERE co.conname = i.indexname)"
            " ORDER BY i.tablename, i.indexname",
            [tables],
        )
        indexes = [(n, d) for n, d in cursor.fetchall()]
        for table, name, _ in constraints:
            cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
    return DroppedDefinitions(constraints, indexes)


def restore_indexes(dropped: DroppedDefinitions, log: Any) -> None:
    for table, name, definition in dropped.constraints:
        started = time.monotonic()
        _execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
        log(f"constraint {name}", started)
    for name, definition in dropped.indexes:
        started = time.monotonic()
        _execute(definition)
        log(f"index {name}", started)


# --- text -------------------------------------------------------------------------------------------

OPENERS = ("Please", "Could you", "Can you", "I need you to", "Kindly", "We should")
VERBS = (
    "check",
    "update",
    "summarize",
    "draft",
    "review",
    "send",
    "schedule",
    "cancel",
    "approve",
    "find",
    "compare",
    "archive",
)
DONE_VERBS = (
    "checked",
    "updated",
    "summarized",
    "drafted",
    "reviewed",
    "sent",
    "scheduled",
    "cancelled",
    "approved",
    "found",
    "compared",
    "archived",
)
NOUNS = (
    "the quarterly report",
    "the shipping label",
    "the refund request",
    "the meeting notes",
    "the contract renewal",
    "the travel booking",
    "the expense claim",
    "the customer email",
    "the release checklist",
    "the onboarding plan",
    "the pricing sheet",
    "the backup logs",
    "the support ticket",
    "the lunch menu",
    "the team calendar",
)
TAILS = (
    "for tomorrow",
    "before Friday",
    "by end of day",
    "for the Berlin office",
    "for our biggest customer",
    "when you have a moment",
    "as discussed yesterday",
    "and let me know",
    "with the latest numbers",
    "for the board meeting",
)
FOLLOW_UPS = (
    "",
    " Thanks!",
    "",
    " The client is waiting on this.",
    "",
    " Keep it short.",
    "",
    " Copy the finance team.",
    "",
    " It is not urgent.",
    "",
    " Use the new template.",
    "",
    " Ping me when it is done.",
    "",
    " Mark it as high priority.",
)
REPLIES = ("Done: I", "Sure, I", "I checked and", "Here is the update: I", "Okay, I")


def message_text_sql(h: str, seq: str, rare: str) -> str:
    """SQL for a message's text from a 60-bit hash `h`: a user request (odd seq) or an
    assistant reply (even seq), the common word in ~40 % of them, the rare word where
    `rare` holds."""
    user = (
        f"({sql_array(OPENERS)})[1 + mod({h}, 6)] || ' ' || ({sql_array(VERBS)})[1 + mod({h} / 6, 12)]"
        f" || ' ' || ({sql_array(NOUNS)})[1 + mod({h} / 72, 15)] || ' '"
        f" || ({sql_array(TAILS)})[1 + mod({h} / 1080, 10)] || '.'"
        f" || ({sql_array(FOLLOW_UPS)})[1 + mod({h} / 10800, 16)]"
    )
    reply = (
        f"({sql_array(REPLIES)})[1 + mod({h}, 5)] || ' ' || ({sql_array(DONE_VERBS)})[1 + mod({h} / 6, 12)]"
        f" || ' ' || ({sql_array(NOUNS)})[1 + mod({h} / 72, 15)] || ' '"
        f" || ({sql_array(TAILS)})[1 + mod({h} / 1080, 10)] || '.'"
    )
    return (
        f"CASE WHEN mod({seq}, 2) = 1 THEN {user} ELSE {reply} END"
        f" || CASE WHEN mod({h} / 172800, 100) < 40 THEN ' Also check the {COMMON_WORD} number.'"
        f" ELSE '' END"
        f" || CASE WHEN {rare} THEN ' The {RARE_WORD} charter needs a quote too.' ELSE '' END"
    )


# --- the load --------------------------------------------------------------------------------------


def load(scale: float, special_scale: float, log_prefix: str = "  ") -> Loaded:
    """Bulk-load the data set into the (migrated, otherwise empty) database Django is
    connected to. Returns what the measurements need (times, ids)."""
    from django.db import connection, transaction

    from runs.models import AuditEntry, Decision, Message, Run, RunEvent, Thread, Ticket, ToolCall

    sizes = Sizes.for_scale(scale, special_scale)
    config = ensure_config()
    started_all = time.monotonic()
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0)
    T0 = f"{q(t0.isoformat())}::timestamptz"

    def log(what: str, started: float, rows: int | None = None) -> None:
        extra = f" ({rows:,} rows)" if rows is not None and rows >= 0 else ""
        print(f"{log_prefix}{what}{extra}: {time.monotonic() - started:.1f}s", flush=True)

    def step(what: str, sql: str, params: list[Any] | None = None) -> int:
        started = time.monotonic()
        rows = _execute(sql, params)
        log(what, started, rows)
        return rows

    def insert(what: str, model: Any, exprs: dict[str, str], source: str) -> int:
        started = time.monotonic()
        rows = insert_select(model, exprs, source)
        log(what, started, rows)
        return rows

    if transaction.get_autocommit() is False:
        raise LoadError("the load runs in autocommit mode")
    print(
        f"{log_prefix}sizes: {sizes.threads:,} threads, {sizes.runs:,} regular runs, "
        f"big thread {sizes.big_thread_runs:,} runs, huge run {sizes.huge_run_events:,} events",
        flush=True,
    )
    # session settings only (the server's configuration is left alone)
    _execute("SET maintenance_work_mem = '512MB'")
    _execute("SET synchronous_commit = off")
    _execute("SET session_replication_role = replica")  # no FK triggers during the load
    _execute(
        "CREATE OR REPLACE FUNCTION pg_temp.h(key text) RETURNS bigint LANGUAGE sql IMMUTABLE"
        " AS $$ SELECT ('x' || substr(md5(key), 1, 15))::bit(60)::bigint $$"
    )
    # UUID v7 (time-ordered, as the application's ids) from a timestamp and a row number
    _execute(
        "CREATE OR REPLACE FUNCTION pg_temp.uuid7(ts timestamptz, n bigint, salt text)"
        " RETURNS uuid LANGUAGE sql IMMUTABLE AS $$ SELECT (lpad(to_hex(floor(extract(epoch"
        " FROM ts) * 1000)::bigint), 12, '0') || '7' || substr(md5(salt || n::text), 1, 3)"
        " || to_hex(8 + mod(n, 4)::int) || substr(md5(n::text || salt), 1, 15))::uuid $$"
    )
    started = time.monotonic()
    dropped = drop_secondary_indexes()
    log(
        f"dropped {len(dropped.indexes)} indexes and {len(dropped.constraints)} unique "
        "constraints for the load",
        started,
    )

    # -- plan: agents ------------------------------------------------------------------------
    _execute(
        "CREATE TEMP TABLE bench_agents (idx int PRIMARY KEY, id int, slug text, v1 int,"
        " v2 int, price_in numeric, price_out numeric)"
    )
    for a in config["agents"]:
        _execute(
            "INSERT INTO bench_agents VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [a["idx"], a["id"], a["slug"], a["v1"], a["v2"], a["price_in"], a["price_out"]],
        )
    operators = sql_array([str(pk) for pk in config["operators"]]) + "::int[]"
    operator_names = sql_array(list(OPERATORS))
    nt, nr = sizes.threads, sizes.runs
    big_t, huge_t = nt + 1, nt + 2

    # -- plan: threads -----------------------------------------------------------------------
    # Regular threads start evenly over the 90 days (the newest 2 h before now); about one
    # in 80 has no messages, the others 4 (two requests, two replies).
    step(
        "plan threads",
        f"""CREATE TEMP TABLE bench_threads AS
        SELECT t, created_at, mod(pg_temp.h('a' || t), 10)::int AS agent_idx,
               CASE WHEN mod(t, 80) = 79 THEN 0 ELSE 4 END AS n_msgs, 'regular' AS kind
        FROM (SELECT t, {T0} - interval '{DAYS} days'
                     + (t - 1) * ((interval '{DAYS} days' - interval '2 hours') / {nt}) AS created_at
              FROM generate_series(1, {nt}) t) s
        UNION ALL SELECT {big_t}, {T0} - interval '{DAYS} days' - interval '1 hour', 0,
               {4 * sizes.big_thread_runs}, 'big'
        UNION ALL SELECT {huge_t}, {T0} - interval '2 days' - interval '1 hour', 1, 4, 'huge'""",
    )
    _execute("ALTER TABLE bench_threads ADD PRIMARY KEY (t)")
    _execute(
        "ALTER TABLE bench_threads ADD COLUMN id uuid;"
        " UPDATE bench_threads SET id = pg_temp.uuid7(created_at, t, 'thread')"
    )

    # -- plan: runs --------------------------------------------------------------------------
    # Regular run i belongs to thread 1 + i mod NT and is its k-th (k = i / NT), 10-20 min
    # after the previous one. The last run of every 10th thread waits on a ticket; the last
    # runs of the newest 1 % of threads are running or created; the rest are done, with
    # failures mixed in by a hash of i.
    wait_seconds = (
        "CASE WHEN mod(w, 100) < 30 THEN 5 + mod(w / 100, 55)"
        " WHEN mod(w, 100) < 60 THEN 60 + mod(w / 100, 240)"
        " WHEN mod(w, 100) < 80 THEN 300 + mod(w / 100, 1500)"
        " WHEN mod(w, 100) < 92 THEN 1800 + mod(w / 100, 5400)"
        " ELSE 7200 + mod(w / 100, 30000) END"
    )
    step(
        "plan runs",
        f"""CREATE TEMP TABLE bench_runs AS
        WITH r AS (
            SELECT i, 1 + mod(i, {nt}) AS t, i / {nt} AS k, (i + {nt} >= {nr}) AS last,
                   mod(pg_temp.h('r' || i), 1000) AS u, pg_temp.h('w' || i) AS w
            FROM generate_series(0, {nr} - 1) i
        ), regular AS (
            SELECT r.i, r.t, r.k, 'regular' AS kind,
                   th.created_at + r.k * interval '10 minutes'
                       + mod(r.w / 7, 600) * interval '1 second' AS created_at,
                   th.agent_idx,
                   CASE WHEN r.last AND mod(r.t, 10) = 3 THEN 'waiting'
                        WHEN r.last AND r.t > {nt} - {max(20, nt // 100)} AND mod(r.t, 20) = 17
                            THEN 'running'
                        WHEN r.last AND r.t > {nt} - {max(20, nt // 100)} AND mod(r.t, 20) = 18
                            THEN 'created'
                        ELSE 'done' END AS status,
                   r.u, r.w
            FROM r JOIN bench_threads th ON th.t = r.t
        ), big AS (
            SELECT {nr} + j AS i, {big_t} AS t, j AS k, 'big' AS kind,
                   {T0} - interval '{DAYS} days'
                       + j * ((interval '{DAYS} days' - interval '3 hours') / {sizes.big_thread_runs})
                       AS created_at,
                   0 AS agent_idx, 'done' AS status,
                   mod(pg_temp.h('r' || ({nr} + j)), 1000) AS u, pg_temp.h('w' || ({nr} + j)) AS w
            FROM generate_series(0, {sizes.big_thread_runs - 1}) j
        ), huge AS (
            SELECT {nr + sizes.big_thread_runs} + j AS i, {huge_t} AS t, j AS k,
                   CASE WHEN j = {HUGE_THREAD_EARLIER_RUNS} THEN 'huge' ELSE 'huge_prev' END AS kind,
                   {T0} - interval '2 days' - interval '50 minutes' + j * interval '10 minutes'
                       AS created_at,
                   1 AS agent_idx, 'done' AS status, 999 AS u, pg_temp.h('w' || j) AS w
            FROM generate_series(0, {HUGE_THREAD_EARLIER_RUNS}) j
        )
        SELECT x.*,
               CASE WHEN x.status = 'waiting' THEN 'suspended'
                    WHEN x.status <> 'done' THEN ''
                    WHEN x.u < 30 THEN 'error'
                    WHEN x.u < 35 THEN 'timeout'
                    WHEN x.u < 50 THEN 'cancelled'
                    WHEN x.u < 55 THEN 'stopped:max_rounds'
                    WHEN x.u < 57 THEN 'blocked:policy'
                    WHEN x.u < 60 THEN 'behavior_requested'
                    ELSE 'natural' END AS reason
        FROM (SELECT * FROM regular UNION ALL SELECT * FROM big UNION ALL SELECT * FROM huge) x""",
    )
    _execute(
        f"""ALTER TABLE bench_runs
            ADD COLUMN id uuid, ADD COLUMN n_events int, ADD COLUMN decided bool,
            ADD COLUMN wait_s int, ADD COLUMN action text, ADD COLUMN call_id text,
            ADD COLUMN finished_at timestamptz;
        UPDATE bench_runs SET
            id = pg_temp.uuid7(created_at, i, 'run'),
            n_events = CASE WHEN kind = 'huge' THEN {sizes.huge_run_events}
                            WHEN status = 'created' THEN 1 WHEN status = 'running' THEN 3
                            WHEN status = 'waiting' THEN 4 ELSE 2 END,
            decided = (kind = 'regular' AND status = 'done' AND reason <> 'cancelled'
                       AND created_at >= {T0} - interval '7 days'),
            wait_s = {wait_seconds},
            action = CASE WHEN mod(w / 1000003, 100) < 80 THEN 'approve'
                          WHEN mod(w / 1000003, 100) < 92 THEN 'reject' ELSE 'edit' END,
            call_id = 'call_' || substr(md5('c' || i), 1, 16);
        UPDATE bench_runs SET finished_at = CASE
            WHEN status <> 'done' THEN NULL
            WHEN decided THEN LEAST(created_at + (wait_s + 5) * interval '1 second',
                                    {T0} - interval '1 second')
            WHEN kind = 'huge' THEN created_at + interval '20 minutes'
            ELSE LEAST(created_at + (5 + mod(w / 13, 115)) * interval '1 second',
                       {T0} - interval '1 second') END;
        CREATE INDEX ON bench_runs (t, k);
        CREATE UNIQUE INDEX ON bench_runs (id);
        ANALYZE bench_runs; ANALYZE bench_threads"""
    )

    # -- threads -----------------------------------------------------------------------------
    title = (
        f"initcap(substr(({sql_array(NOUNS)})[1 + mod(pg_temp.h('n' || th.t), 15)], 5))"
        f" || ' ' || ({sql_array(TAILS)})[1 + mod(pg_temp.h('tl' || th.t), 10)]"
    )
    insert(
        "threads",
        Thread,
        {
            "id": "th.id",
            "title": f"CASE WHEN th.kind = 'big' THEN 'Team standup log (long-lived)' ELSE {title} END",
            "resource_id": "'team-' || mod(th.t, 20)",
            "message_count": "th.n_msgs",
            "open_run_id": "CASE WHEN last.status <> 'done' THEN last.id END",
            "active_run_id": "CASE WHEN last.status = 'running' THEN last.id END",
            "latest_run_id": "last.id",
            "custom": "'{}'::jsonb",
            "created_at": "th.created_at",
            "updated_at": "COALESCE(last.finished_at, last.created_at + interval '2 seconds')",
        },
        """FROM bench_threads th
        LEFT JOIN LATERAL (SELECT r.id, r.status, r.created_at, r.finished_at FROM bench_runs r
                           WHERE r.t = th.t ORDER BY r.k DESC LIMIT 1) last ON true
        ORDER BY th.created_at""",
    )

    # -- runs ----------------------------------------------------------------------------------
    waiting_json = (
        "jsonb_build_object('reason', 'tool_permission', 'ticket_ids',"
        " jsonb_build_array('perm_' || p.call_id), 'tickets', jsonb_build_array("
        "jsonb_build_object('ticket_id', 'perm_' || p.call_id, 'tool_call_id', p.call_id,"
        " 'tool_name', CASE WHEN mod(p.w, 3) = 0 THEN 'send_email' ELSE 'write_note' END,"
        " 'arguments', jsonb_build_object('title', 'the weekly summary', 'body', 'draft'),"
        " 'resume_mode', 'replay_tool_call', 'reason', 'tool:PermissionConfirm')),"
        " 'message', 'suspended')"
    )
    termination = (
        "CASE p.reason WHEN 'natural' THEN '{\"type\": \"natural_end\"}'::jsonb"
        " WHEN 'behavior_requested' THEN '{\"type\": \"behavior_requested\"}'::jsonb"
        " WHEN 'cancelled' THEN '{\"type\": \"cancelled\"}'::jsonb"
        ' WHEN \'error\' THEN \'{"type": "error", "value": "model call failed: 503"}\'::jsonb'
        ' WHEN \'timeout\' THEN \'{"type": "error", "value": "timeout"}\'::jsonb'
        " WHEN 'stopped:max_rounds' THEN"
        ' \'{"type": "stopped", "value": {"code": "max_rounds"}}\'::jsonb'
        ' WHEN \'blocked:policy\' THEN \'{"type": "blocked", "value": "policy"}\'::jsonb'
        " END"
    )
    steps = "(1 + mod(p.w / 17, 6))"
    run_exprs = {
        "id": "p.id",
        "thread_id": "th.id",
        "agent_id": "a.id",
        "agent_version_id": f"CASE WHEN p.created_at >= {T0} - interval '45 days' THEN a.v2 ELSE a.v1 END",
        "origin": "'user'",
        "request": "jsonb_build_object('origin', 'User', 'sender_id', 'api',"
        " 'input_message_ids', '[]'::jsonb, 'input_message_count', 1)",
        "input": "jsonb_build_object('thread_id', th.id::text, 'range',"
        " jsonb_build_object('from_seq', 1, 'to_seq', 1), 'trigger_message_ids', '[]'::jsonb,"
        " 'selected_message_ids', '[]'::jsonb)",
        "output": "CASE WHEN p.status IN ('done', 'waiting') THEN jsonb_build_object('thread_id',"
        " th.id::text, 'range', jsonb_build_object('from_seq', 2, 'to_seq', 2),"
        " 'message_ids', '[]'::jsonb) END",
        "status": "p.status",
        "status_reason": "p.reason",
        "termination_reason": termination,
        "final_output": "CASE WHEN p.reason = 'natural' THEN 'Done: the note is saved.' END",
        "error_payload": "CASE WHEN p.reason IN ('error', 'timeout') THEN"
        " jsonb_build_object('message', CASE p.reason WHEN 'timeout' THEN 'timeout'"
        " ELSE 'model call failed: 503 upstream unavailable' END) END",
        "waiting": f"CASE WHEN p.status = 'waiting' THEN {waiting_json} END",
        "created_at": "p.created_at",
        "started_at": "CASE WHEN p.status <> 'created' THEN p.created_at + interval '1 second' END",
        "finished_at": "p.finished_at",
        "updated_at": "COALESCE(p.finished_at, p.created_at + interval '2 seconds')",
        "steps": f"CASE WHEN p.kind = 'huge' THEN {sizes.huge_run_events // 8}"
        f" WHEN p.status = 'created' THEN 0 ELSE {steps} END",
        "input_tokens": f"CASE WHEN p.status = 'created' THEN 0 ELSE {steps} * (300 + mod(p.w / 19, 2000)) END",
        "output_tokens": f"CASE WHEN p.status = 'created' THEN 0 ELSE {steps} * (40 + mod(p.w / 23, 400)) END",
        "state": "CASE WHEN p.status <> 'created' THEN jsonb_build_object('revision', "
        f"{steps}, 'extensions', jsonb_build_object('__runtime.run_lifecycle',"
        " jsonb_build_object('run_id', p.id::text, 'status', p.status, 'status_reason',"
        " NULLIF(p.reason, ''), 'step_count', " + steps + "), '__runtime.stop_condition_stats',"
        " jsonb_build_object('inferences', " + steps + ", 'consecutive_errors', 0))) END",
        "last_event_seq": "p.n_events",
        "due": "p.status = 'created'",
        "lease_owner": "CASE WHEN p.status = 'running' THEN 'bench-worker-1:4242' ELSE '' END",
        "lease_expires_at": f"CASE WHEN p.status = 'running' THEN {T0} + interval '5 minutes' END",
        "attempt": "CASE WHEN p.status = 'created' THEN 0 ELSE 1 END",
        "cancel_requested_at": "CASE WHEN p.reason = 'cancelled' THEN p.finished_at - interval '1 second' END",
        "dispatched_at": "p.created_at",
        "input_price_per_million_usd": "a.price_in",
        "output_price_per_million_usd": "a.price_out",
    }
    if has_column(Run, "open_tickets"):
        run_exprs["open_tickets"] = "CASE WHEN p.status = 'waiting' THEN 1 ELSE 0 END"
    insert(
        "runs",
        Run,
        run_exprs,
        """FROM bench_runs p JOIN bench_threads th ON th.t = p.t
        JOIN bench_agents a ON a.idx = p.agent_idx ORDER BY p.created_at""",
    )

    # -- messages -------------------------------------------------------------------------------
    rare_threads = ", ".join(str(1 + (nt * j) // 5) for j in range(5))
    text = message_text_sql("m.h", "m.seq", f"m.t IN ({rare_threads}) AND m.seq = 1")
    insert(
        "messages",
        Message,
        {
            "id": "pg_temp.uuid7(m.created_at, m.t::bigint * 100000 + m.seq, 'msg')",
            "thread_id": "m.thread_id",
            "seq": "m.seq",
            "role": "CASE WHEN mod(m.seq, 2) = 1 THEN 'user' ELSE 'assistant' END",
            "content": f"jsonb_build_array(jsonb_build_object('type', 'text', 'text', {text}))",
            "tool_call_id": "''",
            "visibility": "'all'",
            "produced_by_run_id": "CASE WHEN mod(m.seq, 2) = 0 THEN m.run_id END",
            "step_index": "CASE WHEN mod(m.seq, 2) = 0 THEN 0 END",
            "created_at": "m.created_at",
        },
        """FROM (SELECT th.t, th.id AS thread_id, s.seq, r.id AS run_id,
                     COALESCE(r.created_at, th.created_at) + s.seq * interval '1 second' AS created_at,
                     pg_temp.h(th.t || '.' || s.seq) AS h
              FROM bench_threads th
              CROSS JOIN LATERAL generate_series(1, th.n_msgs) s(seq)
              LEFT JOIN bench_runs r ON r.t = th.t AND r.k = (s.seq - 1) / 4) m
        ORDER BY m.created_at""",
    )

    # -- events ---------------------------------------------------------------------------------
    identity = (
        "jsonb_build_object('thread_id', th.id::text, 'run_id', p.id::text, 'identity',"
        " jsonb_build_object('thread_id', th.id::text, 'run_id', p.id::text, 'agent_id', a.slug,"
        " 'origin', 'user'))"
    )
    cycle = sql_array(
        [
            "step_start",
            "text_delta",
            "tool_call_start",
            "tool_call_ready",
            "inference_complete",
            "tool_call_done",
            "step_end",
            "state_snapshot",
        ]
    )
    event_type = (
        "CASE WHEN s.seq = 1 THEN 'run_start'"
        " WHEN s.seq = p.n_events AND p.status IN ('done', 'waiting') THEN 'run_finish'"
        " WHEN p.status = 'waiting' THEN (ARRAY['tool_call_ready', 'tool_call_done'])[s.seq - 1]"
        f" ELSE ({cycle})[1 + mod(s.seq - 2, 8)] END"
    )
    payload = (
        "CASE e.event_type"
        f" WHEN 'run_start' THEN {identity}"
        f" WHEN 'run_finish' THEN {identity} || jsonb_build_object('result',"
        " jsonb_build_object('response', 'Done: the note is saved.', 'status', p.status,"
        " 'status_reason', NULLIF(p.reason, '')), 'termination', COALESCE(" + termination + ","
        ' \'{"type": "suspended"}\'::jsonb))'
        " WHEN 'text_delta' THEN jsonb_build_object('delta', 'Working on it.')"
        " WHEN 'step_start' THEN jsonb_build_object('message_id', p.id::text)"
        " WHEN 'tool_call_start' THEN jsonb_build_object('id', p.call_id, 'name', 'write_note')"
        " WHEN 'tool_call_ready' THEN jsonb_build_object('id', p.call_id, 'name', 'write_note',"
        " 'arguments', jsonb_build_object('title', 'the weekly summary', 'body', 'draft'))"
        " WHEN 'inference_complete' THEN jsonb_build_object('model', 'bench', 'usage',"
        " jsonb_build_object('prompt_tokens', 310, 'completion_tokens', 42, 'total_tokens', 352),"
        " 'duration_ms', 840)"
        " WHEN 'tool_call_done' THEN jsonb_build_object('id', p.call_id, 'outcome',"
        " CASE WHEN p.status = 'waiting' THEN 'suspended' ELSE 'success' END, 'result',"
        " jsonb_build_object('tool_name', 'write_note', 'status', 'success', 'data', 'saved'))"
        " ELSE '{}'::jsonb END"
    )
    insert(
        "run events",
        RunEvent,
        {
            "run_id": "p.id",
            "seq": "s.seq",
            "event_type": "e.event_type",
            "payload": f"jsonb_build_object('event_type', e.event_type) || {payload}",
            "created_at": "p.created_at + s.seq * interval '50 milliseconds'",
        },
        f"""FROM bench_runs p JOIN bench_threads th ON th.t = p.t
        JOIN bench_agents a ON a.idx = p.agent_idx
        CROSS JOIN LATERAL generate_series(1, p.n_events) s(seq)
        CROSS JOIN LATERAL (SELECT {event_type} AS event_type) e
        ORDER BY p.created_at, s.seq""",
    )

    # -- tool calls, tickets, decisions ----------------------------------------------------------
    tool_name = "CASE WHEN mod(p.w, 3) = 0 THEN 'send_email' ELSE 'write_note' END"
    arguments = "jsonb_build_object('title', 'the weekly summary', 'body', 'draft')"
    ticket_at = "p.created_at + interval '2 seconds'"
    closed_at = f"LEAST({ticket_at} + p.wait_s * interval '1 second', {T0} - interval '2 seconds')"
    insert(
        "tool calls",
        ToolCall,
        {
            "run_id": "p.id",
            "call_id": "p.call_id",
            "tool_name": tool_name,
            "arguments": arguments,
            "status": "CASE WHEN p.status = 'waiting' THEN 'suspended'"
            " WHEN p.action = 'reject' THEN 'cancelled' ELSE 'succeeded' END",
            "resume_mode": "'replay_tool_call'",
            "suspension_id": "'perm_' || p.call_id",
            "suspension_reason": "'tool:PermissionConfirm'",
            "step_index": "0",
            "created_at": ticket_at,
            "updated_at": f"CASE WHEN p.status = 'waiting' THEN {ticket_at} ELSE {closed_at} END",
        },
        "FROM bench_runs p WHERE p.status = 'waiting' OR p.decided ORDER BY p.created_at",
    )
    ticket_exprs = {
        "id": "pg_temp.uuid7(p.created_at, p.i, 'ticket')",
        "run_id": "p.id",
        "tool_call_id": "tc.id",
        "ticket_id": "'perm_' || p.call_id",
        "tool_name": "tc.tool_name",
        "arguments": "tc.arguments",
        "resume_mode": "'replay_tool_call'",
        "reason": "'tool:PermissionConfirm'",
        "message": "''",
        "status": "CASE WHEN p.status = 'waiting' THEN 'pending' ELSE 'decided' END",
        "default_action": "'reject'",
        "created_at": ticket_at,
        "closed_at": f"CASE WHEN p.status = 'waiting' THEN NULL ELSE {closed_at} END",
    }
    if has_column(Ticket, "agent_id"):
        ticket_exprs["agent_id"] = "a.id"
    insert(
        "tickets",
        Ticket,
        ticket_exprs,
        """FROM bench_runs p JOIN runs_toolcall tc ON tc.run_id = p.id AND tc.call_id = p.call_id
        JOIN bench_agents a ON a.idx = p.agent_idx ORDER BY p.created_at""",
    )
    operator = f"(1 + mod(p.w / 31, {len(OPERATORS)}))::int"
    insert(
        "decisions",
        Decision,
        {
            "id": f"pg_temp.uuid7({closed_at}, p.i, 'decision')",
            "ticket_id": "pg_temp.uuid7(p.created_at, p.i, 'ticket')",
            "action": "p.action",
            "actor_id": f"({operators})[{operator}]",
            "actor_label": f"({operator_names})[{operator}]",
            "comment": "CASE WHEN p.action = 'reject' THEN 'not this week' ELSE '' END",
            "decision_id": "'dec_' || substr(md5('d' || p.i), 1, 20)",
            "arguments_before": f"CASE WHEN p.action = 'edit' THEN {arguments} END",
            "arguments_after": "CASE WHEN p.action = 'edit' THEN jsonb_build_object('title',"
            " 'the weekly summary (edited)', 'body', 'draft') END",
            "created_at": closed_at,
        },
        "FROM bench_runs p WHERE p.decided ORDER BY p.created_at",
    )

    # -- audit log: every decision, every cancel, run starts for the rest --------------------------
    decided = _scalar("SELECT count(*) FROM bench_runs WHERE decided")
    cancelled = _scalar("SELECT count(*) FROM bench_runs WHERE reason = 'cancelled'")
    starts = max(0, sizes.audit - decided - cancelled)
    insert(
        "audit entries",
        AuditEntry,
        {
            "actor_id": "x.actor_id",
            "actor_label": "x.actor_label",
            "action": "x.action",
            "target_type": "x.target_type",
            "target_id": "x.target_id",
            "run_id": "x.run_id",
            "before": "x.before",
            "after": "x.after",
            "comment": "x.comment",
            "source": "x.source",
            "request_id": "''",
            "created_at": "x.created_at",
        },
        f"""FROM (
            SELECT ({operators})[{operator}] AS actor_id, ({operator_names})[{operator}] AS actor_label,
                   'ticket.' || p.action AS action, 'ticket' AS target_type,
                   pg_temp.uuid7(p.created_at, p.i, 'ticket')::text AS target_id, p.id AS run_id,
                   CASE WHEN p.action = 'edit' THEN {arguments} END AS before,
                   jsonb_build_object('action', p.action, 'tool', {tool_name}) AS after,
                   CASE WHEN p.action = 'reject' THEN 'not this week' ELSE '' END AS comment,
                   'ui' AS source, {closed_at} AS created_at
            FROM bench_runs p WHERE p.decided
            UNION ALL
            SELECT ({operators})[{operator}], ({operator_names})[{operator}], 'run.cancel', 'run',
                   p.id::text, p.id, jsonb_build_object('status', 'running'),
                   jsonb_build_object('status', 'done', 'status_reason', 'cancelled'), '',
                   'ui', p.finished_at - interval '1 second'
            FROM bench_runs p WHERE p.reason = 'cancelled'
            UNION ALL
            SELECT CASE WHEN mod(p.w / 37, 3) = 0 THEN NULL ELSE ({operators})[{operator}] END,
                   CASE WHEN mod(p.w / 37, 3) = 0 THEN 'ci-bot (token ci)'
                        ELSE ({operator_names})[{operator}] END,
                   'run.start', 'run', p.id::text, p.id, NULL,
                   jsonb_build_object('agent', a.slug, 'thread', th.id::text, 'messages',
                                      jsonb_build_array('please update the weekly summary')),
                   '', CASE WHEN mod(p.w / 37, 3) = 0 THEN 'api' ELSE 'ui' END, p.created_at
            FROM (SELECT * FROM bench_runs ORDER BY md5(i::text) LIMIT {starts}) p
            JOIN bench_threads th ON th.t = p.t JOIN bench_agents a ON a.idx = p.agent_idx
        ) x ORDER BY x.created_at""",
    )

    # -- indexes back, statistics -----------------------------------------------------------------
    _execute("RESET session_replication_role")
    restore_indexes(dropped, log)
    fixtures = {
        "huge_run": str(_scalar("SELECT id FROM bench_runs WHERE kind = 'huge'")),
        "huge_thread": str(_scalar(f"SELECT id FROM bench_threads WHERE t = {huge_t}")),
        "big_thread": str(_scalar(f"SELECT id FROM bench_threads WHERE t = {big_t}")),
        "filter_thread": str(_scalar(f"SELECT id FROM bench_threads WHERE t = {nt // 2}")),
        "small_run": str(_scalar("SELECT id FROM bench_runs WHERE kind = 'huge_prev' AND k = 0")),
    }
    for table in ("bench_runs", "bench_threads", "bench_agents"):
        _execute(f"DROP TABLE {table}")
    for table in LOADED_TABLES:
        started = time.monotonic()
        _execute(f"VACUUM (ANALYZE) {table}")
        log(f"vacuum analyze {table}", started)
    _execute("RESET maintenance_work_mem")
    _execute("RESET synchronous_commit")
    connection.close()  # the temporary functions go with the session
    return Loaded(
        t0=t0, scale=scale, load_seconds=time.monotonic() - started_all, fixtures=fixtures
    )


def table_counts() -> dict[str, int]:
    counts = {}
    for table in (*LOADED_TABLES, "runs_hourlystat"):
        try:
            counts[table] = int(_scalar(f"SELECT count(*) FROM {table}"))
        except Exception:  # a table that does not exist (yet)
            from django.db import connection

            if not connection.get_autocommit():
                raise
            counts[table] = -1
    return counts


# --- the meta row: what was loaded, for --reuse ----------------------------------------------


def write_meta(loaded: Loaded) -> None:
    import json

    _execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key text PRIMARY KEY, value jsonb)")
    _execute(
        f"INSERT INTO {META_TABLE} VALUES ('loaded', %s::jsonb)"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [json.dumps(loaded.to_json())],
    )


def read_meta() -> Loaded | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [META_TABLE])
        if cursor.fetchone()[0] is None:
            return None
        cursor.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'loaded'")
        row = cursor.fetchone()
    if row is None:
        return None
    value = row[0]
    if isinstance(value, str):
        import json

        value = json.loads(value)
    return Loaded.from_json(value)
