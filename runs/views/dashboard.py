"""The dashboard and the figures panel its live updates refresh."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from common.access import visible_teams
from runs import selectors
from runs.permissions import VIEW, require, visible_agent_ids
from runs.selectors.dashboard import Dashboard
from runs.selectors.usage import DEFAULT_WINDOW, WINDOWS, glance


def _figures(request: HttpRequest) -> Dashboard:
    """The figures of the user's teams (their runs, providers and endpoints)."""
    user = request.user
    return selectors.dashboard_cached(visible_agent_ids(user), visible_teams(user, VIEW))


@require(VIEW, "view runs")
def dashboard(request: HttpRequest) -> HttpResponse:
    window = request.GET.get("window", DEFAULT_WINDOW)
    return render(
        request,
        "runs/dashboard.html",
        {
            "nav": "dashboard",
            "dash": _figures(request),
            "glance": glance(
                window if window in WINDOWS else DEFAULT_WINDOW,
                agent_ids=visible_agent_ids(request.user),
            ),
        },
    )


@require(VIEW, "view runs")
def dashboard_stats(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "runs/partials/dashboard_stats.html",
        {"dash": _figures(request)},
    )


@require(VIEW, "view runs")
def dashboard_glance(request: HttpRequest) -> HttpResponse:
    """The "cost, tokens and latency" section alone, for the dashboard's timed refresh
    (live_stream.js, data-refresh-seconds): the same window as the page asked for."""
    window = request.GET.get("window", DEFAULT_WINDOW)
    return render(
        request,
        "runs/partials/dashboard_glance.html",
        {
            "glance": glance(
                window if window in WINDOWS else DEFAULT_WINDOW,
                agent_ids=visible_agent_ids(request.user),
            )
        },
    )
