"""An inbox row's own buttons (runs/decisions/views/inbox.py `row_decide`): Approve, or Answer for
a question; Reject, with the reason inline when the row's team requires one. The buttons
sit in the row and submit, through their `form` attribute, forms rendered after the list's
bulk form (forms do not nest): one per action, so a required reason does not hold back
Approve. In Python rather than templates included per row (a page lists 50 rows), like
`ticket_who`; everything is escaped by format_html."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from runs.templatetags.form_errors import _error
from runs.templatetags.runs_extras import RESPOND_ONLY, row_url, short_id

register = template.Library()

ERROR = '<p class="flash error form-error" role="alert" data-error-code="{}">{}</p>'
ANSWER = (
    '<label class="small inbox-answer">Answer <textarea name="answer" form="answer-{}" rows="1"'
    ' required aria-label="Answer to {} {}"{}>{}</textarea></label>\n'
    '<button type="submit" class="primary" form="answer-{}" data-row-action="respond"{}{}>'
    "Answer</button>"
)
APPROVE = (
    '<button type="submit" class="ok" form="approve-{}" data-row-action="approve"{}{}>'
    "Approve</button>"
)
REASON = (
    '<input name="comment" form="reject-{}" maxlength="2000" required aria-required="true"'
    ' placeholder="Reason (required)" aria-label="Reason for rejecting {} {} (required by team'
    ' {})" value="{}"{}>'
)
REJECT = (
    '<button type="submit" class="bad" form="reject-{}" data-row-action="reject"{}{}>'
    "Reject</button>"
)
FORM = (
    '<form id="{}-{}" class="inbox-row-form" method="post" action="{}" hx-post="{}"'
    ' hx-target="#inbox-list" hx-swap="innerHTML"><input type="hidden"'
    ' name="csrfmiddlewaretoken" value="{}"><input type="hidden" name="action" value="{}">'
    "</form>"
)


def _kept(context: Any, url: str, name: str, action: str) -> str:
    error = _error(context, url, action)
    return str(error.value(name, "")) if error is not None else ""


@register.simple_tag(takes_context=True)
def inbox_row_actions(context: Any, ticket: Any, claim: Any) -> SafeString:
    """`{% inbox_row_actions t claim %}`: the row's buttons (`claim` its {% ticket_claim %}:
    deciding a ticket someone else is on asks to confirm first)."""
    url = row_url("runs:inbox-decide", ticket.pk)
    disabled = " disabled" if getattr(ticket, "frozen_team", None) else ""
    ask = format_html(' data-confirm="{}"', claim.ask) if claim and claim.ask else ""
    name, ident = ticket.tool_name, short_id(ticket.pk)
    parts: list[SafeString] = []
    error = _error(context, url, "")
    if error is not None:
        error.shown = True
        parts.append(format_html(ERROR, error.code, error.text))
    if ticket.resume_mode == RESPOND_ONLY:
        kept = _kept(context, url, "answer", "respond")
        parts.append(
            format_html(ANSWER, ticket.pk, name, ident, disabled, kept, ticket.pk, ask, disabled)
        )
    else:
        parts.append(format_html(APPROVE, ticket.pk, ask, disabled))
    if getattr(ticket, "reason_required", False):
        kept = _kept(context, url, "comment", "reject")
        parts.append(format_html(REASON, ticket.pk, name, ident, ticket.team_name, kept, disabled))
    parts.append(format_html(REJECT, ticket.pk, ask, disabled))
    return format_html(
        '<div class="inbox-row-actions" data-row-actions>\n{}\n</div>',
        format_html_join("\n", "{}", ((part,) for part in parts)),
    )


@register.simple_tag(takes_context=True)
def inbox_row_forms(context: Any, tickets: Any, query_suffix: str) -> SafeString:
    """`{% inbox_row_forms tickets filters.query_suffix %}`: the forms the rows' buttons
    submit (none for a frozen team's row), after the bulk form; the list's filters ride
    in the query string."""
    token = str(context.get("csrf_token", ""))
    rows = []
    for ticket in tickets:
        if getattr(ticket, "frozen_team", None):
            continue
        url = row_url("runs:inbox-decide", ticket.pk) + query_suffix
        first = "answer" if ticket.resume_mode == RESPOND_ONLY else "approve"
        action = "respond" if first == "answer" else "approve"
        rows.append((first, ticket.pk, url, url, token, action))
        rows.append(("reject", ticket.pk, url, url, token, "reject"))
    return format_html_join("\n", FORM, rows)
