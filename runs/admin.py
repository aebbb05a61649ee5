"""Read-only admin for the run model: runs, messages and events change only through
services, so that every change is checkpointed and evented."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property

from agents.admin.base import TeamScoped, VisibleRelatedFilter
from common.models import AuditEntry
from runs import admin_notifications, admin_schedules  # noqa: F401  (register their admins)
from runs.models import Decision, Message, Run, RunEvent, Thread, Ticket, ToolCall


class EstimatedCountPaginator(Paginator):
    """An unfiltered change list of millions of rows would count them all (a sequential
    scan per page view); PostgreSQL's planner estimate is enough to number the pages."""

    @cached_property
    def count(self) -> int:
        queryset: Any = self.object_list
        connection = connections[queryset.db]
        if connection.vendor == "postgresql" and not queryset.query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                    [queryset.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] >= 10_000:  # small tables: the exact count is cheap
                return int(row[0])
        return super().count


class ReadOnlyAdmin(TeamScoped, admin.ModelAdmin):
    """Each user sees the rows of the teams they may view (`team_path`); a row with no
    team only site-wide roles see."""

    empty_is_shared = False
    paginator = EstimatedCountPaginator
    show_full_result_count = False  # "n of N" would count the whole table again

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("seq", "role", "content", "tool_call_id", "produced_by_run", "step_index")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    team_path = "team"
    list_display = ("id", "title", "message_count", "open_run", "updated_at")
    list_select_related = ("open_run",)  # nullable: not joined by default
    search_fields = ("id", "title")
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    team_path = "thread__team"
    list_display = ("thread", "seq", "role", "tool_call_id", "produced_by_run", "created_at")
    list_select_related = ("thread", "produced_by_run")
    list_filter = ("role",)
    search_fields = ("thread__id",)


class EventInline(admin.TabularInline):
    model = RunEvent
    fields = ("seq", "event_type", "payload", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    team_path = "agent__team"
    list_display = ("id", "agent", "status", "status_reason", "steps", "created_at", "finished_at")
    list_filter = ("status", ("agent", VisibleRelatedFilter))
    list_select_related = ("agent",)
    search_fields = ("id", "thread__id")
    inlines = [EventInline]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    team_path = "run__agent__team"
    list_display = ("call_id", "tool_name", "status", "run", "updated_at")
    list_filter = ("status", "tool_name")


@admin.register(Ticket)
class TicketAdmin(ReadOnlyAdmin):
    team_path = "agent__team"
    list_display = ("id", "ticket_id", "tool_name", "status", "run", "created_at", "deadline_at")
    list_filter = ("status", "tool_name")


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    team_path = "ticket__agent__team"
    list_display = ("ticket", "action", "actor_label", "created_at")
    list_filter = ("action",)


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    team_path = "run__agent__team"
    list_display = ("run", "seq", "event_type", "created_at")
    list_filter = ("event_type",)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    team_path = "team"  # entries without a team: site-wide roles only
    list_display = ("created_at", "actor_label", "action", "target_type", "target_id", "source")
    list_filter = ("action", "source")
    search_fields = ("actor_label", "target_id", "comment")
