"""The notification routes pages (docs/notifications.md): which events of which agents go
to which channel. A team's admins create, change and delete the routes of their team's
agents; a route for every agent is shared and only site-wide admins change it; everyone
who may read routes sees those of their teams and the shared ones, and the channels
(their URLs and secrets are write-only: never shown). The form and its validation are
the admin's (runs/operations/notification_forms.py); every change is audited by the service."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.models import Agent
from common.access import allowed_unfrozen, site_wide, visible_teams
from common.audit import request_actor
from common.errors import Forbidden, ServiceError
from common.teams import ensure_not_frozen_only
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationEvent,
    NotificationRule,
)
from runs.operations.notification_forms import NotificationRuleForm
from runs.operations.schedule_forms import AgentChoice
from runs.operations.services.notification_routes import rule_delete, rule_save
from runs.permissions import forbidden, require
from runs.views.forms import FormError, page_action, render_form_error, shown_data

VIEW = "operations.view_notificationrule"
ADD = "operations.add_notificationrule"
CHANGE = "operations.change_notificationrule"
DELETE = "operations.delete_notificationrule"
VIEW_CHANNEL = "operations.view_notificationchannel"
EVENT_LABELS = dict(NotificationEvent.choices)


def _user(request: HttpRequest) -> Any:
    return request.user  # LoginRequiredMiddleware: always a signed-in user here


def _visible(user: Any) -> Any:
    """The routes `user` sees: those of their teams' agents, and the shared ones."""
    rows = NotificationRule.objects.select_related("channel", "agent", "agent__team")
    teams = visible_teams(user, VIEW)
    if teams is not None:
        rows = rows.filter(Q(agent__team_id__in=teams) | Q(agent__isnull=True))
    return rows.order_by("channel__name", "id")


def _rule(request: HttpRequest, rule_id: int) -> NotificationRule:
    rule = _visible(_user(request)).filter(pk=rule_id).first()
    if rule is None:  # another team's route is not confirmed to exist
        raise Http404("no such route")
    return rule  # type: ignore[no-any-return]


def _team_id(rule: NotificationRule) -> int | None:
    return rule.agent.team_id if rule.agent is not None else None


def _allowed(user: Any, perm: str, rule: NotificationRule) -> bool:
    """Whether the role allows `perm` on the route were its team not frozen (a shared
    route: site-wide roles only)."""
    team = _team_id(rule)
    return site_wide(user, perm) if team is None else allowed_unfrozen(user, perm, team)


def _ensure(user: Any, perm: str, rule: NotificationRule, what: str) -> None:
    """Forbidden unless `user` may `perm` on the route; Frozen (409, saying why) when only
    its team's freeze stands in the way."""
    if not _allowed(user, perm, rule):
        raise Forbidden(f"you may not {what}")
    team = _team_id(rule)
    if team is not None:
        ensure_not_frozen_only(user, perm, team)


def _row(user: Any, rule: NotificationRule) -> dict[str, Any]:
    team = rule.agent.team if rule.agent is not None else None
    return {
        "rule": rule,
        "events": [EVENT_LABELS.get(event, event) for event in rule.events or []],
        "may_change": _allowed(user, CHANGE, rule),
        "may_delete": _allowed(user, DELETE, rule),
        "frozen": team if team is not None and team.frozen else None,
    }


def _list_context(request: HttpRequest) -> dict[str, Any]:
    user = _user(request)
    channels = NotificationChannel.objects.order_by("name") if user.has_perm(VIEW_CHANNEL) else None
    return {
        "nav": "notifications",
        "rows": [_row(user, rule) for rule in _visible(user)],
        "channels": channels,
        "channel_admin": {
            verb: site_wide(user, f"operations.{verb}_notificationchannel")
            for verb in ("add", "change", "delete")
        },
        "may_add": allowed_unfrozen(user, ADD),
    }


@require_GET
@require(VIEW, "see notification routes")
def route_list(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/routes/list.html", _list_context(request))


# --- create and change ---------------------------------------------------------------------------


class ChannelChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.name} · {obj.get_kind_display()}"


