"""Sending one notification (docs/notifications.md): a signed JSON webhook, a
Slack-compatible incoming-webhook body, or an email, and the channel's secrets.

A channel's URL (it may carry a token) and its signing secret are stored encrypted
(agents.secrets) and decrypted only here, at send time; neither appears in payloads,
logs, audit entries or errors. Webhooks go through the SSRF guard at connect time too:
the host is resolved and refused if it is not public (unless AWAKEN_NOTIFY_ALLOW_PRIVATE),
the vetted address is pinned and redirects are not followed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import secrets
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail

from agents.secrets import SecretError, decrypt, encrypt
from agents.services.address_guard import allow_private_hint, host_address_error
from agents.tools.builtin.web import PinnedConnection, parse_http_url, tls_context
from runs import metrics
from runs.models import Ticket
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationDelivery,
    NotificationEvent,
)
from runs.operations.services.email_links import approval_links
from runs.operations.services.notify_slack import asks_for_answer, send_slack_app
from runs.runtime.netguard import AddressRefusedError, vetted_addresses
from runs.wording import run_status_text, say

USER_AGENT = "awaken-ops-notify/1.0"
SIGNATURE_HEADER = "X-Awaken-Signature"
MAX_ERROR_BODY = 300  # of a receiver's error response, kept in last_error
ALLOW_PRIVATE_HINT = allow_private_hint("AWAKEN_NOTIFY_ALLOW_PRIVATE", "notification targets")
TITLES = {
    "ticket.opened": "Ticket opened",
    "ticket.deadline_near": "Ticket deadline near",
    "run.failed": "Run failed",
    "run.given_up": "Run given up",
    "failure_group.new": "New failure group",
}


@dataclass(frozen=True)
class SendOutcome:
    """One attempt: delivered, or why not; `permanent` failures are not retried."""

    ok: bool = False
    response_code: int | None = None
    error: str = ""
    permanent: bool = False


# --- secrets and targets ------------------------------------------------------------------


def new_signing_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def url_display(url: str) -> str:
    """The URL's scheme, host and port: what lists and logs show (no path, no token)."""
    parts = urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}"


def channel_set_url(channel: NotificationChannel, url: str) -> None:
    channel.url_encrypted = encrypt(url)
    channel.url_display = url_display(url) if url else ""


def channel_set_secret(channel: NotificationChannel, secret: str) -> None:
    channel.signing_secret_encrypted = encrypt(secret)


def channel_secret(channel: NotificationChannel) -> str:
    return decrypt(channel.signing_secret_encrypted)


def _allow_private() -> bool:
    return bool(settings.AWAKEN_NOTIFY_ALLOW_PRIVATE)


def target_url_error(url: str) -> str | None:
    """The SSRF guard at save time: why `url` may not be a notification target, or None."""
    try:
        host, port, _, _ = parse_http_url(url)
    except ValueError as exc:
        return str(exc)
    return host_address_error(host, port, allow_private=_allow_private(), hint=ALLOW_PRIVATE_HINT)


# --- formats ------------------------------------------------------------------------------


