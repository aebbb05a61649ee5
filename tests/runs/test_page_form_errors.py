"""Page actions answer errors inside the form that was sent: a refusal, a frozen team
(409 `team_frozen`), invalid input or a NUL character re-render the panel (htmx) or the
page (a plain form post) with the message in that form and what was typed kept, never a
bare text response or a redirect that loses it. A frozen team's buttons show the freeze
before the click; its settings and members are frozen too, only lifting the freeze is not."""

from __future__ import annotations

import re
from html import unescape

import pytest

from common.audit import Actor
from common.models import AuditEntry, Membership, Team
from common.teams import team_freeze
from runs.models import Decision, PendingInput, Run, Ticket
from runs.services.submission_flow import input_submit, run_start
from tests.factories import call, scripted_agent, superuser, team, team_member, user_with_role
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

OPS = Actor(label="ops", source="ui")
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-tickets"}  # as the card sends
FROZEN_TEXT = 'team "red" is frozen: incident 42'


def waiting(tool: str = "write_note", slug: str = "asker") -> Run:
    """A run of team red's agent waiting on one ticket for `tool`."""
    arguments = {"question": "which city?"} if tool == "ask_human" else {"title": "t", "body": "b"}
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call(tool, arguments)]}, {"text": "ok"}],
        slug=slug,
        # ask_human opens its own ticket (answered); another tool asks permission
        permission={"default_behavior": "allow" if tool == "ask_human" else "ask"},
        tools=[tool],
        team=team("red"),
    )
    run = drive(run_start(agent=agent, messages="go"))
    assert run.status == Run.Status.WAITING, run.status_reason
    return run


def ticket_of(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def freeze() -> Team:
    return team_freeze(team=team("red"), actor=OPS, reason="incident 42")


def form_of(html: str, action_url: str, action: str = "") -> str:
    """The HTML of the first form that posts to `action_url` (with `action` as its hidden
    action field when given)."""
    for form in re.findall(r"<form\b.*?</form>", html, flags=re.S):
        form = unescape(form)
        if f'action="{action_url}"' in form and (
            not action or f'name="action" value="{action}"' in form
        ):
            return form
    raise AssertionError(f"no form posting to {action_url} {action}: {html[:2000]}")


@pytest.fixture
def operator(client):
    client.force_login(team_member("operator", "red", "opa"))
    return client


# --- the freeze on the pages -----------------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
def test_deciding_a_frozen_teams_ticket_is_409_inside_the_card_and_the_card_stays(operator, htmx):
    run = waiting()
    ticket = ticket_of(run)
    freeze()
    url = f"/tickets/{ticket.pk}/decide"
    response = operator.post(url, {"action": "reject", "comment": "no"}, **(HTMX if htmx else {}))
    assert response.status_code == 409
    html = response.content.decode()
    reject = form_of(html, url, "reject")
    assert FROZEN_TEXT in reject and 'data-error-code="team_frozen"' in reject
    assert form_of(html, url, "approve")  # the card keeps its buttons
    assert ("<h1" in html) is not htmx  # htmx: the panel; a form post: the page
    assert 'value="no"' in reject  # what was typed is kept
    assert not Decision.objects.exists()


def test_a_frozen_teams_run_page_shows_its_buttons_disabled_with_the_reason(operator):
    run = waiting()
    ticket = ticket_of(run)
    freeze()
    html = operator.get(f"/runs/{run.pk}/").content.decode()
    approve = form_of(html, f"/tickets/{ticket.pk}/decide", "approve")
    assert "disabled" in approve
    card = html[html.index(f'id="ticket-{ticket.pk}"') :]
    assert "Team Red is frozen" in card[: card.index("</form>")]  # before the first button
    assert "disabled" in form_of(html, f"/runs/{run.pk}/cancel")


def test_a_frozen_teams_thread_page_shows_the_composer_disabled_with_the_reason(operator):
    run = waiting()
    freeze()
    html = operator.get(f"/threads/{run.thread_id}/").content.decode()
    composer = form_of(html, f"/threads/{run.thread_id}/send")
    assert re.search(r'type="submit" disabled>Send<', composer)
    assert "Team Red is frozen" in composer


def _actions(run: Run, ticket: Ticket, pending: PendingInput) -> list[tuple[str, dict]]:
    return [
        (f"/tickets/{ticket.pk}/decide", {"action": "approve"}),
        (f"/tickets/{ticket.pk}/claim", {"from": "run"}),
        (f"/tickets/{ticket.pk}/assign", {"from": "run", "assignee": "opa"}),
        (f"/runs/{run.pk}/cancel", {"reason": "x"}),
        (f"/runs/{run.pk}/priority", {"priority": "3"}),
        (f"/threads/{run.thread_id}/send", {"agent": run.agent.slug, "message": "more"}),
        (f"/threads/{run.thread_id}/interrupt", {"reason": "x"}),
        (f"/inputs/{pending.pk}/edit", {"message": "changed", "priority": "1"}),
        (f"/inputs/{pending.pk}/retract", {}),
    ]


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
def test_every_page_action_on_a_frozen_teams_objects_is_409_team_frozen(operator, htmx):
    run = waiting()
    pending = input_submit(agent=run.agent, messages="later", thread=run.thread, actor=OPS).input
    ticket = ticket_of(run)
    freeze()
    for url, form in _actions(run, ticket, pending):
        response = operator.post(url, form, **(HTMX if htmx else {}))
        assert response.status_code == 409, (url, response.status_code, response.content[:300])
        assert FROZEN_TEXT in unescape(response.content.decode()), url
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING
    assert PendingInput.objects.get(pk=pending.pk).status == PendingInput.Status.PENDING
    assert not Decision.objects.exists()


def test_a_frozen_teams_retry_is_409_on_the_run_page(operator):
    run = waiting()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.DONE, status_reason="error")
    freeze()
    response = operator.post(f"/runs/{run.pk}/retry")
    assert response.status_code == 409
    assert FROZEN_TEXT in form_of(response.content.decode(), f"/runs/{run.pk}/retry")
    assert Run.objects.count() == 1


