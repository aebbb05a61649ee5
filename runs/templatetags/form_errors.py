"""A page action's error inside the form that was sent (runs/views/forms.py):
`{% form_error url "reject" %}` shows the message in the form posting to `url` (with that
`action`), `{% form_kept url "comment" default "reject" %}` gives back what was typed."""

from __future__ import annotations

from typing import Any

from django import template

from runs.views.forms import FormError

register = template.Library()


def _error(context: Any, url: str, action: str) -> FormError | None:
    error = context.get("form_error")
    if isinstance(error, FormError) and error.is_for(str(url), action):
        return error
    return None


@register.inclusion_tag("runs/partials/form_error.html", takes_context=True)
def form_error(context: Any, url: str, action: str = "") -> dict[str, Any]:
    error = _error(context, url, action)
    if error is not None:
        error.shown = True
    return {"error": error}


@register.simple_tag(takes_context=True)
def form_kept(context: Any, url: str, name: str, default: Any = "", action: str = "") -> Any:
    error = _error(context, url, action)
    return error.value(name, default) if error is not None else default
