"""Budgets (docs/budgets.md): what a team, or one of its agents, may spend per day or per
month in cost and tokens. At the limit a run's next step waits (status reason `budget`)
instead of calling the model; crossing the warning level notifies once per period."""

from __future__ import annotations

import zoneinfo

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone


def validate_time_zone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f'unknown time zone "{value}" (an IANA name, e.g. UTC)') from exc


class Budget(models.Model):
    class Period(models.TextChoices):
        DAY = "day", "per day"
        MONTH = "month", "per month"

    team = models.ForeignKey(
        "common.Team",
        on_delete=models.CASCADE,
        related_name="budgets",
        help_text="Whose runs it counts (all the team's agents, or `agent`'s only).",
    )
    agent = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budgets",
        help_text="One agent of the team; empty: every agent of the team.",
    )
    period = models.CharField(
        max_length=5, choices=Period.choices, default=Period.DAY, help_text="Day or month."
    )
    time_zone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_time_zone],
        help_text="Where the day or month starts (IANA name, e.g. Europe/Paris).",
    )
    cost_limit_usd = models.DecimalField(
        max_digits=14,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="USD per period; empty: no cost limit.",
    )
    token_limit = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Input + output tokens per period; empty: no limit."
    )
    warn_percent = models.PositiveSmallIntegerField(
        default=80,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Notify (budget.warning) once a period when the spend reaches this share.",
    )
    warned_period = models.CharField(
        max_length=20, blank=True, editable=False, help_text="The period last warned about."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="Created at.")
    updated_at = models.DateTimeField(default=timezone.now, help_text="Last changed at.")

    class Meta:
        app_label = "operations"
        ordering = ["team", "agent", "period"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "period"],
                condition=Q(agent__isnull=True),
                name="budget_unique_team_period",
            ),
            models.UniqueConstraint(fields=["agent", "period"], name="budget_unique_agent_period"),
        ]

    def __str__(self) -> str:
        whose = f"agent {self.agent.slug}" if self.agent else f"team {self.team.slug}"
        return f"{whose} per {self.period}"

    def clean(self) -> None:
        agent = self.agent if self.agent_id is not None else None
        if agent is not None and self.team_id is not None and agent.team_id != self.team_id:
            raise ValidationError({"agent": "the agent is not the team's"})
        if self.cost_limit_usd is None and self.token_limit is None:
            raise ValidationError({"token_limit": "give a cost limit, a token limit or both"})
