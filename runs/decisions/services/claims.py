"""Claims and assignment of tickets, so that two operators never decide the same ticket
without knowing it.

A claim says who is on a ticket now: it lapses `claimed_until` (the database's clock)
unless its holder renews it by claiming again. An assignment says whose ticket it is.
Neither stops a decision: the pages ask before deciding a ticket someone else is on, the
API accepts it, and a decision ends the claim (runs/services/tickets.py). Every claim,
release and assignment is audited in its transaction and, once committed, broadcast as
the run's summary so that the inbox and the run page refresh what they show of it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Now

from common.audit import Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from common.teams import ensure_writable
from runs.models import Run, Ticket
from runs.permissions import DECIDE
from runs.realtime import broadcast_run_changed
from runs.selectors.claims import CLAIM_MINUTES, MAX_CLAIM_MINUTES, minutes_until
from runs.services.events import run_summary

ADMIN_ROLE = "admin"  # may release anyone's claim (common/roles.py)
DECIDERS_SHOWN = 200  # the assign select's options at most


def deciders() -> QuerySet[Any]:
    """Active users who may decide tickets (superusers, and the roles and users granted
    the permission): who a ticket can be assigned to. One query, by username."""
    perm = Permission.objects.filter(
        content_type__app_label="runs", codename=DECIDE.split(".", 1)[1]
    )
    users = get_user_model().objects.filter(is_active=True)
    return (
        users.filter(
            Q(is_superuser=True)
            | Q(pk__in=users.filter(user_permissions__in=perm).values("pk"))
            | Q(pk__in=users.filter(groups__permissions__in=perm).values("pk"))
        )
        .only("pk", "username")
        .order_by("username")[:DECIDERS_SHOWN]
    )


def may_release_any(user: Any) -> bool:
    """Admins (superusers and the admin role) release claims that are not theirs."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or user.groups.filter(name=ADMIN_ROLE).exists())


def _person(actor: Actor, doing: str) -> Any:
    user = actor.user_or_none
    if user is None:
        raise InvalidInput(f"only a signed-in user can {doing} a ticket")
    return user


def _fresh(ticket: Ticket) -> Ticket:
    return Ticket.objects.select_related(
        "run__agent", "tool_call", "claimed_by", "assigned_to"
    ).get(pk=ticket.pk)


def _claim_row(ticket: Ticket) -> dict[str, Any] | None:
    """The ticket's status and claim as they are now, with the database's clock."""
    row = (
        Ticket.objects.filter(pk=ticket.pk)
        .annotate(db_now=Now())
        .values("status", "claimed_by_id", "claimed_by__username", "claimed_until", "db_now")
        .first()
    )
    return None if row is None else dict(row)


def _held_by_other(row: dict[str, Any], user: Any) -> bool:
    until = row["claimed_until"]
    return (
        row["claimed_by_id"] is not None
        and row["claimed_by_id"] != getattr(user, "pk", None)
        and until is not None
        and until >= row["db_now"]
    )


def _claimed_error(ticket: Ticket, row: dict[str, Any], tail: str = "") -> IllegalTransition:
    left = minutes_until(row["claimed_until"], row["db_now"])
    who = row["claimed_by__username"] or "someone"
    return IllegalTransition(
        f"{who} is on this ticket for {left} more minute{'s' if left != 1 else ''}{tail}",
        {
            "ticket": str(ticket.pk),
            "claimant": who,
            "claimed_until": row["claimed_until"].isoformat(),
        },
    )


def _not_pending(ticket: Ticket, status: str | None, doing: str) -> IllegalTransition:
    return IllegalTransition(
        f"ticket {ticket.ticket_id} is {status or 'gone'}: there is nothing to {doing}",
        {"ticket": str(ticket.pk), "ticket_status": status},
    )


def _announce(ticket: Ticket) -> None:
    """After commit: the run's summary to the lists and to the run's page."""
    run = ticket.run
    summary = run_summary(run)
    transaction.on_commit(lambda: broadcast_run_changed(run.pk, summary))


def _claim_before(row: dict[str, Any]) -> dict[str, Any]:
    """The audit's `before` of a claim change, from the row `_claim_row` read."""
    return {"claimed_by": row["claimed_by__username"], "claimed_until": row["claimed_until"]}


def _claim_json(ticket: Ticket) -> dict[str, Any]:
    return {
        "claimed_by": ticket.claimed_by.get_username() if ticket.claimed_by else None,
        "claimed_until": ticket.claimed_until,
    }


def _writable(ticket: Ticket) -> None:
    """Claims change nothing of a frozen team's tickets (common.teams.ensure_writable)."""
    team_id = Run.objects.filter(pk=ticket.run_id).values_list("agent__team_id", flat=True)
    ensure_writable(team_id.first())


