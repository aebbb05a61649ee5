"""The dashboard and the figures panel its live updates refresh."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string

from common.access import visible_teams
from runs.operations.selectors.dashboard import Dashboard, dashboard_cached
from runs.operations.selectors.usage import DEFAULT_WINDOW, WINDOWS, glance
from runs.permissions import VIEW, require, visible_agent_ids
from runs.selectors.filters import QueryFilters, filter_errors_context
from runs.views.forms import filter_page


def read_window(params: QueryDict) -> tuple[str, dict[str, str]]:
    """The window of the figures (the default when absent or bad) and what was wrong."""
    read = QueryFilters(params)
    window = read.choice("window", "Window", WINDOWS)
    return window or DEFAULT_WINDOW, read.errors


def _figures(request: HttpRequest) -> Dashboard:
    """The figures of the user's teams (their runs, providers and endpoints)."""
    user = request.user
    return dashboard_cached(visible_agent_ids(user), visible_teams(user, VIEW))


def dashboard_figures_html() -> str:
    """The figures panel of every team, as pushed to the open dashboards by the core's
    websocket (runs.consumers, setting AWAKEN_DASHBOARD_FIGURES)."""
    return render_to_string("runs/partials/dashboard_stats.html", {"dash": dashboard_cached()})


@filter_page
@require(VIEW, "view runs")
def dashboard(request: HttpRequest) -> HttpResponse:
    """400 with the dashboard (on the default window) and what was wrong for a bad window."""
    window, errors = read_window(request.GET)
    return render(
        request,
        "runs/dashboard.html",
        {
            "nav": "dashboard",
            "dash": _figures(request),
            "glance": glance(window, agent_ids=visible_agent_ids(request.user)),
            **filter_errors_context(errors),
        },
        status=400 if errors else 200,
    )


@require(VIEW, "view runs")
def dashboard_stats(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "runs/partials/dashboard_stats.html",
        {"dash": _figures(request)},
    )


@filter_page
@require(VIEW, "view runs")
def dashboard_glance(request: HttpRequest) -> HttpResponse:
    """The "cost, tokens and latency" section alone, for the dashboard's timed refresh
    (live_stream.js, data-refresh-seconds): the same window as the page asked for."""
    window, errors = read_window(request.GET)
    return render(
        request,
        "runs/partials/dashboard_glance.html",
        {
            "glance": glance(window, agent_ids=visible_agent_ids(request.user)),
            **filter_errors_context(errors),
        },
        status=400 if errors else 200,
    )
