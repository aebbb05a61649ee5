"""Replays (docs/replays.md): past runs' initial user input run again on a chosen version
of their agent (a draft included), to see which outcomes would change before publishing.

`replay_create` picks the originals by filter and starts the first replays in the same
transaction; runs/replays/services/replay_flow.py starts the rest as replays end, decides their
tickets and repairs lost starts; runs/replays/services/replay_tools.py makes their side effects
dry. `replay_cancel` skips what has not started and cancels what runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agents.errors import AgentConfigInvalid
from agents.models import Agent, AgentVersion
from agents.selectors import agent_version_by_number, agent_version_latest
from agents.services.agents import agent_draft_snapshot
from common.access import scope
from common.audit import Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from common.teams import ensure_writable
from runs.models import Run
from runs.replays.models.replays import ReplayItem, ReplaySet
from runs.replays.services.replay_flow import replays_start_next
from runs.services.run_end import REPLAY_MODE
from runs.services.runs import run_cancel_unchecked

MAX_LIMIT = 200
MAX_CONCURRENCY = 8
DEFAULT_LIMIT = 20
MAX_VERSION_NUMBER = 2_147_483_647  # the largest a version number column holds
OUTCOMES = ("any", "completed", "failed", "cancelled")
FAILED = Q(status_reason__in=["error", "timeout"]) | Q(status_reason__startswith="stopped:")


@dataclass(frozen=True)
class ReplayRequest:
    """A checked request for a replay set (the API's body and the page's form)."""

    agent: Agent
    version: str  # "latest", "draft" or a published number
    outcome: str
    created_after: dt.datetime | None
    created_before: dt.datetime | None
    limit: int
    ticket_policy: str
    http_mode: str
    concurrency: int

    @property
    def filters(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "created_after": self.created_after.isoformat() if self.created_after else None,
            "created_before": self.created_before.isoformat() if self.created_before else None,
            "limit": self.limit,
        }


def _when(raw: Any, name: str) -> dt.datetime | None:
    if raw in (None, ""):
        return None
    if isinstance(raw, dt.datetime):
        value: dt.datetime | None = raw
    else:
        try:
            value = parse_datetime(str(raw).strip())
            if value is None:
                value = dt.datetime.fromisoformat(str(raw).strip())
        except ValueError:
            value = None
    if value is None:
        raise InvalidInput(f"{name} must be an ISO 8601 date and time", {name: [str(raw)]})
    return value if timezone.is_aware(value) else timezone.make_aware(value, dt.UTC)


def _bounded_int(raw: Any, name: str, default: int, top: int) -> int:
    if raw in (None, ""):
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number", {name: [str(raw)]}) from None
    if not 1 <= value <= top:
        raise InvalidInput(f"{name} must be between 1 and {top}, got {value}", {name: [str(raw)]})
    return value


def _choice(raw: Any, name: str, choices: tuple[str, ...] | list[str], default: str) -> str:
    value = str(raw).strip() if raw not in (None, "") else default
    if value not in choices:
        raise InvalidInput(
            f"{name} must be one of {', '.join(choices)}, got {value!r}", {name: [value]}
        )
    return value


def _version_choice(raw: Any) -> str:
    """ "latest" (also for a missing or null version), "draft", or a published version
    number (a positive integer, or its digits): anything else is named as wrong rather
    than read as "latest" (0 and false were)."""
    if raw is None or raw == "":
        return "latest"
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        value = None
    elif isinstance(raw, int):
        value = str(raw) if 1 <= raw <= MAX_VERSION_NUMBER else None
    else:
        text = raw.strip().lower()
        number = text.isascii() and text.isdigit() and len(text) <= 10
        if text in ("latest", "draft") or (number and 1 <= int(text) <= MAX_VERSION_NUMBER):
            value = text if not number else str(int(text))
        else:
            value = None
    if value is None:
        shown = repr(raw)[:80]
        raise InvalidInput(
            f"version must be latest, draft or a published version number (1, 2, …), got {shown}",
            {"version": [shown]},
        )
    return value


def replay_request(data: dict[str, Any], user: Any = None) -> ReplayRequest:
    """Check a request (agent_id, version, filters{outcome, created_after, created_before},
    limit, ticket_policy, http_mode, concurrency); InvalidInput names what is wrong. With
    `user`, an agent of a team they cannot see is refused as an unknown one, before
    anything else is checked (the answer does not tell that it exists)."""
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object")
    agent_id = str(data.get("agent_id") or "").strip()
    agents = Agent.objects.all() if user is None else scope(Agent.objects.all(), user, "team_id")
    agent = agents.filter(slug=agent_id).first() if agent_id else None
    if agent is None:
        raise InvalidInput(f"no agent {agent_id!r}", {"agent_id": [agent_id]})
    filters = data.get("filters") or {}
    if not isinstance(filters, dict):
        raise InvalidInput("filters must be an object", {"filters": ["not an object"]})
    version = _version_choice(data.get("version"))
    after = _when(filters.get("created_after"), "created_after")
    before = _when(filters.get("created_before"), "created_before")
    if after and before and after >= before:
        raise InvalidInput("created_after must be before created_before")
    return ReplayRequest(
        agent=agent,
        version=version,
        outcome=_choice(filters.get("outcome"), "outcome", OUTCOMES, "any"),
        created_after=after,
        created_before=before,
        limit=_bounded_int(data.get("limit"), "limit", DEFAULT_LIMIT, MAX_LIMIT),
        ticket_policy=_choice(
            data.get("ticket_policy"), "ticket_policy", ReplaySet.TicketPolicy.values, "as_recorded"
        ),
        http_mode=_choice(
            data.get("http_mode"), "http_mode", ReplaySet.HttpMode.values, "recorded"
        ),
        concurrency=_bounded_int(data.get("concurrency"), "concurrency", 2, MAX_CONCURRENCY),
    )


def replay_candidates(request: ReplayRequest) -> QuerySet[Run]:
    """The agent's finished top-level runs (not replays) the filters pick, newest first."""
    runs = Run.objects.filter(
        agent=request.agent, status=Run.Status.DONE, parent_run__isnull=True
    ).exclude(run_mode=REPLAY_MODE)
    if request.created_after:
        runs = runs.filter(created_at__gte=request.created_after)
    if request.created_before:
        runs = runs.filter(created_at__lt=request.created_before)
    if request.outcome == "failed":
        runs = runs.filter(FAILED)
    elif request.outcome == "cancelled":
        runs = runs.filter(status_reason="cancelled")
    elif request.outcome == "completed":
        runs = runs.exclude(FAILED).exclude(status_reason="cancelled")
    return runs.order_by("-created_at", "-id")