def ticket_claim(ticket: Ticket, actor: Actor, minutes: int = CLAIM_MINUTES) -> Ticket:
    """Put the actor on a pending ticket for `minutes`: one guarded update that wins when
    nobody holds the ticket, its claim has lapsed, or the actor holds it (a renewal).
    Otherwise IllegalTransition naming the claimant and the time left. Returns the ticket
    as it is now."""
    user = _person(actor, "claim")
    _writable(ticket)
    if not 1 <= minutes <= MAX_CLAIM_MINUTES:
        raise InvalidInput(f"minutes must be 1 to {MAX_CLAIM_MINUTES}, got {minutes}")
    if ticket.child_run_id:
        raise InvalidInput(
            f"ticket {ticket.ticket_id} is answered by child run {ticket.child_run_id}: "
            "claim the child's tickets"
        )
    with transaction.atomic():
        before = _claim_row(ticket)
        if before is None:
            raise _not_pending(ticket, None, "claim")
        for _attempt in range(2):  # a claim that lapses between the two reads: again
            claimable = Q(claimed_by__isnull=True) | Q(claimed_until__isnull=True)
            claimable |= Q(claimed_until__lt=Now()) | Q(claimed_by=user)
            won = (
                Ticket.objects.filter(pk=ticket.pk, status=Ticket.Status.PENDING)
                .filter(claimable)
                .update(claimed_by=user, claimed_until=Now() + dt.timedelta(minutes=minutes))
            )
            if won:
                break
            row = _claim_row(ticket)
            if row is None or row["status"] != Ticket.Status.PENDING:
                raise _not_pending(ticket, row["status"] if row else None, "claim")
            if _held_by_other(row, user):
                raise _claimed_error(ticket, row)
        else:
            raise IllegalTransition(f"ticket {ticket.ticket_id} could not be claimed; try again")
        fresh = _fresh(ticket)
        renewed = before["claimed_by_id"] == user.pk
        audit_record(
            actor=actor,
            action="ticket.claim",
            target_type="ticket",
            target_id=ticket.pk,
            run=fresh.run,
            before=_claim_before(before),
            after=_claim_json(fresh),
            comment=f"{'renewed' if renewed else 'claimed'} for {minutes} min",
        )
        _announce(fresh)
    return fresh


def ticket_release(ticket: Ticket, actor: Actor, *, force: bool = False) -> Ticket:
    """End the ticket's claim: the claimant's own, or anyone's with `force` (an admin).
    Releasing a ticket nobody holds (or whose claim has lapsed) changes nothing and is
    not an error. Returns the ticket as it is now."""
    user = actor.user_or_none
    if user is None and not force:
        raise InvalidInput("only a signed-in user can release a ticket")
    _writable(ticket)
    with transaction.atomic():
        before = _claim_row(ticket)
        if before is None:
            raise _not_pending(ticket, None, "release")
        held = Ticket.objects.filter(pk=ticket.pk, claimed_by__isnull=False)
        if not force:
            held = held.filter(claimed_by=user)
        if not held.update(claimed_by=None, claimed_until=None):
            if not force and _held_by_other(before, user):
                who = before["claimed_by__username"] or "the claimant"
                raise _claimed_error(ticket, before, f": only {who} or an admin can release it")
            return _fresh(ticket)  # nobody held it: nothing to do
        fresh = _fresh(ticket)
        audit_record(
            actor=actor,
            action="ticket.release",
            target_type="ticket",
            target_id=ticket.pk,
            run=fresh.run,
            before=_claim_before(before),
            after={"claimed_by": None, "claimed_until": None},
            comment="" if before["claimed_by_id"] == getattr(user, "pk", None) else "forced",
        )
        _announce(fresh)
    return fresh


def ticket_assign(ticket: Ticket, assignee: Any, actor: Actor) -> Ticket:
    """Assign a pending ticket to `assignee` (an active user who may decide tickets), or
    to nobody with None. Returns the ticket as it is now."""
    _writable(ticket)
    if assignee is not None and not (assignee.is_active and assignee.has_perm(DECIDE)):
        name = assignee.get_username()
        raise InvalidInput(
            f"{name} cannot decide tickets{'' if assignee.is_active else ' (inactive)'}: "
            "assign it to an operator",
            {"user": name},
        )
    with transaction.atomic():
        before = (
            Ticket.objects.filter(pk=ticket.pk).values("status", "assigned_to__username").first()
        )
        updated = Ticket.objects.filter(pk=ticket.pk, status=Ticket.Status.PENDING).update(
            assigned_to=assignee
        )
        if not updated:
            raise _not_pending(ticket, before["status"] if before else None, "assign")
        fresh = _fresh(ticket)
        audit_record(
            actor=actor,
            action="ticket.assign",
            target_type="ticket",
            target_id=ticket.pk,
            run=fresh.run,
            before={"assigned_to": before["assigned_to__username"] if before else None},
            after={"assigned_to": assignee.get_username() if assignee is not None else None},
        )
        _announce(fresh)
    return fresh


def assignee_named(username: str | None) -> Any:
    """The user named `username` (None: nobody); InvalidInput when there is none."""
    if not username:
        return None
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise InvalidInput(f"no user named {username}", {"user": username})
    return user
