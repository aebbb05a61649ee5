"""The replay pages (docs/replays.md): the sets and the "New replay" form (admins:
`replays.replay_runs`; viewers read with `replays.view_replayset`), how many runs a filter
matches, one set's table (refetched while it runs) and its cancel."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.models import Agent
from common.access import allowed_unfrozen, frozen_team_of, scope
from common.audit import request_actor
from common.errors import Forbidden, InvalidInput, ServiceError
from runs.permissions import denied, may_see, require, visible_or_404
from runs.replays.models.replays import ReplaySet
from runs.replays.selectors.replays import replay_rows, replay_sets, replay_summary
from runs.replays.services.replays import (
    DEFAULT_LIMIT,
    MAX_CONCURRENCY,
    MAX_LIMIT,
    OUTCOMES,
    replay_cancel,
    replay_create,
    replay_preview_count,
    replay_request,
)
from runs.views.forms import FormError, page_action, render_form_error

VIEW_REPLAYS = "replays.view_replayset"
REPLAY = "replays.replay_runs"
REFRESH_SECONDS = 2


def _body(data: Any) -> dict[str, Any]:
    """The form's fields as the service's request (the API's body shape)."""
    return {
        "agent_id": data.get("agent_id", ""),
        "version": data.get("version", "latest"),
        "filters": {
            "outcome": data.get("outcome", "any"),
            "created_after": data.get("created_after", ""),
            "created_before": data.get("created_before", ""),
        },
        "limit": data.get("limit", ""),
        "ticket_policy": data.get("ticket_policy", ""),
        "http_mode": data.get("http_mode", ""),
        "concurrency": data.get("concurrency", ""),
    }


def _form_context(request: HttpRequest, values: Any) -> dict[str, Any]:
    return {
        "nav": "replays",
        "sets": list(scope(replay_sets(), request.user, "agent__team_id")[:50]),
        "can_replay": allowed_unfrozen(request.user, REPLAY),
        "agents": list(  # the agents of the teams where the user may replay
            scope(Agent.objects.order_by("slug"), request.user, "team_id", REPLAY).values_list(
                "slug", "name"
            )
        ),
        "values": values,
        "outcomes": OUTCOMES,
        "policies": ReplaySet.TicketPolicy.values,
        "http_modes": ReplaySet.HttpMode.values,
        "max_limit": MAX_LIMIT,
        "max_concurrency": MAX_CONCURRENCY,
        "default_limit": DEFAULT_LIMIT,
    }


def _new_replay_error(request: HttpRequest, error: FormError) -> HttpResponse:
    """The replays page with the error inside the "New replay" form, the values kept."""
    context = _form_context(request, error.values)
    return render_form_error(request, "runs/replays.html", context, error)


@require_http_methods(["GET", "POST"])
@page_action(_new_replay_error)
@require(VIEW_REPLAYS, "see replays")
def replay_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return render(request, "runs/replays.html", _form_context(request, {}))
    if not allowed_unfrozen(request.user, REPLAY):
        raise Forbidden("You may not replay runs.")
    checked = replay_request(_body(request.POST), user=request.user)
    if not allowed_unfrozen(request.user, REPLAY, checked.agent):  # another team's agent
        raise InvalidInput(f"no agent {checked.agent.slug!r}")
    replay_set = replay_create(request=checked, actor=request_actor(request, "ui"))
    messages.success(request, f"Replaying {replay_set.items.count()} runs.")
    return redirect("runs:replay-detail", replay_set.pk)


@require_GET
@require(VIEW_REPLAYS, "see replays")
def replay_preview(request: HttpRequest) -> HttpResponse:
    """How many runs the form's filters match (the form refetches it as it changes)."""
    context: dict[str, Any] = {}
    try:
        request_ = replay_request(_body(request.GET), user=request.user)
        if not may_see(request.user, request_.agent):  # another team's agent
            raise InvalidInput(f"no agent {request_.agent.slug!r}")
    except ServiceError as exc:
        context["error"] = exc.message
    else:
        context["matched"], context["picked"] = replay_preview_count(request_)
    return render(request, "runs/replays_preview.html", context)


def _table_context(replay_set: ReplaySet) -> dict[str, Any]:
    rows = replay_rows(replay_set)
    return {
        "replay_set": replay_set,
        "rows": rows,
        "summary": replay_summary(replay_set, rows),
        "live": replay_set.status == ReplaySet.Status.RUNNING,
        "refresh_seconds": REFRESH_SECONDS,
    }


@require_GET
@require(VIEW_REPLAYS, "see replays")
def replay_detail(request: HttpRequest, set_id: Any) -> HttpResponse:
    replay_set = get_object_or_404(
        ReplaySet.objects.select_related("agent", "version", "created_by"), pk=set_id
    )
    visible_or_404(request.user, replay_set)
    return render(request, "runs/replays_detail.html", _detail_context(request, replay_set))


def _detail_context(request: HttpRequest, replay_set: ReplaySet) -> dict[str, Any]:
    return {
        "nav": "replays",
        # a frozen team's cancel is shown disabled, saying why
        "can_replay": allowed_unfrozen(request.user, REPLAY, replay_set),
        "frozen": frozen_team_of(request.user, replay_set.agent),
        **_table_context(replay_set),
    }


def _cancel_error(request: HttpRequest, error: FormError, set_id: Any) -> HttpResponse:
    replay_set = get_object_or_404(
        ReplaySet.objects.select_related("agent", "version", "created_by"), pk=set_id
    )
    visible_or_404(request.user, replay_set)
    context = _detail_context(request, replay_set)
    return render_form_error(request, "runs/replays_detail.html", context, error)


@require_GET
@require(VIEW_REPLAYS, "see replays")
def replay_table(request: HttpRequest, set_id: Any) -> HttpResponse:
    replay_set = get_object_or_404(ReplaySet.objects.select_related("agent", "version"), pk=set_id)
    visible_or_404(request.user, replay_set)
    return render(request, "runs/replays_table.html", _detail_context(request, replay_set))


@require_POST
@page_action(_cancel_error)
@require(REPLAY, "cancel replays")
def replay_cancel_view(request: HttpRequest, set_id: Any) -> HttpResponse:
    replay_set = get_object_or_404(ReplaySet.objects.select_related("agent"), pk=set_id)
    if (refused := denied(request, REPLAY, replay_set, "replay in this team")) is not None:
        return refused
    replay_cancel(replay_set=replay_set, actor=request_actor(request, "ui"))
    messages.success(request, "Replay cancelled.")
    return redirect("runs:replay-detail", replay_set.pk)
