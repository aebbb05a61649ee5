"""The load's plan: temporary tables that fix every thread's and run's time, agent,
status and outcome, from which every loaded table is derived (so the rows agree with each
other), and the two SQL functions the load uses (a 60-bit hash, UUID v7 ids)."""

from __future__ import annotations

from bench.scale_data.context import LoadContext
from bench.scale_data.dataset import DAYS, HUGE_THREAD_EARLIER_RUNS
from bench.scale_data.sql import execute

# A decided ticket's wait, in seconds, from a run's hash `w`: from 5 s to 10 h.
WAIT_SECONDS = (
    "CASE WHEN mod(w, 100) < 30 THEN 5 + mod(w / 100, 55)"
    " WHEN mod(w, 100) < 60 THEN 60 + mod(w / 100, 240)"
    " WHEN mod(w, 100) < 80 THEN 300 + mod(w / 100, 1500)"
    " WHEN mod(w, 100) < 92 THEN 1800 + mod(w / 100, 5400)"
    " ELSE 7200 + mod(w / 100, 30000) END"
)


def prepare_session() -> None:
    """Session settings for the bulk load and the SQL functions it uses."""
    # session settings only (the server's configuration is left alone)
    execute("SET maintenance_work_mem = '512MB'")
    execute("SET synchronous_commit = off")
    execute("SET session_replication_role = replica")  # no FK triggers during the load
    execute(
        "CREATE OR REPLACE FUNCTION pg_temp.h(key text) RETURNS bigint LANGUAGE sql IMMUTABLE"
        " AS $$ SELECT ('x' || substr(md5(key), 1, 15))::bit(60)::bigint $$"
    )
    # UUID v7 (time-ordered, as the application's ids) from a timestamp and a row number
    execute(
        "CREATE OR REPLACE FUNCTION pg_temp.uuid7(ts timestamptz, n bigint, salt text)"
        " RETURNS uuid LANGUAGE sql IMMUTABLE AS $$ SELECT (lpad(to_hex(floor(extract(epoch"
        " FROM ts) * 1000)::bigint), 12, '0') || '7' || substr(md5(salt || n::text), 1, 3)"
        " || to_hex(8 + mod(n, 4)::int) || substr(md5(n::text || salt), 1, 15))::uuid $$"
    )


def plan_agents(ctx: LoadContext) -> None:
    """bench_agents: the configuration rows' ids and prices, by agent index."""
    execute(
        "CREATE TEMP TABLE bench_agents (idx int PRIMARY KEY, id int, slug text, v1 int,"
        " v2 int, price_in numeric, price_out numeric)"
    )
    for a in ctx.config["agents"]:
        execute(
            "INSERT INTO bench_agents VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [a["idx"], a["id"], a["slug"], a["v1"], a["v2"], a["price_in"], a["price_out"]],
        )


def plan_threads(ctx: LoadContext) -> None:
    """bench_threads: one row per thread (t = 1..threads, then the big thread and the huge
    run's thread) with its start, agent, message count and id."""
    T0, nt, sizes = ctx.t0_sql, ctx.sizes.threads, ctx.sizes
    big_t, huge_t = ctx.big_thread, ctx.huge_thread
    # Regular threads start evenly over the 90 days (the newest 2 h before now); about one
    # in 80 has no messages, the others 4 (two requests, two replies).
    ctx.step(
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
    execute("ALTER TABLE bench_threads ADD PRIMARY KEY (t)")
    execute(
        "ALTER TABLE bench_threads ADD COLUMN id uuid;"
        " UPDATE bench_threads SET id = pg_temp.uuid7(created_at, t, 'thread')"
    )


def plan_runs(ctx: LoadContext) -> None:
    """bench_runs: one row per run (regular, the big thread's, the huge run's thread's)
    with its thread, position in it, time, agent, status and status reason."""
    T0, nt, nr, sizes = ctx.t0_sql, ctx.sizes.threads, ctx.sizes.runs, ctx.sizes
    big_t, huge_t = ctx.big_thread, ctx.huge_thread
    # Regular run i belongs to thread 1 + i mod NT and is its k-th (k = i / NT), 10-20 min
    # after the previous one. The last run of every 10th thread waits on a ticket; the last
    # runs of the newest 1 % of threads are running or created; the rest are done, with
    # failures mixed in by a hash of i.
    ctx.step(
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


def plan_run_outcomes(ctx: LoadContext) -> None:
    """The derived columns of bench_runs: id, event count, whether its ticket was decided
    (and how, after what wait), its tool call id and when it finished."""
    T0, sizes = ctx.t0_sql, ctx.sizes
    execute(
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
            wait_s = {WAIT_SECONDS},
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
