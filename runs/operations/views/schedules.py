"""The schedules pages (docs/schedules.md): the schedules of the teams a user may see,
each with its timing, next and last runs; a team's operators and admins create, change,
pause, resume and run them now, its admins delete them; viewers read. The form and its
validation are the admin's (runs/operations/schedule_forms.py), the work is the
service's (runs/operations/services/schedules.py), every change audited there. A
schedule of another team is a 404; a frozen team's schedules show their actions
disabled, with why, and refuse them (409)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.models import Agent
from common.access import allowed_unfrozen, scope, visible_teams
from common.audit import request_actor
from common.errors import ServiceError
from common.models import Team
from common.teams import ensure_may, teams_visible
from runs.models import Run, Schedule
from runs.operations.schedule_forms import AgentChoice, ScheduleForm, in_zone, timing
from runs.operations.services.schedules import (
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_run_now,
    schedule_save,
)
from runs.permissions import forbidden, require, visible_or_404
from runs.views.forms import FormError, page_action, render_form_error, shown_data

VIEW = "runs.view_schedule"
ADD = "runs.add_schedule"
CHANGE = "runs.change_schedule"
DELETE = "runs.delete_schedule"
RUN = "runs.run_schedule"
RECENT_RUNS = 10
LIST_LIMIT = 500


def _user(request: HttpRequest) -> Any:
    return request.user  # LoginRequiredMiddleware: always a signed-in user here


def _visible(user: Any) -> Any:
    rows = Schedule.objects.select_related("agent", "agent__team", "last_run")
    return scope(rows, user, "agent__team_id", VIEW).order_by("name")


def _schedule(request: HttpRequest, schedule_id: Any) -> Schedule:
    """The schedule when the user may see it; 404 otherwise (another team's too)."""
    schedule = get_object_or_404(_visible(_user(request)), pk=schedule_id)
    return visible_or_404(_user(request), schedule, VIEW)  # type: ignore[no-any-return]


def _can(user: Any, schedule: Schedule) -> dict[str, bool]:
    """What the page offers on `schedule`: the actions the user's role allows in its
    team (a frozen team's shown disabled; the views check again)."""
    team = schedule.agent.team_id
    return {
        "change": allowed_unfrozen(user, CHANGE, team),
        "delete": allowed_unfrozen(user, DELETE, team),
        "run": allowed_unfrozen(user, RUN, team),
    }


def _row(user: Any, schedule: Schedule) -> dict[str, Any]:
    return {
        "schedule": schedule,
        "timing": timing(schedule),
        "next": in_zone(schedule, schedule.next_run_at) if schedule.enabled else "paused",
        "last_slot": in_zone(schedule, schedule.last_run_at),
        "last_started": in_zone(schedule, schedule.last_run.created_at)
        if schedule.last_run is not None
        else "",
        "can": _can(user, schedule),
        "frozen": schedule.agent.team if schedule.agent.team.frozen else None,
    }


# --- the list and a schedule's page ------------------------------------------------------------


def _list_context(request: HttpRequest) -> dict[str, Any]:
    user = _user(request)
    teams = list(teams_visible(user).filter(pk__in=_team_ids(user, VIEW)))
    chosen = request.GET.get("team", "")
    rows = _visible(user)
    if chosen:
        rows = rows.filter(agent__team__slug=chosen)
    schedules = list(rows[: LIST_LIMIT + 1])
    return {
        "nav": "schedules",
        "teams": teams,
        "chosen_team": chosen,
        "rows": [_row(user, schedule) for schedule in schedules[:LIST_LIMIT]],
        "more": len(schedules) > LIST_LIMIT,
        "may_add": allowed_unfrozen(user, ADD),
    }


def _team_ids(user: Any, perm: str) -> Any:
    teams = visible_teams(user, perm)
    return Team.objects.values("pk") if teams is None else list(teams)


@require_GET
@require(VIEW, "see schedules")
def schedule_list(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/schedules/list.html", _list_context(request))


def _detail_context(request: HttpRequest, schedule: Schedule) -> dict[str, Any]:
    runs = Run.objects.filter(schedule=schedule).select_related("agent")
    recent = list(runs.order_by("-created_at")[:RECENT_RUNS])
    return {
        "nav": "schedules",
        **_row(_user(request), schedule),
        "runs": [{"run": run, "at": in_zone(schedule, run.created_at)} for run in recent],
        "recent": RECENT_RUNS,
    }


@require_GET
def schedule_detail(request: HttpRequest, schedule_id: Any) -> HttpResponse:
    schedule = _schedule(request, schedule_id)
    return render(request, "runs/schedules/detail.html", _detail_context(request, schedule))


# --- create and change ---------------------------------------------------------------------------


def _agents(user: Any, perm: str, current: Agent | None = None) -> Any:
    """The agents a schedule may start, for a user who may `perm` schedules: those of the
    teams where their role allows it (a frozen team's too: saving says why it waits)."""
    teams = visible_teams(user, perm)
    agents = Agent.objects.select_related("team").order_by("team__name", "name", "slug")
    if teams is None:
        return agents
    shown = agents.filter(team_id__in=teams)
    if current is not None:
        shown = shown | agents.filter(pk=current.pk)
    return shown


# the form's fields in plain words (the admin keeps the model's)
WORDS = {
    "agent": ("Agent", "Each run starts its latest published version."),
    "message": ("Message", "What each run is asked, as the first user message."),
    "kind": ("Starts", ""),
    "cron": (
        "Cron expression",
        "Five fields: minute hour day-of-month month day-of-week, read on the time zone's "
        "clock; e.g. 0 9 * * 1-5 is 09:00 on weekdays.",
    ),
    "interval_seconds": ("Every (seconds)", "e.g. 3600 for once an hour."),
    "timezone": ("Time zone", "An IANA name such as UTC, Europe/Berlin or America/New_York."),
    "catch_up": ("Runs missed while nothing was running", ""),
    "thread_policy": ("Thread", ""),
    "priority": ("Priority", "Of the runs it starts: 0 is the highest, 255 the lowest."),
    "enabled": ("Enabled", "Untick to keep it paused: it starts nothing until resumed."),
}
KINDS = [
    (Schedule.Kind.CRON.value, "on a timetable (a cron expression)"),
    (Schedule.Kind.INTERVAL.value, "every so many seconds"),
]


class PageScheduleForm(ScheduleForm):
    """The admin's form, its agent among those of the user's teams."""

    def __init__(self, *args: Any, agents: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"] = AgentChoice(queryset=agents)
        for name, (label, help_text) in WORDS.items():
            self.fields[name].label, self.fields[name].help_text = label, help_text
        kind = self.fields["kind"]
        assert isinstance(kind, forms.TypedChoiceField)
        kind.choices = KINDS
        kind.widget.attrs["data-mode-select"] = ""  # shows the cron or the interval field


def _form_page(
    request: HttpRequest, form: ScheduleForm, schedule: Schedule | None, status: int = 200
) -> HttpResponse:
    context = {
        "nav": "schedules",
        "form": form,
        "schedule": schedule,
        "frozen": schedule.agent.team if schedule and schedule.agent.team.frozen else None,
        "action": reverse("runs:schedule-edit", args=[schedule.pk])
        if schedule is not None
        else reverse("runs:schedule-new"),
    }
    return render(request, "runs/schedules/form.html", context, status=status)


def _save(request: HttpRequest, form: ScheduleForm, schedule: Schedule | None) -> HttpResponse:
    """Save a valid form through the service; its refusal (a frozen team, a name taken
    meanwhile) is shown on the form, in the refusal's status."""
    if not form.is_valid():
        return _form_page(request, form, schedule, status=400)
    try:
        saved = schedule_save(form.instance, request_actor(request, "ui"))
    except ServiceError as exc:
        form.add_error(None, exc.message)
        return _form_page(request, form, schedule, status=exc.status)
    messages.success(request, f"Saved schedule {saved.name}.")
    return redirect("runs:schedule-detail", schedule_id=saved.pk)


def _form_refused(request: HttpRequest, error: FormError, **kwargs: Any) -> HttpResponse:
    """A NUL in a field (refused before the form reads it): the form again, as sent."""
    schedule_id = kwargs.get("schedule_id")
    schedule = _schedule(request, schedule_id) if schedule_id else None
    agents = _agents(
        _user(request), CHANGE if schedule else ADD, schedule.agent if schedule else None
    )
    form = PageScheduleForm(shown_data(request.POST), instance=schedule, agents=agents)
    form.is_valid()
    form.add_error(None, error.text)
    return _form_page(request, form, schedule, status=error.status)


@require_http_methods(["GET", "POST"])
@page_action(_form_refused)
def schedule_new(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    if not allowed_unfrozen(user, ADD):
        return forbidden(request, "create schedules")
    agents = _agents(user, ADD)
    if request.method != "POST":
        initial = {"timezone": "UTC", "kind": Schedule.Kind.CRON}
        return _form_page(request, PageScheduleForm(initial=initial, agents=agents), None)
    return _save(request, PageScheduleForm(request.POST, agents=agents), None)


@require_http_methods(["GET", "POST"])
@page_action(_form_refused)
def schedule_edit(request: HttpRequest, schedule_id: Any) -> HttpResponse:
    schedule = _schedule(request, schedule_id)
    user = _user(request)
    if not allowed_unfrozen(user, CHANGE, schedule.agent.team_id):
        return forbidden(request, f"change schedule {schedule.name}")
    agents = _agents(user, CHANGE, schedule.agent)
    if request.method != "POST":
        return _form_page(request, PageScheduleForm(instance=schedule, agents=agents), schedule)
    # another agent: one of the teams where the user changes schedules (the choices)
    return _save(
        request, PageScheduleForm(request.POST, instance=schedule, agents=agents), schedule
    )


# --- actions -------------------------------------------------------------------------------------


def _action_refused(request: HttpRequest, error: FormError, schedule_id: Any) -> HttpResponse:
    """The page the action was sent from (the list, or the schedule's page) with the
    refusal inside the form that was sent."""
    if request.POST.get("from") == "list":
        return render_form_error(request, "runs/schedules/list.html", _list_context(request), error)
    schedule = _schedule(request, schedule_id)
    context = _detail_context(request, schedule)
    return render_form_error(request, "runs/schedules/detail.html", context, error)


def _back(request: HttpRequest, schedule: Schedule) -> HttpResponse:
    if request.POST.get("from") == "list":
        return redirect(reverse("runs:schedules"))
    return redirect("runs:schedule-detail", schedule_id=schedule.pk)


@require_POST
@page_action(_action_refused)
def schedule_pause_view(request: HttpRequest, schedule_id: Any) -> HttpResponse:
    schedule = _schedule(request, schedule_id)
    ensure_may(_user(request), CHANGE, schedule, f"pause schedule {schedule.name}")
    schedule_pause(schedule, request_actor(request, "ui"))
    messages.success(request, f"Paused {schedule.name}: it starts nothing until resumed.")
    return _back(request, schedule)


@require_POST
@page_action(_action_refused)
def schedule_resume_view(request: HttpRequest, schedule_id: Any) -> HttpResponse:
    schedule = _schedule(request, schedule_id)
    ensure_may(_user(request), CHANGE, schedule, f"resume schedule {schedule.name}")
    resumed = schedule_resume(schedule, request_actor(request, "ui"))
    when = in_zone(resumed, resumed.next_run_at)
    messages.success(request, f"Resumed {schedule.name}: next run {when}.")
    return _back(request, schedule)


@require_POST
@page_action(_action_refused)
def schedule_run_now_view(request: HttpRequest, schedule_id: Any) -> HttpResponse:
    schedule = _schedule(request, schedule_id)
    ensure_may(_user(request), RUN, schedule, f"run schedule {schedule.name}")
    schedule_run_now(schedule, request_actor(request, "ui"))
    messages.success(request, f"{schedule.name}: started a run (see its last run).")
    return _back(request, schedule)


@require_POST
@page_action(_action_refused)
def schedule_delete_view(request: HttpRequest, schedule_id: Any) -> HttpResponse:
    schedule = _schedule(request, schedule_id)
    ensure_may(_user(request), DELETE, schedule, f"delete schedule {schedule.name}")
    schedule_delete(schedule, request_actor(request, "ui"))
    messages.success(request, f"Deleted schedule {schedule.name}; its runs stay.")
    return redirect("runs:schedules")
