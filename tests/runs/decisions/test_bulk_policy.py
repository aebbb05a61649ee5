"""Decisions by policy: which tickets a policy matches (agent, tool, argument pattern,
age), deciding exactly the previewed ones, conflicts with someone deciding first, the
audit trail, and the inbox's "Decide by policy" panel."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from common.audit import Actor
from common.errors import InvalidInput
from common.models import AuditEntry
from runs.decisions.services import bulk as bulk_service
from runs.decisions.services.bulk import TicketPolicy, bulk_decide, tickets_matching
from runs.models import Decision, Run, Ticket
from runs.services.tickets import decision_submit
from tests.factories import user_with_role
from tests.runs.bulk_helpers import age, calc, email, note, waiting_on

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
BOB = Actor(label="bob")


def ids(tickets: list[Ticket]) -> list[Any]:
    return [ticket.pk for ticket in tickets]


@pytest.fixture
def world() -> dict[str, Ticket]:
    """Two agents' waiting tickets of three tools, of known ages (minutes)."""
    lunch, dinner, sum_ = waiting_on("noter", note("lunch"), note("dinner"), calc("6*7"))
    (box,) = waiting_on("other", note("lunchbox/2"))
    (mail,) = waiting_on("mailer", email("a@example.com", "b@example.com"))
    (leak,) = waiting_on("leaker", email("a@example.com", "eve@evil.test"))
    ages = {"lunch": 90, "dinner": 30, "sum": 50, "box": 120, "mail": 10, "leak": 5}
    tickets = {
        "lunch": lunch,
        "dinner": dinner,
        "sum": sum_,
        "box": box,
        "mail": mail,
        "leak": leak,
    }
    return {name: age(ticket, ages[name]) for name, ticket in tickets.items()}


def matching(**policy: Any) -> list[Any]:
    return ids(tickets_matching(TicketPolicy(**policy)))


# --- matching -------------------------------------------------------------------------------------


def test_by_agent_oldest_first(world):
    assert matching(agent="noter") == ids([world["lunch"], world["sum"], world["dinner"]])
    assert matching(agent="nobody") == []


def test_by_tool(world):
    assert matching(tool="write_note") == ids([world["box"], world["lunch"], world["dinner"]])
    assert matching(tool="calculator", agent="noter") == [world["sum"].pk]


def test_by_age(world):
    assert matching(waiting_longer_than=60) == ids([world["box"], world["lunch"]])
    assert matching(waiting_longer_than=0) == ids(
        [world[n] for n in ["box", "lunch", "sum", "dinner", "mail", "leak"]]
    )
    assert matching(tool="write_note", waiting_longer_than=100) == [world["box"].pk]


@pytest.mark.parametrize(
    ("pattern", "tool", "expected"),
    [
        ('title ~ "lunch*"', "", ["lunch"]),  # `*` stops at "/" (path glob)
        ('title ~ "lunch**"', "", ["box", "lunch"]),
        ('write_note(title ~ "lunch**")', "", ["box", "lunch"]),  # a whole pattern
        ('title =~ "(?i)^DIN"', "", ["dinner"]),  # regex search
        ("lunch*", "write_note", ["box", "lunch"]),  # the primary argument (title)
        ("6*", "calculator", ["sum"]),
        ('expression ~ "6*7"', "", ["sum"]),
        ('calculator(expression ~ "1*")', "", []),
        ("/calc.*/", "", ["sum"]),  # a regex on the tool name
        ('to ~ "*@example.com"', "", ["mail"]),  # a list: every element must match
        ('title ~ "lunch*"', "calculator", []),  # the tool filter still applies
    ],
)
def test_by_argument_pattern(world, pattern, tool, expected):
    assert matching(arguments_pattern=pattern, tool=tool) == ids([world[n] for n in expected])


def test_a_limit_keeps_the_oldest(world):
    assert matching(waiting_longer_than=0)[:2] == ids(
        tickets_matching(TicketPolicy(waiting_longer_than=0), limit=2)
    )


def test_decided_and_delegated_tickets_never_match(world):
    decision_submit(ticket=world["lunch"], action="reject", actor=BOB)
    assert world["lunch"].pk not in matching(agent="noter")
    Ticket.objects.filter(pk=world["dinner"].pk).update(ticket_id="delegate_run:x")
    assert matching(agent="noter") == [world["sum"].pk]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({}, "at least one of"),
        ({"arguments_pattern": 'title =~ "("'}, "does not parse"),
        ({"arguments_pattern": "write_note(", "tool": "x y"}, "does not parse"),
        ({"waiting_longer_than": -1}, "minutes"),
    ],
)
def test_a_policy_that_names_nothing_or_does_not_parse_is_refused(policy, message):
    with pytest.raises(InvalidInput, match=message):
        tickets_matching(TicketPolicy(**policy))


