"""`{% saved_views_panel "runs" %}`: the saved views of a page (the runs list, the inbox)
and its "Save this view" form, for the user of the request. The page's view does not
read them, so a page below this app (the runs list) shows them without importing it."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from runs.accounts.views.saved_views import saved_views_context

register = template.Library()

PANEL = "runs/partials/saved_views.html"


@register.simple_tag(takes_context=True)
def saved_views_panel(context: template.Context, page: str) -> SafeString:
    """The panel rendered inside the page's context (its form errors, its CSRF token)."""
    assert context.template is not None  # called while a page renders
    panel = context.template.engine.get_template(PANEL)
    with context.push(**saved_views_context(context["request"], page)):
        return panel.render(context)