def canonical_body(payload: dict[str, Any]) -> bytes:
    """The JSON a webhook receives: stable (sorted keys, no spaces), UTF-8."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the secret>`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def summary(payload: dict[str, Any]) -> tuple[str, list[str]]:
    """A title and detail lines, for Slack and email."""
    event = str(payload.get("event", ""))
    run = payload.get("run") or {}
    agent = (run.get("agent") or {}).get("name") or (run.get("agent") or {}).get("id") or "?"
    ticket = payload.get("ticket")
    lines = [f"Agent: {agent}"]
    if ticket:
        title = f"{TITLES.get(event, event)}: {ticket.get('tool')} ({agent})"
        if ticket.get("message"):
            lines.append(f"Asks: {ticket['message']}")
        if ticket.get("deadline_at"):
            lines.append(
                f"Deadline: {ticket['deadline_at']} "
                f"(then {say(ticket.get('default_action'), 'default_action')})"
            )
    elif group := payload.get("failure_group"):
        again = " (failing again after it was resolved)" if group.get("regression") else ""
        title = f"{TITLES.get(event, event)}: {group.get('title')}{again}"
        lines.append(f"Where: {group.get('source') or 'the run itself'}")
        if run.get("error"):
            lines.append(f"Error: {run['error']}")
        lines.append(f"Failures: {group.get('url')}")
    else:
        title = f"{TITLES.get(event, event)}: {agent}"
        if run.get("error"):
            lines.append(f"Error: {run['error']}")
    if run.get("status"):  # in plain words (runs/wording.py); the payload keeps the values
        lines.append(f"Status: {run_status_text(run['status'], run.get('status_reason'))}")
    lines.append(f"Run: {run.get('id')}")
    return title, lines


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(payload: dict[str, Any]) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook message: `text` (the fallback) and blocks."""
    title, lines = summary(payload)
    url = str(payload.get("url", ""))
    detail = "\n".join(_slack_escape(line) for line in lines)
    return {
        "text": _slack_escape(f"{title} {url}"),
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*{_slack_escape(title)}*\n{detail}"},
            },
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": f"<{_slack_escape(url)}|Open the run> · "
                        f"{_slack_escape(TITLES.get(str(payload.get('event', '')), ''))}",
                    }
                ],
            },
        ],
    }


# --- sending ------------------------------------------------------------------------------


def _cut(connection: http.client.HTTPConnection, cut: threading.Event) -> None:
    """The attempt's deadline passed: shut its socket, so the read in progress ends
    (`cut` set first: the sender may see the error before this thread has returned)."""
    cut.set()
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def post_json(url: str, body: bytes, headers: dict[str, str]) -> SendOutcome:
    """POST `body` to `url` through the SSRF guard (pinned address, no redirects)."""
    timeout = float(settings.AWAKEN_NOTIFY_TIMEOUT)
    try:
        host, port, target, tls = parse_http_url(url)
    except ValueError as exc:
        return SendOutcome(error=f"invalid URL: {exc}", permanent=True)
    try:
        addresses = vetted_addresses(host, port, allow_private=_allow_private())
    except AddressRefusedError as exc:
        return SendOutcome(error=f"refused: {exc}", permanent="non-public" in str(exc))
    connection = PinnedConnection(host, port, addresses, timeout, tls_context() if tls else None)
    # The socket's timeout bounds each read; this bounds the whole attempt (connect, send,
    # answer), so a receiver that trickles its answer cannot hold the sender longer.
    cut = threading.Event()
    deadline = threading.Timer(timeout, _cut, args=(connection, cut))
    deadline.daemon = True
    deadline.start()
    try:
        connection.request(
            "POST",
            target,
            body=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                "Connection": "close",
                **headers,
            },
        )
        response = connection.getresponse()
        excerpt = response.read(MAX_ERROR_BODY)
    except TimeoutError:
        return SendOutcome(error=f"timed out after {timeout:g}s")
    except (ssl.SSLError, http.client.HTTPException, OSError) as exc:
        if cut.is_set():  # cut at the deadline
            return SendOutcome(error=f"timed out after {timeout:g}s")
        return SendOutcome(error=f"{type(exc).__name__}: {exc}")
    finally:
        deadline.cancel()
        connection.close()
    if 200 <= response.status < 300:
        return SendOutcome(ok=True, response_code=response.status)
    text = excerpt.decode("utf-8", errors="replace").strip()
    where = (
        f" (redirect to {response.getheader('Location')}, not followed)"
        if 300 <= response.status < 400
        else ""
    )
    return SendOutcome(
        response_code=response.status, error=f"HTTP {response.status}{where}: {text}".strip()
    )


def _send_webhook(channel: NotificationChannel, row: NotificationDelivery) -> SendOutcome:
    secret = channel_secret(channel)
    if not secret:
        return SendOutcome(error="the channel has no signing secret: set one", permanent=True)
    body = canonical_body(row.payload)
    headers = {
        "X-Awaken-Event": row.event,
        "X-Awaken-Delivery": str(row.pk),
        SIGNATURE_HEADER: signature(secret, int(time.time()), body),
    }
    return post_json(decrypt(channel.url_encrypted), body, headers)


