"""The schedule form the admin, the schedules pages and the API share (docs/schedules.md):
it validates through the service (`schedule_config_errors`), so a name taken, an invalid
cron expression, interval, time zone or message, or an agent never published, is refused
with the same message on the field to fix wherever a schedule is edited. Also how a
schedule's timing and times are shown."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from common.errors import ServiceError
from runs.models import Schedule
from runs.operations.services.schedule_rules import schedule_config_errors, zone_for

FORM_FIELDS = (
    "name",
    "agent",
    "message",
    "kind",
    "cron",
    "interval_seconds",
    "timezone",
    "thread_policy",
    "catch_up",
    "priority",
    "enabled",
)
UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


class ScheduleForm(forms.ModelForm):
    """Refuses a name taken, an invalid cron expression, interval, time zone or message,
    and an agent with no published version, with the service's message on the field to
    fix (a field's own check, such as a required one, speaks first)."""

    class Meta:
        model = Schedule
        fields = FORM_FIELDS
        widgets = {"message": forms.Textarea(attrs={"rows": 3})}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        values = {name: data.get(name) for name in FORM_FIELDS}
        values["timezone"] = values["timezone"] or ""
        candidate = Schedule(pk=self.instance.pk, **values)
        for field, message in schedule_config_errors(candidate).items():
            if field in self.fields and field not in self.errors:
                self.add_error(field, message)
        return data

    def validate_unique(self) -> None:
        """A name taken is the service's check (in `clean`), with its message: the other
        valid fields' uniqueness only."""
        checked = set(self.cleaned_data) - {"name"}
        exclude = {field.name for field in Schedule._meta.get_fields()} - checked
        try:
            self.instance.validate_unique(exclude=exclude)
        except ValidationError as error:
            self.add_error(None, error)


class AgentChoice(forms.ModelChoiceField):
    """An agent chosen by name, with its slug and team (the pages' agent fields)."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.name} ({obj.slug}) · {obj.team}"


def every(seconds: int | None) -> str:
    """An interval as shown: every 90 s, every 5 min, every 2 h."""
    if not seconds:
        return "every ? s"
    for size, unit in UNITS:
        if seconds % size == 0:
            return f"every {seconds // size} {unit}"
    return f"every {seconds} s"


def timing(schedule: Schedule) -> str:
    """When it fires, as shown: "every 1 h" or "cron 0 9 * * 1-5"."""
    if schedule.kind == Schedule.Kind.INTERVAL:
        return every(schedule.interval_seconds)
    return f"cron {schedule.cron}"


def in_zone(schedule: Schedule, moment: dt.datetime | None) -> str:
    """A time as read in the schedule's time zone (with the zone's abbreviation)."""
    if moment is None:
        return "-"
    try:
        local = moment.astimezone(zone_for(schedule.timezone))
    except ServiceError:
        local = moment
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")
