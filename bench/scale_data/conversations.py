"""The conversation tables of the scale load, each derived from the plan: threads, runs,
their messages and their events.

Django's models are imported inside the functions: they need django.setup(), which runs
after the environment is set (see bench/common.py)."""

from __future__ import annotations

from bench.scale_data.context import LoadContext
from bench.scale_data.sql import has_column, sql_array
from bench.scale_data.text import NOUNS, TAILS, message_text_sql

# A waiting run's `waiting` column: its one pending permission ticket.
WAITING = (
    "jsonb_build_object('reason', 'tool_permission', 'ticket_ids',"
    " jsonb_build_array('perm_' || p.call_id), 'tickets', jsonb_build_array("
    "jsonb_build_object('ticket_id', 'perm_' || p.call_id, 'tool_call_id', p.call_id,"
    " 'tool_name', CASE WHEN mod(p.w, 3) = 0 THEN 'send_email' ELSE 'write_note' END,"
    " 'arguments', jsonb_build_object('title', 'the weekly summary', 'body', 'draft'),"
    " 'resume_mode', 'replay_tool_call', 'reason', 'tool:PermissionConfirm')),"
    " 'message', 'suspended')"
)
# A finished run's termination reason, from its planned status reason.
TERMINATION = (
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


def insert_threads(ctx: LoadContext) -> None:
    from runs.models import Thread

    title = (
        f"initcap(substr(({sql_array(NOUNS)})[1 + mod(pg_temp.h('n' || th.t), 15)], 5))"
        f" || ' ' || ({sql_array(TAILS)})[1 + mod(pg_temp.h('tl' || th.t), 10)]"
    )
    ctx.insert(
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


def run_columns(ctx: LoadContext) -> dict[str, str]:
    """runs_run's columns, as SQL over the plan (p), its thread (th) and agent (a)."""
    from runs.models import Run

    T0, sizes = ctx.t0_sql, ctx.sizes
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
        "termination_reason": TERMINATION,
        "final_output": "CASE WHEN p.reason = 'natural' THEN 'Done: the note is saved.' END",
        "error_payload": "CASE WHEN p.reason IN ('error', 'timeout') THEN"
        " jsonb_build_object('message', CASE p.reason WHEN 'timeout' THEN 'timeout'"
        " ELSE 'model call failed: 503 upstream unavailable' END) END",
        "waiting": f"CASE WHEN p.status = 'waiting' THEN {WAITING} END",
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
    return run_exprs


def insert_runs(ctx: LoadContext) -> None:
    from runs.models import Run

    ctx.insert(
        "runs",
        Run,
        run_columns(ctx),
        """FROM bench_runs p JOIN bench_threads th ON th.t = p.t
        JOIN bench_agents a ON a.idx = p.agent_idx ORDER BY p.created_at""",
    )


def insert_messages(ctx: LoadContext) -> None:
    """4 messages (two requests, two replies) on 79 of every 80 regular threads and per
    run on the big thread; the rare word in 5 of them."""
    from runs.models import Message

    nt = ctx.sizes.threads
    rare_threads = ", ".join(str(1 + (nt * j) // 5) for j in range(5))
    text = message_text_sql("m.h", "m.seq", f"m.t IN ({rare_threads}) AND m.seq = 1")
    ctx.insert(
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


def event_payload() -> str:
    """The SQL of an event's payload by its type (`e.event_type`), for run `p` on thread
    `th` of agent `a`: the run's identity on run_start and run_finish, a fixed tool step's
    data on the others."""
    identity = (
        "jsonb_build_object('thread_id', th.id::text, 'run_id', p.id::text, 'identity',"
        " jsonb_build_object('thread_id', th.id::text, 'run_id', p.id::text, 'agent_id', a.slug,"
        " 'origin', 'user'))"
    )
    payload = (
        "CASE e.event_type"
        f" WHEN 'run_start' THEN {identity}"
        f" WHEN 'run_finish' THEN {identity} || jsonb_build_object('result',"
        " jsonb_build_object('response', 'Done: the note is saved.', 'status', p.status,"
        " 'status_reason', NULLIF(p.reason, '')), 'termination', COALESCE(" + TERMINATION + ","
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
    return payload


def insert_events(ctx: LoadContext) -> None:
    """Gap-free seqs 1..n_events per run: run_start, a step's events, run_finish."""
    from runs.models import RunEvent

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
    ctx.insert(
        "run events",
        RunEvent,
        {
            "run_id": "p.id",
            "seq": "s.seq",
            "event_type": "e.event_type",
            "payload": f"jsonb_build_object('event_type', e.event_type) || {event_payload()}",
            "created_at": "p.created_at + s.seq * interval '50 milliseconds'",
        },
        f"""FROM bench_runs p JOIN bench_threads th ON th.t = p.t
        JOIN bench_agents a ON a.idx = p.agent_idx
        CROSS JOIN LATERAL generate_series(1, p.n_events) s(seq)
        CROSS JOIN LATERAL (SELECT {event_type} AS event_type) e
        ORDER BY p.created_at, s.seq""",
    )
