"""Setting budgets (docs/budgets.md): create, change and delete a team's or an agent's
budget, each audited with what it was and what it became. A change that raises or
removes a limit lets the runs it held go at once (in the same transaction: due again,
their doorbell rung on commit); the sweep does the same when a new period starts."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent
from common.audit import Actor, audit_record
from common.errors import IllegalTransition as Conflict
from common.errors import InvalidInput
from common.models import Team
from common.teams import ensure_may, ensure_writable
from runs.operations.models.budgets import Budget
from runs.operations.services.budgets import budgets_release, cached

ADD, CHANGE, DELETE = (
    "operations.add_budget",
    "operations.change_budget",
    "operations.delete_budget",
)
CHANGEABLE = ("period", "time_zone", "cost_limit_usd", "token_limit", "warn_percent")


def budget_snapshot(budget: Budget) -> dict[str, Any]:
    return {
        "team": budget.team_id,
        "agent": budget.agent_id,
        "period": budget.period,
        "time_zone": budget.time_zone,
        "cost_limit_usd": budget.cost_limit_usd,
        "token_limit": budget.token_limit,
        "warn_percent": budget.warn_percent,
    }


def _checked(budget: Budget) -> None:
    """The row's own validation, as a 400 naming the field; one limit at least."""
    if budget.cost_limit_usd is not None:
        try:
            budget.cost_limit_usd = Decimal(str(budget.cost_limit_usd))
        except InvalidOperation as exc:
            raise InvalidInput("cost_limit_usd: not a number", {"field": "cost_limit_usd"}) from exc
    try:
        budget.full_clean(exclude=["team", "agent"], validate_unique=False)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise InvalidInput(f"{field}: {' '.join(messages)}", {"field": field}) from exc


def budget_changed(budget: Budget) -> int:
    """After a change of `budget` (in its transaction): forget the cached budgets and let
    go the runs of its team that nothing holds any more. Returns how many."""
    cached.forget()
    return budgets_release(timezone.now(), team_id=budget.team_id)


def _may(actor: Actor, perm: str, team: Team, what: str) -> None:
    if actor.user is not None:
        ensure_may(actor.user, perm, team, what)
    ensure_writable(team)  # a frozen team's budgets wait for the freeze to be lifted


@transaction.atomic
def budget_create(*, actor: Actor, team: Team, agent: Agent | None = None, **fields: Any) -> Budget:
    """A new budget of `team` (or of its `agent`): period (day or month), time_zone,
    cost_limit_usd and/or token_limit, warn_percent."""
    unknown = set(fields) - set(CHANGEABLE)
    if unknown:
        raise InvalidInput(f"unknown budget field(s): {', '.join(sorted(unknown))}")
    _may(actor, ADD, team, "set this team's budgets")
    budget = Budget(team=team, agent=agent, **fields)
    _checked(budget)
    try:
        with transaction.atomic():
            budget.save()
    except IntegrityError as exc:
        whose = f'agent "{agent.slug}"' if agent else f'team "{team.slug}"'
        raise Conflict(f"{whose} has a budget per {budget.period} already") from exc
    audit_record(
        actor=actor,
        action="budget.create",
        target_type="budget",
        target_id=budget.pk,
        team=team,
        after=budget_snapshot(budget),
    )
    return budget


@transaction.atomic
def budget_update(*, actor: Actor, budget: Budget, **changes: Any) -> Budget:
    """Change a budget's limits (or period, time zone, warning level); the runs it held
    and no longer holds are let go."""
    unknown = set(changes) - set(CHANGEABLE)
    if unknown:
        raise InvalidInput(f"unknown budget field(s): {', '.join(sorted(unknown))}")
    budget = (
        Budget.objects.select_for_update(of=("self",))
        .select_related("team", "agent")
        .get(pk=budget.pk)
    )
    _may(actor, CHANGE, budget.team, "change this team's budgets")
    before = budget_snapshot(budget)
    for name, value in changes.items():
        setattr(budget, name, value)
    _checked(budget)
    budget.updated_at = timezone.now()
    try:
        with transaction.atomic():
            budget.save()
    except IntegrityError as exc:
        raise Conflict(f"there is a budget per {budget.period} already for it") from exc
    audit_record(
        actor=actor,
        action="budget.update",
        target_type="budget",
        target_id=budget.pk,
        team=budget.team_id,
        before=before,
        after=budget_snapshot(budget),
    )
    budget_changed(budget)
    return budget


@transaction.atomic
def budget_delete(*, actor: Actor, budget: Budget) -> None:
    """Remove a budget; the runs it alone held are let go."""
    budget = Budget.objects.select_for_update(of=("self",)).select_related("team").get(pk=budget.pk)
    _may(actor, DELETE, budget.team, "delete this team's budgets")
    audit_record(
        actor=actor,
        action="budget.delete",
        target_type="budget",
        target_id=budget.pk,
        team=budget.team_id,
        before=budget_snapshot(budget),
    )
    budget.delete()
    budget_changed(budget)