def replay_preview_count(request: ReplayRequest) -> tuple[int, int]:
    """(runs the filters match, runs a set would replay: at most the limit)."""
    matched = replay_candidates(request).count()
    return matched, min(matched, request.limit)


def _version(request: ReplayRequest) -> AgentVersion:
    agent = request.agent
    if request.version == "draft":
        try:
            return agent_draft_snapshot(agent=agent)
        except AgentConfigInvalid as exc:
            raise InvalidInput(exc.message, {"version": ["draft"]}) from None
    if request.version == "latest":
        version = agent_version_latest(agent)
        if version is None:
            raise InvalidInput(f"agent '{agent.slug}' has no published version")
        return version
    version = agent_version_by_number(agent, int(request.version))
    if version is None or version.draft:
        raise InvalidInput(
            f"agent '{agent.slug}' has no published version {request.version}",
            {"version": [request.version]},
        )
    return version


@transaction.atomic
def replay_create(*, request: ReplayRequest, actor: Actor) -> ReplaySet:
    """A replay set of the runs `request` picks (the newest `limit`, replayed oldest
    first), its first replays started within the limits. InvalidInput when none match."""
    ensure_writable(request.agent.team_id)
    version = _version(request)
    originals = list(replay_candidates(request).values_list("pk", flat=True)[: request.limit])
    if not originals:
        raise InvalidInput("no finished run of this agent matches the filters")
    replay_set = ReplaySet.objects.create(
        agent=request.agent,
        version=version,
        filters=request.filters,
        ticket_policy=request.ticket_policy,
        http_mode=request.http_mode,
        concurrency=request.concurrency,
        created_by=actor.user_or_none,
    )
    ReplayItem.objects.bulk_create(
        ReplayItem(replay_set=replay_set, position=position, original_run_id=run_id)
        for position, run_id in enumerate(reversed(originals), start=1)
    )
    audit_record(
        actor=actor,
        action="replay.create",
        target_type="replayset",
        target_id=replay_set.pk,
        after={
            "agent": request.agent.slug,
            "version": version.number,
            "draft": version.draft,
            "filters": request.filters,
            "runs": len(originals),
            "ticket_policy": request.ticket_policy,
            "http_mode": request.http_mode,
            "concurrency": request.concurrency,
        },
    )
    replays_start_next()
    replay_set.refresh_from_db()
    return replay_set


def replay_cancel(*, replay_set: ReplaySet, actor: Actor) -> ReplaySet:
    """Cancel a running set: its pending items are skipped (in one transaction, under the
    set's lock), then its running replays are cancelled one by one (each in its own, so
    no set lock is held while a run's row is: a replay's end locks them the other way)."""
    with transaction.atomic():
        locked = (
            ReplaySet.objects.select_for_update(of=("self",))
            .select_related("agent")
            .get(pk=replay_set.pk)
        )
        ensure_writable(locked.agent.team_id)
        if locked.status != ReplaySet.Status.RUNNING:
            raise IllegalTransition(
                f"replay set {locked.pk} is {locked.status}", {"status": locked.status}
            )
        now = timezone.now()
        skipped = ReplayItem.objects.filter(
            replay_set=locked, status=ReplayItem.Status.PENDING
        ).update(status=ReplayItem.Status.SKIPPED, note="cancelled before it started")
        ReplaySet.objects.filter(pk=locked.pk).update(
            status=ReplaySet.Status.CANCELLED, finished_at=now
        )
        audit_record(
            actor=actor,
            action="replay.cancel",
            target_type="replayset",
            target_id=locked.pk,
            before={"status": locked.status},
            after={"status": ReplaySet.Status.CANCELLED, "skipped": skipped},
        )
    running = Run.objects.filter(
        replay_item__replay_set=replay_set, replay_item__status=ReplayItem.Status.RUNNING
    ).exclude(status=Run.Status.DONE)
    for run in running:
        with contextlib.suppress(IllegalTransition):  # it finished meanwhile
            run_cancel_unchecked(run=run, actor=actor)
    replay_set.refresh_from_db()
    return replay_set
