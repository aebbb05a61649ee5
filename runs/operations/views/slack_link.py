"""Linking a Slack user to oneself, once, from the notifications page
(docs/approvals-slack-email.md): the link Slack showed an unlinked presser opens the
page with the offer (GET changes nothing); confirming it (POST) links; a linked Slack
user can be unlinked there. Audited (runs.operations.services.slack_links)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from common.audit import request_actor
from common.errors import ServiceError
from runs.operations.models.slack import SlackUserLink
from runs.operations.services.slack_links import (
    link_token_read,
    slack_user_link,
    slack_user_unlink,
)
from runs.operations.views.notifications import SubscriptionForm, notifications_context

TEMPLATE = "runs/notifications.html"


def _page(request: HttpRequest, status: int = 200, **extra: Any) -> HttpResponse:
    context = notifications_context(request, SubscriptionForm(None, user=request.user))
    response = render(request, TEMPLATE, {**context, **extra}, status=status)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_http_methods(["GET", "POST"])
def slack_link(request: HttpRequest, token: str) -> HttpResponse:
    try:
        identity = link_token_read(token)
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("runs:notifications")
    if request.method != "POST":
        return _page(request, slack_link_offer=identity, slack_link_token=token)
    try:
        slack_user_link(
            request.user, identity, SlackUserLink.How.PAGE, request_actor(request, "ui")
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("runs:notifications")
    messages.success(
        request, "Linked: your presses in Slack now decide as you. Press the button again."
    )
    return redirect("runs:notifications")


@require_POST
def slack_unlink(request: HttpRequest, link_id: int) -> HttpResponse:
    link = get_object_or_404(SlackUserLink, pk=link_id, user=request.user)  # another's: 404
    slack_user_unlink(link, request_actor(request, "ui"))
    messages.success(request, "Unlinked the Slack user.")
    return redirect("runs:notifications")
