"""The "Notifications" page: each user subscribes themselves (by email to their own
address) to events, by agent and tool, deletes their subscriptions and sees what was sent
to them; the team's routing rules are listed to those who may read them. Channels and
rules are configured in the admin."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agents.models import Agent
from common.access import scope
from common.audit import request_actor
from common.errors import InvalidInput
from runs.operations.models.notifications import (
    ROUTABLE_EVENT_CHOICES,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.models.slack import SlackUserLink
from runs.operations.services.notifications import (
    deliveries_of,
    subscription_add,
    subscription_delete,
)
from runs.permissions import VIEW, require
from runs.views.forms import FormError, page_action, render_form_error, shown_data

VIEW_RULES = "operations.view_notificationrule"


class SubscriptionForm(forms.Form):
    events = forms.MultipleChoiceField(
        choices=ROUTABLE_EVENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )
    agent = forms.ModelChoiceField(
        queryset=Agent.objects.order_by("slug"), required=False, to_field_name="slug"
    )
    tool = forms.CharField(required=False, max_length=200, strip=True)

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = scope(Agent.objects.order_by("slug"), user, "team_id")  # user's teams


def notifications_context(request: HttpRequest, form: SubscriptionForm) -> dict[str, Any]:
    user: Any = request.user  # LoginRequiredMiddleware: always a signed-in user here
    can_read_rules = user.has_perm(VIEW_RULES)
    rules = (
        list(
            NotificationRule.objects.filter(enabled=True, channel__enabled=True)
            .select_related("channel", "agent")
            .order_by("channel__name", "id")
        )
        if can_read_rules
        else []
    )
    return {
        "nav": "notifications",
        "form": form,
        "event_choices": ROUTABLE_EVENT_CHOICES,
        "agents": scope(Agent.objects.order_by("slug"), user, "team_id").values_list(
            "slug", "name"
        ),
        "subscriptions": NotificationSubscription.objects.filter(user=user)
        .select_related("agent")
        .order_by("id"),
        "deliveries": deliveries_of(user),
        "can_read_rules": can_read_rules,
        "rules": rules,
        "slack_links": SlackUserLink.objects.filter(user=user).order_by("linked_at"),
    }


def _subscribe_error(request: HttpRequest, error: FormError, **_: Any) -> HttpResponse:
    """The page with the error inside the form that was sent, the choices kept."""
    form = SubscriptionForm(shown_data(request.POST), user=request.user)  # as sent
    context = notifications_context(request, form)
    return render_form_error(request, "runs/notifications.html", context, error)


@require_http_methods(["GET", "POST"])
@page_action(_subscribe_error)
@require(VIEW, "manage notifications")
def notifications(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        form = SubscriptionForm(None, user=request.user)
        return render(request, "runs/notifications.html", notifications_context(request, form))
    form = SubscriptionForm(request.POST, user=request.user)
    if not form.is_valid():
        raise InvalidInput("Check the form: " + "; ".join(_errors(form)))
    data = form.cleaned_data
    subscription_add(
        user=request.user,
        events=list(data["events"]),
        agent=data["agent"],
        tool=data["tool"],
        actor=request_actor(request, "ui"),
    )
    messages.success(request, "Subscribed.")
    return redirect("runs:notifications")


def _errors(form: forms.Form) -> list[str]:
    return [f"{field}: {error}" for field, errors in form.errors.items() for error in errors]


@require_POST
@page_action(_subscribe_error)
@require(VIEW, "manage notifications")
def subscription_delete_view(request: HttpRequest, subscription_id: int) -> HttpResponse:
    subscription = get_object_or_404(  # another user's: 404
        NotificationSubscription, pk=subscription_id, user=request.user
    )
    subscription_delete(subscription, request_actor(request, "ui"))
    messages.success(request, "Unsubscribed.")
    return redirect("runs:notifications")
