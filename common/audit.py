"""The audit trail: one row per operator action, in the action's own transaction."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from common.jsonsafe import without_nul
from common.models import ApiToken, AuditEntry
from common.writes import WriteBatch


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

# What of a client's X-Request-ID is kept: it is stored (a varchar of this size, which
# PostgreSQL enforces: a longer one failed the action it came with) and echoed in a header.
REQUEST_ID_MAX = AuditEntry._meta.get_field("request_id").max_length or 64
_NOT_IN_REQUEST_ID = re.compile(r"[^A-Za-z0-9._:-]")


def request_id(request: Any) -> str:
    """The request's id: the client's X-Request-ID with anything but letters, digits and
    `._:-` dropped, cut to REQUEST_ID_MAX characters; a new one when nothing is left.
    Kept on the request, so the response header and every audit row of it agree."""
    cached = getattr(request, "_awaken_request_id", None)
    if cached:
        return str(cached)
    raw = request.headers.get("X-Request-ID", "")
    value = _NOT_IN_REQUEST_ID.sub("", raw)[:REQUEST_ID_MAX] or uuid.uuid4().hex
    request._awaken_request_id = value
    return value


def request_actor(request: Any, source: str) -> Actor:
    """Who acts in an HTTP request, whatever the surface (source: "api", "ui", "admin"):
    the signed-in user, which of their API tokens when one authenticated, and the
    request's id."""
    user = request.user
    label = user.get_username() if getattr(user, "is_authenticated", False) else ""
    token = getattr(request, "auth", None)  # set by DRF's authentication only
    if isinstance(token, ApiToken):
        label = f"{label} (token {token.name})"
    return Actor(user=user, label=label[:200], source=source, request_id=request_id(request))


class _AuditEncoder(DjangoJSONEncoder):
    """Django's encoder (Decimal and dates as strings, UUIDs, lazy text) plus what
    model_to_dict hands over: related rows (a many-to-many field's value) as their pk, sets
    as lists."""

    def default(self, o: Any) -> Any:
        if isinstance(o, models.Model):
            return o.pk
        if isinstance(o, (set, frozenset)):
            return sorted(o, key=str)
        return super().default(o)


def _json_safe(value: Any) -> Any:
    """`value` as the audit row's JSON stores it, so that recording an action can never be
    what makes it fail: a Decimal price made a whole admin save a 500, rolled back."""
    if value is None:
        return None
    return without_nul(json.loads(json.dumps(value, cls=_AuditEncoder)))


def _team_id(team: Any, run: Any) -> int | None:
    if team is not None:
        return team if isinstance(team, int) else team.pk
    if run is not None:
        return run.agent.team_id
    return None


def audit_record(
    *,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: Any,
    run: Any = None,  # the runs.Run concerned, if any
    team: Any = None,  # the common.Team whose members see it; else the run's agent's
    before: Any = None,
    after: Any = None,
    comment: str = "",
    batch: WriteBatch | None = None,  # queue the row there (common/writes.py)
) -> AuditEntry:
    entry = AuditEntry(
        actor=actor.user_or_none,
        actor_label=actor.name,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        run=run,
        team_id=_team_id(team, run),
        before=_json_safe(before),
        after=_json_safe(after),
        comment=comment,
        source=actor.source,
        request_id=actor.request_id,
    )
    if batch is not None:
        batch.insert([entry])
    else:
        entry.save(force_insert=True)
    return entry
