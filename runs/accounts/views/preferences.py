"""What an operator chooses for themselves from the page header: the time display."""

from __future__ import annotations

from typing import Any, cast

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from runs.models import OperatorPreference


def back_to(request: HttpRequest) -> str:
    """The page the form was sent from (`next`), when it is one of this site's."""
    target = request.POST.get("next", "")
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if target and allowed else "/"


@require_POST
def set_time_display(request: HttpRequest) -> HttpResponse:
    """Remember how this user sees times (relative, local, UTC), then back to the page.
    Login is required (LoginRequiredMiddleware); an unknown choice changes nothing."""
    choice = request.POST.get("time_display", "")
    if choice in OperatorPreference.TimeDisplay.values:
        OperatorPreference.objects.update_or_create(
            user=cast(Any, request.user), defaults={"time_display": choice}
        )
    return redirect(back_to(request))
