"""Ticket claims and assignment (runs/decisions/services/claims.py): claim, renew, the conflict
naming the claimant, lapse, release, assignment checks, a decision ends the claim, the
audit rows and the live broadcast; and the inbox and run pages that show them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from common.audit import SYSTEM, Actor
from common.errors import IllegalTransition, InvalidInput
from common.models import AuditEntry
from runs.decisions.services import claims
from runs.decisions.services.claims import (
    CLAIM_MINUTES,
    deciders,
    ticket_assign,
    ticket_claim,
    ticket_release,
)
from runs.models import Run, Ticket
from runs.realtime import DASHBOARD_GROUP, run_group
from runs.selectors.claims import live_claim
from runs.services.runs import run_cancel
from runs.services.tickets import decision_submit
from tests.factories import superuser, user_with_role, view_only_user, waiting_run

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def pending(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def as_actor(user: Any) -> Actor:
    return Actor(user=user, label=user.username, source="ui")


@pytest.fixture
def olivia() -> Any:
    return user_with_role("operator", "olivia")


@pytest.fixture
def bob() -> Any:
    return user_with_role("operator", "bob")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """What the claims broadcast once committed: (run id, summary)."""
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(
        claims, "broadcast_run_changed", lambda run_id, s: calls.append((run_id, s))
    )
    return calls


def lapse(ticket: Ticket) -> None:
    Ticket.objects.filter(pk=ticket.pk).update(
        claimed_until=timezone.now() - dt.timedelta(seconds=1)
    )


# --- the service -------------------------------------------------------------------------------


def test_claim_puts_the_actor_on_the_ticket_for_five_minutes(
    olivia, sent, django_capture_on_commit_callbacks
):
    run = waiting_run()
    ticket = pending(run)
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        claimed = ticket_claim(ticket, as_actor(olivia))
    assert claimed.claimed_by == olivia
    assert claimed.claimed_until is not None
    left = claimed.claimed_until - before
    assert dt.timedelta(minutes=CLAIM_MINUTES) - dt.timedelta(seconds=5) < left
    assert left <= dt.timedelta(minutes=CLAIM_MINUTES, seconds=5)
    entry = AuditEntry.objects.get(action="ticket.claim")
    assert entry.actor == olivia and entry.run_id == run.pk and entry.target_id == str(ticket.pk)
    assert entry.before == {"claimed_by": None, "claimed_until": None}
    assert entry.after["claimed_by"] == "olivia"
    assert sent == [(run.pk, sent[0][1])] and sent[0][1]["id"] == str(run.pk)


def test_claiming_again_renews_and_minutes_are_bounded(olivia):
    ticket = pending(waiting_run())
    first = ticket_claim(ticket, as_actor(olivia), minutes=1)
    renewed = ticket_claim(ticket, as_actor(olivia), minutes=30)
    assert renewed.claimed_by == olivia
    assert renewed.claimed_until > first.claimed_until + dt.timedelta(minutes=20)
    entries = AuditEntry.objects.filter(action="ticket.claim").order_by("id")
    assert [e.comment for e in entries] == ["claimed for 1 min", "renewed for 30 min"]
    for minutes in (0, 61):
        with pytest.raises(InvalidInput, match="minutes must be 1 to 60"):
            ticket_claim(ticket, as_actor(olivia), minutes=minutes)


def test_a_claim_held_by_someone_else_is_refused_naming_them_and_the_time_left(olivia, bob):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia), minutes=2)
    with pytest.raises(IllegalTransition) as refused:
        ticket_claim(ticket, as_actor(bob))
    assert refused.value.message == "olivia is on this ticket for 2 more minutes"
    assert refused.value.details["claimant"] == "olivia"
    assert refused.value.details["claimed_until"].startswith(str(timezone.now().year))
    assert Ticket.objects.get(pk=ticket.pk).claimed_by == olivia
    assert AuditEntry.objects.filter(action="ticket.claim").count() == 1

    Ticket.objects.filter(pk=ticket.pk).update(
        claimed_until=timezone.now() + dt.timedelta(seconds=30)
    )
    with pytest.raises(IllegalTransition, match=r"for 1 more minute$"):
        ticket_claim(ticket, as_actor(bob))


def test_a_lapsed_claim_is_anyones(olivia, bob):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia))
    lapse(ticket)
    assert live_claim(Ticket.objects.get(pk=ticket.pk)) is None
    claimed = ticket_claim(ticket, as_actor(bob))
    assert claimed.claimed_by == bob
    entry = AuditEntry.objects.filter(action="ticket.claim").latest("id")
    assert entry.before["claimed_by"] == "olivia" and entry.after["claimed_by"] == "bob"


def test_only_pending_tickets_of_people_are_claimed(olivia):
    run = waiting_run()
    ticket = pending(run)
    decision_submit(ticket=ticket, action="approve", actor=as_actor(olivia))
    with pytest.raises(IllegalTransition, match="is decided: there is nothing to claim"):
        ticket_claim(ticket, as_actor(olivia))
    with pytest.raises(InvalidInput, match="signed-in user"):
        ticket_claim(ticket, SYSTEM)


def test_release_by_the_claimant_is_idempotent_and_audited(
    olivia, sent, django_capture_on_commit_callbacks
):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia))
    with django_capture_on_commit_callbacks(execute=True):
        released = ticket_release(ticket, as_actor(olivia))
    assert released.claimed_by is None and released.claimed_until is None
    again = ticket_release(ticket, as_actor(olivia))  # nothing to do: no error, no row
    assert again.claimed_by is None
    entries = AuditEntry.objects.filter(action="ticket.release")
    assert entries.count() == 1
    assert entries.get().before["claimed_by"] == "olivia"
    assert entries.get().after == {"claimed_by": None, "claimed_until": None}
    assert len(sent) == 1


def test_someone_elses_claim_is_released_only_by_force(olivia, bob):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia))
    with pytest.raises(IllegalTransition, match="only olivia or an admin can release it"):
        ticket_release(ticket, as_actor(bob))
    assert Ticket.objects.get(pk=ticket.pk).claimed_by == olivia
    admin = user_with_role("admin", "ada")
    assert claims.may_release_any(admin) and claims.may_release_any(superuser())
    assert not claims.may_release_any(bob)
    released = ticket_release(ticket, as_actor(admin), force=True)
    assert released.claimed_by is None
    assert AuditEntry.objects.get(action="ticket.release").comment == "forced"
    lapse(ticket_claim(ticket, as_actor(olivia)))
    assert ticket_release(ticket, as_actor(bob)).claimed_by_id == olivia.pk  # lapsed: no-op


def test_assign_to_an_operator_or_to_nobody(olivia, bob, sent, django_capture_on_commit_callbacks):
    run = waiting_run()
    ticket = pending(run)
    with django_capture_on_commit_callbacks(execute=True):
        assigned = ticket_assign(ticket, bob, as_actor(olivia))
    assert assigned.assigned_to == bob
    entry = AuditEntry.objects.get(action="ticket.assign")
    assert entry.before == {"assigned_to": None} and entry.after == {"assigned_to": "bob"}
    assert entry.actor == olivia
    assert ticket_assign(ticket, None, as_actor(olivia)).assigned_to is None
    assert AuditEntry.objects.filter(action="ticket.assign").count() == 2
    assert [run_id for run_id, _ in sent] == [run.pk]


def test_assign_refuses_who_cannot_decide(olivia):
    ticket = pending(waiting_run())
    viewer = user_with_role("viewer", "vera")
    with pytest.raises(InvalidInput, match="vera cannot decide tickets: assign it to an operator"):
        ticket_assign(ticket, viewer, as_actor(olivia))
    gone = user_with_role("operator", "gone")
    gone.is_active = False
    gone.save()
    with pytest.raises(InvalidInput, match=r"gone cannot decide tickets \(inactive\)"):
        ticket_assign(ticket, User.objects.get(pk=gone.pk), as_actor(olivia))
    with pytest.raises(InvalidInput, match="no user named nobody-here"):
        claims.assignee_named("nobody-here")
    assert not AuditEntry.objects.filter(action="ticket.assign").exists()


def test_a_closed_ticket_cannot_be_assigned(olivia, bob):
    ticket = pending(waiting_run())
    decision_submit(ticket=ticket, action="reject", actor=as_actor(olivia))
    with pytest.raises(IllegalTransition, match="is decided: there is nothing to assign"):
        ticket_assign(ticket, bob, as_actor(olivia))


def test_deciders_are_active_users_who_may_decide(olivia, bob):
    user_with_role("viewer", "vera")
    view_only_user("vic")
    root = superuser("root")
    gone = user_with_role("operator", "gone")
    User.objects.filter(pk=gone.pk).update(is_active=False)
    assert [u.username for u in deciders()] == ["bob", "olivia", "root"]
    assert root.is_superuser


def test_a_decision_ends_the_claim(olivia, bob):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia))
    decision = decision_submit(ticket=ticket, action="approve", actor=as_actor(bob))
    assert decision.actor == bob  # someone else's claim does not stop a decision
    closed = Ticket.objects.get(pk=ticket.pk)
    assert closed.status == Ticket.Status.DECIDED
    assert closed.claimed_by is None and closed.claimed_until is None


def test_cancelling_the_run_ends_the_claim(olivia):
    run = waiting_run()
    ticket = pending(run)
    ticket_claim(ticket, as_actor(olivia))
    run_cancel(run=run, actor=as_actor(olivia))
    closed = Ticket.objects.get(pk=ticket.pk)
    assert closed.status == Ticket.Status.CANCELLED and closed.claimed_by is None


def test_the_broadcast_reaches_the_dashboard_and_the_run_groups(
    monkeypatch, olivia, django_capture_on_commit_callbacks
):
    from runs import realtime

    run = waiting_run()
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(realtime.broadcaster, "send", sent.extend)
    with django_capture_on_commit_callbacks(execute=True):
        ticket_claim(pending(run), as_actor(olivia))
    assert [group for group, _ in sent] == [DASHBOARD_GROUP, run_group(run.pk)]
    assert all(m["type"] == "run.changed" and m["run"]["id"] == str(run.pk) for _, m in sent)


# --- the pages ---------------------------------------------------------------------------------


def test_the_inbox_shows_the_claim_and_asks_before_a_key_decides(client, olivia, bob):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia), minutes=2)
    ticket_assign(ticket, bob, as_actor(olivia))
    client.force_login(bob)
    html = client.get("/inbox/").content.decode()
    assert "olivia is on this, 2 min" in html
    assert 'data-claim-confirm="olivia is on this (2 min left) — decide anyway?"' in html
    assert "assigned to you" in html
    assert '<option value="olivia">olivia</option>' in html
    assert '<option value="bob" selected>bob</option>' in html
    client.force_login(olivia)
    html = client.get("/inbox/list").content.decode()
    assert "you are on this, 2 min" in html and "data-claim-confirm" not in html
    assert "assigned to bob" in html and ">Release</button>" in html


def test_the_inbox_filters_mine_unassigned_and_all(client, olivia, bob):
    tickets = [pending(waiting_run(f"note {n}")) for n in range(4)]
    ticket_assign(tickets[0], olivia, as_actor(olivia))
    ticket_claim(tickets[1], as_actor(olivia))
    ticket_assign(tickets[2], bob, as_actor(bob))
    lapsed = ticket_claim(tickets[3], as_actor(olivia))
    lapse(lapsed)
    client.force_login(olivia)

    def listed(query: str) -> set[Ticket]:
        html = client.get(f"/inbox/list{query}").content.decode()
        return {t for t in tickets if f'data-ticket-id="{t.pk}"' in html}

    assert listed("?who=mine") == {tickets[0], tickets[1]}
    assert listed("?who=unassigned") == {tickets[1], tickets[3]}
    assert listed("?who=all") == set(tickets) == listed("")
    assert listed("?who=bogus") == set(tickets)
    page = client.get("/inbox/?who=mine").content.decode()
    assert '<option value="mine" selected>' in page
    assert 'name="who" value="mine"' in page  # kept by the list's forms


def test_claim_release_and_assign_from_the_inbox(client, olivia, bob):
    ticket = pending(waiting_run())
    client.force_login(olivia)
    response = client.post(f"/tickets/{ticket.pk}/claim", {"who": "mine"}, **HX)
    assert response.status_code == 200
    assert "you are on this, 5 min" in response.content.decode()
    assert Ticket.objects.get(pk=ticket.pk).claimed_by == olivia

    client.force_login(bob)
    response = client.post(f"/tickets/{ticket.pk}/claim", {}, **HX)
    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="inbox-confirm" hx-swap-oob="innerHTML"' in html
    assert "olivia is on this ticket for 5 more minutes" in html
    response = client.post(
        f"/tickets/{ticket.pk}/assign", {f"assignee-{ticket.pk}": "bob", "agent": ""}, **HX
    )
    assert response.status_code == 200 and "assigned to you" in response.content.decode()

    client.force_login(olivia)
    response = client.post(f"/tickets/{ticket.pk}/release", {"who": "mine"})
    assert response.status_code == 302 and response["Location"] == "/inbox/?who=mine"
    assert Ticket.objects.get(pk=ticket.pk).claimed_by is None
    rows = AuditEntry.objects.filter(action__startswith="ticket.").order_by("id")
    actions = list(rows.values_list("action", "source"))
    assert actions == [("ticket.claim", "ui"), ("ticket.assign", "ui"), ("ticket.release", "ui")]


def test_a_viewer_sees_claims_but_cannot_claim(client, olivia):
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(olivia))
    viewer = user_with_role("viewer", "vera")
    client.force_login(viewer)
    html = client.get("/inbox/").content.decode()
    assert "olivia is on this, 5 min" in html and ">Claim</button>" not in html
    for action in ("claim", "release", "assign"):
        response = client.post(f"/tickets/{ticket.pk}/{action}", {})
        assert response.status_code == 403, action
    assert Ticket.objects.get(pk=ticket.pk).claimed_by == olivia


def test_the_run_page_asks_before_deciding_a_ticket_someone_else_is_on(client, olivia, bob):
    run = waiting_run()
    ticket = pending(run)
    ticket_claim(ticket, as_actor(olivia), minutes=3)
    client.force_login(bob)
    html = client.get(f"/runs/{run.pk}/tickets").content.decode()
    assert "olivia is on this, 3 min" in html
    question = 'data-confirm="olivia is on this (3 min left) — decide anyway?"'
    assert html.count(question) == 3  # approve, edit and reject
    client.force_login(olivia)
    html = client.get(f"/runs/{run.pk}/tickets").content.decode()
    assert "you are on this, 3 min" in html and "data-confirm" not in html
    response = client.post(f"/tickets/{ticket.pk}/release", {"from": "run"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Released write_note." in html and ">Claim</button>" in html


def test_claimant_names_are_escaped(client, bob):
    sly = user_with_role("operator", "<b>x</b>")
    ticket = pending(waiting_run())
    ticket_claim(ticket, as_actor(sly))
    client.force_login(bob)
    html = client.get("/inbox/list").content.decode()
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt; is on this" in html
