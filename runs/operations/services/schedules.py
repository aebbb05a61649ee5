"""Schedules start agent runs on a cron expression or an interval (docs/schedules.md).

The schedule's row is the one source of truth: `next_run_at` is the slot it fires next.
Firing a slot is a guarded update (`... SET next_run_at = <following> WHERE id = X AND
next_run_at = <slot>`), so a slot fires exactly once however many tickers ask at the same
time (two `celery beat`, beat and the embedded worker's thread). The run it starts is
created in the transaction of that update.

A slot fired more than its grace late (the grace: half the schedule's period, at least
GRACE_MIN and at most GRACE_MAX) was missed while nothing was ticking: catch-up policy
`skip` records the missed slots and starts nothing; `once` starts one run for all of
them. Either way the next slot is the first one after now.

Cron expressions are read on the wall clock of the schedule's time zone, so "0 9 * * *"
is 09:00 there in summer and in winter. Each matching wall-clock time fires once: a time
that the clocks skip (02:30 on the night they go forward) fires as much later as the jump
(03:30); a time that occurs twice (the night they go back) fires at its first occurrence,
except for expressions whose hour field is `*` or `*/n`, which also fire in the repeated
hour so that they keep their rhythm in real time.

What a valid schedule is lives in schedule_rules.py (the admin, the pages and the API
validate through it).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from croniter import CroniterError, croniter
from django.db import IntegrityError, transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from common.audit import Actor, audit_record
from common.errors import Frozen, InvalidInput, ServiceError
from common.teams import ensure_writable
from runs.models import Run, Schedule
from runs.operations.services.schedule_rules import (
    cron_error,
    schedule_config_errors,
    schedule_validate,
    zone_for,
)
from runs.operations.services.schedule_rules import schedule_errors as schedule_errors
from runs.services.submission import Origin, Submission, ThreadBusy
from runs.services.submission_flow import submission_accept_within

logger = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # how often beat (CELERY_BEAT_SCHEDULE) and the embedded thread tick
GRACE_MIN = dt.timedelta(seconds=5)
GRACE_MAX = dt.timedelta(seconds=60)
MAX_DUE_PER_TICK = 100
MAX_COUNTED = 1000  # missed cron slots counted one by one; more are reported as "1000+"
# Far enough to see around any clock change (offsets of one zone differ by < 3 hours).
DST_HORIZON = dt.timedelta(hours=3)
BUSY = "skipped: previous run still open"


# --- when -------------------------------------------------------------------------------------


def _instants(wall: dt.datetime, zone: ZoneInfo, repeat: bool) -> list[dt.datetime]:
    """The instants (UTC) a matching wall-clock time fires at: a skipped time as much later
    as the jump, a repeated time at its first occurrence (and its second with `repeat`)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(dt.UTC)
    exists = first.astimezone(zone).replace(tzinfo=None) == wall
    if repeat and exists and second != first:
        return [first, second]
    return [first]


def _offset(moment: dt.datetime) -> dt.timedelta:
    return moment.utcoffset() or dt.timedelta(0)


def _cron_next(expression: str, zone: ZoneInfo, after: dt.datetime) -> dt.datetime:
    """The first instant after `after` the expression fires at in `zone` (see the module's
    doc for clock changes)."""
    repeat = expression.split()[1].startswith("*")
    local = after.astimezone(zone)
    wall = local.replace(tzinfo=None)
    start = wall
    if repeat and local.fold == 0:  # inside a repeated hour's first pass: its second is ahead
        shift = _offset(local) - _offset(local.replace(fold=1))
        start -= max(shift, dt.timedelta(0))
    candidates = croniter(expression, start, ret_type=dt.datetime)
    best: dt.datetime | None = None
    horizon: dt.datetime | None = None
    while True:
        naive = candidates.get_next()
        if best is not None and horizon is not None and naive > horizon:
            return best
        for instant in _instants(naive, zone, repeat):
            if instant > after and (best is None or instant < best):
                best = instant
        if best is not None and horizon is None:
            # no clock change in between: nothing later can fire sooner; else look past it
            changed = _offset(local) != _offset(best.astimezone(zone))
            horizon = naive + (DST_HORIZON if changed or start != wall else dt.timedelta(0))


