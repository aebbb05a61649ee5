"""The budgets endpoints' bodies and answers (docs/budgets.md)."""

from __future__ import annotations

from rest_framework import serializers

from runs.operations.models.budgets import Budget, validate_time_zone

LIMIT_HELP = "Empty (null): no limit of this kind; at least one limit is needed."


class BudgetChangeSerializer(serializers.Serializer):
    """What PATCH changes (every field optional)."""

    period = serializers.ChoiceField(
        choices=Budget.Period.choices, required=False, help_text="day or month."
    )
    time_zone = serializers.CharField(
        max_length=64,
        required=False,
        validators=[validate_time_zone],
        help_text="IANA time zone where the day or month starts, e.g. UTC, Europe/Paris.",
    )
    cost_limit_usd = serializers.DecimalField(
        max_digits=14,
        decimal_places=4,
        min_value=0,
        required=False,
        allow_null=True,
        help_text=f"USD per period. {LIMIT_HELP}",
    )
    token_limit = serializers.IntegerField(
        min_value=0,
        required=False,
        allow_null=True,
        help_text=f"Input + output tokens per period. {LIMIT_HELP}",
    )
    warn_percent = serializers.IntegerField(
        min_value=1,
        max_value=100,
        required=False,
        help_text="budget.warning is notified once a period when the spend reaches it.",
    )


class BudgetCreateSerializer(BudgetChangeSerializer):
    team = serializers.SlugField(max_length=63, help_text="The team's slug.")
    agent = serializers.SlugField(
        max_length=63,
        required=False,
        allow_null=True,
        help_text="One agent of the team (its slug); empty: every agent of the team.",
    )


class BudgetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(help_text="The team's slug.")
    agent = serializers.CharField(allow_null=True, help_text="The agent's slug; null: the team.")
    period = serializers.CharField(help_text="day or month.")
    time_zone = serializers.CharField()
    period_start = serializers.DateTimeField(help_text="The current period's start.")
    period_end = serializers.DateTimeField(help_text="The current period's end (exclusive).")
    tokens = serializers.IntegerField(help_text="Tokens spent in the current period.")
    token_limit = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.DecimalField(
        max_digits=24, decimal_places=6, help_text="USD spent in the current period."
    )
    cost_limit_usd = serializers.DecimalField(max_digits=14, decimal_places=4, allow_null=True)
    warn_percent = serializers.IntegerField()
    used_percent = serializers.FloatField(help_text="The larger share of a limit spent.")
    reached = serializers.BooleanField(help_text="A limit is reached: new steps wait.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class BudgetListSerializer(serializers.Serializer):
    items = BudgetSerializer(many=True)


class BudgetQuerySerializer(serializers.Serializer):
    team = serializers.SlugField(max_length=63, required=False, help_text="One team's only.")
    agent = serializers.SlugField(
        max_length=63,
        required=False,
        help_text="The budgets that hold this agent's runs (its own and its team's).",
    )
