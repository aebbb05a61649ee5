"""Sending to a Slack app channel (docs/approvals-slack-email.md): a bot posts to one Slack
channel through the Web API (slack-sdk's WebClient, base URL AWAKEN_SLACK_API_URL).

A ticket's notice is a Block Kit message with its tool, what it asks, its arguments and
Approve / Reject buttons (Answer / Reject for a question); the Slack message's place is
kept (`SlackMessage`) so that, once the ticket closes (decided here, in Slack, by e-mail,
by its deadline, or cancelled with its run), the `ticket.closed` delivery rewrites it to
say who decided what and when, without buttons. Both read the ticket as it is when they
are sent, so a message is never older than the delivery that wrote it. Everything goes
through the notification outbox (notify_drain), never inside a run's transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils import timezone
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from agents.secrets import decrypt, encrypt
from runs.models import Decision, Ticket
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationDelivery,
    NotificationEvent,
)
from runs.operations.models.slack import SlackMessage
from runs.runtime import types as rt

MAX_ARGUMENTS_SHOWN = 2500  # characters of the arguments' JSON in a message
# Slack's errors that trying again cannot fix (the token, the channel, the app's scopes)
PERMANENT_ERRORS = {
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "missing_scope",
    "invalid_blocks",
    "msg_too_long",
}
ACTION_APPROVE = "awaken_approve"
ACTION_REJECT = "awaken_reject"
ACTION_ANSWER = "awaken_answer"
ACTION_OPEN = "awaken_open"
DONE_WORDS = {
    "approve": "Approved",
    "edit": "Approved with edits",
    "reject": "Rejected",
    "respond": "Answered",
}


def channel_set_bot_token(channel: NotificationChannel, token: str) -> None:
    channel.bot_token_encrypted = encrypt(token)


def slack_client(channel: NotificationChannel) -> WebClient:
    """A Web API client for the channel's bot (its token decrypted here, never logged)."""
    return WebClient(
        token=decrypt(channel.bot_token_encrypted),
        base_url=settings.AWAKEN_SLACK_API_URL.rstrip("/") + "/",
        timeout=int(max(1.0, float(settings.AWAKEN_NOTIFY_TIMEOUT))),
    )