# --- the team's own settings and members while frozen -------------------------------------


def test_a_frozen_teams_settings_and_members_are_refused_409_and_only_unfreezing_works(client):
    client.force_login(team_member("admin", "red", "ada"))
    user_with_role("viewer", "vic")
    freeze()
    settings = client.post("/teams/red/settings", {"name": "X", "bulk_confirm_above": "1"})
    assert settings.status_code == 409
    assert FROZEN_TEXT in form_of(settings.content.decode(), "/teams/red/settings")
    added = client.post("/teams/red/members", {"username": "vic", "role": "admin"})
    assert added.status_code == 409
    removed = client.post("/teams/red/members/ada/remove")
    assert removed.status_code == 409
    red = Team.objects.get(slug="red")
    assert red.name == "Red" and red.bulk_confirm_above != 1
    assert set(Membership.objects.filter(team=red).values_list("user__username", flat=True)) == {
        "ada"
    }
    page = client.get("/teams/red/").content.decode()
    assert "disabled" in form_of(page, "/teams/red/settings")
    assert "disabled" not in form_of(page, "/teams/red/unfreeze")
    assert client.post("/teams/red/unfreeze", {}).status_code == 302
    assert not Team.objects.get(slug="red").frozen
    assert not AuditEntry.objects.filter(action__in=["team.settings", "team.member"]).exists()


def test_the_api_refuses_a_frozen_teams_settings_and_members_with_team_frozen(client):
    client.force_login(superuser())
    user_with_role("viewer", "vic")
    freeze()
    patched = client.patch("/api/v1/teams/red", {"name": "X"}, content_type="application/json")
    assert patched.status_code == 409 and patched.json()["error"]["code"] == "team_frozen"
    put = client.put(
        "/api/v1/teams/red/members/vic", {"role": "admin"}, content_type="application/json"
    )
    assert put.status_code == 409 and put.json()["error"]["code"] == "team_frozen"
    assert Team.objects.get(slug="red").name == "Red"


# --- invalid input and NUL characters ------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
def test_a_nul_in_an_answer_is_400_inside_the_respond_form_and_the_card_stays(operator, htmx):
    run = waiting("ask_human", slug="asker")
    ticket = ticket_of(run)
    url = f"/tickets/{ticket.pk}/decide"
    response = operator.post(
        url, {"action": "respond", "answer": "Par\x00is"}, **(HTMX if htmx else {})
    )
    assert response.status_code == 400
    html = response.content.decode()
    respond = form_of(html, url, "respond")
    assert "NUL" in respond and 'data-error-code="invalid"' in respond
    assert "Par\ufffdis" in respond  # kept, the NUL shown where it was
    assert form_of(html, url, "reject")  # the card keeps Reject
    assert ticket_of(run).status == Ticket.Status.PENDING


