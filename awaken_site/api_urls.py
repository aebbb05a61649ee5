"""/api/v1/ routes (included by awaken_site.urls).

Agent and endpoint ids use the `slug` converter: a path segment that cannot be a slug
(NUL, control characters, bytes that are not UTF-8) matches no route, so it never reaches a
database query (PostgreSQL refuses NUL in text) and is the catch-all's JSON 404."""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api.endpoints import EndpointCheckView, EndpointDetailView, EndpointListView
from agents.api.mcp import McpServerCheckView, McpServerDetailView, McpServerListView
from agents.api.views import AgentDetailView, AgentListView
from common.api.errors import error_body
from runs.accounts.api.views import audit, saved_views, teams
from runs.api.stream import RunEventStreamView
from runs.api.views import inputs, runs, threads
from runs.api.views.agui import AguiRunView
from runs.api.views.run_bulk import RunBulkActionView
from runs.decisions.api.views import bulk, tickets
from runs.decisions.api.views.claims import TicketAssignView, TicketClaimView
from runs.decisions.api.views.rules import TicketRuleProposalView
from runs.operations.api.views import budgets, exports
from runs.operations.api.views import schedules as schedule_views
from runs.operations.api.views.stats import StatsView
from runs.replays.api.views.compare import RunCompareView
from runs.replays.api.views.forks import RunForksView, RunForkView
from runs.replays.api.views.replays import ReplayCancelView, ReplayDetailView, ReplayListView


# CSRF exempt like every DRF view: it changes nothing, and otherwise a POST from a token
# client (no CSRF cookie) got Django's HTML "CSRF verification failed" page, not this 404.
@csrf_exempt
@login_not_required
def api_not_found(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        error_body("not_found", f"No API endpoint at {request.path}; see /api/v1/docs/."),
        status=404,
    )


