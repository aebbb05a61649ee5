"""Failure groups (docs/failure-groups.md): failed runs grouped by fingerprint
(runs/operations/services/fingerprint.py), team by team.

`failure_record` is called in the transaction that ends a run failed (`run_fail`, and the
checkpoint that finishes a run in error, timeout or a stop condition): one upsert of the
group (`INSERT … ON CONFLICT (team, fingerprint) DO UPDATE`, which counts it, moves its
last occurrence and reopens a resolved group), one insert linking the run to it, and,
only the first time an agent fails this way, the group's list of agents. A new group, or
a resolved one failing again, queues a `failure_group.new` notification in the same
transaction (the outbox: runs/operations/services/notifications.py).

Resolving, ignoring and reopening a group are operator actions: role-checked by the
page, refused in a frozen team, audited. `failures_backfill` groups the failed runs of
before (`manage.py group_failures`)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from agents.models import Model
from agents.selectors import agent_version_by_id
from common.audit import Actor, audit_record
from common.errors import InvalidInput
from common.teams import ensure_writable
from runs.fields import uuid7_default
from runs.models import Run
from runs.operations.models.failures import AGENTS_KEPT, FailureGroup, FailureGroupRun
from runs.operations.services.fingerprint import SAMPLE_CHARS, Fingerprint, fingerprint
from runs.operations.services.notifications import notify_failure_group, site_url
from runs.services.events import team_of

REPLAY_MODE = "replay"  # replays are dry runs of a draft: their failures are nobody's
FAILED = Q(status=Run.Status.DONE) & (
    Q(status_reason__in=["error", "timeout"]) | Q(status_reason__startswith="stopped:")
)


def source_of(version_id: int | None) -> str:
    """Where a run of this pinned version fails: its remote endpoint, or its model's
    provider ('' when the version names neither)."""
    if not version_id:
        return ""
    spec = agent_version_by_id(version_id).spec or {}
    if spec.get("endpoint_id"):
        return f"endpoint:{spec['endpoint_id']}"
    model = spec.get("model_id")
    if not isinstance(model, str) or not model:
        return ""
    provider = Model.objects.filter(slug=model).values_list("provider__slug", flat=True).first()
    return f"provider:{provider}" if provider else f"model:{model}"


def message_of(error_payload: Any) -> str:
    if isinstance(error_payload, dict) and error_payload.get("message") is not None:
        return str(error_payload["message"])
    return ""


def run_fingerprint(run: Run, message: str) -> Fingerprint:
    return fingerprint(run.status_reason, source_of(run.agent_version_id), message)


@dataclass
class Occurrences:
    """Failures of one group to add: how many, when, which runs and agents."""

    team_id: int
    print: Fingerprint
    sample: str
    first: dt.datetime
    last: dt.datetime
    last_run_id: Any
    agent_ids: list[int] = field(default_factory=list)
    runs: list[tuple[Any, dt.datetime]] = field(default_factory=list)  # (id, created_at)


@dataclass(frozen=True)
class Upserted:
    group_id: Any
    new: bool  # the group was created by this upsert
    regression: bool  # it was resolved and fails again


def failure_record(run: Run, error_payload: Any = None, *, now: dt.datetime | None = None) -> Any:
    """Count the run that has just failed in its group (created if new) and link it; in
    the transaction that ended the run. Returns the group's id; None for a run that did
    not fail, or a replay."""
    if not run.is_failed:
        return None
    if "run_mode" not in run.get_deferred_fields() and run.run_mode == REPLAY_MODE:
        return None
    now = now or run.finished_at or timezone.now()
    message = message_of(error_payload)
    occurrences = Occurrences(
        team_id=team_of(run),
        print=run_fingerprint(run, message),
        sample=message[:SAMPLE_CHARS],
        first=now,
        last=now,
        last_run_id=run.pk,
        agent_ids=[run.agent_id],
        runs=[(run.pk, run.created_at)],
    )
    upserted = _upsert(occurrences)
    if upserted.new or upserted.regression:
        notify_failure_group(
            run,
            group_payload(upserted.group_id, occurrences.print, upserted.regression),
            subject=_subject(upserted, now),
            error=message,
        )
    return upserted.group_id


def _subject(upserted: Upserted, now: dt.datetime) -> str:
    """Once per group, and once per time a resolved group fails again."""
    base = f"failure_group:{upserted.group_id}"
    return f"{base}@{now:%Y%m%dT%H%M%S.%f}" if upserted.regression else base


def group_payload(group_id: Any, print_: Fingerprint, regression: bool) -> dict[str, Any]:
    url = f"{reverse('runs:failures')}?state=all#failure-{group_id}"
    return {
        "id": str(group_id),
        "title": print_.title,
        "error_type": print_.error_type,
        "source": print_.source,
        "regression": regression,
        "url": site_url(url),
        "runs_url": site_url(f"{reverse('runs:run-list')}?failure_group={group_id}"),
    }


def _db(value: Any, field_name: str) -> Any:
    return FailureGroup._meta.get_field(field_name).get_db_prep_value(  # type: ignore[union-attr]
        value, connection, prepared=False
    )


def _upsert_sql(table: str) -> str:
    """INSERT ... ON CONFLICT DO UPDATE of a group: counts added, the seen span widened, the
    last run kept by time, a resolved group reopened as a regression; returns the id, the
    new count, the agents and whether it regressed now (its last parameter is the
    occurrence's last time)."""
    resolved = f"{table}.state = 'resolved'"
    return (
        f"INSERT INTO {table} (id, team_id, fingerprint, error_type, source, title, "
        "sample_message, count, first_seen, last_seen, last_run_id, agent_ids, state, "
        "state_changed_by_label) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (team_id, fingerprint) DO UPDATE SET "
        f"count = {table}.count + EXCLUDED.count, "
        f"first_seen = CASE WHEN EXCLUDED.first_seen < {table}.first_seen "
        f"THEN EXCLUDED.first_seen ELSE {table}.first_seen END, "
        f"last_seen = CASE WHEN EXCLUDED.last_seen > {table}.last_seen "
        f"THEN EXCLUDED.last_seen ELSE {table}.last_seen END, "
        f"last_run_id = CASE WHEN EXCLUDED.last_seen >= {table}.last_seen "
        f"THEN EXCLUDED.last_run_id ELSE {table}.last_run_id END, "
        f"regressed_at = CASE WHEN {resolved} THEN EXCLUDED.last_seen "
        f"ELSE {table}.regressed_at END, "
        f"state_changed_at = CASE WHEN {resolved} THEN EXCLUDED.last_seen "
        f"ELSE {table}.state_changed_at END, "
        f"state_changed_by_id = CASE WHEN {resolved} THEN NULL "
        f"ELSE {table}.state_changed_by_id END, "
        f"state_changed_by_label = CASE WHEN {resolved} THEN 'a new failure' "
        f"ELSE {table}.state_changed_by_label END, "
        f"state = CASE WHEN {resolved} THEN 'open' ELSE {table}.state END "
        f"RETURNING id, count, agent_ids, "
        f"CASE WHEN {table}.regressed_at = %s THEN 1 ELSE 0 END"
    )


def _upsert(occ: Occurrences) -> Upserted:
    """One statement: insert the group or add to it. A resolved group is open again
    (`regressed_at` set to this occurrence); an ignored one stays ignored."""
    table = connection.ops.quote_name(FailureGroup._meta.db_table)
    when = connection.ops.adapt_datetimefield_value
    new_id = uuid7_default()
    count = len(occ.runs)
    params = [
        _db(new_id, "id"),
        occ.team_id,
        occ.print.digest,
        occ.print.error_type[:100],
        occ.print.source[:220],
        occ.print.title,
        occ.sample,
        count,
        when(occ.first),
        when(occ.last),
        _db(occ.last_run_id, "last_run_id"),
        _db(sorted(set(occ.agent_ids))[:AGENTS_KEPT], "agent_ids"),
        FailureGroup.State.OPEN,
        "",
        when(occ.last),  # the regression check below
    ]
    sql = _upsert_sql(table)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        group_id, total, agents, regressed = cursor.fetchone()
    group_id = FailureGroup._meta.pk.to_python(group_id)  # type: ignore[union-attr]
    _add_agents(group_id, agents, occ.agent_ids)
    FailureGroupRun.objects.bulk_create(
        [
            FailureGroupRun(run_id=run_id, group_id=group_id, created_at=created)
            for run_id, created in occ.runs
        ],
        ignore_conflicts=True,
    )
    return Upserted(group_id, new=total == count, regression=bool(regressed))


def _add_agents(group_id: Any, stored: Any, agent_ids: Iterable[int]) -> None:
    """Add agents the group does not list yet (the row is locked by the upsert)."""
    known = json.loads(stored) if isinstance(stored, str | bytes) else list(stored or [])
    missing = sorted(set(agent_ids) - set(known))
    if missing and len(known) < AGENTS_KEPT:
        FailureGroup.objects.filter(pk=group_id).update(
            agent_ids=sorted(known + missing)[:AGENTS_KEPT]
        )


# --- triage: resolve, ignore, reopen -----------------------------------------------------------

TRANSITIONS = {
    "resolve": FailureGroup.State.RESOLVED,
    "ignore": FailureGroup.State.IGNORED,
    "reopen": FailureGroup.State.OPEN,
}


@transaction.atomic
def failure_group_set_state(*, group: FailureGroup, action: str, actor: Actor) -> FailureGroup:
    """Resolve, ignore or reopen a group (audited). Doing what is already done changes
    nothing and records nothing. Refused while the group's team is frozen."""
    state = TRANSITIONS.get(action)
    if state is None:
        raise InvalidInput(f"unknown action {action!r}: resolve, ignore or reopen")
    group = FailureGroup.objects.select_for_update().get(pk=group.pk)
    ensure_writable(group.team_id)
    if group.state == state:
        return group
    before = group.state
    group.state = state
    group.state_changed_at = timezone.now()
    group.state_changed_by = actor.user_or_none
    group.state_changed_by_label = actor.name
    group.save(
        update_fields=["state", "state_changed_at", "state_changed_by", "state_changed_by_label"]
    )
    audit_record(
        actor=actor,
        action=f"failure_group.{action}",
        target_type="failure_group",
        target_id=group.pk,
        team=group.team_id,
        before={"state": before},
        after={"state": state, "title": group.title, "count": group.count},
    )
    return group


# --- backfill ----------------------------------------------------------------------------------

BACKFILL_BATCH = 2000


def failures_backfill(*, batch: int = BACKFILL_BATCH, log: Any = None) -> dict[str, int]:
    """Group the failed runs no group counts yet, oldest first, one batch per transaction:
    each batch is read by the failures index, fingerprinted here and written as one
    upsert per group it touches (not per run). Runs again safely: a run already linked is
    skipped. Replays are left out (they notify nobody and count nowhere)."""
    totals = {"runs": 0, "groups": 0, "batches": 0}
    after: tuple[dt.datetime, Any] | None = None
    while True:
        rows = _failed_batch(after, batch)
        if not rows:
            return totals
        after = (rows[-1]["finished_at"], rows[-1]["pk"])
        with transaction.atomic():
            linked = set(
                FailureGroupRun.objects.filter(run_id__in=[r["pk"] for r in rows]).values_list(
                    "run_id", flat=True
                )
            )
            groups = _aggregate([r for r in rows if r["pk"] not in linked])
            for _, occ in sorted(groups.items()):  # rows locked in key order
                _upsert(occ)
        totals["runs"] += sum(len(o.runs) for o in groups.values())
        totals["groups"] += len(groups)
        totals["batches"] += 1
        if log is not None:
            log(f"batch {totals['batches']}: {totals['runs']} runs grouped so far")


def _failed_batch(after: tuple[dt.datetime, Any] | None, size: int) -> list[Any]:
    runs = Run.objects.filter(FAILED).exclude(run_mode=REPLAY_MODE).exclude(finished_at=None)
    if after is not None:
        runs = runs.filter(Q(finished_at__gt=after[0]) | Q(finished_at=after[0], pk__gt=after[1]))
    return list(
        runs.order_by("finished_at", "pk").values(
            "pk",
            "agent_id",
            "agent__team_id",
            "agent_version_id",
            "status_reason",
            "error_payload",
            "created_at",
            "finished_at",
        )[:size]
    )


def _aggregate(rows: list[dict[str, Any]]) -> dict[tuple[int, str], Occurrences]:
    groups: dict[tuple[int, str], Occurrences] = {}
    sources: dict[int | None, str] = {}
    for row in rows:
        version = row["agent_version_id"]
        if version not in sources:
            sources[version] = source_of(version)
        message = message_of(row["error_payload"])
        print_ = fingerprint(row["status_reason"], sources[version], message)
        key = (row["agent__team_id"], print_.digest)
        occ = groups.get(key)
        if occ is None:
            occ = groups[key] = Occurrences(
                team_id=row["agent__team_id"],
                print=print_,
                sample=message[:SAMPLE_CHARS],
                first=row["finished_at"],
                last=row["finished_at"],
                last_run_id=row["pk"],
            )
        occ.last, occ.last_run_id = row["finished_at"], row["pk"]  # rows come oldest first
        if row["agent_id"] not in occ.agent_ids:
            occ.agent_ids.append(row["agent_id"])
        occ.runs.append((row["pk"], row["created_at"]))
    return groups