def test_a_nul_in_the_composer_is_400_inside_the_composer_with_the_message_kept(operator):
    run = waiting()
    url = f"/threads/{run.thread_id}/send"
    response = operator.post(url, {"agent": run.agent.slug, "message": "hel\x00lo"})
    assert response.status_code == 400
    composer = form_of(response.content.decode(), url)
    assert "NUL" in composer and "hel\ufffdlo" in composer
    assert not PendingInput.objects.exists()


def test_a_nul_in_a_team_setting_is_400_inside_the_settings_form(client):
    client.force_login(team_member("admin", "red", "ada"))
    response = client.post("/teams/red/settings", {"name": "R\x00", "bulk_confirm_above": "1"})
    assert response.status_code == 400
    assert "NUL" in form_of(response.content.decode(), "/teams/red/settings")
    assert Team.objects.get(slug="red").name == "Red"


def test_invalid_input_on_the_run_page_is_400_inside_its_form(operator):
    agent = scripted_agent([{"text": "ok"}], team=team("red"))
    run = run_start(agent=agent, messages="go")  # queued: its priority may change
    response = operator.post(f"/runs/{run.pk}/priority", {"priority": "high"})
    assert response.status_code == 400
    form = form_of(response.content.decode(), f"/runs/{run.pk}/priority")
    assert "priority must be an integer" in form and 'value="high"' in form


def test_an_unanswered_respond_is_400_inside_the_respond_form(operator):
    run = waiting("ask_human")
    ticket = ticket_of(run)
    url = f"/tickets/{ticket.pk}/decide"
    response = operator.post(url, {"action": "respond", "answer": "  "}, **HTMX)
    assert response.status_code == 400
    assert 'data-error-code="invalid"' in form_of(response.content.decode(), url, "respond")


def test_a_nul_on_a_page_without_its_own_form_errors_is_an_html_400_not_bare_text(operator):
    # (a list page names a NUL in a filter above its list: tests/runs/test_list_form_errors.py)
    response = operator.get("/tokens/?q=%00")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"NUL" in response.content
    response = operator.get("/tokens/?q=%00", **HTMX)
    assert response.status_code == 400 and b'class="flash error' in response.content


def test_a_ticket_decided_meanwhile_answers_409_as_an_outcome_that_stays(operator):
    run = waiting()
    ticket = ticket_of(run)
    url = f"/tickets/{ticket.pk}/decide"
    assert operator.post(url, {"action": "approve"}, **HTMX).status_code == 200
    response = operator.post(url, {"action": "reject"}, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="run-outcomes" hx-swap-oob="beforeend"' in html and "already decided" in html


def test_a_nul_in_the_token_and_subscription_forms_is_400_inside_them(client):
    client.force_login(team_member("operator", "red", "opa"))
    response = client.post("/tokens/", {"name": "c\x00i"})
    assert response.status_code == 400
    form = form_of(response.content.decode(), "/tokens/")
    assert "NUL" in form and 'value="c\ufffdi"' in form
    response = client.post("/notifications/", {"tool": "send_\x00"})
    assert response.status_code == 400
    form = form_of(response.content.decode(), "/notifications/")
    assert "NUL" in form and 'value="send_\ufffd"' in form


def test_a_nul_in_the_decide_by_policy_form_is_said_under_it(operator):
    response = operator.post("/inbox/policy", {"tool": "write_\x00note"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="flash error"' in html and "contains a NUL character" in html
    assert "\x00" not in html


def test_a_bulk_decision_on_a_frozen_teams_tickets_is_409(operator):
    run = waiting()
    ticket = ticket_of(run)
    freeze()
    form = {"action": "approve", "ticket": str(ticket.pk), "confirm": "1"}
    response = operator.post("/inbox/bulk", form, HTTP_HX_REQUEST="true")
    assert response.status_code == 409
    assert FROZEN_TEXT in unescape(response.content.decode())
    assert not Decision.objects.exists()


def test_the_admin_shows_a_frozen_team_read_only(client):
    client.force_login(superuser())
    red = freeze()
    page = client.get(f"/admin/common/team/{red.pk}/change/").content.decode()
    assert 'name="_save"' not in page
    response = client.post(
        f"/admin/common/team/{red.pk}/change/",
        {"name": "X", "bulk_confirm_above": "1", "memberships-TOTAL_FORMS": "0"},
    )
    assert response.status_code == 403
    assert Team.objects.get(pk=red.pk).name == "Red"
