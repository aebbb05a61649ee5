"""The audit log page."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from common.access import visible_teams
from common.models import AuditEntry
from runs.selectors.base import Page, keyset_page, uuid_or_none

AUDIT = "common.view_auditentry"


def audit_list(
    *,
    action: str = "",
    actor: str = "",
    run: str = "",
    cursor: str | None = None,
    user: Any = None,
) -> Page:
    entries = filter_audit(AuditEntry.objects.select_related("actor"), action, actor, run)
    return keyset_page(scope_audit(entries, user), cursor)


def scope_audit(entries: QuerySet[AuditEntry], user: Any) -> QuerySet[AuditEntry]:
    """The entries of the teams where `user` may read the audit log; entries of no team
    (site settings, tokens ...) only for those who may read it site-wide."""
    teams = visible_teams(user, AUDIT)
    if teams is None:
        return entries
    return entries.filter(team_id__in=teams)


def filter_audit(
    entries: QuerySet[AuditEntry], action: str, actor: str, run: str
) -> QuerySet[AuditEntry]:
    """The audit page's filters (its CSV export uses them too): an action prefix, the
    actor as shown, a run id."""
    if action:
        entries = entries.filter(action__startswith=action)
    if actor:
        entries = entries.filter(actor_label=actor)
    if run:
        entries = entries.filter(run_id=uuid_or_none(run))
    return entries
