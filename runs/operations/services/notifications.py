"""Notifications (docs/notifications.md): routing events to channels and subscribers and
the durable outbox they are written to.

`notify_ticket` and `notify_run` are called inside the transaction of the event they tell
about: they write one outbox row (a NotificationDelivery) per destination, deduplicated
by the (destination, event, subject) constraints, so the notification exists exactly
when the event committed. `kick_drain` rings the drain after commit (beat ticks it too);
the drain itself (`runs.operations.services.notify_drain.notifications_drain`, the
`runs.deliver_notifications` task) sends the due rows outside any transaction and retries
failures with backoff. The task runs on its own `notifications` queue and worker, never
beside runs.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import BigIntegerField, Value
from django.db.models.signals import post_delete, post_save
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent
from agents.selectors import agent_version_by_id
from common.audit import Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from runs.models import Run, Ticket
from runs.operations.models.notifications import (
    ROUTABLE_EVENT_CHOICES,
    NotificationChannel,
    NotificationDelivery,
    NotificationEvent,
    NotificationRule,
    NotificationSubscription,
)

logger = logging.getLogger(__name__)

DRAIN_TASK = "runs.deliver_notifications"
MAX_ARGUMENTS_CHARS = 4000  # larger tool arguments are left out of the payload
EVENTS = {value for value, _ in ROUTABLE_EVENT_CHOICES}  # not ticket.closed
TICKET_EVENTS = {NotificationEvent.TICKET_OPENED, NotificationEvent.TICKET_DEADLINE_NEAR}


# --- routing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One enabled rule (to a channel) or subscription (to a user)."""

    channel_id: int | None
    user_id: int | None
    events: frozenset[str]
    agent_id: int | None
    tool: str

    def matches(self, event: str, agent_id: int | None, tool: str | None) -> bool:
        if self.events and event not in self.events:
            return False
        if self.agent_id is not None and self.agent_id != agent_id:
            return False
        if self.tool:  # a tool pattern routes only events about a tool call (tickets)
            return tool is not None and fnmatch.fnmatchcase(tool, self.tool)
        return True

    @property
    def destination(self) -> tuple[str, int]:
        if self.channel_id is not None:
            return ("channel", self.channel_id)
        assert self.user_id is not None
        return ("user", self.user_id)


class _NoRoutes:
    """Whether this process may assume there is no rule and no subscription at all, so
    that opening a ticket costs no query: an entry in the local-memory `default` cache
    for AWAKEN_NOTIFY_ROUTES_CACHE_SECONDS. Only the empty answer is cached: a cached route
    could name a channel deleted meanwhile (its outbox row would then break the event's
    transaction). Saving or deleting a channel, rule or subscription in this process
    forgets it at once; other processes see a new rule within the TTL. The entry holds
    the generation at which its query started, and every forget starts a new one, so a
    query that raced a change never counts."""

    KEY = "notify:no-routes"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.generation = 0  # changes with every forget

    def known(self) -> bool:
        return cache.get(self.KEY) == self.generation

    def remember(self, ttl: float, generation: int) -> None:
        """Remember an empty answer read at `generation` (stale once a change came)."""
        cache.set(self.KEY, generation, ttl)

    def forget(self) -> None:
        with self._lock:
            self.generation += 1
        cache.delete(self.KEY)


no_routes = _NoRoutes()


def _routing_changed(sender: Any, **kwargs: Any) -> None:
    no_routes.forget()


for _model in (NotificationChannel, NotificationRule, NotificationSubscription):
    post_save.connect(_routing_changed, sender=_model, dispatch_uid=f"notify-routes-{_model}")
    post_delete.connect(_routing_changed, sender=_model, dispatch_uid=f"notify-routes-d{_model}")


def routes() -> list[Route]:
    """Every enabled rule of an enabled channel and every subscription of an active user,
    in one query (none while the process knows there are none)."""
    if no_routes.known():
        return []
    generation = no_routes.generation
    null = Value(None, output_field=BigIntegerField())
    rules = (
        NotificationRule.objects.filter(enabled=True, channel__enabled=True)
        .order_by()
        .values_list("channel_id", null, "events", "agent_id", "tool")
    )
    subscriptions = (
        NotificationSubscription.objects.filter(user__is_active=True)
        .order_by()
        .values_list(null, "user_id", "events", "agent_id", "tool")
    )
    found = [
        Route(channel_id, user_id, frozenset(events or ()), agent_id, tool or "")
        for channel_id, user_id, events, agent_id, tool in rules.union(subscriptions, all=True)
    ]
    ttl = float(settings.AWAKEN_NOTIFY_ROUTES_CACHE_SECONDS)
    if not found and ttl > 0:
        no_routes.remember(ttl, generation)
    return found


def destinations(event: str, agent_id: int | None, tool: str | None) -> list[tuple[str, int]]:
    """Where `event` goes: each channel and subscriber once, however many routes match."""
    found: dict[tuple[str, int], None] = {}
    for route in routes():
        if route.matches(event, agent_id, tool):
            found[route.destination] = None
    return list(found)


