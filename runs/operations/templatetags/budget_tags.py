"""`{% budgets_panel %}` (the dashboard) and `{% run_budget_card %}` (the run page, a core
page: the tag reads and renders it, so the core does not import this app): spend against
the limits (docs/budgets.md). The run page's card costs no query when no budget applies."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from runs.operations.selectors.budgets import budget_rows, budgets_of_run, budgets_visible

register = template.Library()

PANEL = "runs/partials/budgets_panel.html"


def _render(context: template.Context, **extra: object) -> SafeString:
    assert context.template is not None  # called while a page renders
    panel = context.template.engine.get_template(PANEL)
    with context.push(**extra):
        return panel.render(context)


@register.simple_tag(takes_context=True)
def budgets_panel(context: template.Context) -> SafeString:
    """Every budget the user may see, with its spend; nothing when there is none."""
    budgets = budgets_visible(context["request"].user)
    return _render(context, budgets=budget_rows(budgets), budget_scope="dashboard")


@register.simple_tag(takes_context=True)
def run_budget_card(context: template.Context) -> SafeString:
    """The budgets that hold the page's `run`, with their spend."""
    rows = budgets_of_run(context["run"])
    return _render(context, budgets=rows, budget_scope="run") if rows else SafeString("")
