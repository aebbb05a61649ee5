"""Where the thread page's forms show their errors (runs/views/forms.py): the thread
page, the threads page (a new thread), or the run page for the forms shown there."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from common.access import visible_teams
from runs import selectors
from runs.models import PendingInput
from runs.permissions import START, VIEW_THREAD, capabilities
from runs.views.detail import run_form_error
from runs.views.forms import FormError, render_form_error
from runs.views.lists import thread_page_context


def thread_form_error(request: HttpRequest, error: FormError, thread_id: Any) -> HttpResponse:
    """The thread page with the error inside its form; a form sent from the run page
    (`back=run`) gets the run page."""
    context = thread_page_context(request, thread_id)
    if error.values.get("message") is not None and error.url.endswith("/send"):
        context["message"] = error.values["message"]  # the composer keeps what was typed
        context["default_agent"] = error.values.get("agent", context["default_agent"])
        context["mode"] = error.values.get("mode") or context["mode"]
        context["priority"] = error.values.get("priority", context["priority"])
    return render_form_error(request, "runs/thread_detail.html", context, error)


def new_thread_error(request: HttpRequest, error: FormError) -> HttpResponse:
    """The threads page with the error inside its "New thread" form."""
    teams = visible_teams(request.user, VIEW_THREAD)
    context = {
        "nav": "threads",
        "page": selectors.thread_list(cursor=None, q="", teams=teams),
        "q": "",
        "agents": selectors.agents_for_composer(visible_teams(request.user, START)),
        "can": capabilities(request.user),
    }
    return render_form_error(request, "runs/thread_list.html", context, error)


def composer_error(request: HttpRequest, error: FormError, thread_id: Any = None) -> HttpResponse:
    if thread_id is None:
        return new_thread_error(request, error)
    return thread_form_error(request, error, thread_id)


def thread_error(request: HttpRequest, error: FormError, thread_id: Any) -> HttpResponse:
    return thread_form_error(request, error, thread_id)


def input_error(request: HttpRequest, error: FormError, input_id: Any) -> HttpResponse:
    """A pending input's edit or retract form: on the run page (steer input, `back=run`)
    or the thread page."""
    input_ = get_object_or_404(PendingInput.objects.only("thread_id", "run_id"), pk=input_id)
    if error.values.get("back") == "run" and input_.run_id is not None:
        return run_form_error(request, error, input_.run_id)
    return thread_form_error(request, error, input_.thread_id)