def next_after(schedule: Schedule, after: dt.datetime) -> dt.datetime:
    """The schedule's first slot after `after` (intervals: `after` + the interval)."""
    if schedule.kind == Schedule.Kind.INTERVAL:
        if not schedule.interval_seconds:
            raise InvalidInput("An interval schedule needs a number of seconds (≥ 1).")
        return after + dt.timedelta(seconds=schedule.interval_seconds)
    zone = zone_for(schedule.timezone)
    if len((schedule.cron or "").split()) != 5:
        raise InvalidInput(cron_error(schedule.cron or "") or "", {"cron": [schedule.cron]})
    try:
        return _cron_next(schedule.cron, zone, after)
    except (CroniterError, ValueError, KeyError):
        problem = cron_error(schedule.cron) or f"The cron expression {schedule.cron!r} failed."
        raise InvalidInput(problem, {"cron": [schedule.cron]}) from None


def first_slot(schedule: Schedule, now: dt.datetime | None = None) -> dt.datetime:
    """The slot a schedule enabled (created, saved, resumed) at `now` fires first: the
    next cron match, or one interval from now (in whole seconds)."""
    schedule_validate(schedule)
    now = (now or timezone.now()).replace(microsecond=0)
    return next_after(schedule, now)


def grace(schedule: Schedule, slot: dt.datetime) -> dt.timedelta:
    """How late a slot may fire and still count as on time: half the period from that slot
    to the next, at least GRACE_MIN, at most GRACE_MAX."""
    period = next_after(schedule, slot) - slot
    return min(max(period / 2, GRACE_MIN), GRACE_MAX)


@dataclass(frozen=True)
class Due:
    """What firing `slot` at `now` does: `missed` slots up to `latest` passed unfired
    (0 when on time); `following` is the next slot, the first one after now."""

    slot: dt.datetime
    latest: dt.datetime
    missed: int
    following: dt.datetime
    capped: bool = False  # more than MAX_COUNTED cron slots were missed


def due_at(schedule: Schedule, slot: dt.datetime, now: dt.datetime) -> Due:
    capped = False
    if schedule.kind == Schedule.Kind.INTERVAL:
        step = dt.timedelta(seconds=schedule.interval_seconds or 1)
        passed = math.floor((now - slot) / step)  # slots after `slot` up to now
        latest, following = slot + passed * step, slot + (passed + 1) * step
        count = passed + 1
    else:
        latest, count, following = slot, 1, next_after(schedule, slot)
        while following <= now:
            if count >= MAX_COUNTED:  # a long outage of a frequent schedule: stop counting
                capped, following = True, next_after(schedule, now)
                break
            latest, following = following, next_after(schedule, following)
            count += 1
    on_time = now - slot <= grace(schedule, slot)
    missed = 0 if on_time else count
    return Due(slot=slot, latest=latest, missed=missed, following=following, capped=capped)


# --- firing ---------------------------------------------------------------------------------


def schedule_actor(schedule: Schedule) -> Actor:
    return Actor(label=f"schedule {schedule.name}"[:200], source="schedule")


def _start_run(schedule: Schedule, actor: Actor) -> Run:
    """Start the schedule's run (in the caller's transaction) on a new thread or on its one
    thread; ThreadBusy when that thread's previous run is still open."""
    schedule = (
        Schedule.objects.select_for_update(of=("self",))
        .select_related("agent", "thread")
        .get(pk=schedule.pk)
    )
    ensure_writable(schedule.agent.team_id)  # a frozen team's schedule does not fire
    # the submission command checks what the schedule sends, as for any other sender;
    # a new run only (NEW_RUN): a busy thread is ThreadBusy, not queued input. The slot's
    # claim is the schedule's idempotency: no key.
    same = schedule.thread_policy == Schedule.ThreadPolicy.SAME
    command = Submission.build_new_run(
        agent=schedule.agent,
        messages=schedule.message,
        thread=schedule.thread if same else None,
        priority=schedule.priority,
        actor=actor,
        origin=Origin(run_mode="scheduled", team_guard=False),  # checked above
        schedule=schedule,
    )
    run = submission_accept_within(command).run
    assert run is not None  # NEW_RUN always starts one
    if same and run.thread_id != schedule.thread_id:  # its first thread, or a new one
        Schedule.objects.filter(pk=schedule.pk).update(thread=run.thread_id)
    return run


def _missed(due: Due) -> str:
    return f"{due.missed}+" if due.capped else str(due.missed)


