"""The dashboard and the figures panel its live updates refresh."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from runs import selectors
from runs.permissions import VIEW, require


@require(VIEW, "view runs")
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(
        request, "runs/dashboard.html", {"nav": "dashboard", "dash": selectors.dashboard_cached()}
    )


@require(VIEW, "view runs")
def dashboard_stats(request: HttpRequest) -> HttpResponse:
    return render(
        request, "runs/partials/dashboard_stats.html", {"dash": selectors.dashboard_cached()}
    )
