"""`{% run_forks_card %}`: the run page's forks card (provenance, the run's forks, the fork
form), read and rendered by this app, so the run page of the core does not import it. A
fork that failed passes what was chosen as `fork_choices` (runs/replays/views/forks.py)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from runs.replays.views.forks import fork_context

register = template.Library()

CARD = "runs/partials/run_fork.html"


@register.simple_tag(takes_context=True)
def run_forks_card(context: template.Context) -> SafeString:
    """The card for the page's `run`, rendered inside the page's context."""
    assert context.template is not None  # called while a page renders
    card = context.template.engine.get_template(CARD)
    choices = context.get("fork_choices") or {}
    with context.push(**fork_context(context["request"], context["run"], **choices)):
        return card.render(context)
