"""Admin for schedules (docs/schedules.md): the form validates timing, time zone and
message through the service; saving recomputes the next run; pause, resume and run now
are audited actions (run now also a button on the change page, with `runs.run_schedule`);
the change page lists the schedule's last runs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agents.admin.base import TeamAdmin, VisibleRelatedFilter
from agents.selectors import agent_version_latest
from common.access import frozen_teams
from common.errors import ServiceError
from runs.models import Run, Schedule
from runs.services.schedules import (
    schedule_errors,
    schedule_pause,
    schedule_plan,
    schedule_resume,
    schedule_run_now,
    zone_for,
)

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
# kept from the row when a change is saved: a firing may have set them meanwhile
FIRING_FIELDS = ("thread_id", "last_run_id", "last_run_at", "last_outcome")
RECENT_RUNS = 10
UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


class ScheduleForm(forms.ModelForm):
    """Refuses an invalid cron expression, interval, time zone or message, and an agent
    with no published version, with a message on the field to fix."""

    class Meta:
        model = Schedule
        fields = FORM_FIELDS
        widgets = {"message": forms.Textarea(attrs={"rows": 3})}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        candidate = Schedule(
            **{name: data.get(name) for name in ("kind", "cron", "interval_seconds", "message")},
            timezone=data.get("timezone") or "",
        )
        for field, message in schedule_errors(candidate).items():
            if field in self.fields and field not in self.errors:
                self.add_error(field, message)
        agent = data.get("agent")
        if agent is not None and agent_version_latest(agent) is None:
            self.add_error(
                "agent", f"Agent '{agent.slug}' has no published version: publish it first."
            )
        return data


def every(seconds: int | None) -> str:
    """An interval as shown: every 90 s, every 5 min, every 2 h."""
    if not seconds:
        return "every ? s"
    for size, unit in UNITS:
        if seconds % size == 0:
            return f"every {seconds // size} {unit}"
    return f"every {seconds} s"


def run_link(run_id: Any) -> str:
    return format_html(
        '<a href="{}">{}</a>', reverse("runs:run-detail", args=[run_id]), str(run_id)
    )


def in_zone(schedule: Schedule, moment: dt.datetime | None) -> str:
    """A time as read in the schedule's time zone (with the zone's abbreviation)."""
    if moment is None:
        return "-"
    try:
        local = moment.astimezone(zone_for(schedule.timezone))
    except ServiceError:
        local = moment
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")


@admin.register(Schedule)
class ScheduleAdmin(TeamAdmin):
    """A schedule belongs to its agent's team: that team's admins configure it."""

    form = ScheduleForm
    team_path = "agent__team"
    change_form_template = "admin/runs/schedule/change_form.html"
    list_display = (
        "name",
        "agent",
        "timing",
        "timezone",
        "enabled",
        "next_run",
        "last_run_time",
        "last_run_link",
        "last_outcome",
    )
    list_filter = ("enabled", "kind", "thread_policy", ("agent", VisibleRelatedFilter))
    list_select_related = ("agent",)
    search_fields = ("name", "message")
    readonly_fields = (
        "next_run",
        "last_run_time",
        "last_run_link",
        "last_outcome",
        "thread_link",
        "recent_runs",
        "created_by",
        "created_at",
        "updated_at",
    )
    actions = ["pause", "resume", "run_now"]
    fieldsets = (
        (None, {"fields": ("name", "agent", "message", "priority", "enabled")}),
        ("When", {"fields": ("kind", "cron", "interval_seconds", "timezone", "catch_up")}),
        ("Thread", {"fields": ("thread_policy", "thread_link")}),
        (
            "Runs",
            {"fields": ("next_run", "last_run_time", "last_run_link", "last_outcome")},
        ),
        ("Last runs", {"fields": ("recent_runs",)}),
        ("Record", {"fields": ("created_by", "created_at", "updated_at")}),
    )

    # --- columns and read-only fields ---------------------------------------------------------

    @admin.display(description="when")
    def timing(self, obj: Schedule) -> str:
        if obj.kind == Schedule.Kind.INTERVAL:
            return every(obj.interval_seconds)
        return f"cron {obj.cron}"

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, obj: Schedule) -> str:
        if not obj.enabled:
            return "paused"
        return in_zone(obj, obj.next_run_at)

    @admin.display(description="last slot", ordering="last_run_at")
    def last_run_time(self, obj: Schedule) -> str:
        return in_zone(obj, obj.last_run_at)

    @admin.display(description="last run")
    def last_run_link(self, obj: Schedule) -> str:
        return run_link(obj.last_run_id) if obj.last_run_id else "-"

    @admin.display(description="thread")
    def thread_link(self, obj: Schedule) -> str:
        if not obj.thread_id:
            return "-"
        url = reverse("runs:thread-detail", args=[obj.thread_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.thread_id))

    @admin.display(description=f"last {RECENT_RUNS} runs")
    def recent_runs(self, obj: Schedule) -> str:
        if obj._state.adding:
            return "-"
        rows = Run.objects.filter(schedule=obj).order_by("-created_at")[:RECENT_RUNS]
        items = format_html_join(
            "",
            '<li><a href="{}">{}</a> {} ({}) {}</li>',
            (
                (
                    reverse("runs:run-detail", args=[run.pk]),
                    str(run.pk),
                    run.status,
                    run.status_reason or "-",
                    in_zone(obj, run.created_at),
                )
                for run in rows
            ),
        )
        return format_html('<ul class="schedule-runs">{}</ul>', items) if items else "none yet"

    # --- saving -----------------------------------------------------------------------------

    def save_model(self, request: Any, obj: Schedule, form: Any, change: bool) -> None:
        if change:  # the admin's transaction: nothing fires this row until it commits
            current = Schedule.objects.select_for_update().filter(pk=obj.pk).first()
            for name in FIRING_FIELDS if current is not None else ():
                setattr(obj, name, getattr(current, name))
        else:
            obj.created_by = request.user
        schedule_plan(obj)
        super().save_model(request, obj, form, change)

    # --- actions ----------------------------------------------------------------------------

    def has_run_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        """`runs.run_schedule` somewhere; for a schedule, in its agent's team (not frozen)."""
        if obj is None:
            return bool(request.user.has_perm("runs.run_schedule"))
        return self.team_of(obj) not in frozen_teams(request.user) and bool(
            request.user.has_perm("runs.run_schedule", obj)  # its agent's team
        )

    def _refused(self, request: HttpRequest, schedule: Schedule, allowed: bool) -> bool:
        if not allowed:
            self.message_user(
                request, f"{schedule.name}: you may not do this to it; skipped.", messages.ERROR
            )
        return not allowed

    @admin.action(description="Pause the selected schedules", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: Any) -> None:
        done = 0
        for schedule in queryset:
            if self._refused(request, schedule, self.has_change_permission(request, schedule)):
                continue
            schedule_pause(schedule, self._actor(request))
            done += 1
        if done:
            self.message_user(request, f"Paused {done} schedule(s).", messages.SUCCESS)

    @admin.action(
        description="Resume the selected schedules (next run from now)", permissions=["change"]
    )
    def resume(self, request: HttpRequest, queryset: Any) -> None:
        done = 0
        for schedule in queryset:
            if self._refused(request, schedule, self.has_change_permission(request, schedule)):
                continue
            try:
                schedule_resume(schedule, self._actor(request))
                done += 1
            except ServiceError as exc:
                self.message_user(request, f"{schedule.name}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(request, f"Resumed {done} schedule(s).", messages.SUCCESS)

    @admin.action(description="Run the selected schedules now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset: Any) -> None:
        for schedule in queryset:
            if not self._refused(request, schedule, self.has_run_permission(request, schedule)):
                self._run_now(request, schedule)

    def _run_now(self, request: HttpRequest, schedule: Schedule) -> None:
        try:
            run = schedule_run_now(schedule, self._actor(request))
        except ServiceError as exc:
            self.message_user(request, f"{schedule.name}: {exc.message}", messages.ERROR)
            return
        self.message_user(
            request,
            format_html("{}: started run {}", schedule.name, run_link(run.pk)),
            messages.SUCCESS,
        )

    def get_urls(self) -> list[Any]:
        custom = [
            path(
                "<path:object_id>/run-now/",
                self.admin_site.admin_view(self.run_now_view),
                name="runs_schedule_run_now",
            )
        ]
        return custom + super().get_urls()

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        schedule = self.get_object(request, object_id)  # None: not a UUID, or not visible
        if schedule is None:
            raise Http404("no such schedule")
        change_url = reverse("admin:runs_schedule_change", args=[schedule.pk])
        if request.method != "POST":
            return HttpResponseRedirect(change_url)
        if not self.has_run_permission(request, schedule):
            raise PermissionDenied
        self._run_now(request, schedule)
        return HttpResponseRedirect(change_url)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        schedule = self.get_object(request, object_id)
        allowed = schedule is not None and self.has_run_permission(request, schedule)
        extra = {**(extra_context or {}), "has_run_permission": allowed}
        return super().change_view(request, object_id, form_url, extra)
