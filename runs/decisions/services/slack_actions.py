"""Slack's interaction requests (docs/approvals-slack-email.md): POST
/integrations/slack/actions, as Slack sends them when someone presses a button of a
ticket's message or submits the modal that asks for a reason or an answer.

A request counts only when it is signed by the signing secret of one of the enabled Slack
app channels (slack-sdk's SignatureVerifier), its timestamp is within five minutes, and
its signature was not seen before (a replay); anything else is 401 and decides nothing.
The Slack user must be linked to a user here (runs.operations.services.slack_links); the
decision then goes through `remote_decide`: the user's role in the ticket's team, the
freeze, a reason where the team requires one, someone else's claim, first decision wins,
idempotent by the interaction (its trigger id, or the modal's view id). Refusals are told
to the presser alone (chat.postEphemeral; in the modal, as a field's error); the message
itself is rewritten by the `ticket.closed` delivery of the outbox once the ticket closes.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import SignatureVerifier

from agents.secrets import SecretError, decrypt
from common.audit import Actor
from common.errors import DecisionConflict, InvalidInput, ServiceError
from runs.decisions.services.remote_decide import (
    ensure_may_decide,
    remote_decide,
    ticket_for_decision,
)
from runs.models import Decision, Ticket
from runs.operations.models.notifications import NotificationChannel
from runs.operations.models.slack import SlackUserLink
from runs.operations.services.notify_slack import (
    ACTION_ANSWER,
    ACTION_APPROVE,
    ACTION_REJECT,
    outcome_text,
    slack_client,
)
from runs.operations.services.slack_links import (
    SlackIdentity,
    link_url,
    linked_user,
    slack_user_link,
    user_by_verified_email,
)
from runs.ticket_forms import parse_answer

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 5 * 60  # Slack's: older requests are refused
SEEN_CACHE = "api_throttle"  # shared through Redis when there is one
MODAL_CALLBACK = "awaken_decide"
MODAL_ACTIONS = {ACTION_REJECT: "reject", ACTION_ANSWER: "respond"}


class Unverified(Exception):
    """Not a request Slack signed for one of our Slack app channels (or a replay)."""


def verified_channel(body: bytes, headers: Any) -> NotificationChannel:
    """The Slack app channel whose signing secret signed this request (Unverified when
    none did, when it is older than five minutes, or when it was seen before)."""
    timestamp = headers.get("X-Slack-Request-Timestamp") or ""
    signature = headers.get("X-Slack-Signature") or ""
    try:
        age = abs(time.time() - int(timestamp))
    except ValueError:
        raise Unverified("missing or invalid X-Slack-Request-Timestamp") from None
    if age > WINDOW_SECONDS:
        raise Unverified("the request is older than five minutes")
    channels = NotificationChannel.objects.filter(
        kind=NotificationChannel.Kind.SLACK_APP, enabled=True
    ).exclude(signing_secret_encrypted="")
    for channel in channels:
        try:
            secret = decrypt(channel.signing_secret_encrypted)
        except SecretError:
            continue
        if secret and SignatureVerifier(secret).is_valid(body, timestamp, signature):
            if not caches[SEEN_CACHE].add(f"slack-seen:{signature}", 1, WINDOW_SECONDS * 2):
                raise Unverified("this request was received before (a replay)")
            return channel
    raise Unverified("the signature does not match")


@dataclass(frozen=True)
class Interaction:
    channel: NotificationChannel
    payload: dict[str, Any]
    request_id: str

    @property
    def identity(self) -> SlackIdentity:
        user = self.payload.get("user") or {}
        team = (self.payload.get("team") or {}).get("id") or user.get("team_id") or ""
        return SlackIdentity(str(team), str(user.get("id") or ""), str(user.get("username") or ""))

    @property
    def slack_channel(self) -> str:
        where = self.payload.get("channel") or {}
        return str(where.get("id") or self.channel.slack_channel)

    def tell(self, text: str, slack_channel: str = "") -> None:
        """Say `text` to the presser alone; Slack's failure to take it is only logged."""
        try:
            slack_client(self.channel).chat_postEphemeral(
                channel=slack_channel or self.slack_channel,
                user=self.identity.user_id,
                text=text,
            )
        except (SlackApiError, SlackClientError, OSError):
            logger.warning("could not tell a Slack user why they were refused", exc_info=True)


def _user_of(interaction: Interaction) -> Any:
    """The linked user, or one linked now by the verified e-mail address (when allowed)."""
    identity = interaction.identity
    user = linked_user(identity)
    if user is not None or not settings.AWAKEN_SLACK_LINK_BY_EMAIL:
        return user
    try:
        answer = slack_client(interaction.channel).users_info(user=identity.user_id)
    except (SlackApiError, SlackClientError, OSError):
        logger.warning("users.info failed for a Slack user", exc_info=True)
        return None
    user = user_by_verified_email(answer.get("user") or {})
    if user is None:
        return None
    actor = Actor(label=f"slack {identity.user_id}", source="slack")
    try:
        slack_user_link(user, identity, SlackUserLink.How.EMAIL, actor)
    except ServiceError:
        return None
    return user


