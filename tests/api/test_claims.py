"""Ticket claims and assignment over the API: claim (and renew), 409 naming the claimant,
release, assign, the ticket's claim fields, `?who=` on the tickets list, roles."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from common.audit import Actor
from common.models import AuditEntry
from runs.decisions.services.claims import ticket_assign, ticket_claim
from runs.models import Run, Ticket
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import bearer, superuser, token_for, user_with_role, waiting_run

pytestmark = pytest.mark.django_db

CLAIM = "/api/v1/tickets/{ticket_id}/claim"
ASSIGN = "/api/v1/tickets/{ticket_id}/assign"
TICKET = "/api/v1/tickets/{ticket_id}"
TICKETS = "/api/v1/tickets"


def pending(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def claim(api, ticket: Ticket, body: dict | None = None):
    response = api.post(CLAIM.format(ticket_id=ticket.pk), body or {}, format="json")
    return conforms(response, "POST", CLAIM)


def release(api, ticket: Ticket):
    return conforms(api.delete(CLAIM.format(ticket_id=ticket.pk)), "DELETE", CLAIM)


def assign(api, ticket: Ticket, user: str | None):
    response = api.post(ASSIGN.format(ticket_id=ticket.pk), {"user": user}, format="json")
    return conforms(response, "POST", ASSIGN)


def operator_api_of(username: str):
    return bearer(token_for(user_with_role("operator", username), "ops"))


def test_claim_renew_and_release(operator_api, operator_user):
    ticket = pending(waiting_run())
    response = claim(operator_api, ticket)
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(ticket.pk) and body["claimed_by"] == "olga"
    until = dt.datetime.fromisoformat(body["claimed_until"])
    assert dt.timedelta(minutes=4) < until - timezone.now() <= dt.timedelta(minutes=5)
    assert body["assigned_to"] is None

    renewed = claim(operator_api, ticket, {"minutes": 30}).json()
    assert dt.datetime.fromisoformat(renewed["claimed_until"]) > until + dt.timedelta(minutes=20)

    response = release(operator_api, ticket)
    assert response.status_code == 200
    assert response.json()["claimed_by"] is None and response.json()["claimed_until"] is None
    assert release(operator_api, ticket).status_code == 200  # idempotent
    entries = AuditEntry.objects.filter(action__startswith="ticket.").order_by("id")
    assert [(e.action, e.source, e.actor_id) for e in entries] == [
        ("ticket.claim", "api", operator_user.pk),
        ("ticket.claim", "api", operator_user.pk),
        ("ticket.release", "api", operator_user.pk),
    ]


@pytest.mark.parametrize("minutes", [0, 61, "soon"])
def test_claim_minutes_are_1_to_60(operator_api, minutes):
    ticket = pending(waiting_run())
    error = assert_error(claim(operator_api, ticket, {"minutes": minutes}), 400, "invalid")
    assert "minutes" in error["details"]


def test_a_claim_held_by_someone_else_is_409_with_the_claimant(operator_api):
    ticket = pending(waiting_run())
    claim(operator_api_of("olivia"), ticket, {"minutes": 2})
    error = assert_error(claim(operator_api, ticket), 409, "conflict")
    assert error["message"] == "olivia is on this ticket for 2 more minutes"
    assert error["details"]["claimant"] == "olivia"
    until = dt.datetime.fromisoformat(error["details"]["claimed_until"])
    assert until > timezone.now() + dt.timedelta(minutes=1)
    error = assert_error(release(operator_api, ticket), 409, "conflict")
    assert "only olivia or an admin can release it" in error["message"]

    # an admin releases anyone's claim
    admin = bearer(token_for(superuser("root"), "root"))
    assert release(admin, ticket).json()["claimed_by"] is None
    assert claim(operator_api, ticket).json()["claimed_by"] == "olga"


def test_a_lapsed_claim_is_not_shown_and_is_anyones(operator_api):
    ticket = pending(waiting_run())
    claim(operator_api_of("olivia"), ticket)
    Ticket.objects.filter(pk=ticket.pk).update(
        claimed_until=timezone.now() - dt.timedelta(seconds=1)
    )
    shown = conforms(operator_api.get(TICKET.format(ticket_id=ticket.pk)), "GET", TICKET)
    assert shown.json()["claimed_by"] is None and shown.json()["claimed_until"] is None
    assert claim(operator_api, ticket).json()["claimed_by"] == "olga"


def test_claiming_a_decided_ticket_is_409(operator_api):
    ticket = pending(waiting_run())
    decided = operator_api.post(
        f"/api/v1/tickets/{ticket.pk}/decision", {"action": "approve"}, format="json"
    )
    assert decided.status_code == 201
    error = assert_error(claim(operator_api, ticket), 409, "conflict")
    assert error["details"]["ticket_status"] == "decided"


def test_deciding_a_ticket_someone_else_claimed_is_accepted_and_ends_the_claim(operator_api):
    ticket = pending(waiting_run())
    claim(operator_api_of("olivia"), ticket)
    decided = operator_api.post(
        f"/api/v1/tickets/{ticket.pk}/decision", {"action": "approve"}, format="json"
    )
    assert decided.status_code == 201 and decided.json()["actor"] == "olga (token ops)"
    body = operator_api.get(TICKET.format(ticket_id=ticket.pk)).json()
    assert body["status"] == "decided" and body["claimed_by"] is None


def test_assign_and_unassign(operator_api, operator_user):
    ticket = pending(waiting_run())
    user_with_role("operator", "olivia")
    response = assign(operator_api, ticket, "olivia")
    assert response.status_code == 200 and response.json()["assigned_to"] == "olivia"
    response = assign(operator_api, ticket, None)
    assert response.status_code == 200 and response.json()["assigned_to"] is None
    entries = AuditEntry.objects.filter(action="ticket.assign").order_by("id")
    assert [e.after for e in entries] == [{"assigned_to": "olivia"}, {"assigned_to": None}]


def test_assign_refuses_unknown_and_read_only_users(operator_api, viewer_user):
    ticket = pending(waiting_run())
    error = assert_error(assign(operator_api, ticket, "nobody-here"), 400, "invalid")
    assert error["details"] == {"user": "nobody-here"}
    error = assert_error(assign(operator_api, ticket, "vic"), 400, "invalid")
    assert error["message"] == "vic cannot decide tickets: assign it to an operator"
    assert_error(
        operator_api.post(ASSIGN.format(ticket_id=ticket.pk), {}, format="json"), 400, "invalid"
    )
    assert not AuditEntry.objects.filter(action="ticket.assign").exists()


def test_roles_viewer_403_anonymous_401_unknown_ticket_404(viewer_api, anonymous_api, operator_api):
    ticket = pending(waiting_run())
    for api, status, code in (
        (viewer_api, 403, "permission_denied"),
        (anonymous_api, 401, "not_authenticated"),
    ):
        assert_error(claim(api, ticket), status, code)
        assert_error(release(api, ticket), status, code)
        assert_error(assign(api, ticket, None), status, code)
    assert viewer_api.get(TICKET.format(ticket_id=ticket.pk)).status_code == 200
    missing = "00000000-0000-0000-0000-000000000000"
    assert_error(operator_api.post(CLAIM.format(ticket_id=missing)), 404, "not_found")
    assert Ticket.objects.get(pk=ticket.pk).claimed_by is None


def test_tickets_list_filters_by_who(operator_api, operator_user):
    olivia = user_with_role("operator", "olivia")
    tickets = [pending(waiting_run(f"note {n}")) for n in range(3)]
    ticket_assign(tickets[0], operator_user, Actor(user=olivia))
    ticket_claim(tickets[1], Actor(user=operator_user))
    ticket_assign(tickets[2], olivia, Actor(user=olivia))

    def listed(who: str) -> list[str]:
        response = conforms(operator_api.get(TICKETS, {"who": who}), "GET", TICKETS)
        assert response.status_code == 200
        return [item["id"] for item in response.json()["items"]]

    ids = [str(t.pk) for t in tickets]
    assert listed("mine") == ids[:2]
    assert listed("unassigned") == [ids[1]]
    assert listed("all") == ids
    items = operator_api.get(TICKETS).json()["items"]
    assert [(i["assigned_to"], i["claimed_by"]) for i in items] == [
        ("olga", None),
        (None, "olga"),
        ("olivia", None),
    ]
    assert_error(operator_api.get(TICKETS, {"who": "everyone"}), 400, "invalid")
