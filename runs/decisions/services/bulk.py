"""Decisions by policy: the pending tickets that match a filter (agent, tool, argument
pattern, waiting longer than N minutes), and one decision (approve or reject) on each of
a list of tickets, every ticket reported as decided, conflict (someone decided it first)
or error.

The preview and the decision are two steps: `tickets_matching` lists what a policy
matches now; `bulk_decide` decides exactly the tickets named (the preview's ids), each
through `decision_submit` in its own transaction, so the first decision on a ticket wins
and no ticket is ever decided twice."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from common import limits
from common.access import scope
from common.audit import SYSTEM, Actor, audit_record
from common.errors import DecisionConflict, InvalidInput, ServiceError
from common.teams import ensure_confirmed, ensure_reason, ensure_writable
from runs.models import Ticket
from runs.permissions import DECIDE, VIEW
from runs.runtime.permissions import PatternError, ToolPattern, primary_argument
from runs.selectors.base import agent_id_for_slug
from runs.selectors.waiting import MAX_MINUTES
from runs.services.run_bulk import MAX_BULK
from runs.services.tickets import decision_json, decision_submit, tool_schema

BULK_ACTIONS = {"approve": "approved", "reject": "rejected"}
SCAN_CHUNK = 500  # candidates read at a time while an argument pattern is checked

PATTERN_HELP = (
    'an argument pattern looks like title ~ "lunch*" (a path glob on a named argument), '
    'command =~ "(?i)rm" (a regex), npm * (a glob on the tool\'s primary argument), or a '
    'whole permission pattern such as write_note(title ~ "lunch*")'
)


@dataclass(frozen=True)
class TicketPolicy:
    """Which pending tickets a bulk decision covers; empty fields do not filter."""

    agent: str = ""  # agent slug
    tool: str = ""  # exact tool name
    arguments_pattern: str = ""  # permission-pattern syntax (runs.runtime.permissions)
    waiting_longer_than: int | None = None  # minutes

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "tool": self.tool,
            "arguments_pattern": self.arguments_pattern,
            "waiting_longer_than_minutes": self.waiting_longer_than,
        }

    @property
    def empty(self) -> bool:
        return not (
            self.agent
            or self.tool
            or self.arguments_pattern
            or self.waiting_longer_than is not None
        )

    def pattern(self) -> ToolPattern | None:
        """The argument pattern as the permission rules parse it. A whole pattern (with a
        tool: `write_note(title ~ "x*")`, or a `/regex/` on the tool name) is used as it
        is; anything else is the part in parentheses, for the policy's tool (any tool when
        none is given). Raises InvalidInput when it does not parse."""
        text = self.arguments_pattern.strip()
        if not text:
            return None
        if "(" in text or (text.startswith("/") and text.endswith("/")):
            try:
                return _checked(ToolPattern.parse(text), text)
            except PatternError:
                pass  # a value holding "(": try it as the argument part
        try:
            return _checked(ToolPattern.parse(f"{self.tool or '*'}({text})"), text)
        except PatternError as exc:
            raise InvalidInput(
                f"argument pattern {text!r} does not parse: {exc}; {PATTERN_HELP}",
                {"field": "arguments_pattern"},
            ) from exc

    def check(self) -> ToolPattern | None:
        """Refuse a policy that names nothing (it would cover every waiting ticket) or a
        bad age; returns the parsed argument pattern."""
        if self.empty:
            raise InvalidInput(
                "give at least one of agent, tool, argument pattern or waiting longer than"
            )
        minutes = self.waiting_longer_than
        if minutes is not None and not 0 <= minutes <= MAX_MINUTES:
            raise InvalidInput(
                f"waiting longer than must be 0 to {MAX_MINUTES} minutes",
                {"field": "waiting_longer_than"},
            )
        return self.pattern()


def _checked(pattern: ToolPattern, text: str) -> ToolPattern:
    """`pattern`, unless its glob on the primary argument is malformed. A permission rule
    would take `((((` as a literal glob that matches (almost) nothing; typed into a policy
    it is a mistake, and a preview saying "no match" would hide it."""
    if pattern.arg_glob is not None and pattern.arg_field is None:
        problem = glob_problem(pattern.arg_glob)
        if problem is not None:
            raise PatternError(
                f"{problem} in {pattern.arg_glob!r} (a literal one is written [(], [)] or [[])"
            )
    return pattern


def glob_problem(glob: str) -> str | None:
    """What is unbalanced in `glob` (parentheses, fnmatch's [sets]), or None."""
    depth, index = 0, 0
    while index < len(glob):
        char = glob[index]
        if char == "[":
            end = index + 1
            if glob[end : end + 1] == "!":
                end += 1
            if glob[end : end + 1] == "]":
                end += 1  # a leading ] is part of the set
            close = glob.find("]", end)
            if close == -1:
                return "a [ that no ] closes"
            index = close + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return "a ) that closes nothing"
        index += 1
    return "a ( that is never closed" if depth > 0 else None


def _candidates(
    policy: TicketPolicy, pattern: ToolPattern | None, now: dt.datetime
) -> QuerySet[Ticket]:
    """The SQL part of the policy, oldest first, over the inbox's partial indexes: by
    agent (ticket_inbox_agent_idx), by tool (ticket_inbox_tool_idx), age as a bound on
    their created_at."""
    tickets = Ticket.objects.for_operators().select_related("run__agent", "tool_call")
    if policy.agent:
        tickets = tickets.filter(agent_id=agent_id_for_slug(policy.agent))
    tool = policy.tool or _exact_tool(pattern)
    if tool:
        tickets = tickets.filter(tool_name=tool)
    if policy.waiting_longer_than is not None:
        cutoff = now - dt.timedelta(minutes=policy.waiting_longer_than)
        tickets = tickets.filter(created_at__lt=cutoff)
    return tickets.order_by("created_at", "pk")


def _exact_tool(pattern: ToolPattern | None) -> str:
    """The one tool a pattern names (`write_note(...)`), so SQL can filter by it."""
    glob = pattern.tool_glob if pattern is not None and pattern.tool_regex is None else None
    if glob and not any(char in glob for char in "*?["):
        return glob
    return ""


def tickets_matching(
    policy: TicketPolicy,
    limit: int = MAX_BULK,
    *,
    now: dt.datetime | None = None,
    user: Any = None,
) -> list[Ticket]:
    """The pending operator tickets the policy matches, oldest first, at most `limit`;
    with `user`, only those of the teams where they may decide. Agent, tool and age
    filter in SQL; the argument pattern is checked here, on the candidates in turn, as a
    permission rule checks a call (a list argument matches when every element does, as
    for an allow rule)."""
    pattern = policy.check()
    tickets = _candidates(policy, pattern, now or timezone.now())
    if user is not None:
        tickets = scope(tickets, user, "run__agent__team_id", DECIDE)
    if pattern is None:
        return list(tickets[:limit])
    primaries: dict[str, str | None] = {}
    found: list[Ticket] = []
    for ticket in tickets.iterator(chunk_size=SCAN_CHUNK):
        if ticket.tool_name not in primaries:
            primaries[ticket.tool_name] = primary_argument(tool_schema(ticket.tool_name))
        primary = primaries[ticket.tool_name]
        if pattern.matches(ticket.tool_name, ticket.arguments, primary, every=True):
            found.append(ticket)
            if len(found) >= limit:
                break
    return found


# --- deciding -------------------------------------------------------------------------------------

DECIDED, CONFLICT, ERROR = "decided", "conflict", "error"


@dataclass
class BulkItem:
    """What became of one ticket. `decision` is ours when decided, the one that came
    first on a conflict (decision_json)."""

    ticket_id: str
    outcome: str
    ticket: Ticket | None = None
    decision: dict[str, Any] | None = None
    message: str = ""

    @property
    def decided_by(self) -> str:
        return str((self.decision or {}).get("actor") or "")


@dataclass
class BulkOutcome:
    action: str
    items: list[BulkItem] = field(default_factory=list)

    def _with(self, outcome: str) -> list[BulkItem]:
        return [item for item in self.items if item.outcome == outcome]

    @property
    def decided(self) -> list[BulkItem]:
        return self._with(DECIDED)

    @property
    def conflicts(self) -> list[BulkItem]:
        return self._with(CONFLICT)

    @property
    def errors(self) -> list[BulkItem]:
        return self._with(ERROR)

    @property
    def verb(self) -> str:
        return BULK_ACTIONS[self.action]

    @property
    def level(self) -> str:
        if not (self.conflicts or self.errors):
            return "success"
        return "warning" if self.decided else "error"

    @property
    def summary(self) -> str:
        text = f"{len(self.decided)} {self.verb}"
        if self.conflicts:
            text += f"; {len(self.conflicts)} already decided by someone else: " + "; ".join(
                _label(item) + f" by {item.decided_by}" for item in self.conflicts
            )
        if self.errors:
            text += f"; {len(self.errors)} failed: " + "; ".join(
                f"{_label(item)}: {item.message}" for item in self.errors
            )
        return text + "."


def _label(item: BulkItem) -> str:
    name = item.ticket.tool_name if item.ticket else "ticket"
    return f"{name} {item.ticket_id[-8:]}"


def _conflict(ticket: Ticket, winner: dict[str, Any]) -> BulkItem:
    when = str(winner.get("created_at") or "")[:19].replace("T", " ")
    message = f"already decided by {winner.get('actor')} at {when} ({winner.get('action')})"
    return BulkItem(str(ticket.pk), CONFLICT, ticket, winner, message)


def _decide_one(
    ident: uuid.UUID | str, ticket: Ticket | None, action: str, comment: str, actor: Actor
) -> BulkItem:
    if ticket is None:
        return BulkItem(str(ident), ERROR, message="no such ticket")
    if ticket.status != Ticket.Status.PENDING:  # closed before this request: no attempt
        winner = getattr(ticket, "decision", None) if ticket.status == "decided" else None
        if winner is not None:
            return _conflict(ticket, decision_json(winner))
        return BulkItem(str(ident), ERROR, ticket, message=f"ticket is {ticket.status}")
    try:
        with transaction.atomic():
            decision = decision_submit(ticket=ticket, action=action, comment=comment, actor=actor)
    except DecisionConflict as exc:  # decided meanwhile: the first decision stands
        winner = exc.details.get("decision")
        if isinstance(winner, dict):
            return _conflict(ticket, winner)
        return BulkItem(str(ident), ERROR, ticket, message=exc.message)
    except ServiceError as exc:
        return BulkItem(str(ident), ERROR, ticket, message=exc.message)
    return BulkItem(str(ident), DECIDED, ticket, decision_json(decision))


def _unique_ids(ticket_ids: Iterable[Any]) -> list[uuid.UUID | str]:
    ids: list[uuid.UUID | str] = []
    for raw in ticket_ids:
        try:
            ident: uuid.UUID | str = uuid.UUID(str(raw).strip())
        except ValueError:
            ident = str(raw)[:64]
        if ident not in ids:
            ids.append(ident)
    return ids


def bulk_guard(tickets: Iterable[Ticket], action: str, comment: str, confirmed: bool) -> None:
    """The teams' guards on a bulk decision, before anything changes: none of the teams
    is frozen (Frozen), a reject has a reason where a team requires one (InvalidInput),
    and more tickets than the lowest threshold of the teams were confirmed
    (ConfirmationRequired). `tickets` need `run__agent` loaded. A comment longer than
    the limit is refused first (common/limits.py)."""
    limits.check_chars(comment, limits.comment_chars(), "comment", "the comment")
    items = list(tickets)
    team_ids = sorted({t.run.agent.team_id for t in items if t.run.agent.team_id is not None})
    for team_id in team_ids:
        ensure_writable(team_id)
        if action == "reject":
            ensure_reason(team_id, comment, "reject a ticket")
    ensure_confirmed(team_ids, len(items), confirmed)


def bulk_decide(
    ticket_ids: Iterable[Any],
    action: str,
    comment: str = "",
    actor: Actor = SYSTEM,
    *,
    policy: TicketPolicy | None = None,
    confirm: bool = False,
) -> BulkOutcome:
    """Decide each named ticket (in the order given) with `action`, each in its own
    transaction through `decision_submit`: it is decided, or reported as a conflict
    (decided first by someone else: who and when) or an error; the others go through.
    Each decision is audited as a single one is, plus one `tickets.bulk_decide` row with
    the policy (if one chose the tickets) and the counts."""
    if action not in BULK_ACTIONS:
        raise InvalidInput(f"action must be approve or reject, got {action!r}")
    ids = _unique_ids(ticket_ids)
    if not ids:
        raise InvalidInput("name at least one ticket")
    if len(ids) > MAX_BULK:
        raise InvalidInput(f"decide at most {MAX_BULK} tickets at once")
    uuids = [ident for ident in ids if isinstance(ident, uuid.UUID)]
    user = actor.user_or_none
    found = {  # another team's tickets are as unknown ones
        ticket.pk: ticket
        for ticket in Ticket.objects.filter(pk__in=uuids).select_related(
            "run__agent", "tool_call", "decision"
        )
        if user is None or user.has_perm(VIEW, ticket.run)
    }
    bulk_guard(found.values(), action, comment, confirm)
    outcome = BulkOutcome(action)
    for ident in ids:
        ticket = found.get(ident) if isinstance(ident, uuid.UUID) else None
        if ticket is not None and user is not None and not user.has_perm(DECIDE, ticket.run):
            item = BulkItem(str(ident), ERROR, ticket, message="your role in its team may not")
        else:
            item = _decide_one(ident, ticket, action, comment, actor)
        outcome.items.append(item)
    _audit(outcome, policy, comment, actor)
    return outcome


def _audit(outcome: BulkOutcome, policy: TicketPolicy | None, comment: str, actor: Actor) -> None:
    ids = {
        kind: [item.ticket_id for item in outcome._with(kind)]
        for kind in (DECIDED, CONFLICT, ERROR)
    }
    audit_record(
        actor=actor,
        action="tickets.bulk_decide",
        target_type="tickets",
        target_id=f"{len(outcome.items)} tickets",
        after={
            "action": outcome.action,
            "policy": policy.to_json() if policy is not None else None,
            "requested": len(outcome.items),
            "decided": len(ids[DECIDED]),
            "conflicts": len(ids[CONFLICT]),
            "errors": len(ids[ERROR]),
            "tickets": ids,
        },
        comment=comment,
    )
