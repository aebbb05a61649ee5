"""Decisions on tickets: approve, edit, reject, respond — and upstream's
{toolCallId, action: resume|cancel, payload}. The first decision wins; a repeated
decision_id returns the first result; the last decision of a run resumes it."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from agents.services.mcp import is_mcp_tool, mcp_tool_schema
from agents.tools import UnknownToolError, get_tool
from common import limits
from common.audit import SYSTEM, Actor, audit_record
from common.errors import DecisionConflict, InvalidInput, NotFound
from common.jsonsafe import JsonTooDeep, check_depth, find_unstorable
from common.teams import by_operator, ensure_reason, ensure_writable
from runs import metrics
from runs.models import Decision, Run, Ticket, ToolCall
from runs.runtime import types as rt
from runs.runtime.backends import DELEGATE_PARAMETERS, DELEGATE_TOOL_PREFIX
from runs.services import stats
from runs.services.dispatch import enqueue_on_commit
from runs.services.events import events_append, run_reserving_seqs
from runs.services.locks import retry_lock_conflicts
from runs.services.run_end import TicketsClosed, tickets_closed_effects

ACTIONS = ("approve", "edit", "reject", "respond")


def decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "id": str(decision.pk),
        "ticket": str(decision.ticket_id),
        "action": decision.action,
        "actor": decision.actor_label,
        "comment": decision.comment,
        "decision_id": decision.decision_id,
        "payload": decision.payload,
        "arguments_before": decision.arguments_before,
        "arguments_after": decision.arguments_after,
        "created_at": decision.created_at.isoformat(),
    }


def normalize_decision_body(body: dict[str, Any]) -> dict[str, Any]:
    """Map upstream's {toolCallId, action: resume|cancel, payload} onto our actions."""
    if not isinstance(body, dict):
        raise InvalidInput("decision body must be a JSON object")
    action = body.get("action")
    if action in ("resume", "cancel"):
        payload = body.get("payload")
        approved = payload.get("approved") if isinstance(payload, dict) else None
        ours = "reject" if action == "cancel" or approved is False else "resume"
        return {
            "target": body.get("toolCallId") or body.get("tool_call_id"),
            "action": ours,
            "payload": payload,
            "comment": body.get("reason") or body.get("comment") or "",
            "decision_id": body.get("decision_id") or body.get("decisionId"),
        }
    if action not in ACTIONS:
        raise InvalidInput(
            f"action must be one of {', '.join(ACTIONS)} (or upstream resume/cancel), got {action!r}"
        )
    return {
        "target": body.get("ticket_id") or body.get("toolCallId") or body.get("tool_call_id"),
        "action": action,
        "arguments": body.get("arguments"),
        "payload": body.get("payload"),
        "comment": body.get("comment") or "",
        "decision_id": body.get("decision_id"),
    }


def ticket_for_target(*, run: Run, target: str | None) -> Ticket:
    """A run's ticket by upstream ticket id or tool call id; the newest wins."""
    if not target:
        raise InvalidInput("name the ticket: toolCallId (a tool call id or ticket id)")
    tickets = Ticket.objects.filter(run=run).select_related("tool_call").order_by("-created_at")
    ticket = (
        tickets.filter(ticket_id=target).first()
        or tickets.filter(tool_call__call_id=target).first()
    )
    if ticket is None:
        raise NotFound(f"tool call or suspension {target} not found in run {run.pk}")
    return ticket


def _resume_for(
    ticket: Ticket,
    action: str,
    arguments: Any,
    payload: Any,
    comment: str,
    actor_label: str,
    decision_id: str,
) -> tuple[rt.ToolCallResume, str]:
    """The ToolCallResume the runtime replays, and the resume mode it uses."""
    mode = ticket.resume_mode
    if action == "resume":  # upstream body: its meaning depends on what the ticket waits for
        action = (
            "respond" if mode == rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT else "approve"
        )
    if action == "approve":
        result = payload if payload is not None else {"approved": True}
        return rt.ToolCallResume(
            decision_id, rt.ResumeDecisionAction.RESUME, result, comment or None
        ), mode
    if action == "edit":
        result = {"approved": True, "arguments": arguments}
        return rt.ToolCallResume(
            decision_id, rt.ResumeDecisionAction.RESUME, result, comment or None
        ), mode
    if action == "respond":
        return (
            rt.ToolCallResume(
                decision_id, rt.ResumeDecisionAction.RESUME, payload, comment or None
            ),
            rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT.value,
        )
    reason = f"Rejected by {actor_label}" + (f": {comment}" if comment else "")
    result = {"approved": False, "message": reason}
    if isinstance(payload, dict):
        result = {**payload, **result}
    return rt.ToolCallResume(
        decision_id, rt.ResumeDecisionAction.CANCEL, result, comment or None
    ), mode