# --- deciding -------------------------------------------------------------------------------------


def test_the_previewed_tickets_are_exactly_the_ones_decided(world):
    operator = user_with_role("operator", "olga")
    actor = Actor(user=operator, source="ui")
    policy = TicketPolicy(tool="write_note", waiting_longer_than=60)
    previewed = tickets_matching(policy)
    assert ids(previewed) == ids([world["box"], world["lunch"]])
    note(  # a new ticket matching the policy after the preview: not decided
        "late"
    )
    outcome = bulk_decide(ids(previewed), "approve", "fine", actor, policy=policy)
    assert [item.outcome for item in outcome.items] == ["decided", "decided"]
    decided = set(Decision.objects.values_list("ticket_id", flat=True))
    assert decided == set(ids(previewed))
    assert all(d.actor_label == "olga" and d.comment == "fine" for d in Decision.objects.all())
    assert Ticket.objects.for_operators().count() == 4
    assert outcome.summary == "2 approved."


def test_a_ticket_decided_meanwhile_is_a_conflict_naming_who_and_is_not_decided_twice(world):
    previewed = tickets_matching(TicketPolicy(agent="noter"))
    decision_submit(ticket=world["sum"], action="reject", comment="no", actor=BOB)

    outcome = bulk_decide(ids(previewed), "approve", "", Actor(label="olga"))
    by_ticket = {item.ticket_id: item for item in outcome.items}
    conflict = by_ticket[str(world["sum"].pk)]
    assert conflict.outcome == "conflict" and conflict.decided_by == "bob"
    assert "already decided by bob at" in conflict.message and "(reject)" in conflict.message
    assert conflict.decision is not None and conflict.decision["action"] == "reject"
    assert [i.outcome for i in outcome.decided] == ["decided", "decided"]
    assert Decision.objects.get(ticket=world["sum"]).actor_label == "bob"
    assert Decision.objects.count() == 3  # one per ticket
    assert "2 approved; 1 already decided by someone else: calculator" in outcome.summary
    assert outcome.level == "warning"

    again = bulk_decide(ids(previewed), "approve", "", Actor(label="olga"))
    assert [item.outcome for item in again.items] == ["conflict"] * 3
    assert Decision.objects.count() == 3


def test_a_ticket_decided_while_the_bulk_runs_is_a_conflict(world, monkeypatch):
    """Loaded as pending, decided by bob just before our decision reaches it."""
    real = bulk_service._decide_one

    def bob_first(ident: Any, ticket: Ticket | None, *args: Any) -> Any:
        if ticket is not None and ticket.pk == world["dinner"].pk:
            assert ticket.status == Ticket.Status.PENDING  # as loaded
            decision_submit(ticket=ticket, action="approve", actor=BOB)
        return real(ident, ticket, *args)

    monkeypatch.setattr(bulk_service, "_decide_one", bob_first)
    outcome = bulk_decide(ids([world["lunch"], world["dinner"]]), "reject", "", Actor(label="al"))
    assert [item.outcome for item in outcome.items] == ["decided", "conflict"]
    assert outcome.items[1].decided_by == "bob"
    assert Decision.objects.get(ticket=world["dinner"]).action == "approve"


def test_errors_are_reported_and_the_others_go_through(world):
    unknown = "01970000-0000-7000-8000-000000000000"
    outcome = bulk_decide([world["lunch"].pk, unknown, "junk", world["lunch"].pk], "approve")
    assert [item.outcome for item in outcome.items] == ["decided", "error", "error"]
    assert outcome.items[1].message == "no such ticket"
    with pytest.raises(InvalidInput):
        bulk_decide([world["dinner"].pk], "edit")
    with pytest.raises(InvalidInput):
        bulk_decide([], "approve")


