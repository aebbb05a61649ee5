"""Replays in flight (docs/replays.md): starting a set's next items within the limits,
deciding a replay's tickets by the set's policy, and the sweep's repair. Everything here
runs inside the caller's transaction: the one that created the set, the checkpoint that
opened tickets or ended a replay run, a cancel, a failure, the sweep.

The limits: a set runs at most `concurrency` replays at once, all sets together at most
AWAKEN_REPLAY_CONCURRENCY. Starting locks every running set's row (in creation order,
so two starters queue behind each other rather than deadlock), counts the running items
and starts pending ones in position order, oldest set first, with guarded updates.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from common.audit import Actor
from common.errors import ServiceError
from runs.models import PRIORITY_MAX, Decision, Message, Run, Ticket
from runs.replays.models.replays import ReplayItem, ReplaySet
from runs.replays.services.replay_tools import arguments_key
from runs.runtime import types as rt
from runs.services.dispatch import enqueue_on_commit
from runs.services.run_end import REPLAY_MODE
from runs.services.submission import Origin, Submission
from runs.services.submission_flow import submission_accept_within
from runs.services.tickets import decision_submit

logger = logging.getLogger(__name__)

REPLAY_PRIORITY = PRIORITY_MAX  # the lowest: workers take live runs first
POLICY_ACTOR = Actor(label="replay policy", source="replay")


# --- starting -------------------------------------------------------------------------------


def initial_messages(run: Run) -> list[rt.Message]:
    """The user input that started `run`: its trigger messages (request / input)."""
    ids = list(((run.request or {}).get("input_message_ids")) or [])
    ids = ids or list(((run.input or {}).get("trigger_message_ids")) or [])
    if not ids:
        return []
    rows = Message.objects.filter(thread_id=run.thread_id, id__in=ids).order_by("seq")
    return [
        rt.Message(role=rt.Role(row.role), content=list(row.content or []))
        for row in rows
        if row.role in ("user", "system") and row.text.strip()
    ]


def _start_item(item: ReplayItem, replay_set: ReplaySet) -> bool:
    """Start `item`'s replay, or skip it (its original is gone or had no input)."""
    original = Run.objects.filter(pk=item.original_run_id).first() if item.original_run_id else None
    messages = initial_messages(original) if original is not None else []
    if not messages:
        note = "its original run is gone" if original is None else "no initial user input"
        ReplayItem.objects.filter(pk=item.pk, status=ReplayItem.Status.PENDING).update(
            status=ReplayItem.Status.SKIPPED, note=note
        )
        return False
    actor = Actor(
        user=replay_set.created_by, label=f"replay {replay_set.pk}"[:200], source="replay"
    )
    # the original's input as stored (checked when it was sent): history, not new input
    command = Submission.build_new_run(
        agent=replay_set.agent,
        history=messages,
        priority=REPLAY_PRIORITY,
        actor=actor,
        origin=Origin(
            run_mode=REPLAY_MODE,
            version=replay_set.version,
            title_prefix="replay: ",
            team_guard=False,  # the replay policy is not guarded by a freeze
        ),
    )
    run = submission_accept_within(command).run
    assert run is not None  # NEW_RUN always starts one
    started = ReplayItem.objects.filter(pk=item.pk, status=ReplayItem.Status.PENDING).update(
        status=ReplayItem.Status.RUNNING, replay_run=run
    )
    if not started:  # cannot happen under the set's lock; roll the run back with it
        raise RuntimeError(f"replay item {item.pk} was started twice")
    return True


def replays_start_next() -> int:
    """Start pending items of the running sets while the limits allow; mark sets with
    nothing left done. Returns how many replays started. Call inside a transaction."""
    sets = list(
        ReplaySet.objects.select_for_update(of=("self",))
        .filter(status=ReplaySet.Status.RUNNING)
        .order_by("created_at", "pk")
        .select_related("agent", "version", "created_by")
    )
    if not sets:
        return 0
    counts = {
        row["replay_set_id"]: row
        for row in ReplayItem.objects.filter(replay_set__in=sets)
        .values("replay_set_id")
        .annotate(
            running=Count("pk", filter=Q(status=ReplayItem.Status.RUNNING)),
            pending=Count("pk", filter=Q(status=ReplayItem.Status.PENDING)),
        )
    }
    room = settings.AWAKEN_REPLAY_CONCURRENCY - sum(row["running"] for row in counts.values())
    started = 0
    for replay_set in sets:
        row = counts.get(replay_set.pk, {"running": 0, "pending": 0})
        running = row["running"]
        if row["pending"]:
            pending = ReplayItem.objects.filter(
                replay_set=replay_set, status=ReplayItem.Status.PENDING
            ).order_by("position")
            for item in pending:
                if running >= replay_set.concurrency or room <= 0:
                    break
                if _start_item(item, replay_set):
                    running += 1
                    room -= 1
                    started += 1
        _finish_if_done(replay_set)
    return started


def _finish_if_done(replay_set: ReplaySet) -> None:
    left = ReplayItem.objects.filter(
        replay_set=replay_set,
        status__in=[ReplayItem.Status.PENDING, ReplayItem.Status.RUNNING],
    )
    if not left.exists():
        ReplaySet.objects.filter(pk=replay_set.pk, status=ReplaySet.Status.RUNNING).update(
            status=ReplaySet.Status.DONE, finished_at=timezone.now()
        )