def _validate(ticket: Ticket, action: str, arguments: Any, payload: Any) -> None:
    waits_for_answer = ticket.resume_mode == rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT
    if action in ("approve", "edit") and waits_for_answer:
        raise InvalidInput(
            f"ticket {ticket.ticket_id} waits for an answer ({ticket.tool_name}): respond or reject it"
        )
    if action == "respond" and payload is None:
        raise InvalidInput("respond needs a payload: the answer the tool call returns")
    if action == "edit":
        if not isinstance(arguments, dict):
            raise InvalidInput("edit needs arguments: a JSON object for the tool")
        schema = ticket_tool_schema(ticket)
        if schema is not None:
            try:
                jsonschema.validate(arguments, schema)
            except jsonschema.ValidationError as exc:
                where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
                raise InvalidInput(
                    f"edited arguments do not match {ticket.tool_name}'s schema at {where}: {exc.message}",
                    {"path": where},
                ) from exc


def tool_schema(tool_name: str, spec: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The input schema of `tool_name`; an MCP tool's is the one `spec` (the run's pinned
    version) froze."""
    if tool_name.startswith(DELEGATE_TOOL_PREFIX):
        return copy.deepcopy(DELEGATE_PARAMETERS)
    if is_mcp_tool(tool_name):
        return mcp_tool_schema(tool_name, spec)
    try:
        return get_tool(tool_name).descriptor.parameters
    except UnknownToolError:
        return None


def ticket_tool_schema(ticket: Ticket) -> dict[str, Any] | None:
    """The input schema of the ticket's tool, as the run's pinned version knows it."""
    spec = None
    if is_mcp_tool(ticket.tool_name):
        spec = ticket.run.agent_version.spec
    return tool_schema(ticket.tool_name, spec)


def decision_submit(
    *,
    ticket: Ticket,
    action: str,
    arguments: Any = None,
    payload: Any = None,
    comment: str = "",
    decision_id: str | None = None,
    actor: Actor = SYSTEM,
    dispatch: bool = True,
) -> Decision:
    """Record the first decision on a ticket and, if it was the run's last open ticket,
    make the run due. Raises DecisionConflict naming who decided first and when; a
    decision_id already decided returns that first decision."""
    decision, _ = decision_submit_or_repeat(
        ticket=ticket,
        action=action,
        arguments=arguments,
        payload=payload,
        comment=comment,
        decision_id=decision_id,
        actor=actor,
        dispatch=dispatch,
    )
    return decision


def decision_submit_or_repeat(
    *,
    ticket: Ticket,
    action: str,
    arguments: Any = None,
    payload: Any = None,
    comment: str = "",
    decision_id: str | None = None,
    actor: Actor = SYSTEM,
    dispatch: bool = True,
) -> tuple[Decision, bool]:
    """decision_submit, and whether the decision is an earlier one with the same
    decision_id (a repeat, which the API answers with 200 rather than 201)."""
    _check_decision(ticket, action, arguments, payload, comment, decision_id, actor)
    try:
        decision = _decide(
            ticket, action, arguments, payload, comment, decision_id, actor, dispatch
        )
    except _Lost:  # rolled back: it wrote nothing
        return _winner_or_conflict(ticket, decision_id), True
    if isinstance(decision, _Repeat):
        return decision.decision, True
    return decision, False


class _Lost(Exception):
    """Another decision closed the ticket first."""


class _Repeat:
    def __init__(self, decision: Decision) -> None:
        self.decision = decision


@retry_lock_conflicts
@transaction.atomic
def _decide(
    ticket: Ticket,
    action: str,
    arguments: Any,
    payload: Any,
    comment: str,
    decision_id: str | None,
    actor: Actor,
    dispatch: bool,
) -> Decision | _Repeat:
    """One decision's transaction. Its run row is locked first (the lock order:
    runs.services.locks), by the update that counts the ticket closed and reserves the
    event's seq; then the ticket, whose guarded update says whether this decision wins
    (_Lost: it did not, and everything rolls back)."""
    if decision_id:
        existing = Decision.objects.filter(ticket=ticket, decision_id=decision_id).first()
        if existing is not None:
            return _Repeat(existing)
    now = timezone.now()
    run = run_reserving_seqs(
        Run.objects.filter(pk=ticket.run_id),
        1,
        {"open_tickets": Greatest(F("open_tickets") - 1, 0)},
    )
    assert run is not None  # a ticket's run is only ever deleted with it
    won = Ticket.objects.filter(pk=ticket.pk, status=Ticket.Status.PENDING).update(
        status=Ticket.Status.DECIDED, closed_at=now, claimed_by=None, claimed_until=None
    )  # a decision ends the ticket's claim (runs/decisions/services/claims.py)
    if not won:
        raise _Lost
    decision = _record_decision(
        ticket, action, arguments, payload, comment, decision_id or rt.new_id(), actor, now
    )
    _settle_run(run, ticket, decision, actor, now, dispatch=dispatch)
    metrics.ticket_decided(ticket, decision.action, now)
    return decision


def _check_decision(
    ticket: Ticket,
    action: str,
    arguments: Any,
    payload: Any,
    comment: str,
    decision_id: str | None,
    actor: Actor,
) -> None:
    """Refuse, before anything is written, a decision that could never be recorded."""
    if action not in (*ACTIONS, "resume"):
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    given = {
        "arguments": arguments,
        "payload": payload,
        "comment": comment,
        "decision_id": decision_id or "",
    }
    try:
        check_depth(given)
    except JsonTooDeep as exc:
        raise InvalidInput(f"arguments or payload {exc}") from None
    found = find_unstorable(given)
    if found is not None:
        raise InvalidInput(f"{found[1]} are not allowed (at {found[0]})")
    if by_operator(actor):  # what a person or a client wrote (a child's answer is not)
        _check_sizes(arguments, payload, comment)
    if ticket.child_run_id and actor.source != SYSTEM.source:
        raise InvalidInput(
            f"ticket {ticket.ticket_id} is answered by child run {ticket.child_run_id} when it "
            "finishes: decide the child's tickets, or cancel the run"
        )
    if by_operator(actor):  # the worker's own decisions (expiry, supersede) are not guarded
        team_id = (
            Run.objects.filter(pk=ticket.run_id).values_list("agent__team_id", flat=True).first()
        )
        ensure_writable(team_id)
        if action == "reject":
            ensure_reason(team_id, comment, "reject a ticket")
    if action != "resume":
        _validate(ticket, action, arguments, payload)


def _check_sizes(arguments: Any, payload: Any, comment: str) -> None:
    """The limits of common/limits.py: an answer or edited arguments (as JSON) and a
    comment, each refused as a whole when too long (nothing is cut)."""
    limits.check_json_chars(arguments, limits.answer_chars(), "arguments", "the edited arguments")
    limits.check_json_chars(payload, limits.answer_chars(), "payload", "the answer")
    limits.check_chars(comment, limits.comment_chars(), "comment", "the comment")


def _record_decision(
    ticket: Ticket,
    action: str,
    arguments: Any,
    payload: Any,
    comment: str,
    decision_key: str,
    actor: Actor,
    now: Any,
) -> Decision:
    """The decision row of a ticket this request just closed, and its tool call set to
    resume (or to be cancelled) with it."""
    label = actor.name
    resume, mode = _resume_for(ticket, action, arguments, payload, comment, label, decision_key)
    final_action = action
    if action == "resume":
        final_action = (
            "respond" if mode == rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT else "approve"
        )
    decision = Decision.objects.create(
        ticket=ticket,
        action=final_action,
        actor=actor.user_or_none,
        actor_label=label,
        comment=comment,
        decision_id=decision_key,
        payload=resume.result,
        arguments_before=ticket.arguments if action == "edit" else None,
        arguments_after=arguments if action == "edit" else None,
        created_at=now,
    )
    updates: dict[str, Any] = {
        "status": (
            ToolCall.Status.RESUMING
            if resume.action is rt.ResumeDecisionAction.RESUME
            else ToolCall.Status.CANCELLED
        ),
        "resume_input": resume.to_json(),
        "resume_mode": mode,
        "updated_at": now,
    }
    if action == "edit":
        updates["arguments"] = arguments
    ToolCall.objects.filter(pk=ticket.tool_call_id, status=ToolCall.Status.SUSPENDED).update(
        **updates
    )
    return decision


def _settle_run(
    run: Run, ticket: Ticket, decision: Decision, actor: Actor, now: Any, *, dispatch: bool
) -> None:
    """The decision in the run's audit trail and event log; the run is due once its last
    open ticket is decided (and rung now, with `dispatch`). `run`: locked by the caller
    (before the open-ticket check below, so two last decisions racing on one run cannot
    both miss each other), the event's seq reserved."""
    edited = decision.action == Decision.Action.EDIT
    audit_record(
        actor=actor,
        action=f"ticket.{decision.action}",
        target_type="ticket",
        target_id=ticket.pk,
        run=run,
        before={"arguments": ticket.arguments},
        after={"arguments": decision.arguments_after} if edited else {"result": decision.payload},
        comment=decision.comment,
    )
    events_append(
        run,
        [
            {
                "event_type": "ticket_decided",
                "ticket": str(ticket.pk),
                "ticket_id": ticket.ticket_id,
                "tool_call_id": ticket.tool_call.call_id,
                "tool_name": ticket.tool_name,
                "decision": decision_json(decision),
            }
        ],
        now=now,
        save_counter=False,
    )
    if run.status == Run.Status.WAITING and not (
        Ticket.objects.filter(run_id=run.pk, status=Ticket.Status.PENDING).exists()
    ):  # its last open ticket: the run is due
        Run.objects.filter(pk=run.pk).update(
            due=True, **({"dispatched_at": now} if dispatch else {})
        )
        if dispatch:
            enqueue_on_commit(run.pk)
    stats.tickets_closed([(ticket.created_at, run.agent_id)], now)
    tickets_closed_effects(TicketsClosed([ticket.pk], now))