def _fire_claimed(schedule: Schedule, due: Due) -> tuple[str, Run | None]:
    """The claimed slot's outcome (in the claim's transaction): skipped, or a run."""
    if due.missed and schedule.catch_up == Schedule.CatchUp.SKIP:
        return f"skipped {_missed(due)} missed", None
    try:
        with transaction.atomic():
            run = _start_run(schedule, schedule_actor(schedule))
    except ThreadBusy:
        return BUSY, None
    except Frozen as exc:  # the slot passes, as a skipped one does
        return f"skipped: {exc.message}"[:500], None
    except Exception as exc:  # recorded on the schedule: the slot is not retried forever
        logger.warning("schedule %s could not start its run", schedule.pk, exc_info=True)
        message = exc.message if isinstance(exc, ServiceError) else f"{type(exc).__name__}"
        return f"failed: {message}"[:500], None
    if due.missed:
        return f"caught up {_missed(due)} missed: started run {run.pk}", run
    return f"started run {run.pk}", run


def schedule_fire(schedule: Schedule, now: dt.datetime | None = None) -> str | None:
    """Fire the schedule's due slot (`schedule.next_run_at`, as read) if no one else did:
    returns what it did, or None when it was not due or another process took the slot."""
    now = now or timezone.now()
    slot = schedule.next_run_at
    if slot is None or slot > now or not schedule.enabled:
        return None
    try:
        due = due_at(schedule, slot, now)
    except InvalidInput as exc:  # changed behind the form's back: stop until it is fixed
        Schedule.objects.filter(pk=schedule.pk, next_run_at=slot).update(
            next_run_at=None, last_outcome=f"stopped: {exc.message}"[:500]
        )
        return None
    with transaction.atomic():
        claimed = Schedule.objects.filter(pk=schedule.pk, enabled=True, next_run_at=slot).update(
            next_run_at=due.following, last_run_at=due.latest, updated_at=timezone.now()
        )
        if not claimed:
            return None
        outcome, run = _fire_claimed(schedule, due)
        changes: dict[str, Any] = {"last_outcome": outcome}
        if run is not None:
            changes["last_run"] = run
        Schedule.objects.filter(pk=schedule.pk).update(**changes)
    return outcome


def schedules_fire_due(now: dt.datetime | None = None) -> dict[str, int]:
    """Fire every enabled schedule whose next slot has come (the one-second tick of beat
    and of the embedded worker); counts what happened."""
    now = now or timezone.now()
    counts = {"due": 0, "started": 0, "skipped": 0, "failed": 0, "taken": 0}
    due = Schedule.objects.filter(enabled=True, next_run_at__lte=now).order_by(
        "next_run_at", "priority"
    )
    for schedule in due[:MAX_DUE_PER_TICK]:
        counts["due"] += 1
        try:
            outcome = schedule_fire(schedule, now)
        except Exception:  # one broken schedule does not stop the others
            logger.warning("schedule %s failed to fire", schedule.pk, exc_info=True)
            counts["failed"] += 1
            continue
        if outcome is None:
            counts["taken"] += 1
        elif outcome.startswith("failed"):
            counts["failed"] += 1
        elif "started run" in outcome:
            counts["started"] += 1
        else:
            counts["skipped"] += 1
    return counts


# --- operator actions -----------------------------------------------------------------------


def schedule_run_now(schedule: Schedule, actor: Actor) -> Run:
    """Start the schedule's run at once, leaving its slots as they are (paused or not);
    ThreadBusy (an IllegalTransition) when its one thread's previous run is still open."""
    with transaction.atomic():
        run = _start_run(schedule, actor)
        Schedule.objects.filter(pk=schedule.pk).update(
            last_run=run, last_outcome=f"run now by {actor.name}: started run {run.pk}"[:500]
        )
        audit_record(
            actor=actor,
            action="schedule.run_now",
            target_type="schedule",
            target_id=schedule.pk,
            run=run,
            after={"name": schedule.name, "run": str(run.pk)},
        )
    return run