def escape(text: Any) -> str:
    """Slack's mrkdwn escapes: what a tool or a model wrote is shown, never a link."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def asks_for_answer(ticket: Ticket) -> bool:
    return ticket.resume_mode == rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT


def _arguments_text(ticket: Ticket) -> str:
    text = json.dumps(ticket.arguments, indent=1, ensure_ascii=False, default=str)
    if len(text) > MAX_ARGUMENTS_SHOWN:
        text = text[:MAX_ARGUMENTS_SHOWN] + "\n… (cut: the run page shows them whole)"
    return escape(text).replace("```", "`\u200b``")


def _stamp(when: Any) -> str:
    return f"{when.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


def outcome_text(ticket: Ticket, decision: Decision | None) -> str:
    """Who decided what and when, for a closed ticket (or why it closed undecided)."""
    if decision is None:
        return f":no_entry_sign: *Cancelled* at {_stamp(ticket.closed_at or timezone.now())}: the run ended before a decision."
    word = DONE_WORDS.get(decision.action, decision.action)
    if decision.actor_id is None and decision.comment.startswith("no decision by the deadline"):
        head = f":hourglass: *Expired* at {_stamp(decision.created_at)}: {word.lower()} by default"
    else:
        head = (
            f"{':white_check_mark:' if decision.action != 'reject' else ':x:'} *{word}* by "
            f"{escape(decision.actor_label)} at {_stamp(decision.created_at)}"
        )
    lines = [head]
    if decision.comment:
        lines.append(f"Reason: {escape(decision.comment[:500])}")
    if decision.action == "respond":
        answer = json.dumps(decision.payload, ensure_ascii=False, default=str)
        lines.append(f"Answer: {escape(answer[:500])}")
    return "\n".join(lines)


def _buttons(ticket: Ticket, url: str) -> dict[str, Any]:
    value = str(ticket.pk)
    first = (
        {"action_id": ACTION_ANSWER, "text": "Answer", "style": "primary"}
        if asks_for_answer(ticket)
        else {"action_id": ACTION_APPROVE, "text": "Approve", "style": "primary"}
    )
    reject = {"action_id": ACTION_REJECT, "text": "Reject", "style": "danger"}
    elements = [
        {
            "type": "button",
            "action_id": button["action_id"],
            "text": {"type": "plain_text", "text": button["text"]},
            "style": button["style"],
            "value": value,
        }
        for button in (first, reject)
    ]
    elements.append(
        {
            "type": "button",
            "action_id": ACTION_OPEN,
            "text": {"type": "plain_text", "text": "Open the run"},
            "url": url,
        }
    )
    return {"type": "actions", "block_id": f"ticket:{ticket.pk}", "elements": elements}


def ticket_message(
    ticket: Ticket, agent: str, url: str, outcome: str | None = None
) -> dict[str, Any]:
    """The message about `ticket` as it is now: `text` (the fallback) and `blocks`;
    buttons while it waits, who decided what and when once it is closed (`outcome`:
    that text, else read from its decision)."""
    title = f"{'Question' if asks_for_answer(ticket) else 'Approval needed'}: {ticket.tool_name} ({agent})"
    lines = [f"*{escape(title)}*"]
    if ticket.message:
        lines.append(f"Asks: {escape(ticket.message[:1000])}")
    if ticket.deadline_at and ticket.status == Ticket.Status.PENDING:
        lines.append(f"Deadline: {_stamp(ticket.deadline_at)} (then {ticket.default_action})")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"```{_arguments_text(ticket)}```"}},
    ]
    if ticket.status == Ticket.Status.PENDING:
        blocks.append(_buttons(ticket, url))
        fallback = title
    else:
        if outcome is None:
            outcome = outcome_text(ticket, Decision.objects.filter(ticket=ticket).first())
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": outcome}})
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"<{escape(url)}|Open the run>"}],
            }
        )
        fallback = f"{title}: {outcome}"
    return {"text": escape(fallback)[:3000], "blocks": blocks}


def _ticket_of(payload: dict[str, Any]) -> Ticket | None:
    ticket_id = (payload.get("ticket") or {}).get("id")
    if not ticket_id:
        return None
    return Ticket.objects.filter(pk=ticket_id).first()


def _agent_name(payload: dict[str, Any]) -> str:
    agent = (payload.get("run") or {}).get("agent") or {}
    return str(agent.get("name") or agent.get("id") or "?")


def _post_ticket(
    client: WebClient, channel: NotificationChannel, row: NotificationDelivery
) -> None:
    ticket = _ticket_of(row.payload)
    if ticket is None:  # removed meanwhile (retention): nothing to tell
        return
    body = ticket_message(ticket, _agent_name(row.payload), str(row.payload.get("url", "")))
    answer = client.chat_postMessage(channel=channel.slack_channel, **body)
    SlackMessage.objects.get_or_create(
        slack_channel=str(answer.get("channel") or channel.slack_channel),
        ts=str(answer["ts"]),
        defaults={"channel": channel, "ticket_id": ticket.pk},
    )


class NotPostedYet(Exception):
    """The ticket's message is still being posted: update it on the next attempt."""


