"""Admin for budgets (docs/budgets.md): a team's admins set its budgets and its agents';
every change is audited (budget.create / update / delete, with what it was and became)
and a raised or removed limit lets the runs it held go at once."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction

from agents.admin.base import TeamAdmin, writable_teams
from agents.models import Agent
from runs.operations.models.budgets import Budget
from runs.operations.selectors.budgets import budget_rows
from runs.operations.services.budget_changes import budget_changed


@admin.register(Budget)
class BudgetAdmin(TeamAdmin):
    list_display = ("__str__", "team", "agent", "period", "cost_limit_usd", "token_limit", "spend")
    list_filter = ("period",)
    list_select_related = ("team", "agent")
    fields = (
        "team",
        "agent",
        "period",
        "time_zone",
        "cost_limit_usd",
        "token_limit",
        "warn_percent",
    )

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if db_field.name == "agent":  # the agents of the teams the user configures
            teams = writable_teams(request.user, self.perm_name("change"))
            kwargs["queryset"] = Agent.objects.filter(team__in=teams)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def team_of(self, obj: Any) -> int | None:
        return obj.team_id if obj is not None else None

    @admin.display(description="spent this period")
    def spend(self, obj: Budget) -> str:
        row = budget_rows([obj])[0]
        return f"{row['tokens']} tokens, ${row['cost_usd']:.4f} ({row['used_percent']} %)"

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            budget_changed(obj)

    def delete_model(self, request: Any, obj: Any) -> None:
        with transaction.atomic():
            super().delete_model(request, obj)
            budget_changed(obj)
