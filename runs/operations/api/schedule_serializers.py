"""Serializers of /api/v1/schedules (docs/schedules.md, "Over the API").

The request serializer checks only the JSON types; what a valid schedule is (lengths,
choices, ranges, a name taken, the timing, an agent never published) is checked by the
schedule form the admin and the pages use (runs/operations/schedule_forms.py), through the
service's rules, so the API refuses a schedule with the admin's words. The limits written
here only document those checks in the OpenAPI schema (validators that check nothing)."""

from __future__ import annotations

from typing import Any

from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.api import serializers as run_serializers
from runs.models import PRIORITY_MAX, PRIORITY_MIN, Schedule
from runs.operations.services.schedule_rules import INTERVAL_MAX


class _Documents:
    """A validator that only documents a limit in the schema (drf-spectacular reads it):
    the shared form checks it, with the admin's message."""

    def __call__(self, value: Any) -> None:
        return None


class _MaxLength(_Documents, MaxLengthValidator):
    pass


class _MinValue(_Documents, MinValueValidator):
    pass


class _MaxValue(_Documents, MaxValueValidator):
    pass


LIMITS = {"max_length": _MaxLength, "min_value": _MinValue, "max_value": _MaxValue}


def documented(**limits: Any) -> list[Any]:
    """A field's `validators` that put `limits` (max_length, min_value, max_value) in the
    schema only (a kwarg, so that the serializer's copy of the field keeps them)."""
    return [LIMITS[name](value) for name, value in limits.items()]


class Choice(serializers.ChoiceField):
    """An enum in the schema; any string passes here, the shared form checks the choice."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return data


def _text(help_text: str, max_length: int | None = None, **kwargs: Any) -> serializers.Field:
    limits = documented(max_length=max_length) if max_length else []
    return serializers.CharField(
        allow_blank=True, trim_whitespace=False, help_text=help_text, validators=limits, **kwargs
    )


def _length(name: str) -> int | None:
    return Schedule._meta.get_field(name).max_length  # type: ignore[union-attr]


class ScheduleWriteSerializer(serializers.Serializer):
    """A schedule's settings. Creating one: `name`, `agent_id` and `message` are required,
    the others default as in the admin. Changing one (PATCH): only the fields sent change."""

    name = _text("Unique among schedules.", _length("name"))
    agent_id = serializers.CharField(
        help_text="The agent (slug) each run starts, at its latest published version: one "
        "of a team where you may manage schedules."
    )
    message = _text("The user message each run starts with.")
    kind = Choice(choices=Schedule.Kind.values, required=False, help_text="cron or interval.")
    cron = _text(
        "Five fields: minute hour day-of-month month day-of-week, read on the time zone's "
        "clock (kind cron).",
        _length("cron"),
        required=False,
    )
    interval_seconds = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Seconds between runs (kind interval).",
        validators=documented(min_value=1, max_value=INTERVAL_MAX),
    )
    timezone = _text("IANA time zone (default UTC).", _length("timezone"), required=False)
    thread_policy = Choice(
        choices=Schedule.ThreadPolicy.values,
        required=False,
        help_text="new: a new thread each run (default); same: one thread for every run.",
    )
    catch_up = Choice(
        choices=Schedule.CatchUp.values,
        required=False,
        help_text="Runs missed while nothing was running: skip (default) or once.",
    )
    priority = serializers.IntegerField(
        required=False,
        help_text="Of the runs it starts: 0 highest, 255 lowest (128).",
        validators=documented(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX),
    )
    enabled = serializers.BooleanField(
        required=False, help_text="false: created paused (default true)."
    )


class ScheduleSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    agent_id = serializers.CharField(source="agent.slug", help_text="Agent slug.")
    team = serializers.CharField(source="agent.team.slug", help_text="Its agent's team (slug).")
    message = serializers.CharField()
    kind = serializers.ChoiceField(choices=Schedule.Kind.values)
    cron = serializers.CharField(allow_blank=True)
    interval_seconds = serializers.IntegerField(allow_null=True)
    timezone = serializers.CharField()
    thread_policy = serializers.ChoiceField(choices=Schedule.ThreadPolicy.values)
    catch_up = serializers.ChoiceField(choices=Schedule.CatchUp.values)
    priority = serializers.IntegerField()
    enabled = serializers.BooleanField(help_text="false: paused.")
    next_run_at = serializers.DateTimeField(
        allow_null=True, help_text="The next slot (null while paused)."
    )
    last_run_at = serializers.DateTimeField(
        allow_null=True, help_text="The last slot fired (run or skipped)."
    )
    last_run_id = serializers.UUIDField(allow_null=True, help_text="The run it started last.")
    last_outcome = serializers.CharField(allow_blank=True, help_text="What the last firing did.")
    thread_id = serializers.UUIDField(
        allow_null=True, help_text="Its one thread (thread policy same), once it exists."
    )
    created_by = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_created_by(self, schedule: Schedule) -> str | None:
        user = schedule.created_by
        return user.get_username() if user is not None else None


class ScheduleListQuerySerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        required=False, allow_blank=True, max_length=100, help_text="Only this agent's (slug)."
    )
    paused = serializers.BooleanField(
        required=False, allow_null=True, help_text="true: only paused; false: only running."
    )
    cursor = serializers.CharField(
        required=False, allow_blank=True, max_length=400, help_text="next_cursor of a page."
    )
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)


class SchedulePageSerializer(serializers.Serializer):
    items = ScheduleSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Pass as ?cursor= for more.")
    prev_cursor = serializers.CharField(
        allow_null=True, help_text="The page before this one; null on the first page."
    )


class ScheduleRunsQuerySerializer(serializers.Serializer):
    cursor = serializers.CharField(
        required=False, allow_blank=True, max_length=400, help_text="next_cursor of a page."
    )
    limit = serializers.IntegerField(min_value=1, max_value=200, default=10)


class ScheduleRunNowSerializer(serializers.Serializer):
    run = run_serializers.RunSummarySerializer(help_text="The run it started.")
    schedule = ScheduleSerializer()