def read_only(view: Any) -> Any:
    """`view` for GET, HEAD and OPTIONS; any other method is a JSON 405. The schema and
    docs views would answer it as YAML or as an HTML page."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            response = JsonResponse(
                error_body("method_not_allowed", f'Method "{request.method}" not allowed.'),
                status=405,
            )
            response["Allow"] = "GET, HEAD, OPTIONS"
            return response
        return view(request, *args, **kwargs)

    return csrf_exempt(login_not_required(wrapped))


urlpatterns = [
    path("runs", runs.RunListView.as_view(), name="api-runs"),
    # before runs/<str:run_id>, which "export.csv" would match
    path("runs/export.csv", exports.RunsCsvExportView.as_view(), name="api-runs-export"),
    path("runs/compare", RunCompareView.as_view(), name="api-runs-compare"),  # before it too
    path("runs/bulk-action", RunBulkActionView.as_view(), name="api-runs-bulk-action"),  # and it
    path("runs/<str:run_id>", runs.RunDetailView.as_view(), name="api-run"),
    path("runs/<str:run_id>/export", exports.RunExportView.as_view(), name="api-run-export"),
    path("runs/<str:run_id>/cancel", runs.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/retry", runs.RunRetryView.as_view(), name="api-run-retry"),
    path("runs/<str:run_id>/fork", RunForkView.as_view(), name="api-run-fork"),
    path("runs/<str:run_id>/forks", RunForksView.as_view(), name="api-run-forks"),
    path("runs/<str:run_id>/events", runs.RunEventsView.as_view(), name="api-run-events"),
    path(
        "runs/<str:run_id>/events/stream",
        RunEventStreamView.as_view(),
        name="api-run-events-stream",
    ),
    path("runs/<str:run_id>/decisions", runs.RunDecisionsView.as_view(), name="api-run-decisions"),
    path("runs/<str:run_id>/inputs", inputs.RunInputsView.as_view(), name="api-run-inputs"),
    path("runs/<str:run_id>/priority", runs.RunPriorityView.as_view(), name="api-run-priority"),
    path("tickets", tickets.TicketListView.as_view(), name="api-tickets"),
    path(
        "tickets/bulk-decision", bulk.BulkDecisionView.as_view(), name="api-tickets-bulk-decision"
    ),
    path("tickets/<str:ticket_id>", tickets.TicketDetailView.as_view(), name="api-ticket"),
    path(
        "tickets/<str:ticket_id>/decision",
        tickets.TicketDecisionView.as_view(),
        name="api-ticket-decision",
    ),
    path("tickets/<str:ticket_id>/claim", TicketClaimView.as_view(), name="api-ticket-claim"),
    path("tickets/<str:ticket_id>/assign", TicketAssignView.as_view(), name="api-ticket-assign"),
    path(
        "tickets/<str:ticket_id>/rule-proposal",
        TicketRuleProposalView.as_view(),
        name="api-ticket-rule-proposal",
    ),
    path("threads", threads.ThreadListView.as_view(), name="api-threads"),
    path("threads/<str:thread_id>", threads.ThreadDetailView.as_view(), name="api-thread"),
    path(
        "threads/<str:thread_id>/messages",
        threads.ThreadMessagesView.as_view(),
        name="api-thread-messages",
    ),
    path(
        "threads/<str:thread_id>/inputs",
        inputs.ThreadInputListView.as_view(),
        name="api-thread-inputs",
    ),
    path(
        "threads/<str:thread_id>/interrupt",
        inputs.ThreadInterruptView.as_view(),
        name="api-thread-interrupt",
    ),
    path("inputs/<str:input_id>", inputs.InputDetailView.as_view(), name="api-input"),
    path("agents", AgentListView.as_view(), name="api-agents"),
    path("agents/<slug:agent_id>", AgentDetailView.as_view(), name="api-agent"),
    path("agents/<slug:agent_id>/ag-ui", AguiRunView.as_view(), name="api-agent-ag-ui"),
    path("endpoints", EndpointListView.as_view(), name="api-endpoints"),
    path("endpoints/<slug:endpoint_id>", EndpointDetailView.as_view(), name="api-endpoint"),
    path(
        "endpoints/<slug:endpoint_id>/check",
        EndpointCheckView.as_view(),
        name="api-endpoint-check",
    ),
    path("mcp-servers", McpServerListView.as_view(), name="api-mcp-servers"),
    path("mcp-servers/<slug:server_id>", McpServerDetailView.as_view(), name="api-mcp-server"),
    path(
        "mcp-servers/<slug:server_id>/check",
        McpServerCheckView.as_view(),
        name="api-mcp-server-check",
    ),
    path("stats", StatsView.as_view(), name="api-stats"),
    path("budgets", budgets.BudgetListView.as_view(), name="api-budgets"),
    path("budgets/<str:budget_id>", budgets.BudgetDetailView.as_view(), name="api-budget"),
    path("schedules", schedule_views.ScheduleListView.as_view(), name="api-schedules"),
    path(
        "schedules/<str:schedule_id>",
        schedule_views.ScheduleDetailView.as_view(),
        name="api-schedule",
    ),
    path(
        "schedules/<str:schedule_id>/pause",
        schedule_views.SchedulePauseView.as_view(),
        name="api-schedule-pause",
    ),
    path(
        "schedules/<str:schedule_id>/resume",
        schedule_views.ScheduleResumeView.as_view(),
        name="api-schedule-resume",
    ),
    path(
        "schedules/<str:schedule_id>/run-now",
        schedule_views.ScheduleRunNowView.as_view(),
        name="api-schedule-run-now",
    ),
    path(
        "schedules/<str:schedule_id>/runs",
        schedule_views.ScheduleRunsView.as_view(),
        name="api-schedule-runs",
    ),
    path("audit", audit.AuditListView.as_view(), name="api-audit"),
    path("audit/export.csv", exports.AuditCsvExportView.as_view(), name="api-audit-export"),
    path("saved-views", saved_views.SavedViewListView.as_view(), name="api-saved-views"),
    path(
        "saved-views/<int:view_id>",
        saved_views.SavedViewDetailView.as_view(),
        name="api-saved-view",
    ),
    path("replays", ReplayListView.as_view(), name="api-replays"),
    path("replays/<str:set_id>", ReplayDetailView.as_view(), name="api-replay"),
    path("replays/<str:set_id>/cancel", ReplayCancelView.as_view(), name="api-replay-cancel"),
    path("teams", teams.TeamListView.as_view(), name="api-teams"),
    path("teams/<slug:slug>", teams.TeamDetailView.as_view(), name="api-team"),
    path("teams/<slug:slug>/freeze", teams.TeamFreezeView.as_view(), name="api-team-freeze"),
    path("teams/<slug:slug>/unfreeze", teams.TeamUnfreezeView.as_view(), name="api-team-unfreeze"),
    path("teams/<slug:slug>/members", teams.TeamMemberListView.as_view(), name="api-team-members"),
    path(
        "teams/<slug:slug>/members/<str:username>",
        teams.TeamMemberView.as_view(),
        name="api-team-member",
    ),
    path("schema/", read_only(SpectacularAPIView.as_view()), name="api-schema"),
    path(
        "docs/",
        read_only(SpectacularSwaggerView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    re_path(r"^[\s\S]*$", api_not_found),  # any character, a newline too
]
