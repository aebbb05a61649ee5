"""Template helpers of ticket claims (runs/decisions/services/claims.py)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from runs.selectors.claims import Claim, live_claim
from runs.templatetags.runs_extras import row_url, short_id

register = template.Library()


@register.simple_tag(takes_context=True)
def ticket_claim(context: template.Context, ticket: Any) -> Claim | None:
    """`{% ticket_claim t as claim %}`: the ticket's live claim as the signed-in user sees
    it (`claim.mine`, `claim.by`, `claim.left` "2 min", `claim.ask` the question to
    confirm before deciding a ticket someone else is on), or None."""
    request = context.get("request")
    viewer = getattr(request, "user", None) or context.get("user")
    return live_claim(ticket, viewer)


WHO_BUTTON = (
    '<button type="submit" class="link" formaction="{}" formmethod="post" hx-post="{}"'
    ' hx-target="{}" hx-swap="innerHTML"{}>{}</button>'
)


def _who_button(url: str, target: str, disabled: str, label: str) -> SafeString:
    return format_html(WHO_BUTTON, url, url, target, disabled, label)


def _decider_controls(ticket: Any, claim: Claim | None, deciders: Any, target: str) -> SafeString:
    """A decider's Claim (or Release) button, assign select and Assign button, disabled
    while the ticket's team is frozen."""
    disabled = " disabled" if getattr(ticket, "frozen_team", None) else ""
    if claim and claim.mine:
        release = row_url("runs:ticket-release", ticket.pk)
        button = _who_button(release, target, disabled, "Release")
    elif not claim:
        button = _who_button(row_url("runs:ticket-claim", ticket.pk), target, disabled, "Claim")
    else:
        button = SafeString("")
    options = format_html_join(
        "",
        '<option value="{}"{}>{}</option>',
        (
            (
                user.username,
                " selected" if user.pk == ticket.assigned_to_id else "",
                user.username,
            )
            for user in deciders
        ),
    )
    select = format_html(
        '<select name="assignee-{}"{} aria-label="Assign {} {} to">'
        '<option value="">nobody</option>{}</select>',
        ticket.pk,
        disabled,
        ticket.tool_name,
        short_id(ticket.pk),
        options,
    )
    assign = _who_button(row_url("runs:ticket-assign", ticket.pk), target, disabled, "Assign")
    return format_html('<div class="small">\n  {}\n  {}\n  {}\n</div>', button, select, assign)


@register.simple_tag(takes_context=True)
def ticket_who(
    context: template.Context,
    ticket: Any,
    claim: Claim | None,
    deciders: Any,
    decide: bool,
    target: str,
) -> SafeString:
    """`{% ticket_who t claim deciders can.decide "#inbox-list" %}`: an inbox row's claim
    and assignee, and for a decider the Claim (or Release), assign select and Assign
    buttons, escaped; `claim` is the row's {% ticket_claim %}, `deciders` the users the
    select offers. Inside the bulk form the buttons post to their own URL (formaction
    without JavaScript, hx-post with it). In Python rather than a template included per
    row: a page lists 50 rows."""
    parts: list[str] = []
    if claim:
        holder = "you are" if claim.mine else format_html("{} is", claim.by)
        parts.append(
            format_html('<span class="badge" data-claim>{} on this, {}</span>', holder, claim.left)
        )
    if ticket.assigned_to_id:
        viewer = context.get("user")
        if viewer is not None and ticket.assigned_to_id == viewer.pk:
            assignee: str = "you"
        else:
            assignee = ticket.assigned_to.get_username()
        parts.append(
            format_html('<span class="small nowrap" data-assignee>assigned to {}</span>', assignee)
        )
    elif not claim and not decide:  # a decider reads "nobody" in the assign select
        parts.append('<span class="muted small">nobody</span>')
    if decide:
        parts.append(_decider_controls(ticket, claim, deciders, target))
    return mark_safe("\n".join(parts))  # each part escaped above
