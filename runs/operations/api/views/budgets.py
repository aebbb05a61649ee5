"""/budgets: each team's and agent's budgets with their spend in the current period
(docs/budgets.md). Anyone who sees a team's runs sees its budgets; its admins set them
(audited). Another team's budget answers 404."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from common.api.auth import actor_for
from common.api.base import ApiView, get_or_not_found, validated
from common.api.errors import error_responses
from common.models import Team
from runs.operations.api import budget_serializers as s
from runs.operations.models.budgets import Budget
from runs.operations.selectors.budgets import VIEW_BUDGET, budget_rows, budgets_visible
from runs.operations.services.budget_changes import (
    ADD,
    CHANGE,
    DELETE,
    budget_create,
    budget_delete,
    budget_update,
)

BUDGET_ID = OpenApiParameter("budget_id", OpenApiTypes.INT, OpenApiParameter.PATH)
TAGS = ["budgets"]


def _one(budget: Budget) -> Response:
    return Response(s.BudgetSerializer(budget_rows([budget])[0]).data)


def _visible(request: Request, budget_id: Any) -> Budget:
    try:
        key = int(budget_id)
    except (TypeError, ValueError):
        key = -1
    return get_or_not_found(budgets_visible(request.user), "budget", key)


class BudgetListView(ApiView):
    required_perms = {"GET": VIEW_BUDGET, "POST": ADD}

    @extend_schema(
        operation_id="budgets_list",
        summary="Budgets and their spend",
        description="The budgets of your teams, each with what was spent in its current "
        "day or month (tokens, USD at the prices each run kept) against its limits. "
        "`agent`: the budgets that hold that agent's runs (its own and its team's).",
        tags=TAGS,
        parameters=[s.BudgetQuerySerializer],
        responses={200: s.BudgetListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.BudgetQuerySerializer, request.query_params)
        budgets = budgets_visible(request.user)
        if query.get("team"):
            budgets = budgets.filter(team__slug=query["team"])
        if query.get("agent"):
            agent = Agent.objects.filter(slug=query["agent"]).first()
            if agent is None:
                budgets = budgets.none()
            else:
                team_budget = Q(agent__isnull=True, team_id=agent.team_id)
                budgets = budgets.filter(Q(agent=agent) | team_budget)
        return Response({"items": s.BudgetSerializer(budget_rows(budgets), many=True).data})

    @extend_schema(
        operation_id="budgets_create",
        summary="Set a budget",
        description="A team's budget (or one agent's of the team) per day or month: "
        "cost_limit_usd and/or token_limit, the time zone its periods start in, the "
        "warning level. Team admins only; audited as budget.create. One budget per team "
        "(or agent) and period: a second is 409.",
        tags=TAGS,
        request=s.BudgetCreateSerializer,
        responses={201: s.BudgetSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request) -> Response:
        data = validated(s.BudgetCreateSerializer, request.data)
        team = get_or_not_found(Team.objects.all(), "team", data.pop("team"), by="slug")
        if not request.user.has_perm("common.view_team", team):
            team = get_or_not_found(Team.objects.none(), "team", team.slug, by="slug")
        agent_slug = data.pop("agent", None)
        agent = None
        if agent_slug:
            agents = Agent.objects.filter(team=team)
            agent = get_or_not_found(agents, "agent", agent_slug, by="slug", team=team.slug)
        budget = budget_create(actor=actor_for(request), team=team, agent=agent, **data)
        response = _one(budget)
        response.status_code = 201
        return response


class BudgetDetailView(ApiView):
    required_perms = {"GET": VIEW_BUDGET, "PATCH": CHANGE, "DELETE": DELETE}

    @extend_schema(
        operation_id="budgets_get",
        summary="A budget and its spend",
        tags=TAGS,
        parameters=[BUDGET_ID],
        responses={200: s.BudgetSerializer, **error_responses(404)},
    )
    def get(self, request: Request, budget_id: str) -> Response:
        return _one(_visible(request, budget_id))

    @extend_schema(
        operation_id="budgets_update",
        summary="Change a budget",
        description="Raising or removing a limit lets the runs it held go at once. Team "
        "admins only; audited as budget.update with what it was and became.",
        tags=TAGS,
        parameters=[BUDGET_ID],
        request=s.BudgetChangeSerializer,
        responses={200: s.BudgetSerializer, **error_responses(404, 409, body=True)},
    )
    def patch(self, request: Request, budget_id: str) -> Response:
        data = validated(s.BudgetChangeSerializer, request.data)  # the body first: a 400
        budget = _visible(request, budget_id)
        return _one(budget_update(actor=actor_for(request), budget=budget, **data))

    @extend_schema(
        operation_id="budgets_delete",
        summary="Remove a budget",
        description="The runs it alone held go on. Team admins only; audited.",
        tags=TAGS,
        parameters=[BUDGET_ID],
        responses={204: None, **error_responses(404, 409)},
    )
    def delete(self, request: Request, budget_id: str) -> Response:
        budget_delete(actor=actor_for(request), budget=_visible(request, budget_id))
        return Response(status=204)
