"""Read-only admin for the run model: runs, messages and events change only through
services, so that every change is checkpointed and evented. Its raw tables are shown to
superusers only (`RawTableAdmin`); the audit log to those who may read it."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections
from django.db.models.expressions import RawSQL
from django.utils.functional import SimpleLazyObject, cached_property

from agents.admin.base import TeamScoped, VisibleRelatedFilter
from common.models import AuditEntry
from runs.models import Decision, Message, Run, RunEvent, Thread, Ticket, ToolCall

EXACT_COUNT_BELOW = 10_000  # rows (estimated): a smaller table is counted, cheaply


class EstimatedCountPaginator(Paginator):
    """An unfiltered change list of millions of rows would count them all (a sequential
    scan per page view); PostgreSQL's planner estimate is enough to number the pages. One
    statement either way: the estimate, or for a small table its exact count."""

    @cached_property
    def count(self) -> int:
        queryset: Any = self.object_list
        connection = connections[queryset.db]
        if connection.vendor == "postgresql" and not queryset.query.where:
            table = queryset.model._meta.db_table
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT CASE WHEN reltuples >= %s THEN reltuples::bigint "
                    f"ELSE (SELECT COUNT(*) FROM {connection.ops.quote_name(table)}) END "
                    "FROM pg_class WHERE oid = %s::regclass",
                    [EXACT_COUNT_BELOW, table],
                )
                row = cursor.fetchone()
            if row is not None:
                return int(row[0])
        return super().count


def skip_scan_values(queryset: Any, column: str) -> list[Any]:
    """The distinct non-null values of `column` in `queryset`, smallest first, read by
    skipping through an index that leads with the column: one probe per value, in one
    recursive statement, instead of reading every row (PostgreSQL)."""
    ordered = queryset.order_by(column).values_list(column, flat=True)
    smallest = ordered.filter(**{f"{column}__isnull": False})[:1]
    following = ordered.filter(**{f"{column}__gt": RawSQL("skip.value", ())})[:1]
    first, first_params = smallest.query.sql_with_params()
    then, then_params = following.query.sql_with_params()
    sql = (
        f"WITH RECURSIVE skip(value) AS (({first}) UNION ALL "
        f"SELECT ({then}) FROM skip WHERE skip.value IS NOT NULL) "
        "SELECT value FROM skip WHERE value IS NOT NULL"
    )
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, [*first_params, *then_params])
        return [row[0] for row in cursor.fetchall()]


class IndexedValuesFilter(admin.AllValuesFieldListFilter):
    """Django's filter by each value of a column, without DISTINCT over every row: the
    values of a list no team scope narrows (a site-wide viewer) are read by
    `skip_scan_values` (the column needs an index that leads with it); a team's rows
    keep the DISTINCT over them (the team's index first). Not null columns only."""

    def __init__(
        self, field: Any, request: Any, params: Any, model: Any, model_admin: Any, field_path: str
    ) -> None:
        super().__init__(field, request, params, model, model_admin, field_path)
        queryset = model_admin.get_queryset(request)
        if (
            field_path == field.name
            and not field.null
            and connections[queryset.db].vendor == "postgresql"
            and not queryset.query.where
        ):
            # read when the filter renders, as Django's queryset would be
            values = SimpleLazyObject(lambda: skip_scan_values(queryset, field.name))
            self.lookup_choices = cast(Any, values)


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


class RawTableAdmin(ReadOnlyAdmin):
    """A raw table of the run model (runs, their events, messages, tool calls, tickets,
    decisions, threads): superusers only. Staff read them on the product's pages (runs,
    threads, approvals, audit), which explain them; the admin shows the rows as stored."""

    def has_module_permission(self, request: Any) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)


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
class ThreadAdmin(RawTableAdmin):
    team_path = "team"
    list_display = ("id", "title", "message_count", "open_run", "updated_at")
    list_select_related = ("open_run",)  # nullable: not joined by default
    search_fields = ("id", "title")
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(RawTableAdmin):
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
class RunAdmin(RawTableAdmin):
    team_path = "agent__team"
    list_display = ("id", "agent", "status", "status_reason", "steps", "created_at", "finished_at")
    list_filter = ("status", ("agent", VisibleRelatedFilter))
    list_select_related = ("agent",)
    search_fields = ("id", "thread__id")
    inlines = [EventInline]


@admin.register(ToolCall)
class ToolCallAdmin(RawTableAdmin):
    team_path = "run__agent__team"
    list_display = ("call_id", "tool_name", "status", "run", "updated_at")
    list_filter = ("status", "tool_name")


@admin.register(Ticket)
class TicketAdmin(RawTableAdmin):
    team_path = "agent__team"
    list_display = (
        "id",
        "ticket_id",
        "tool_name",
        "status",
        "run_ref",
        "created_at",
        "deadline_at",
    )
    list_filter = ("status", ("tool_name", IndexedValuesFilter))
    # oldest first as the model orders them, the id deciding ties: the (created_at, id)
    # index reads a page without sorting every ticket
    ordering = ("created_at", "id")

    @admin.display(description="run", ordering="run_id")
    def run_ref(self, obj: Ticket) -> Any:
        """The run's id (what the run shows as) without reading the run."""
        return obj.run_id


@admin.register(Decision)
class DecisionAdmin(RawTableAdmin):
    team_path = "ticket__agent__team"
    list_display = ("ticket", "action", "actor_label", "created_at")
    list_filter = ("action",)


@admin.register(RunEvent)
class RunEventAdmin(RawTableAdmin):
    team_path = "run__agent__team"
    list_display = ("run", "seq", "event_type", "created_at")
    list_filter = ("event_type",)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    team_path = "team"  # entries without a team: site-wide roles only
    list_display = ("created_at", "actor_label", "action", "target_type", "target_id", "source")
    list_filter = (("action", IndexedValuesFilter), ("source", IndexedValuesFilter))
    search_fields = ("actor_label", "target_id", "comment")
