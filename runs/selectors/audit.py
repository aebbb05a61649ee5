"""The audit log page."""

from __future__ import annotations

from django.db.models import QuerySet

from common.models import AuditEntry
from runs.selectors.base import Page, keyset_page, uuid_or_none


def audit_list(
    *, action: str = "", actor: str = "", run: str = "", cursor: str | None = None
) -> Page:
    entries = filter_audit(AuditEntry.objects.select_related("actor"), action, actor, run)
    return keyset_page(entries, cursor)


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