def test_each_decision_is_audited_and_one_bulk_row_holds_the_policy_and_counts(world):
    policy = TicketPolicy(agent="noter", arguments_pattern='title ~ "*"')
    previewed = tickets_matching(policy)
    decision_submit(ticket=previewed[0], action="approve", actor=BOB)
    actor = Actor(label="olga", source="ui")
    bulk_decide(ids(previewed), "reject", "too late", actor, policy=policy)

    assert AuditEntry.objects.filter(action="ticket.reject", actor_label="olga").count() == 1
    row = AuditEntry.objects.get(action="tickets.bulk_decide")
    assert (row.actor_label, row.comment, row.source) == ("olga", "too late", "ui")
    after = row.after
    assert after["policy"] == {
        "agent": "noter",
        "tool": "",
        "arguments_pattern": 'title ~ "*"',
        "waiting_longer_than_minutes": None,
    }
    assert (after["action"], after["requested"], after["decided"]) == ("reject", 2, 1)
    assert (after["conflicts"], after["errors"]) == (1, 0)
    assert after["tickets"]["conflict"] == [str(previewed[0].pk)]


# --- the inbox panel ------------------------------------------------------------------------------


def post(client, htmx: bool = True, **form: Any):
    return client.post(reverse("runs:inbox-policy"), form, **(HX if htmx else {}))


def test_an_operator_previews_then_decides_the_previewed_tickets(operator_client, world):
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    assert "Decide by policy" in page and 'name="arguments_pattern"' in page

    html = post(operator_client, tool="write_note", waiting_longer_than="60").content.decode()
    assert "2 tickets match" in html and "Approve all 2" in html and "Reject all 2" in html
    assert html.count('name="ticket" value=') == 2 and "csrfmiddlewaretoken" in html
    assert not Decision.objects.exists()

    form = {
        "confirm": "1",
        "action": "reject",
        "comment": "not now",
        "tool": "write_note",
        "waiting_longer_than": "60",
        "ticket": [str(world["box"].pk), str(world["lunch"].pk)],
    }
    decision_submit(ticket=world["box"], action="approve", actor=BOB)
    html = post(operator_client, **form).content.decode()
    assert "1 rejected; 1 conflict." in html and "already decided by bob at" in html
    assert Decision.objects.get(ticket=world["lunch"]).comment == "not now"
    assert Decision.objects.count() == 2
    row = AuditEntry.objects.get(action="tickets.bulk_decide")
    assert row.after["policy"]["tool"] == "write_note" and row.actor_label == "alice"


def test_the_panel_without_javascript(operator_client, world):
    page = post(operator_client, htmx=False, agent="other")
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html and "1 ticket matches" in html
    assert '<details class="card inbox-policy" id="inbox-policy" open>' in html
    form = {"confirm": "1", "action": "approve", "ticket": [str(world["box"].pk)]}
    response = post(operator_client, htmx=False, **form)
    assert response.status_code == 302 and response["Location"] == reverse("runs:inbox")
    assert "1 approved." in operator_client.get(response["Location"]).content.decode()


def test_bad_policies_and_empty_previews(operator_client, world):
    response = post(operator_client)
    assert response.status_code == 400 and "at least one of" in response.content.decode()
    response = post(operator_client, waiting_longer_than="soon")
    assert response.status_code == 400 and "whole minutes" in response.content.decode()
    response = post(operator_client, arguments_pattern='title =~ "("')
    assert response.status_code == 400 and "does not parse" in response.content.decode()
    html = post(operator_client, agent="nobody").content.decode()
    assert "No waiting ticket matches this policy" in html
    response = post(operator_client, confirm="1", action="edit", ticket=[str(world["box"].pk)])
    assert response.status_code == 400 and "approve or reject" in response.content.decode()
    assert not Decision.objects.exists()


def test_a_viewer_sees_no_panel_and_a_forged_post_is_refused(viewer_client, world):
    page = viewer_client.get(reverse("runs:inbox")).content.decode()
    assert "Decide by policy" not in page and "inbox-policy" not in page
    assert post(viewer_client, tool="write_note").status_code == 403
    form = {"confirm": "1", "action": "approve", "ticket": [str(world["box"].pk)]}
    assert post(viewer_client, **form).status_code == 403
    assert not Decision.objects.exists() and not Run.objects.filter(due=True).exists()


def test_arguments_and_patterns_are_escaped(operator_client):
    hostile = "<script>alert(1)</script>"
    waiting_on("hostile", note(hostile))
    html = post(operator_client, agent="hostile", arguments_pattern=f'title ~ "{hostile}"')
    text = html.content.decode()
    assert "1 ticket matches" in text
    assert hostile not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
