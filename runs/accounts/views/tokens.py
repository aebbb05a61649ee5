"""The "API tokens" page: a user creates (shown once) and revokes their personal tokens."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from common.api.tokens import token_create, token_revoke
from common.audit import request_actor
from common.errors import InvalidInput
from common.models import ApiToken
from runs.views.forms import FormError, page_action, render_form_error

EXPIRY_CHOICES = [
    ("", "never"),
    ("7", "7 days"),
    ("30", "30 days"),
    ("90", "90 days"),
    ("365", "1 year"),
]


def _user(request: HttpRequest) -> Any:
    return request.user  # LoginRequiredMiddleware: always a signed-in user here


def _expiry(raw: str) -> dt.datetime | None:
    if not raw:
        return None
    try:
        days = int(raw)
    except ValueError:
        days = 0
    if not 1 <= days <= 3650:
        raise InvalidInput("expiry must be between 1 and 3650 days")
    return timezone.now() + dt.timedelta(days=days)


def _page(request: HttpRequest, status: int = 200, **extra: Any) -> HttpResponse:
    context: dict[str, Any] = {"nav": "tokens", "expiry_choices": EXPIRY_CHOICES, "created": None}
    context.update(extra)
    context["tokens"] = list(
        ApiToken.objects.filter(user=_user(request)).order_by("-created_at", "-id")
    )
    context["now"] = timezone.now()
    if isinstance(context.get("form_error"), FormError):
        error = context.pop("form_error")
        return render_form_error(request, "runs/tokens.html", context, error)
    response = render(request, "runs/tokens.html", context, status=status)
    if context["created"]:
        response["Cache-Control"] = "no-store"  # the secret is on this page, once
    return response


def _token_error(request: HttpRequest, error: FormError, **_: Any) -> HttpResponse:
    """The page with the error inside the form that was sent, the name kept."""
    return _page(request, form_error=error)


@require_http_methods(["GET", "POST"])
@page_action(_token_error)
def token_list(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request)
    token, raw = token_create(
        user=_user(request),
        name=request.POST.get("name", ""),
        expires_at=_expiry(request.POST.get("expires_days", "").strip()),
        actor=request_actor(request, "ui"),
    )
    return _page(request, created={"token": token, "raw": raw})


@require_POST
@page_action(_token_error)
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=token_id, user=_user(request))
    token_revoke(token=token, actor=request_actor(request, "ui"))
    messages.success(request, f"Revoked {token.name} ({token.prefix}).")
    return redirect("runs:tokens")
