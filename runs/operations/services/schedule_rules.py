"""What a valid schedule is (docs/schedules.md): its timing, time zone and message
(`schedule_errors`, checked again before each firing plans a slot) and, for a schedule
about to be created or changed, its name, choices, priority and agent
(`schedule_config_errors`). The one validation of the admin's form, the schedules pages
and the API: the form (runs/operations/schedule_forms.py) adds these messages to its
fields, the API validates through that form, the service refuses what they refuse."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from agents.selectors import agent_version_latest
from common.errors import InvalidInput
from runs.models import Schedule
from runs.services.creation import normalize_input_messages
from runs.services.submission import priority_error

CRON_FIELDS = "minute hour day-of-month month day-of-week"
NAME_MAX = Schedule._meta.get_field("name").max_length or 200
INTERVAL_MAX = 2_147_483_647  # seconds (about 68 years): PostgreSQL's integer column
CHOICES = {
    "thread_policy": Schedule.ThreadPolicy.values,
    "catch_up": Schedule.CatchUp.values,
}


def zone_for(name: str) -> ZoneInfo:
    """The IANA time zone `name`, or InvalidInput saying what is wrong."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidInput(
            f"Unknown time zone {name!r}: use an IANA name such as UTC, Europe/Berlin or "
            "America/New_York.",
            {"timezone": [str(name)]},
        ) from None


def cron_error(expression: str) -> str | None:
    """Why `expression` is not a usable five-field cron expression, or None."""
    fields = expression.split()
    if not fields:
        return f"Enter a cron expression: five fields ({CRON_FIELDS}), e.g. */5 * * * *."
    if len(fields) != 5:
        return (
            f"A cron expression has five fields ({CRON_FIELDS}); "
            f"{expression.strip()!r} has {len(fields)}."
        )
    try:
        croniter(expression, dt.datetime(2000, 1, 1), ret_type=dt.datetime).get_next()
    except CroniterBadDateError:
        return f"The cron expression {expression.strip()!r} never matches a date."
    except (CroniterError, ValueError, KeyError) as exc:
        return f"Invalid cron expression {expression.strip()!r}: {exc}."
    return None


def schedule_errors(schedule: Schedule) -> dict[str, str]:
    """What is wrong with the schedule's timing, time zone or message, by field name."""
    errors: dict[str, str] = {}
    if schedule.kind == Schedule.Kind.CRON:
        problem = cron_error(schedule.cron or "")
        if problem:
            errors["cron"] = problem
    elif schedule.kind == Schedule.Kind.INTERVAL:
        seconds = schedule.interval_seconds
        if seconds is None or seconds < 1:
            errors["interval_seconds"] = "An interval schedule needs a number of seconds (≥ 1)."
        elif seconds > INTERVAL_MAX:
            errors["interval_seconds"] = (
                f"An interval is at most {INTERVAL_MAX} seconds (about 68 years)."
            )
    else:
        errors["kind"] = f"Kind must be cron or interval, not {schedule.kind!r}."
    try:
        zone_for(schedule.timezone or "")
    except InvalidInput as exc:
        errors["timezone"] = exc.message
    try:
        normalize_input_messages(schedule.message or "")
    except InvalidInput as exc:
        errors["message"] = exc.message.replace("messages[0].content", "The message")
    return errors


def schedule_validate(schedule: Schedule) -> None:
    """InvalidInput naming every problem (`details`: field -> message) if any."""
    errors = schedule_errors(schedule)
    if errors:
        raise InvalidInput(" ".join(errors.values()), {k: [v] for k, v in errors.items()})


def _name_error(schedule: Schedule) -> str | None:
    name = (schedule.name or "").strip()
    if not name:
        return "Enter a name for the schedule."
    if len(schedule.name) > NAME_MAX:
        return f"A schedule's name has at most {NAME_MAX} characters."
    taken = Schedule.objects.filter(name=schedule.name).exclude(pk=schedule.pk).exists()
    if taken:
        return f"A schedule named {schedule.name!r} exists already: choose another name."
    return None


def _setting_errors(schedule: Schedule) -> dict[str, str]:
    """Its thread policy, catch-up policy and priority."""
    errors = {
        field: f"{field.replace('_', ' ').capitalize()} must be one of {', '.join(allowed)}, "
        f"not {getattr(schedule, field)!r}."
        for field, allowed in CHOICES.items()
        if getattr(schedule, field) not in allowed
    }
    if problem := priority_error(schedule.priority):  # the one priority rule
        errors["priority"] = problem
    return errors


def schedule_config_errors(schedule: Schedule) -> dict[str, str]:
    """What is wrong with a schedule about to be created or changed, by field name: its
    name (empty, too long, or another schedule's), timing, time zone and message
    (`schedule_errors`), thread and catch-up policies, priority, and an agent never
    published. The one validation of the admin's form, the schedules pages and the API."""
    errors: dict[str, str] = {}
    if problem := _name_error(schedule):
        errors["name"] = problem
    errors |= schedule_errors(schedule) | _setting_errors(schedule)
    agent = schedule.agent if schedule.agent_id else None
    if agent is None:
        errors["agent"] = "Choose the agent the schedule starts."
    elif agent_version_latest(agent) is None:
        errors["agent"] = f"Agent '{agent.slug}' has no published version: publish it first."
    return errors
