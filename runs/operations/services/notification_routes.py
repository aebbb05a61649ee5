"""Notification routes (docs/notifications.md): the rules sending events of an agent (or
of every agent) to a channel, and the channels (shared by every team), created, changed
and deleted from the routes pages, each change audited (`notificationrule.create` /
`.update` / `.delete`, `notificationchannel.…`, as the admin records them) in its
transaction; a rule's seen by its agent's team. A rule of a frozen team's agent stays as
it is until the freeze is lifted. A channel's URL and secret are never recorded: only
whether one is stored."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.forms.models import model_to_dict

from common.audit import Actor, audit_record
from common.errors import InvalidInput
from common.teams import ensure_writable
from runs.operations.models.notifications import NotificationChannel, NotificationRule
from runs.operations.services.notifications import route_errors


def _team(rule: NotificationRule) -> int | None:
    return rule.agent.team_id if rule.agent is not None else None


def rule_snapshot(rule: NotificationRule) -> dict[str, Any]:
    """The rule's fields as its audit entries record them."""
    return model_to_dict(rule)


def rule_save(rule: NotificationRule, actor: Actor) -> NotificationRule:
    """Create (no row yet) or change a routing rule: its events and tool pattern checked
    (`route_errors`), saved and audited in one transaction; refused (Frozen) when its
    agent's team, before or after the change, is frozen."""
    rule.tool = (rule.tool or "").strip()
    errors = route_errors(list(rule.events or []), rule.tool)
    if errors:
        raise InvalidInput(" ".join(errors.values()), {k: [v] for k, v in errors.items()})
    rule.events = sorted(set(rule.events or []))
    creating = rule._state.adding
    with transaction.atomic():
        current = None
        if not creating:
            current = (
                NotificationRule.objects.select_for_update(of=("self",))
                .select_related("agent")
                .get(pk=rule.pk)
            )
            ensure_writable(_team(current))
        ensure_writable(_team(rule))
        rule.save()
        audit_record(
            actor=actor,
            action="notificationrule.create" if creating else "notificationrule.update",
            target_type="notificationrule",
            target_id=rule.pk,
            team=_team(rule),
            before=rule_snapshot(current) if current is not None else None,
            after=rule_snapshot(rule),
        )
    return rule


def rule_delete(rule: NotificationRule, actor: Actor) -> None:
    """Delete a routing rule (deliveries already queued still go); audited."""
    with transaction.atomic():
        current = (
            NotificationRule.objects.select_for_update(of=("self",))
            .select_related("agent")
            .get(pk=rule.pk)
        )
        ensure_writable(_team(current))
        audit_record(
            actor=actor,
            action="notificationrule.delete",
            target_type="notificationrule",
            target_id=current.pk,
            team=_team(current),
            before=rule_snapshot(current),
        )
        current.delete()


ENCRYPTED_SUFFIX = "_encrypted"


def channel_snapshot(channel: NotificationChannel) -> dict[str, Any]:
    """The channel's fields as its audit entries record them: for the URL and the signing
    secret (stored encrypted, not editable) only whether one is stored."""
    data = model_to_dict(channel)
    for field in channel._meta.concrete_fields:
        if field.name.endswith(ENCRYPTED_SUFFIX):
            data[f"{field.name.removesuffix(ENCRYPTED_SUFFIX)}_stored"] = bool(
                getattr(channel, field.attname)
            )
    return data


def channel_save(channel: NotificationChannel, actor: Actor) -> NotificationChannel:
    """Create or change a channel as its form filled it (the form checked it and set the
    encrypted URL and secret); audited in the same transaction."""
    creating = channel._state.adding
    with transaction.atomic():
        current = (
            None if creating else NotificationChannel.objects.select_for_update().get(pk=channel.pk)
        )
        channel.save()
        audit_record(
            actor=actor,
            action="notificationchannel.create" if creating else "notificationchannel.update",
            target_type="notificationchannel",
            target_id=channel.pk,
            before=channel_snapshot(current) if current is not None else None,
            after=channel_snapshot(channel),
        )
    return channel


def channel_delete(channel: NotificationChannel, actor: Actor) -> int:
    """Delete a channel and the routes to it; audited. Returns how many routes went."""
    with transaction.atomic():
        current = NotificationChannel.objects.select_for_update().get(pk=channel.pk)
        routes = NotificationRule.objects.filter(channel=current).count()
        audit_record(
            actor=actor,
            action="notificationchannel.delete",
            target_type="notificationchannel",
            target_id=current.pk,
            before=channel_snapshot(current),
            comment=f"with {routes} route(s)" if routes else "",
        )
        current.delete()
    return routes