def replay_run_ended(run_id: Any) -> None:
    """In the transaction that ended a replay run (its final checkpoint, a cancel, a
    failure: the places that start the thread's next input): its item is done and the
    next pending items start."""
    ReplayItem.objects.filter(replay_run_id=run_id, status=ReplayItem.Status.RUNNING).update(
        status=ReplayItem.Status.DONE
    )
    replays_start_next()


@transaction.atomic
def replays_repair() -> int:
    """The sweep's repair: items whose replay ended without their item knowing (or whose
    run was deleted) are done, and starts that were lost happen now."""
    stale = ReplayItem.objects.filter(status=ReplayItem.Status.RUNNING).filter(
        Q(replay_run__isnull=True) | Q(replay_run__status=Run.Status.DONE)
    )
    repaired = stale.update(status=ReplayItem.Status.DONE)
    has_work = ReplaySet.objects.filter(status=ReplaySet.Status.RUNNING).exists()
    return repaired + (replays_start_next() if has_work else 0)


def replays_sweep(now: dt.datetime) -> dict[str, int]:
    """The sweep's step for replays (settings AWAKEN_SWEEP_STEPS): replays_repair."""
    return {"replays_repaired": replays_repair()}


# --- tickets ------------------------------------------------------------------------------


def _recorded_decisions(original_run_id: Any) -> dict[str, list[Decision]]:
    """The original run's decisions by (tool, arguments), in the order it got them."""
    found: dict[str, list[Decision]] = defaultdict(list)
    if original_run_id is None:
        return found
    decisions = Decision.objects.filter(ticket__run_id=original_run_id).select_related("ticket")
    for decision in decisions.order_by("ticket__created_at", "created_at"):
        ticket = decision.ticket
        found[f"{ticket.tool_name}:{arguments_key(ticket.arguments)}"].append(decision)
    return found


def _policy_decision(
    policy: str, ticket: Ticket, recorded: dict[str, list[Decision]], seen: dict[str, int]
) -> tuple[str, Any, Any, str]:
    """(action, arguments, payload, comment) the policy gives `ticket`."""
    if policy == ReplaySet.TicketPolicy.APPROVE_ALL:
        return "approve", None, None, "replay policy: approve all"
    if policy == ReplaySet.TicketPolicy.REJECT_ALL:
        return "reject", None, None, "replay policy: reject all"
    key = f"{ticket.tool_name}:{arguments_key(ticket.arguments)}"
    index = seen[key]
    seen[key] += 1
    earlier = recorded.get(key) or []
    if index >= len(earlier):
        return "reject", None, None, "replay policy: as recorded (no recorded decision)"
    decision = earlier[index]
    comment = f"replay policy: as recorded ({decision.action} by {decision.actor_label})"
    if decision.action == Decision.Action.EDIT:
        return "edit", decision.arguments_after, None, comment
    if decision.action == Decision.Action.RESPOND:
        return "respond", None, decision.payload, comment
    return decision.action, None, None, comment


def replay_tickets_decide(run: Run) -> int:
    """In the checkpoint transaction of replay run `run`: decide its pending tickets by
    its set's policy (nobody sees them), and make the run due when it waits on nothing
    else. Returns how many were decided."""
    pending = list(
        Ticket.objects.filter(run_id=run.pk, status=Ticket.Status.PENDING)
        .select_related("tool_call", "run")
        .order_by("created_at", "pk")
    )
    pending = [ticket for ticket in pending if ticket.child_run_id is None]
    if not pending:
        return _due_if_idle(run)
    item = ReplayItem.objects.filter(replay_run_id=run.pk).select_related("replay_set").first()
    policy = item.replay_set.ticket_policy if item else ReplaySet.TicketPolicy.REJECT_ALL
    recorded = _recorded_decisions(item.original_run_id if item else None)
    seen: dict[str, int] = defaultdict(int)
    for decided in Ticket.objects.filter(run_id=run.pk, status=Ticket.Status.DECIDED):
        seen[f"{decided.tool_name}:{arguments_key(decided.arguments)}"] += 1
    for ticket in pending:
        action, arguments, payload, comment = _policy_decision(policy, ticket, recorded, seen)
        try:
            with transaction.atomic():
                decision_submit(
                    ticket=ticket,
                    action=action,
                    arguments=arguments,
                    payload=payload,
                    comment=comment,
                    actor=POLICY_ACTOR,
                )
        except ServiceError as exc:  # e.g. approving a call that waits for an answer
            decision_submit(
                ticket=ticket,
                action="reject",
                comment=f"{comment}; it could not be applied ({exc.message}), so rejected",
                actor=POLICY_ACTOR,
            )
    _due_if_idle(run)
    return len(pending)


def _due_if_idle(run: Run) -> int:
    """A replay run that checkpointed `waiting` with all its tickets decided (they were
    decided in an earlier checkpoint of the same step) is due again."""
    fresh = Run.objects.filter(pk=run.pk).values("status", "due", "waiting").first()
    if fresh is None or fresh["status"] != Run.Status.WAITING or fresh["due"]:
        return 0
    if (fresh["waiting"] or {}).get("reason") == rt.WaitingReason.BACKGROUND_TASKS.value:
        return 0  # its background work wakes it
    if Ticket.objects.filter(run_id=run.pk, status=Ticket.Status.PENDING).exists():
        return 0
    Run.objects.filter(pk=run.pk).update(due=True, dispatched_at=timezone.now())
    enqueue_on_commit(run.pk)
    return 0
