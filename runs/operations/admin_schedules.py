"""Admin for schedules (docs/schedules.md): the form (runs/operations/schedule_forms.py, shared with
the schedules pages) validates through the service; saving recomputes the next run and
is audited by the service; pause, resume and run now
are audited actions (run now also a button on the change page, with `runs.run_schedule`);
the change page lists the schedule's last runs."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agents.admin.base import TeamAdmin, VisibleRelatedFilter
from common.access import frozen_teams
from common.errors import ServiceError
from runs.models import Run, Schedule
from runs.operations.schedule_forms import ScheduleForm, in_zone
from runs.operations.schedule_forms import timing as schedule_timing
from runs.operations.services.schedules import (
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_run_now,
    schedule_save,
)

RECENT_RUNS = 10


def run_link(run_id: Any) -> str:
    return format_html(
        '<a href="{}">{}</a>', reverse("runs:run-detail", args=[run_id]), str(run_id)
    )


@admin.register(Schedule)
class ScheduleAdmin(TeamAdmin):
    """A schedule belongs to its agent's team: that team's operators and admins configure
    it, its admins delete it."""

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
        return schedule_timing(obj)

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
        """Saved, planned and audited by the service, as the schedules pages do."""
        schedule_save(obj, self._actor(request))

    def delete_model(self, request: Any, obj: Schedule) -> None:
        schedule_delete(obj, self._actor(request))

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