def _unlinked_text(identity: SlackIdentity) -> str:
    return (
        "Your Slack account is not linked to a user of Awaken Ops, so nothing was decided. "
        f"Link it once (sign in, then confirm): {link_url(identity)} — then press again."
    )


def _closed_text(ticket: Ticket) -> str:
    decision = Decision.objects.filter(ticket=ticket).first()
    return "Nothing was decided: this ticket is closed. " + outcome_text(ticket, decision)


def handle(interaction: Interaction) -> dict[str, Any] | None:
    """Act on one verified interaction; the JSON to answer Slack with, or None (200)."""
    kind = interaction.payload.get("type")
    if kind == "block_actions":
        _block_action(interaction)
        return None
    if (
        kind == "view_submission"
        and (interaction.payload.get("view") or {}).get("callback_id") == MODAL_CALLBACK
    ):
        return _view_submission(interaction)
    return None  # anything else (a modal closed, a link button): nothing to do


def _block_action(interaction: Interaction) -> None:
    actions = interaction.payload.get("actions") or []
    action = actions[0] if actions else {}
    action_id = action.get("action_id")
    if action_id not in (ACTION_APPROVE, ACTION_REJECT, ACTION_ANSWER):
        return  # "Open the run" is a link: Slack tells us, nothing to do
    user = _user_of(interaction)
    if user is None:
        interaction.tell(_unlinked_text(interaction.identity))
        return
    ticket = ticket_for_decision(_uuid_or_none(action.get("value")))
    if ticket is None:
        interaction.tell("Nothing was decided: this ticket no longer exists.")
        return
    key = f"slack:{interaction.payload.get('trigger_id') or action.get('action_ts')}"
    if Decision.objects.filter(ticket=ticket, decision_id=key).exists():
        return  # this interaction again (Slack retried it): decided already
    if ticket.status != Ticket.Status.PENDING:
        interaction.tell(_closed_text(ticket))
        return
    try:
        ensure_may_decide(user, ticket)
        if action_id == ACTION_APPROVE:
            remote_decide(
                ticket=ticket,
                user=user,
                source="slack",
                action="approve",
                decision_key=key,
                request_id=interaction.request_id,
            )
        else:
            _open_modal(interaction, ticket, MODAL_ACTIONS[action_id])
    except ServiceError as exc:
        interaction.tell(_refusal(exc))


def _refusal(exc: ServiceError) -> str:
    if isinstance(exc, DecisionConflict):
        return f"Nothing was decided by you: {exc.message}."
    return f"Nothing was decided: {exc.message}."


def _uuid_or_none(value: Any) -> Any:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _open_modal(interaction: Interaction, ticket: Ticket, action: str) -> None:
    """views.open: a modal asking for the reason (reject) or the answer (respond)."""
    label = "Your answer" if action == "respond" else "Reason"
    block = "answer" if action == "respond" else "reason"
    metadata = {
        "ticket": str(ticket.pk),
        "action": action,
        "slack_channel": interaction.slack_channel,
    }
    view = {
        "type": "modal",
        "callback_id": MODAL_CALLBACK,
        "private_metadata": json.dumps(metadata),
        "title": {"type": "plain_text", "text": "Answer" if action == "respond" else "Reject"},
        "submit": {"type": "plain_text", "text": "Send" if action == "respond" else "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": block,
                "optional": action == "reject" and not _reason_required(ticket),
                "label": {"type": "plain_text", "text": label},
                "element": {
                    "type": "plain_text_input",
                    "action_id": block,
                    "multiline": True,
                    "max_length": 2000,
                },
            }
        ],
    }
    try:
        slack_client(interaction.channel).views_open(
            trigger_id=str(interaction.payload.get("trigger_id") or ""), view=view
        )
    except (SlackApiError, SlackClientError, OSError) as exc:
        raise InvalidInput(f"Slack did not open the form ({exc}); press again") from None


def _reason_required(ticket: Ticket) -> bool:
    team = ticket.run.agent.team
    return bool(team is not None and team.reason_required)


def _view_submission(interaction: Interaction) -> dict[str, Any] | None:
    view = interaction.payload.get("view") or {}
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        metadata = {}
    action = metadata.get("action")
    block = "answer" if action == "respond" else "reason"
    values = (view.get("state") or {}).get("values") or {}
    text = str(((values.get(block) or {}).get(block) or {}).get("value") or "")
    user = _user_of(interaction)
    if user is None:
        return _modal_error(block, "Your Slack account is not linked: press the button again.")
    ticket = ticket_for_decision(_uuid_or_none(metadata.get("ticket")))
    if ticket is None or action not in ("reject", "respond"):
        return _modal_error(block, "This ticket no longer exists.")
    try:
        remote_decide(
            ticket=ticket,
            user=user,
            source="slack",
            action=action,
            decision_key=f"slack:view:{view.get('id')}",
            comment="" if action == "respond" else text,
            payload=parse_answer(text) if action == "respond" else None,
            request_id=interaction.request_id,
        )
    except ServiceError as exc:
        return _modal_error(block, _refusal(exc))
    return None  # the modal closes; the message is updated by the outbox


def _modal_error(block: str, text: str) -> dict[str, Any]:
    return {"response_action": "errors", "errors": {block: text[:1900]}}