def _update_ticket(
    client: WebClient, channel: NotificationChannel, row: NotificationDelivery
) -> None:
    ticket = _ticket_of(row.payload)
    if ticket is None:  # removed meanwhile (retention): forget its messages
        ticket_id = str((row.payload.get("ticket") or {}).get("id") or "")
        if ticket_id:
            SlackMessage.objects.filter(ticket_id=ticket_id, channel=channel).delete()
        return
    posted = list(SlackMessage.objects.filter(ticket_id=ticket.pk, channel=channel))
    if not posted:
        opening = NotificationDelivery.objects.filter(
            channel=channel,
            subject=row.subject,
            event__in=[NotificationEvent.TICKET_OPENED, NotificationEvent.TICKET_DEADLINE_NEAR],
            status__in=[NotificationDelivery.Status.PENDING, NotificationDelivery.Status.SENDING],
        )
        if opening.exists():
            raise NotPostedYet("the ticket's message is not posted yet")
        return  # never posted (it failed, or it was posted closed): nothing to update
    body = ticket_message(ticket, _agent_name(row.payload), str(row.payload.get("url", "")))
    for message in posted:
        client.chat_update(channel=message.slack_channel, ts=message.ts, **body)
        SlackMessage.objects.filter(pk=message.pk).update(updated_at=timezone.now())


def send_slack_app(
    channel: NotificationChannel,
    row: NotificationDelivery,
    outcome: Any,
    run_body: Callable[[dict[str, Any]], dict[str, Any]],
) -> Any:
    """One delivery to a Slack app channel; `outcome` is notify_send's SendOutcome class,
    `run_body` its Slack message of an event about a run (not a ticket)."""
    if not channel.bot_token_encrypted or not channel.slack_channel:
        return outcome(error="the Slack app channel has no bot token or channel id", permanent=True)
    client = slack_client(channel)
    try:
        if row.event == NotificationEvent.TICKET_CLOSED:
            _update_ticket(client, channel, row)
        elif row.payload.get("ticket"):
            _post_ticket(client, channel, row)
        else:
            client.chat_postMessage(channel=channel.slack_channel, **run_body(row.payload))
    except NotPostedYet as exc:
        return outcome(error=str(exc))
    except SlackApiError as exc:
        code = str(exc.response.get("error", "")) if exc.response is not None else ""
        status = exc.response.status_code if exc.response is not None else None
        return outcome(
            response_code=status, error=f"Slack: {code or exc}", permanent=code in PERMANENT_ERRORS
        )
    except (SlackClientError, OSError) as exc:
        return outcome(error=f"Slack: {type(exc).__name__}: {exc}")
    return outcome(ok=True, response_code=200)


def tickets_closed_queue(ticket_ids: list[Any], now: Any) -> list[NotificationDelivery]:
    """The `ticket.closed` deliveries for tickets that a Slack app channel was asked to
    post (their message is updated when each is sent): two short indexed queries, none
    beyond the first when there is no Slack app channel."""
    channels = list(
        NotificationChannel.objects.filter(kind=NotificationChannel.Kind.SLACK_APP).values_list(
            "pk", flat=True
        )
    )
    if not channels:
        return []
    subjects = {f"ticket:{pk}": pk for pk in ticket_ids}
    asked = NotificationDelivery.objects.filter(
        channel_id__in=channels,
        event__in=[NotificationEvent.TICKET_OPENED, NotificationEvent.TICKET_DEADLINE_NEAR],
        subject__in=list(subjects),
    ).values_list("channel_id", "subject", "payload")
    rows: dict[tuple[int, str], NotificationDelivery] = {}
    for channel_id, subject, payload in asked:
        if (channel_id, subject) in rows:
            continue
        row = NotificationDelivery(
            channel_id=channel_id,
            event=NotificationEvent.TICKET_CLOSED,
            subject=subject,
            created_at=now,
            next_attempt_at=now,
        )
        row.payload = {
            "id": str(row.id),
            "event": NotificationEvent.TICKET_CLOSED.value,
            "occurred_at": now.isoformat().replace("+00:00", "Z"),
            "ticket": {"id": str(subjects[subject])},
            "run": payload.get("run"),
            "url": payload.get("url"),
        }
        rows[(channel_id, subject)] = row
    return list(rows.values())
