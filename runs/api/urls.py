"""/api/v1/ routes (included by awaken_site.urls)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.api.endpoints import EndpointCheckView, EndpointDetailView, EndpointListView
from agents.api.views import AgentDetailView, AgentListView

from . import views
from .errors import error_body
from .stream import RunEventStreamView


@login_not_required
def api_not_found(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        error_body("not_found", f"No API endpoint at {request.path}; see /api/v1/docs/."),
        status=404,
    )


urlpatterns = [
    path("runs", views.RunListView.as_view(), name="api-runs"),
    path("runs/<str:run_id>", views.RunDetailView.as_view(), name="api-run"),
    path("runs/<str:run_id>/cancel", views.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/retry", views.RunRetryView.as_view(), name="api-run-retry"),
    path("runs/<str:run_id>/events", views.RunEventsView.as_view(), name="api-run-events"),
    path(
        "runs/<str:run_id>/events/stream",
        RunEventStreamView.as_view(),
        name="api-run-events-stream",
    ),
    path("runs/<str:run_id>/decisions", views.RunDecisionsView.as_view(), name="api-run-decisions"),
    path("tickets", views.TicketListView.as_view(), name="api-tickets"),
    path("tickets/<str:ticket_id>", views.TicketDetailView.as_view(), name="api-ticket"),
    path(
        "tickets/<str:ticket_id>/decision",
        views.TicketDecisionView.as_view(),
        name="api-ticket-decision",
    ),
    path("threads", views.ThreadListView.as_view(), name="api-threads"),
    path("threads/<str:thread_id>", views.ThreadDetailView.as_view(), name="api-thread"),
    path(
        "threads/<str:thread_id>/messages",
        views.ThreadMessagesView.as_view(),
        name="api-thread-messages",
    ),
    path("agents", AgentListView.as_view(), name="api-agents"),
    path("agents/<str:agent_id>", AgentDetailView.as_view(), name="api-agent"),
    path("endpoints", EndpointListView.as_view(), name="api-endpoints"),
    path("endpoints/<str:endpoint_id>", EndpointDetailView.as_view(), name="api-endpoint"),
    path(
        "endpoints/<str:endpoint_id>/check",
        EndpointCheckView.as_view(),
        name="api-endpoint-check",
    ),
    path("audit", views.AuditListView.as_view(), name="api-audit"),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="api-schema"),
    path(
        "docs/",
        login_not_required(SpectacularSwaggerView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    re_path(r"^.*$", api_not_found),
]