def tickets_close_open(run: Run, now: Any) -> None:
    """Cancel the run's pending tickets (the run is ending); the caller saves the run,
    whose `open_tickets` is set to 0 here."""
    pending = Ticket.objects.filter(run=run, status=Ticket.Status.PENDING)
    closing = list(pending.values_list("pk", "created_at"))
    if closing:
        pending.update(
            status=Ticket.Status.CANCELLED, closed_at=now, claimed_by=None, claimed_until=None
        )
        stats.tickets_closed([(created, run.agent_id) for _, created in closing], now)
        tickets_closed_effects(TicketsClosed([pk for pk, _ in closing], now))
    run.open_tickets = 0


def _winner_or_conflict(ticket: Ticket, decision_id: str | None) -> Decision:
    """The decision that closed the ticket first when it has our decision_id: the same
    client's request sent twice at once, whose first copy won (the check for an earlier
    decision_id above ran before that copy committed). Otherwise DecisionConflict."""
    winner = Decision.objects.filter(ticket=ticket).first()
    if winner is not None and decision_id and winner.decision_id == decision_id:
        return winner
    if winner is None:
        current = Ticket.objects.filter(pk=ticket.pk).values_list("status", flat=True).first()
        raise DecisionConflict(
            f"ticket {ticket.ticket_id} is {current or 'gone'}: its run no longer waits for it",
            {"ticket_status": current},
        )
    raise DecisionConflict(
        f"ticket {ticket.ticket_id} was already decided by {winner.actor_label} "
        f"at {winner.created_at.isoformat(timespec='seconds')} ({winner.action})",
        {"decision": decision_json(winner)},
    )
