"""The audit log page."""

from __future__ import annotations

from common.models import AuditEntry
from runs.selectors.base import Page, keyset_page, uuid_or_none


def audit_list(
    *, action: str = "", actor: str = "", run: str = "", cursor: str | None = None
) -> Page:
    entries = AuditEntry.objects.select_related("actor")
    if action:
        entries = entries.filter(action__startswith=action)
    if actor:
        entries = entries.filter(actor_label=actor)
    if run:
        entries = entries.filter(run_id=uuid_or_none(run))
    return keyset_page(entries, cursor)
