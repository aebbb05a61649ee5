"""Threads created on their own (empty, before any run): in a team the creator may
start runs in, so that they (and their team) see it."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from common.audit import Actor, audit_record
from common.models import Team
from runs.models import Thread


@transaction.atomic
def thread_create(
    *, title: str, resource_id: str, custom: dict[str, Any], team: Team, actor: Actor
) -> Thread:
    """An empty thread of `team` (chosen with common.teams.team_for_new), audited there."""
    thread = Thread.objects.create(title=title, resource_id=resource_id, custom=custom, team=team)
    audit_record(
        actor=actor,
        action="thread.create",
        target_type="thread",
        target_id=thread.pk,
        team=team,
        after={"title": thread.title, "resource_id": thread.resource_id, "team": team.slug},
    )
    return thread
