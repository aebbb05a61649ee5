"""Team scoping of the REST API: lists leave out another team's runs, tickets, threads and
audit entries; another team's run, ticket, thread and events answer the API's 404; an
action needs the role in the object's team (403 when visible but not allowed)."""

from __future__ import annotations

import pytest

from common.models import AuditEntry, Membership
from runs.models import Run, Ticket
from tests.api.helpers import assert_error
from tests.factories import bearer, team, team_member, token_for, user_with_role, waiting_run
from tests.runs.accounts.test_team_scoping import in_team

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def two_runs():
    a = in_team(waiting_run("alpha note"), "alpha")
    b = in_team(waiting_run("beta note"), "beta")
    return a, b


def _ticket(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def _api(user):
    return bearer(token_for(user))


def _ids(response, key: str = "id") -> set[str]:
    assert response.status_code == 200, response.content[:300]
    return {item[key] for item in response.json()["items"]}


def test_lists_leave_out_another_teams_rows(two_runs):
    a, b = two_runs
    api = _api(team_member("operator", "alpha"))
    assert _ids(api.get(f"{API}/runs"), "run_id") == {str(a.pk)}
    assert _ids(api.get(f"{API}/tickets")) == {str(_ticket(a).pk)}
    assert _ids(api.get(f"{API}/threads")) == {str(a.thread_id)}
    csv = b"".join(api.get(f"{API}/runs/export.csv").streaming_content).decode()
    assert str(a.pk) in csv and str(b.pk) not in csv


def test_audit_api_and_export_show_only_the_teams_entries(two_runs):
    a, b = two_runs
    AuditEntry.objects.create(action="site.thing", actor_label="x")  # no team
    api = _api(team_member("admin", "alpha"))
    response = api.get(f"{API}/audit")
    runs = {item.get("run_id") for item in response.json()["items"]}
    assert str(a.pk) in runs and str(b.pk) not in runs
    assert "site.thing" not in {item["action"] for item in response.json()["items"]}
    csv = b"".join(api.get(f"{API}/audit/export.csv").streaming_content).decode()
    assert str(a.pk) in csv and str(b.pk) not in csv and "site.thing" not in csv


def test_another_teams_objects_are_not_found(two_runs):
    a, b = two_runs
    api = _api(team_member("operator", "alpha"))
    ticket = _ticket(b)
    for url in [
        f"{API}/runs/{b.pk}",
        f"{API}/runs/{b.pk}/events",
        f"{API}/runs/{b.pk}/events/stream",
        f"{API}/runs/{b.pk}/export",
        f"{API}/runs/{b.pk}/forks",
        f"{API}/tickets/{ticket.pk}",
        f"{API}/threads/{b.thread_id}",
        f"{API}/runs/compare?a={a.pk}&b={b.pk}",
    ]:
        assert_error(api.get(url), 404, "not_found")
    assert_error(api.post(f"{API}/runs/{b.pk}/cancel", {}, format="json"), 404, "not_found")
    body = {"action": "approve", "ticket_id": str(ticket.pk)}
    assert_error(api.post(f"{API}/runs/{b.pk}/decisions", body, format="json"), 404, "not_found")
    start = {"agent_id": b.agent.slug, "messages": [{"role": "user", "content": "hi"}]}
    assert_error(api.post(f"{API}/runs", start, format="json"), 404, "not_found")
    assert Run.objects.get(pk=b.pk).status == Run.Status.WAITING
    assert _ticket(b).status == Ticket.Status.PENDING


def test_viewer_in_one_team_operator_in_another_decides_only_where_operator(two_runs):
    a, b = two_runs
    user = team_member("viewer", "alpha", username="mixed")
    Membership.objects.create(team=team("beta"), user=user, role="operator")
    api = _api(user)
    assert api.get(f"{API}/runs/{a.pk}").status_code == 200
    ticket_a = _ticket(a)
    body = {"action": "approve", "ticket_id": str(ticket_a.pk)}
    assert_error(api.post(f"{API}/runs/{a.pk}/decisions", body, format="json"), 403, "forbidden")
    assert _ticket(a).status == Ticket.Status.PENDING
    ticket_b = _ticket(b)
    body = {"action": "approve", "ticket_id": str(ticket_b.pk)}
    response = api.post(f"{API}/runs/{b.pk}/decisions", body, format="json")
    assert response.status_code in (200, 201), response.content[:300]
    ticket_b.refresh_from_db()
    assert ticket_b.status != Ticket.Status.PENDING


def test_site_wide_users_still_see_every_team(two_runs):
    a, b = two_runs
    api = _api(user_with_role("viewer"))
    assert _ids(api.get(f"{API}/runs"), "run_id") == {str(a.pk), str(b.pk)}
    assert api.get(f"{API}/runs/{b.pk}").status_code == 200
