"""The stats endpoint's query and response (cost, tokens and latency at a glance)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework import serializers

from runs.operations.selectors.usage import DEFAULT_WINDOW, MAX_SPAN, WINDOWS
from runs.services.stats import hour_of


class StatsQuerySerializer(serializers.Serializer):
    window = serializers.ChoiceField(
        choices=list(WINDOWS),
        default=DEFAULT_WINDOW,
        help_text="The last 24 hours, 7 days or 30 days (whole hours, the current one "
        "included). Ignored when `from` and `to` are given.",
    )
    agent = serializers.SlugField(
        required=False, max_length=63, help_text="Only this agent's runs and tool calls."
    )

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        # `from` is a Python keyword: declared here
        fields["from"] = serializers.DateTimeField(
            required=False, help_text="Custom window start (truncated to its hour)."
        )
        fields["to"] = serializers.DateTimeField(
            required=False, help_text="Custom window end, exclusive (truncated to its hour)."
        )
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("from"), attrs.get("to")
        if (start is None) != (end is None):
            raise serializers.ValidationError("give both `from` and `to`, or neither")
        if start is not None and end is not None:
            start, end = hour_of(start), hour_of(end)
            if end <= start:
                raise serializers.ValidationError("`to` must be at least an hour after `from`")
            if end - start > MAX_SPAN:
                raise serializers.ValidationError("a window spans at most 366 days")
            attrs["from"], attrs["to"] = start, end
        return attrs


def cost_field(help_text: str) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=24, decimal_places=9, help_text=help_text)


class StatsWindowSerializer(serializers.Serializer):
    start = serializers.DateTimeField(help_text="First hour counted (UTC).")
    end = serializers.DateTimeField(help_text="End of the last hour counted, exclusive.")
    days = serializers.IntegerField(help_text="UTC days the window touches (cost_per_day).")


class DayCostSerializer(serializers.Serializer):
    day = serializers.DateField(help_text="UTC day.")
    cost_usd = cost_field("Cost of the runs that finished that day (USD).")


class RunFiguresSerializer(serializers.Serializer):
    runs = serializers.IntegerField(help_text="Runs that finished in the window.")
    succeeded = serializers.IntegerField(help_text="Of them, ended naturally (completed).")
    success_rate = serializers.FloatField(allow_null=True, help_text="succeeded / runs.")
    p50_seconds = serializers.FloatField(
        allow_null=True,
        help_text="Median duration (first start to finish), from log-spaced buckets: "
        "within about 9 % of the exact value.",
    )
    p95_seconds = serializers.FloatField(
        allow_null=True, help_text="95th percentile duration, as p50_seconds."
    )
    input_tokens = serializers.IntegerField(help_text="Prompt tokens of those runs.")
    output_tokens = serializers.IntegerField(help_text="Completion tokens of those runs.")
    cost_usd = cost_field("Their cost at the prices each run kept (unpriced runs: 0).")
    cost_per_day = DayCostSerializer(many=True, help_text="Every UTC day of the window.")


class AgentFiguresSerializer(RunFiguresSerializer):
    agent = serializers.CharField(help_text="Agent id (slug).")


class ModelFiguresSerializer(RunFiguresSerializer):
    model = serializers.CharField(help_text="Model id (slug); empty: runs without a model.")


class ToolFiguresSerializer(serializers.Serializer):
    tool = serializers.CharField(help_text="Tool name.")
    calls = serializers.IntegerField(help_text="Calls that finished (succeeded or failed).")
    failures = serializers.IntegerField(help_text="Of them, failed.")
    failure_rate = serializers.FloatField(allow_null=True, help_text="failures / calls.")
    p95_seconds = serializers.FloatField(
        allow_null=True, help_text="95th percentile latency of the timed calls (buckets)."
    )


class StatsSerializer(serializers.Serializer):
    window = StatsWindowSerializer()
    by_agent = AgentFiguresSerializer(many=True)
    by_model = ModelFiguresSerializer(many=True)
    by_tool = ToolFiguresSerializer(many=True)


def custom_window(query: dict[str, Any]) -> tuple[dt.datetime, dt.datetime] | None:
    start, end = query.get("from"), query.get("to")
    return (start, end) if start is not None and end is not None else None
