"""Template helpers of "Make this a rule" (runs/decisions/views/rules.py)."""

from __future__ import annotations

from typing import Any

from django import template

from runs.decisions.views.rules import rule_candidate

register = template.Library()


@register.filter(name="rule_candidate")
def rule_candidate_filter(ticket: Any) -> bool:
    """Whether a decided ticket of the run page offers "Make this a rule"."""
    return rule_candidate(ticket)