class RouteForm(NotificationRuleForm):
    """The admin's rule form: the agent among those of the user's teams, "every agent"
    (a shared route) for site-wide admins only."""

    def __init__(self, *args: Any, user: Any = None, perm: str = ADD, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        teams = visible_teams(user, perm)
        agents = Agent.objects.select_related("team").order_by("team__name", "name", "slug")
        shared = site_wide(user, perm)
        self.fields["agent"] = AgentChoice(
            queryset=agents if teams is None else agents.filter(team_id__in=teams),
            required=not shared,
            empty_label="every agent (a shared route)" if shared else None,
            label="Agent",
            help_text="Only this agent's runs and tickets."
            if shared
            else "Routes for every agent are shared: site-wide admins set them.",
        )
        self.fields["channel"] = ChannelChoice(
            queryset=NotificationChannel.objects.order_by("name"),
            label="Channel",
            help_text="Where the events go.",
        )
        self.fields["tool"].widget.attrs["placeholder"] = "any, or a pattern: send_*"
        self.fields["tool"].help_text = "Ticket events only: tools matching this pattern."


def _form_page(
    request: HttpRequest, form: RouteForm, rule: NotificationRule | None, status: int = 200
) -> HttpResponse:
    team = rule.agent.team if rule is not None and rule.agent is not None else None
    context = {
        "nav": "notifications",
        "form": form,
        "rule": rule,
        "frozen": team if team is not None and team.frozen else None,
        "action": reverse("runs:notification-route-edit", args=[rule.pk])
        if rule is not None
        else reverse("runs:notification-route-new"),
    }
    return render(request, "runs/routes/form.html", context, status=status)


def _save(request: HttpRequest, form: RouteForm, rule: NotificationRule | None) -> HttpResponse:
    if not form.is_valid():
        return _form_page(request, form, rule, status=400)
    try:
        saved = rule_save(form.instance, request_actor(request, "ui"))
    except ServiceError as exc:
        form.add_error(None, exc.message)
        return _form_page(request, form, rule, status=exc.status)
    messages.success(request, f"Saved the route to {saved.channel.name}.")
    return redirect("runs:notification-routes")


def _form_refused(request: HttpRequest, error: FormError, **kwargs: Any) -> HttpResponse:
    """A NUL in a field, or a refusal before the form was read: the form again, as sent."""
    rule_id = kwargs.get("rule_id")
    rule = _rule(request, rule_id) if rule_id else None
    form = RouteForm(
        shown_data(request.POST), instance=rule, user=_user(request), perm=CHANGE if rule else ADD
    )
    form.is_valid()
    form.add_error(None, error.text)
    return _form_page(request, form, rule, status=error.status)


@require_http_methods(["GET", "POST"])
@page_action(_form_refused)
def route_new(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    if not allowed_unfrozen(user, ADD):
        return forbidden(request, "create notification routes")
    if request.method != "POST":
        return _form_page(request, RouteForm(user=user), None)
    return _save(request, RouteForm(request.POST, user=user), None)


@require_http_methods(["GET", "POST"])
@page_action(_form_refused)
def route_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = _rule(request, rule_id)
    user = _user(request)
    if not _allowed(user, CHANGE, rule):
        return forbidden(request, "change this notification route")
    if request.method != "POST":
        return _form_page(request, RouteForm(instance=rule, user=user, perm=CHANGE), rule)
    return _save(request, RouteForm(request.POST, instance=rule, user=user, perm=CHANGE), rule)


def _delete_refused(request: HttpRequest, error: FormError, **_: Any) -> HttpResponse:
    return render_form_error(request, "runs/routes/list.html", _list_context(request), error)


@require_POST
@page_action(_delete_refused)
def route_delete_view(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = _rule(request, rule_id)
    _ensure(_user(request), DELETE, rule, "delete this notification route")
    rule_delete(rule, request_actor(request, "ui"))
    messages.success(request, f"Deleted the route to {rule.channel.name}.")
    return redirect("runs:notification-routes")