# --- payloads -----------------------------------------------------------------------------


def site_url(path: str) -> str:
    return f"{settings.AWAKEN_PUBLIC_URL}{path}"


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _agent_of(run: Run) -> dict[str, Any]:
    """The run's agent as its pinned version names it (cached per process: no query)."""
    if run.agent_version_id:
        spec = agent_version_by_id(run.agent_version_id).spec
        return {"id": spec.get("id"), "name": spec.get("name")}
    agent = Agent.objects.filter(pk=run.agent_id).first()
    return {"id": agent.slug, "name": agent.name} if agent else {"id": None, "name": None}


def _run_error(run: Run) -> str | None:
    if "error_payload" in run.get_deferred_fields():
        return None
    payload = run.error_payload
    return str(payload.get("message")) if isinstance(payload, dict) else None


def run_payload(run: Run, *, error: str | None = None) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "status": run.status,
        "status_reason": run.status_reason,
        "agent": _agent_of(run),
        "thread": str(run.thread_id),
        "error": error if error is not None else _run_error(run),
        "url": site_url(reverse("runs:run-detail", args=[run.pk])),
    }


def ticket_payload(ticket: Ticket) -> dict[str, Any]:
    arguments = ticket.arguments
    data: dict[str, Any] = {
        "id": str(ticket.pk),
        "ticket_id": ticket.ticket_id,
        "tool": ticket.tool_name,
        "message": ticket.message,
        "reason": ticket.reason,
        "status": ticket.status,
        "created_at": _iso(ticket.created_at),
        "deadline_at": _iso(ticket.deadline_at),
        "default_action": ticket.default_action if ticket.deadline_at else None,
    }
    if len(json.dumps(arguments, default=str)) <= MAX_ARGUMENTS_CHARS:
        data["arguments"] = arguments
    else:
        data["arguments_omitted"] = True  # too large for a notification: see the run page
    return data


def _queue(
    event: str,
    subject: str,
    body: dict[str, Any],
    targets: Iterable[tuple[str, int]],
    now: dt.datetime,
) -> list[NotificationDelivery]:
    rows = []
    for kind, target in targets:
        row = NotificationDelivery(
            event=event, subject=subject, created_at=now, next_attempt_at=now
        )
        if kind == "channel":
            row.channel_id = target
        else:
            row.user_id = target
        row.payload = {"id": str(row.id), "event": event, "occurred_at": _iso(now), **body}
        rows.append(row)
    return rows


def _insert(rows: list[NotificationDelivery]) -> int:
    """Write the outbox rows (a repeat of an event already queued inserts nothing) and
    kick the drain once the transaction commits."""
    if not rows:
        return 0
    NotificationDelivery.objects.bulk_create(rows, ignore_conflicts=True)
    transaction.on_commit(kick_drain, robust=True)
    return len(rows)


def outbox_insert(rows: list[NotificationDelivery]) -> int:
    """Write outbox rows another module built (Slack message updates), as `_insert`."""
    return _insert(rows)


def notify_tickets(tickets: Iterable[Ticket], event: str) -> int:
    """Queue `event` about each ticket for every destination its routes match; returns
    the rows offered. Waits on a child run (delegations) are nobody's to decide: skipped."""
    now = timezone.now()
    rows: list[NotificationDelivery] = []
    for ticket in tickets:
        replay = Ticket.run.is_cached(ticket) and _is_replay(ticket.run)  # no query for it
        if ticket.child_run_id is not None or replay:
            continue
        targets = destinations(event, ticket.agent_id, ticket.tool_name)
        if not targets:
            continue
        body = {
            "ticket": ticket_payload(ticket),
            "run": run_payload(ticket.run),
            "url": site_url(reverse("runs:run-detail", args=[ticket.run_id])),
        }
        rows += _queue(event, f"ticket:{ticket.pk}", body, targets, now)
    return _insert(rows)


def notify_ticket(ticket: Ticket, event: str) -> int:
    """Queue `event` (ticket.opened, ticket.deadline_near) about one ticket; call it in
    the transaction that makes the event happen."""
    return notify_tickets([ticket], event)


def notify_run(run: Run, event: str, *, error: str | None = None) -> int:
    """Queue `event` (run.failed, run.given_up) about a run; call it in the transaction
    that ends the run. `error`: the failure's message when the run row was read without
    its error payload. Replays (docs/replays.md) notify nobody."""
    if _is_replay(run):
        return 0
    targets = destinations(event, run.agent_id, None)
    if not targets:
        return 0
    body = {
        "run": run_payload(run, error=error),
        "url": site_url(reverse("runs:run-detail", args=[run.pk])),
    }
    return _insert(_queue(event, f"run:{run.pk}", body, targets, timezone.now()))


def notify_failure_group(
    run: Run, group: dict[str, Any], *, subject: str, error: str | None = None
) -> int:
    """Queue failure_group.new about a group (`group`: its payload) that `run`'s failure
    has just created, or reopened after it was resolved; in the transaction that ends the
    run. `subject` is the group once (failure_group:<id>), or that time it failed again:
    the outbox's uniqueness sends it once however often the transaction is retried."""
    event = NotificationEvent.FAILURE_GROUP_NEW
    targets = destinations(event, run.agent_id, None)
    if not targets:
        return 0
    body = {"failure_group": group, "run": run_payload(run, error=error), "url": group["url"]}
    return _insert(_queue(event, subject, body, targets, timezone.now()))


