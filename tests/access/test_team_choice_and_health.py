"""Two team-isolation defects checked on their own: the dashboard's provider and endpoint
health counts only the runs the user may see, and a thread created over the API goes to
a team its creator is in (and sees)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from common.models import AuditEntry, Membership, Team
from runs.models import Run, Thread
from tests.factories import bearer, team, team_member, token_for, user_with_role, waiting_run
from tests.runs.accounts.test_team_scoping import in_team

pytestmark = pytest.mark.django_db

THREADS = "/api/v1/threads"


def _health_row(html: str, key: str) -> list[str]:
    """The cells of the health panel's row `key` ("provider:scripted"), tags stripped."""
    row = re.search(rf'<tr data-health="{re.escape(key)}">(.*?)</tr>', html, re.S)
    assert row is not None, f"no health row {key}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row[1], re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]


def test_shared_providers_count_only_the_users_runs() -> None:
    """Both teams' runs use the shared provider `scripted`; beta's failed run of the last
    day is counted for a site-wide viewer but not for alpha's operator."""
    in_team(waiting_run("alpha note"), "alpha")
    failed = in_team(waiting_run("beta note"), "beta")
    Run.objects.filter(pk=failed.pk).update(status=Run.Status.DONE, status_reason="error")
    alpha = Client()
    alpha.force_login(team_member("operator", "alpha"))
    everyone = Client()
    everyone.force_login(user_with_role("viewer"))
    for url in ("/", "/dashboard/stats"):
        # name, health, last error, checked, running, waiting, failed in 24 h
        assert _health_row(everyone.get(url).content.decode(), "provider:scripted")[6] == "1"
        row = _health_row(alpha.get(url).content.decode(), "provider:scripted")
        assert row[5:] == ["1", "0"], row


def test_a_team_members_thread_goes_to_their_team_and_they_read_it() -> None:
    member = team_member("operator", "alpha")
    api = bearer(token_for(member))
    created = api.post(THREADS, {"title": "mine"}, format="json")
    assert created.status_code == 201, created.content
    thread = Thread.objects.get(pk=created.json()["id"])
    assert thread.team.slug == "alpha"
    assert api.get(f"{THREADS}/{thread.pk}").status_code == 200
    entry = AuditEntry.objects.get(action="thread.create", target_id=str(thread.pk))
    assert entry.team_id == thread.team_id  # the team's members see it in the audit log


def test_a_member_of_several_teams_names_the_thread_team() -> None:
    member = team_member("operator", "alpha")
    Membership.objects.create(team=team("gamma"), user=member, role="operator")
    api = bearer(token_for(member))
    ambiguous = api.post(THREADS, {"title": "where?"}, format="json")
    assert ambiguous.status_code == 400, ambiguous.content
    error = ambiguous.json()["error"]
    assert "several teams (alpha, gamma)" in error["message"] and "team" in error["message"]
    assert not Thread.objects.exists()
    named = api.post(THREADS, {"title": "here", "team": "gamma"}, format="json")
    assert named.status_code == 201, named.content
    assert Thread.objects.get(pk=named.json()["id"]).team.slug == "gamma"


def test_another_teams_slug_is_refused_as_an_unknown_one() -> None:
    team("beta")
    api = bearer(token_for(team_member("operator", "alpha")))
    answers: dict[str, Any] = {}
    for slug in ("beta", "zeta"):
        response = api.post(THREADS, {"team": slug}, format="json")
        assert response.status_code == 400, response.content
        answers[slug] = response.json()["error"]
    assert answers["beta"] == {
        **answers["zeta"],
        "message": answers["zeta"]["message"].replace("zeta", "beta"),
        "details": {"team": ["beta"]},
    }
    assert not Thread.objects.exists()


def test_a_team_where_the_role_may_not_start_runs_is_403() -> None:
    member = team_member("operator", "alpha")
    Membership.objects.create(team=team("gamma"), user=member, role="viewer")
    api = bearer(token_for(member))
    refused = api.post(THREADS, {"team": "gamma"}, format="json")
    assert refused.status_code == 403, refused.content
    only = api.post(THREADS, {}, format="json")  # the one team where they may start runs
    assert only.status_code == 201 and Thread.objects.get().team.slug == "alpha"


def test_a_site_wide_operator_creates_in_the_default_team_or_the_one_named() -> None:
    api = bearer(token_for(user_with_role("operator")))
    team("gamma")
    plain = api.post(THREADS, {}, format="json")
    assert plain.status_code == 201
    assert Thread.objects.get(pk=plain.json()["id"]).team.slug == "default"
    named = api.post(THREADS, {"team": "gamma"}, format="json")
    assert Thread.objects.get(pk=named.json()["id"]).team_id == Team.objects.get(slug="gamma").pk
