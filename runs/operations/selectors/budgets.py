"""Budgets as people read them: each with its spend in the current period against its
limits (one query for the spends of every budget listed), for the dashboard's panel, the
run page's card and the API (docs/budgets.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from common.access import scope
from runs.operations.models.budgets import Budget
from runs.operations.services.budgets import Rule, rules_for, spend_json, spends

VIEW_BUDGET = "operations.view_budget"


def budgets_visible(user: Any) -> QuerySet[Budget]:
    """The budgets of the teams where `user` may see budgets."""
    budgets = Budget.objects.select_related("team", "agent").order_by("team__slug", "pk")
    return scope(budgets, user, "team_id", VIEW_BUDGET)


def budget_rows(budgets: Any, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Each budget with its spend (spend_json) and whose it is, in their order."""
    budgets = list(budgets)
    found = {s.rule.id: s for s in spends([Rule.of(b) for b in budgets], now or timezone.now())}
    rows = []
    for budget in budgets:
        row = spend_json(found[budget.pk])
        row.update(
            team=budget.team.slug,
            agent=budget.agent.slug if budget.agent_id else None,
            whose=f"agent {budget.agent.slug}" if budget.agent_id else f"team {budget.team.slug}",
            created_at=budget.created_at,
            updated_at=budget.updated_at,
        )
        rows.append(row)
    return rows


def budgets_of_run(run: Any) -> list[dict[str, Any]]:
    """The budgets that hold `run`'s steps, with their spend; no query when none does."""
    agent = run.agent
    ids = [rule.id for rule in rules_for(agent.team_id, agent.pk)]
    if not ids:
        return []
    return budget_rows(Budget.objects.select_related("team", "agent").filter(pk__in=ids))
