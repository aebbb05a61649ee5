"""The approval tables of the scale load, derived from the plan: the suspended or decided
tool calls, their tickets (pending on the waiting runs, decided on the last 7 days' done
runs), the decisions, and the audit log (every decision and cancel, run starts for the
rest).

Django's models are imported inside the functions: they need django.setup(), which runs
after the environment is set (see bench/common.py)."""

from __future__ import annotations

from bench.scale_data.context import LoadContext
from bench.scale_data.dataset import OPERATORS
from bench.scale_data.sql import has_column, scalar, sql_array

TOOL_NAME = "CASE WHEN mod(p.w, 3) = 0 THEN 'send_email' ELSE 'write_note' END"
ARGUMENTS = "jsonb_build_object('title', 'the weekly summary', 'body', 'draft')"
TICKET_AT = "p.created_at + interval '2 seconds'"
# which of the four operators decided (1-based, into the arrays of operator_arrays)
OPERATOR = f"(1 + mod(p.w / 31, {len(OPERATORS)}))::int"


def closed_at_sql(ctx: LoadContext) -> str:
    """When a decided ticket closed: its wait after it opened, before the load's "now"."""
    T0 = ctx.t0_sql
    return f"LEAST({TICKET_AT} + p.wait_s * interval '1 second', {T0} - interval '2 seconds')"


def operator_arrays(ctx: LoadContext) -> tuple[str, str]:
    """SQL arrays of the operators' user ids and of their names."""
    operators = sql_array([str(pk) for pk in ctx.config["operators"]]) + "::int[]"
    return operators, sql_array(list(OPERATORS))


def insert_tool_calls(ctx: LoadContext) -> None:
    from runs.models import ToolCall

    closed_at = closed_at_sql(ctx)
    ctx.insert(
        "tool calls",
        ToolCall,
        {
            "run_id": "p.id",
            "call_id": "p.call_id",
            "tool_name": TOOL_NAME,
            "arguments": ARGUMENTS,
            "status": "CASE WHEN p.status = 'waiting' THEN 'suspended'"
            " WHEN p.action = 'reject' THEN 'cancelled' ELSE 'succeeded' END",
            "resume_mode": "'replay_tool_call'",
            "suspension_id": "'perm_' || p.call_id",
            "suspension_reason": "'tool:PermissionConfirm'",
            "step_index": "0",
            "created_at": TICKET_AT,
            "updated_at": f"CASE WHEN p.status = 'waiting' THEN {TICKET_AT} ELSE {closed_at} END",
        },
        "FROM bench_runs p WHERE p.status = 'waiting' OR p.decided ORDER BY p.created_at",
    )


def insert_tickets(ctx: LoadContext) -> None:
    from runs.models import Ticket

    closed_at = closed_at_sql(ctx)
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
        "created_at": TICKET_AT,
        "closed_at": f"CASE WHEN p.status = 'waiting' THEN NULL ELSE {closed_at} END",
    }
    if has_column(Ticket, "agent_id"):
        ticket_exprs["agent_id"] = "a.id"
    ctx.insert(
        "tickets",
        Ticket,
        ticket_exprs,
        """FROM bench_runs p JOIN runs_toolcall tc ON tc.run_id = p.id AND tc.call_id = p.call_id
        JOIN bench_agents a ON a.idx = p.agent_idx ORDER BY p.created_at""",
    )


def insert_decisions(ctx: LoadContext) -> None:
    from runs.models import Decision

    closed_at = closed_at_sql(ctx)
    operators, operator_names = operator_arrays(ctx)
    ctx.insert(
        "decisions",
        Decision,
        {
            "id": f"pg_temp.uuid7({closed_at}, p.i, 'decision')",
            "ticket_id": "pg_temp.uuid7(p.created_at, p.i, 'ticket')",
            "action": "p.action",
            "actor_id": f"({operators})[{OPERATOR}]",
            "actor_label": f"({operator_names})[{OPERATOR}]",
            "comment": "CASE WHEN p.action = 'reject' THEN 'not this week' ELSE '' END",
            "decision_id": "'dec_' || substr(md5('d' || p.i), 1, 20)",
            "arguments_before": f"CASE WHEN p.action = 'edit' THEN {ARGUMENTS} END",
            "arguments_after": "CASE WHEN p.action = 'edit' THEN jsonb_build_object('title',"
            " 'the weekly summary (edited)', 'body', 'draft') END",
            "created_at": closed_at,
        },
        "FROM bench_runs p WHERE p.decided ORDER BY p.created_at",
    )


def insert_audit(ctx: LoadContext) -> None:
    from common.models import AuditEntry

    closed_at = closed_at_sql(ctx)
    operators, operator_names = operator_arrays(ctx)
    sizes = ctx.sizes
    decided = scalar("SELECT count(*) FROM bench_runs WHERE decided")
    cancelled = scalar("SELECT count(*) FROM bench_runs WHERE reason = 'cancelled'")
    starts = max(0, sizes.audit - decided - cancelled)
    ctx.insert(
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
            SELECT ({operators})[{OPERATOR}] AS actor_id, ({operator_names})[{OPERATOR}] AS actor_label,
                   'ticket.' || p.action AS action, 'ticket' AS target_type,
                   pg_temp.uuid7(p.created_at, p.i, 'ticket')::text AS target_id, p.id AS run_id,
                   CASE WHEN p.action = 'edit' THEN {ARGUMENTS} END AS before,
                   jsonb_build_object('action', p.action, 'tool', {TOOL_NAME}) AS after,
                   CASE WHEN p.action = 'reject' THEN 'not this week' ELSE '' END AS comment,
                   'ui' AS source, {closed_at} AS created_at
            FROM bench_runs p WHERE p.decided
            UNION ALL
            SELECT ({operators})[{OPERATOR}], ({operator_names})[{OPERATOR}], 'run.cancel', 'run',
                   p.id::text, p.id, jsonb_build_object('status', 'running'),
                   jsonb_build_object('status', 'done', 'status_reason', 'cancelled'), '',
                   'ui', p.finished_at - interval '1 second'
            FROM bench_runs p WHERE p.reason = 'cancelled'
            UNION ALL
            SELECT CASE WHEN mod(p.w / 37, 3) = 0 THEN NULL ELSE ({operators})[{OPERATOR}] END,
                   CASE WHEN mod(p.w / 37, 3) = 0 THEN 'ci-bot (token ci)'
                        ELSE ({operator_names})[{OPERATOR}] END,
                   'run.start', 'run', p.id::text, p.id, NULL,
                   jsonb_build_object('agent', a.slug, 'thread', th.id::text, 'messages',
                                      jsonb_build_array('please update the weekly summary')),
                   '', CASE WHEN mod(p.w / 37, 3) = 0 THEN 'api' ELSE 'ui' END, p.created_at
            FROM (SELECT * FROM bench_runs ORDER BY md5(i::text) LIMIT {starts}) p
            JOIN bench_threads th ON th.t = p.t JOIN bench_agents a ON a.idx = p.agent_idx
        ) x ORDER BY x.created_at""",
    )
