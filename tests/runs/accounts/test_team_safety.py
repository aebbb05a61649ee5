"""The teams' safety settings, enforced in services (common/teams.py, docs/teams.md): an
incident freeze refuses every change of the team's things (services, the API, the CLI's
services, schedules); a team may require a reason to reject or cancel; bulk decisions
above its threshold need confirming, and nothing changes before they are. Team changes
are audited."""

from __future__ import annotations

import datetime as dt

import pytest

from agents.services.rules_from_decisions import rule_add_to_draft
from common.audit import Actor
from common.errors import ConfirmationRequired, Frozen, InvalidInput
from common.models import AuditEntry, Membership, Team
from common.teams import (
    membership_remove,
    membership_set,
    team_freeze,
    team_unfreeze,
    team_update,
)
from runs.decisions.services.bulk import bulk_decide
from runs.decisions.services.claims import ticket_assign, ticket_claim, ticket_release
from runs.models import Decision, PendingInput, Run, Schedule, Ticket
from runs.operations.services import schedules as sched
from runs.replays.models.replays import ReplaySet
from runs.replays.services.forks import run_fork
from runs.replays.services.replays import replay_create, replay_request
from runs.services.inputs import input_retract, thread_interrupt
from runs.services.runs import run_cancel, run_retry, run_set_priority
from runs.services.submission_flow import input_submit, run_start
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.factories import (
    bearer,
    call,
    scripted_agent,
    superuser,
    team,
    team_member,
    token_for,
    user_with_role,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

OPS = Actor(label="ops", source="ui")
ASK = {"default_behavior": "ask"}
TOOLS = ["calculator", "write_note"]


def waiting(team_slug: str = "red", count: int = 1, slug: str = "asker") -> Run:
    """A run of an agent of team `team_slug` waiting on `count` tickets."""
    calls = [call("calculator", {"expression": f"{i}+1"}) for i in range(count)]
    agent = scripted_agent(
        [{"text": "", "tool_calls": calls}, {"text": "ok"}],
        slug=slug,
        permission=ASK,
        tools=TOOLS,
        team=team(team_slug),
    )
    run = drive(run_start(agent=agent, messages="go"))
    assert run.status == Run.Status.WAITING, run.status_reason
    return run


def pending(run: Run) -> list[Ticket]:
    return list(Ticket.objects.filter(run=run, status=Ticket.Status.PENDING))


def freeze(slug: str = "red") -> Team:
    return team_freeze(team=team(slug), actor=OPS, reason="incident 42")


# --- the freeze ----------------------------------------------------------------------------


def test_a_frozen_team_refuses_decisions_cancel_and_new_runs_and_nothing_changes():
    run = waiting()
    (ticket,) = pending(run)
    freeze()
    with pytest.raises(Frozen, match="incident 42"):
        decision_submit(ticket=ticket, action="approve", actor=OPS)
    with pytest.raises(Frozen):
        run_cancel(run=run, actor=OPS, reason="stop")
    with pytest.raises(Frozen):
        run_start(agent=run.agent, messages="again", actor=OPS)
    with pytest.raises(Frozen):
        input_submit(agent=None, messages="more", thread=run.thread, actor=OPS)
    with pytest.raises(Frozen):
        thread_interrupt(thread=run.thread, actor=OPS, reason="stop")
    with pytest.raises(Frozen):
        ticket_claim(ticket, Actor(user=user_with_role("operator"), source="ui"))
    with pytest.raises(Frozen):
        ticket_release(ticket, OPS, force=True)
    with pytest.raises(Frozen):
        ticket_assign(ticket, None, OPS)
    with pytest.raises(Frozen):
        bulk_decide([ticket.pk], "approve", actor=OPS)
    with pytest.raises(Frozen):
        run_fork(run=run, step=0, actor=OPS)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING
    assert pending(run) == [ticket]
    assert not Decision.objects.exists()
    assert Run.objects.count() == 1


def test_the_freeze_blocks_retry_and_priority_and_lifting_it_allows_them_again():
    agent = scripted_agent([{"text": "ok"}], team=team("red"))
    failed = drive(run_start(agent=agent, messages="one"))
    Run.objects.filter(pk=failed.pk).update(status_reason="error")
    failed = Run.objects.get(pk=failed.pk)
    assert failed.is_failed
    created = run_start(agent=scripted_agent([{"text": "ok"}], team=team("red")), messages="x")
    freeze()
    with pytest.raises(Frozen):
        run_set_priority(run=created, priority=1, actor=OPS)
    with pytest.raises(Frozen):
        run_retry(run=failed, actor=OPS)
    team_unfreeze(team=team("red"), actor=OPS)
    run_set_priority(run=created, priority=1, actor=OPS)
    assert Run.objects.get(pk=created.pk).priority == 1


def test_a_frozen_team_refuses_retracting_queued_input():
    run = waiting()
    outcome = input_submit(agent=None, messages="later", thread=run.thread, mode="queue", actor=OPS)
    freeze()
    with pytest.raises(Frozen):
        input_retract(input_id=outcome.input.pk, actor=OPS)
    assert PendingInput.objects.get(pk=outcome.input.pk).status == PendingInput.Status.PENDING


def test_the_worker_is_not_guarded_a_running_run_goes_on_after_the_freeze():
    run = waiting()
    (ticket,) = pending(run)
    decision_submit(ticket=ticket, action="approve", actor=OPS)
    freeze()
    assert drive(Run.objects.get(pk=run.pk)).final_output == "ok"


def test_another_teams_freeze_changes_nothing_for_this_team():
    run = waiting("blue")
    freeze("red")
    (ticket,) = pending(run)
    decision_submit(ticket=ticket, action="approve", actor=OPS)
    assert Decision.objects.count() == 1


def test_a_schedule_of_a_frozen_teams_agent_does_not_fire_and_records_why():
    agent = scripted_agent([{"text": "ok"}], team=team("red"))
    slot = dt.datetime(2025, 1, 10, 12, 0, tzinfo=dt.UTC)
    schedule = Schedule(
        name="nightly", kind="interval", interval_seconds=600, message="hi", agent=agent
    )
    sched.schedule_plan(schedule)
    schedule.next_run_at = slot
    schedule.save()
    freeze()
    outcome = sched.schedule_fire(schedule, slot + dt.timedelta(seconds=1))
    assert outcome is not None and outcome.startswith("skipped:")
    assert "frozen" in outcome
    schedule.refresh_from_db()
    assert schedule.last_outcome == outcome
    assert schedule.next_run_at == slot + dt.timedelta(minutes=10)  # the slot passes
    assert not Run.objects.filter(schedule=schedule).exists()
    with pytest.raises(Frozen):
        sched.schedule_run_now(schedule, OPS)


def test_the_api_answers_409_team_frozen_for_a_decision_and_a_cancel():
    run = waiting()
    (ticket,) = pending(run)
    freeze()
    api = bearer(token_for(user_with_role("operator")))
    response = api.post(
        f"/api/v1/tickets/{ticket.pk}/decision",
        {"action": "approve"},
        format="json",
    )
    assert_error(response, 409, "team_frozen")
    assert_error(api.post(f"/api/v1/runs/{run.pk}/cancel"), 409, "team_frozen")
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING


# --- reason required -------------------------------------------------------------------------


def test_a_team_that_requires_a_reason_refuses_a_blank_reject_and_cancel():
    team("red", reason_required=True)
    run = waiting()
    (ticket,) = pending(run)
    with pytest.raises(InvalidInput, match='team "red" requires a reason to reject'):
        decision_submit(ticket=ticket, action="reject", comment="  ", actor=OPS)
    with pytest.raises(InvalidInput, match="requires a reason to cancel"):
        run_cancel(run=run, actor=OPS)
    with pytest.raises(InvalidInput, match="requires a reason to reject"):
        bulk_decide([ticket.pk], "reject", "", OPS)
    with pytest.raises(InvalidInput, match="requires a reason to cancel"):
        thread_interrupt(thread=run.thread, actor=OPS)
    assert not Decision.objects.exists()
    decision_submit(ticket=ticket, action="reject", comment="wrong sum", actor=OPS)
    run.refresh_from_db()
    cancelled = run_cancel(run=run, actor=OPS, reason="not needed")
    assert cancelled.pk == run.pk
    entry = AuditEntry.objects.get(action="run.cancel", target_id=str(run.pk))
    assert entry.comment == "not needed"


def test_approving_needs_no_reason_and_a_team_without_the_setting_takes_a_blank_reject():
    team("red", reason_required=True)
    (ticket,) = pending(waiting())
    decision_submit(ticket=ticket, action="approve", actor=OPS)
    (other,) = pending(waiting("blue", slug="blue-asker"))
    decision_submit(ticket=other, action="reject", actor=OPS)
    assert Decision.objects.count() == 2


def test_the_cancel_page_refuses_a_blank_reason_with_a_message(client):
    team("red", reason_required=True)
    run = waiting()
    client.force_login(user_with_role("operator"))
    page = client.get(f"/runs/{run.pk}/")
    assert b'name="reason" maxlength="2000" required' in page.content
    response = client.post(f"/runs/{run.pk}/cancel", {"reason": ""}, follow=True)
    assert "requires a reason to cancel a run" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING


# --- bulk confirmation -----------------------------------------------------------------------


def test_a_bulk_decision_above_the_threshold_needs_confirm_and_changes_nothing_before():
    team("red", bulk_confirm_above=2)
    run = waiting(count=3)
    ids = [t.pk for t in pending(run)]
    with pytest.raises(ConfirmationRequired) as caught:
        bulk_decide(ids, "approve", actor=OPS)
    assert caught.value.details == {"count": 3, "threshold": 2}
    assert len(pending(run)) == 3
    assert not AuditEntry.objects.filter(action="tickets.bulk_decide").exists()
    outcome = bulk_decide(ids, "approve", actor=OPS, confirm=True)
    assert len(outcome.decided) == 3


def test_the_lowest_threshold_of_the_teams_involved_applies():
    team("red", bulk_confirm_above=50)
    team("blue", bulk_confirm_above=1)
    ids = [t.pk for t in pending(waiting("red"))] + [
        t.pk for t in pending(waiting("blue", slug="blue-asker"))
    ]
    with pytest.raises(ConfirmationRequired):
        bulk_decide(ids, "approve", actor=OPS)
    assert len(bulk_decide(ids[:1], "approve", actor=OPS).decided) == 1


def test_the_bulk_api_answers_confirmation_required_then_decides_with_confirm():
    team("red", bulk_confirm_above=1)
    run = waiting(count=2)
    ids = [str(t.pk) for t in pending(run)]
    api = bearer(token_for(user_with_role("operator")))
    body = {"ticket_ids": ids, "action": "approve"}
    error = assert_error(
        api.post("/api/v1/tickets/bulk-decision", body, format="json"),
        400,
        "confirmation_required",
    )
    assert error["details"] == {"count": 2, "threshold": 1}
    assert len(pending(run)) == 2
    response = api.post("/api/v1/tickets/bulk-decision", {**body, "confirm": True}, format="json")
    assert response.status_code == 200, response.content
    assert [r["outcome"] for r in response.json()["results"]] == ["decided", "decided"]


def test_the_inbox_policy_asks_to_confirm_then_resends_with_confirm(client):
    team("red", bulk_confirm_above=1)
    run = waiting(count=2)
    client.force_login(user_with_role("operator"))
    post = {"confirm": "1", "action": "approve", "ticket": [str(t.pk) for t in pending(run)]}
    response = client.post("/inbox/policy", post, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 400
    assert "This acts on 2 tickets (more than 1). Confirm" in html
    assert 'name="confirm_bulk" value="1"' in html
    assert len(pending(run)) == 2
    response = client.post("/inbox/policy", {**post, "confirm_bulk": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert pending(run) == []


# --- audited team changes --------------------------------------------------------------------


def test_settings_freeze_unfreeze_and_members_are_audited_with_the_team():
    red = team("red")
    team_update(team=red, actor=OPS, reason_required=True, bulk_confirm_above=3)
    team_freeze(team=red, actor=OPS, reason="incident 7")
    team_unfreeze(team=red, actor=OPS)
    user = user_with_role("viewer", "vic")
    membership_set(team=red, user=user, role="operator", actor=OPS)
    membership_remove(membership=Membership.objects.get(team=red, user=user), actor=OPS)
    rows = list(AuditEntry.objects.filter(team=red).order_by("id"))
    assert [e.action for e in rows] == [
        "team.settings",
        "team.freeze",
        "team.unfreeze",
        "team.member",
        "team.member",
    ]
    assert rows[0].after == {"reason_required": True, "bulk_confirm_above": 3}
    assert rows[1].comment == "incident 7"
    assert rows[3].after == {"user": "vic", "role": "operator"}
    assert rows[4].after == {"user": "vic", "role": None}


def test_the_reject_form_marks_the_reason_required_and_the_server_refuses_blank(client):
    team("red", reason_required=True)
    run = waiting()
    (ticket,) = pending(run)
    client.force_login(user_with_role("operator"))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Reason (required by team Red)" in html
    assert 'placeholder="Reason for rejecting" required' in html
    response = client.post(
        f"/tickets/{ticket.pk}/decide", {"action": "reject", "comment": " "}, HTTP_HX_REQUEST="true"
    )
    assert "requires a reason to reject a ticket" in response.content.decode()
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING


def test_the_api_takes_the_reason_of_a_cancel_and_an_interrupt():
    team("red", reason_required=True)
    run = waiting()
    api = bearer(token_for(user_with_role("operator")))
    error = assert_error(api.post(f"/api/v1/runs/{run.pk}/cancel"), 400, "invalid")
    assert "requires a reason to cancel a run" in error["message"]
    interrupt = f"/api/v1/threads/{run.thread_id}/interrupt"
    assert_error(api.post(interrupt, {"reason": " "}, format="json"), 400, "invalid")
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING
    response = api.post(interrupt, {"reason": "wrong thread"}, format="json")
    assert response.status_code == 200, response.content
    assert Run.objects.get(pk=run.pk).status_reason == "cancelled"
    entry = AuditEntry.objects.get(action="run.cancel", target_id=str(run.pk))
    assert entry.comment == "wrong thread"


def test_a_frozen_team_refuses_a_rule_from_a_decision_and_replays():
    run = waiting()
    agent = run.agent
    freeze()
    with pytest.raises(Frozen):
        rule_add_to_draft(agent, {"tool": "calculator", "behavior": "allow"}, OPS)
    with pytest.raises(Frozen):
        replay_create(request=replay_request({"agent_id": agent.slug}), actor=OPS)
    assert not ReplaySet.objects.exists()
    agent.refresh_from_db()
    assert "calculator" not in str(agent.permission)


def test_the_admin_changes_a_team_through_the_audited_services(client):
    client.force_login(superuser())
    red = team("red")
    response = client.post(
        f"/admin/common/team/{red.pk}/change/",
        {
            "name": "Red team",
            "reason_required": "on",
            "bulk_confirm_above": "5",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code in (200, 302)
    red.refresh_from_db()
    if response.status_code == 200:  # the inline's prefix differs: say so
        raise AssertionError(response.content.decode()[:3000])
    assert (red.name, red.reason_required, red.bulk_confirm_above) == ("Red team", True, 5)
    entry = AuditEntry.objects.get(action="team.settings", team=red)
    assert entry.source == "admin"
    vic = user_with_role("viewer", "vic")
    response = client.post(
        f"/admin/common/team/{red.pk}/change/",
        {
            "name": "Red team",
            "reason_required": "on",
            "bulk_confirm_above": "5",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "0",
            "memberships-0-user": str(vic.pk),
            "memberships-0-role": "operator",
            "memberships-0-team": str(red.pk),
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Membership.objects.get(team=red, user=vic).role == "operator"
    member = AuditEntry.objects.get(action="team.member", team=red)
    assert member.after == {"user": "vic", "role": "operator"}
    client.force_login(team_member("operator", "blue"))
    assert client.get("/admin/common/team/").status_code in (302, 403)
