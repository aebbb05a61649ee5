"""The audit trail: one row per operator action, in the action's own transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs.models import AuditEntry, Run


@dataclass(frozen=True)
class Actor:
    """Who acts and through which surface; passed from entrypoints to services."""

    user: Any = None
    label: str = ""
    source: str = "ui"
    request_id: str = ""

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        if self.user is not None and getattr(self.user, "is_authenticated", False):
            return str(self.user.get_username())
        return "system"

    @property
    def user_or_none(self) -> Any:
        if self.user is not None and getattr(self.user, "is_authenticated", False):
            return self.user
        return None


SYSTEM = Actor(label="system", source="system")


def audit_record(
    *,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: Any,
    run: Run | None = None,
    before: Any = None,
    after: Any = None,
    comment: str = "",
) -> AuditEntry:
    return AuditEntry.objects.create(
        actor=actor.user_or_none,
        actor_label=actor.name,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        run=run,
        before=before,
        after=after,
        comment=comment,
        source=actor.source,
        request_id=actor.request_id,
    )