def _is_replay(run: Run) -> bool:
    """Whether `run` is a replay, without a query for a row read without its mode (the
    checkpoint's: its store knows, and does not call us for replays)."""
    return "run_mode" not in run.get_deferred_fields() and run.run_mode == "replay"


def notify_run_finished(run: Run, error_payload: Any = None) -> int:
    """A run has just ended: queue run.failed if it failed (an error, a timeout, a stop
    condition), with the message of `error_payload` when there is one."""
    if not run.is_failed:
        return 0
    message = error_payload.get("message") if isinstance(error_payload, dict) else None
    return notify_run(
        run, NotificationEvent.RUN_FAILED, error=None if message is None else str(message)
    )


class _Doorbell:
    """Where `kick_drain` rings in this process: the embedded worker's notification
    senders (runs/embedded.py) when they run here, else the `notifications` queue."""

    def __init__(self) -> None:
        self.local: threading.Event | None = None


doorbell = _Doorbell()


def kick_drain() -> None:
    """Ring the drain's doorbell; losing it loses nothing (beat ticks it anyway)."""
    local = doorbell.local
    if local is not None:
        local.set()
        return
    try:
        current_app.tasks[DRAIN_TASK].delay()  # routed to the `notifications` queue
    except Exception:
        logger.warning("could not enqueue %s; the next tick will drain", DRAIN_TASK, exc_info=True)


# --- redelivery and subscriptions ---------------------------------------------------------


def delivery_redeliver(delivery: NotificationDelivery, actor: Actor) -> NotificationDelivery:
    """Send a delivered or failed notification again, with its id (a receiver that
    already processed it recognises it), a fresh set of attempts. Audited."""
    Status = NotificationDelivery.Status
    now = timezone.now()
    with transaction.atomic():
        updated = NotificationDelivery.objects.filter(
            pk=delivery.pk, status__in=[Status.DELIVERED, Status.FAILED]
        ).update(
            status=Status.PENDING,
            attempts=0,
            next_attempt_at=now,
            delivered_at=None,
            response_code=None,
            last_error="",
        )
        if not updated:
            raise IllegalTransition(
                f"notification {delivery.pk} is still being sent; redeliver it once it is "
                "delivered or failed"
            )
        audit_record(
            actor=actor,
            action="notification.redeliver",
            target_type="notificationdelivery",
            target_id=delivery.pk,
            before={"status": delivery.status, "attempts": delivery.attempts},
            after={"status": Status.PENDING},
            comment=f"{delivery.event} {delivery.subject}",
        )
        transaction.on_commit(kick_drain, robust=True)
    delivery.refresh_from_db()
    return delivery


def route_errors(events: list[str], tool: str) -> dict[str, str]:
    """Field -> what to fix, for the events and tool pattern of a rule or subscription."""
    errors: dict[str, str] = {}
    unknown = sorted(set(events) - EVENTS)
    if unknown:
        errors["events"] = f"Unknown events: {', '.join(unknown)}."
    if len(tool) > 200:
        errors["tool"] = "The tool pattern is longer than 200 characters."
    elif tool and set(events) - TICKET_EVENTS:
        errors["tool"] = (
            "A tool pattern applies to ticket events only (runs have no tool): choose ticket "
            "events only, or leave the tool empty."
        )
    return errors


def subscription_add(
    *, user: Any, events: list[str], agent: Agent | None, tool: str, actor: Actor
) -> NotificationSubscription:
    """Subscribe `user` (by email to their own address) to events; audited."""
    tool = (tool or "").strip()
    errors = route_errors(events, tool)
    if errors:
        raise InvalidInput(" ".join(errors.values()), errors)
    with transaction.atomic():
        subscription = NotificationSubscription.objects.create(
            user=user, events=sorted(set(events)), agent=agent, tool=tool
        )
        audit_record(
            actor=actor,
            action="notificationsubscription.create",
            target_type="notificationsubscription",
            target_id=subscription.pk,
            after=_subscription_snapshot(subscription),
        )
    return subscription


def subscription_delete(subscription: NotificationSubscription, actor: Actor) -> None:
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="notificationsubscription.delete",
            target_type="notificationsubscription",
            target_id=subscription.pk,
            before=_subscription_snapshot(subscription),
        )
        subscription.delete()


def _subscription_snapshot(subscription: NotificationSubscription) -> dict[str, Any]:
    return {
        "user": subscription.user_id,
        "events": subscription.events,
        "agent": subscription.agent_id,
        "tool": subscription.tool,
    }


def deliveries_of(user: Any, limit: int = 50) -> list[NotificationDelivery]:
    """The user's own recent notifications (those their subscriptions queued)."""
    return list(NotificationDelivery.objects.filter(user=user).order_by("-created_at")[:limit])