def _set_enabled(schedule: Schedule, actor: Actor, enabled: bool, now: dt.datetime) -> Schedule:
    """Pause or resume: a guarded update from the other state, audited. Pausing a paused
    schedule (resuming a running one) changes nothing and records nothing, so a retried
    request is harmless and a resume never moves a running schedule's next slot."""
    with transaction.atomic():
        current = (
            Schedule.objects.select_for_update(of=("self",))
            .select_related("agent")
            .get(pk=schedule.pk)
        )
        ensure_writable(current.agent.team_id)  # a frozen team's schedules stay as they are
        if current.enabled == enabled:
            return current
        before = {"enabled": current.enabled, "next_run_at": current.next_run_at}
        following = first_slot(current, now) if enabled else None
        changes = {"enabled": enabled, "next_run_at": following, "updated_at": timezone.now()}
        Schedule.objects.filter(pk=current.pk, enabled=not enabled).update(**changes)
        for name, value in changes.items():
            setattr(current, name, value)
        audit_record(
            actor=actor,
            action="schedule.resume" if enabled else "schedule.pause",
            target_type="schedule",
            target_id=current.pk,
            team=current.agent.team_id,
            before=before,
            after={"enabled": enabled, "next_run_at": current.next_run_at},
        )
    return current


def schedule_pause(schedule: Schedule, actor: Actor) -> Schedule:
    """Stop firing: no next slot until it is resumed."""
    return _set_enabled(schedule, actor, False, timezone.now())


def schedule_resume(schedule: Schedule, actor: Actor, now: dt.datetime | None = None) -> Schedule:
    """Fire again from now on (the slots missed while paused are not caught up)."""
    return _set_enabled(schedule, actor, True, now or timezone.now())


def schedule_plan(schedule: Schedule, now: dt.datetime | None = None) -> Schedule:
    """Before a schedule is saved (created or changed): its next slot from now, none while
    it is paused. Raises InvalidInput for an invalid schedule."""
    schedule_validate(schedule)
    schedule.next_run_at = first_slot(schedule, now) if schedule.enabled else None
    schedule.updated_at = timezone.now()
    return schedule


# --- configuration: the admin's form, the schedules pages (and the API) --------------------

# kept from the row when a change is saved: a firing may have set them meanwhile
FIRING_FIELDS = ("thread_id", "last_run_id", "last_run_at", "last_outcome")


def schedule_snapshot(schedule: Schedule) -> dict[str, Any]:
    """The schedule's fields as its audit entries record them."""
    return model_to_dict(schedule)


def schedule_save(schedule: Schedule, actor: Actor, now: dt.datetime | None = None) -> Schedule:
    """Create (no row yet) or change a schedule as its form filled it: validated, its next
    slot planned from now (none while paused), saved and audited (`schedule.create` /
    `schedule.update`, seen by its agent's team) in one transaction. What a firing set
    meanwhile (its thread, last run and outcome) is kept from the row. A frozen team's
    schedule, before or after the change, is refused (Frozen)."""
    errors = schedule_config_errors(schedule)
    if errors:
        raise InvalidInput(" ".join(errors.values()), {k: [v] for k, v in errors.items()})
    creating = schedule._state.adding
    with transaction.atomic():
        current = None
        if not creating:  # nothing fires this row until the change commits
            current = (
                Schedule.objects.select_for_update(of=("self",))
                .select_related("agent")
                .get(pk=schedule.pk)
            )
            ensure_writable(current.agent.team_id)
            for name in FIRING_FIELDS:
                setattr(schedule, name, getattr(current, name))
        elif schedule.created_by_id is None:
            schedule.created_by = actor.user_or_none
        ensure_writable(schedule.agent.team_id)
        schedule_plan(schedule, now)
        try:
            with transaction.atomic():
                schedule.save()
        except IntegrityError:
            raise InvalidInput(
                f"A schedule named {schedule.name!r} exists already: choose another name.",
                {"name": [schedule.name]},
            ) from None
        audit_record(
            actor=actor,
            action="schedule.create" if creating else "schedule.update",
            target_type="schedule",
            target_id=schedule.pk,
            team=schedule.agent.team_id,
            before=schedule_snapshot(current) if current is not None else None,
            after=schedule_snapshot(schedule),
        )
    return schedule


def schedule_delete(schedule: Schedule, actor: Actor) -> None:
    """Delete a schedule (its runs stay, no longer linked to it); audited. Refused while
    its agent's team is frozen."""
    with transaction.atomic():
        current = (
            Schedule.objects.select_for_update(of=("self",))
            .select_related("agent")
            .get(pk=schedule.pk)
        )
        ensure_writable(current.agent.team_id)
        audit_record(
            actor=actor,
            action="schedule.delete",
            target_type="schedule",
            target_id=current.pk,
            team=current.agent.team_id,
            before=schedule_snapshot(current),
        )
        current.delete()