def _decision_lines(payload: dict[str, Any], user_id: int | None) -> list[str]:
    """A waiting ticket's e-mailed decision links (signed, single-use, expiring), as it
    is when the e-mail is sent: none once it is closed."""
    ticket_id = (payload.get("ticket") or {}).get("id")
    if not ticket_id or payload.get("event") not in ("ticket.opened", "ticket.deadline_near"):
        return []
    ticket = (
        Ticket.objects.filter(pk=ticket_id, status=Ticket.Status.PENDING)
        .only("resume_mode", "ticket_id")
        .first()
    )
    if ticket is None or ticket.child_run_id is not None:
        return []
    links = approval_links(ticket.pk, asks_for_answer(ticket), user_id)
    hours = settings.AWAKEN_EMAIL_APPROVAL_SECONDS / 3600
    return [
        "",
        f"Decide (each link asks you to confirm; it works once, for {hours:g} hours):",
        *(f"  {label}: {url}" for label, url in links),
    ]


def _send_email(
    recipients: list[str], payload: dict[str, Any], user_id: int | None = None
) -> SendOutcome:
    title, lines = summary(payload)
    subject = " ".join(f"[Awaken Ops] {title}".split())[:200]  # one line: a header
    decide = _decision_lines(payload, user_id)
    body = "\n".join([*lines, *decide, "", f"Open the run: {payload.get('url', '')}", ""])
    try:
        send_mail(subject, body, None, recipients, fail_silently=False)
    except Exception as exc:  # SMTP errors, refused connections: retried
        return SendOutcome(error=f"email not sent: {type(exc).__name__}: {exc}")
    return SendOutcome(ok=True)


def _send_to_channel(channel: NotificationChannel, row: NotificationDelivery) -> SendOutcome:
    if not channel.enabled:
        return SendOutcome(error="the channel is disabled", permanent=True)
    Kind = NotificationChannel.Kind
    if channel.kind == Kind.EMAIL:
        recipients = [a.strip() for a in channel.email_to.split(",") if a.strip()]
        if not recipients:
            return SendOutcome(error="the channel has no recipients", permanent=True)
        return _send_email(recipients, row.payload)
    if channel.kind == Kind.SLACK_APP:
        return send_slack_app(channel, row, SendOutcome, slack_body)
    if row.event == NotificationEvent.TICKET_CLOSED:  # only Slack app messages are updated
        return SendOutcome(ok=True)
    url = decrypt(channel.url_encrypted)
    if not url:
        return SendOutcome(error="the channel has no URL: set one", permanent=True)
    if channel.kind == Kind.SLACK:
        return post_json(url, canonical_body(slack_body(row.payload)), {})
    return _send_webhook(channel, row)


def _send_to_user(row: NotificationDelivery) -> SendOutcome:
    user = row.user
    if user is None:  # queued while the account was deleted
        return SendOutcome(error="the subscriber's account was deleted", permanent=True)
    if not user.is_active:
        return SendOutcome(error="the subscriber's account is inactive", permanent=True)
    if not user.has_perm("runs.view_run"):
        return SendOutcome(error="the subscriber may no longer view runs", permanent=True)
    if not user.email:
        return SendOutcome(
            error=f"user {user.get_username()} has no email address: set one to get notifications",
            permanent=True,
        )
    return _send_email([user.email], row.payload, user.pk)


@metrics.counts_attempts
def send_delivery(row: NotificationDelivery) -> SendOutcome:
    """Attempt one delivery to its channel or subscriber."""
    try:
        channel = row.channel
        if channel is not None:
            return _send_to_channel(channel, row)
        if row.channel_id is not None:  # queued while an admin deleted the channel
            return SendOutcome(error="the channel was deleted", permanent=True)
        return _send_to_user(row)
    except SecretError as exc:
        return SendOutcome(error=str(exc), permanent=True)
