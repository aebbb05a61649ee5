"""/api/v1/teams: your teams, a team's settings, freeze and members. Members read their
team; its admins change it (audited); another team is a 404; a frozen team's admin can
still lift the freeze."""

from __future__ import annotations

import pytest

from common.models import AuditEntry, Membership, Team
from tests.api.helpers import assert_error
from tests.factories import bearer, team, team_member, token_for, user_with_role

pytestmark = pytest.mark.django_db


def api_of(user):
    return bearer(token_for(user))


def test_a_member_lists_only_their_teams_with_their_role():
    team("blue")
    user = team_member("operator", "red")
    body = api_of(user).get("/api/v1/teams").json()
    assert [(t["slug"], t["role"]) for t in body["items"]] == [("red", "operator")]


def test_a_site_wide_viewer_lists_every_team():
    team("blue"), team("red")
    slugs = {
        t["slug"] for t in api_of(user_with_role("viewer")).get("/api/v1/teams").json()["items"]
    }
    assert {"blue", "red"} <= slugs


def test_another_teams_detail_members_and_changes_are_404():
    team("blue")
    api = api_of(team_member("admin", "red"))
    for path in ("/api/v1/teams/blue", "/api/v1/teams/blue/members"):
        assert_error(api.get(path), 404, "not_found")
    assert_error(api.patch("/api/v1/teams/blue", {"name": "x"}, format="json"), 404, "not_found")
    assert_error(
        api.post("/api/v1/teams/blue/freeze", {"reason": "x"}, format="json"), 404, "not_found"
    )
    assert Team.objects.get(slug="blue").name == "Blue"


def test_an_operator_reads_the_team_but_may_not_change_it():
    api = api_of(team_member("operator", "red"))
    assert api.get("/api/v1/teams/red").json()["bulk_confirm_above"] == 10
    assert_error(
        api.patch("/api/v1/teams/red", {"reason_required": True}, format="json"),
        403,
        "permission_denied",
    )
    assert_error(
        api.post("/api/v1/teams/red/freeze", {"reason": "x"}, format="json"),
        403,
        "permission_denied",
    )
    assert_error(
        api.put("/api/v1/teams/red/members/someone", {"role": "admin"}, format="json"),
        403,
        "permission_denied",
    )
    assert not Team.objects.get(slug="red").reason_required


def test_a_team_admin_changes_settings_freezes_and_unfreezes_audited():
    api = api_of(team_member("admin", "red"))
    response = api.patch(
        "/api/v1/teams/red", {"reason_required": True, "bulk_confirm_above": 3}, format="json"
    )
    assert response.status_code == 200, response.content
    assert (response.json()["reason_required"], response.json()["bulk_confirm_above"]) == (True, 3)
    assert_error(api.post("/api/v1/teams/red/freeze", {}, format="json"), 400, "invalid")
    frozen = api.post("/api/v1/teams/red/freeze", {"reason": "incident"}, format="json").json()
    assert (frozen["frozen"], frozen["frozen_reason"], frozen["frozen_by"]) == (
        True,
        "incident",
        "admin-red (token test)",
    )
    # the freeze leaves its admins reading the team and lifting it
    assert api.post("/api/v1/teams/red/unfreeze").json()["frozen"] is False
    actions = list(
        AuditEntry.objects.filter(team__slug="red").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["team.settings", "team.freeze", "team.unfreeze"]


def test_bad_settings_are_400():
    api = api_of(team_member("admin", "red"))
    assert_error(
        api.patch("/api/v1/teams/red", {"bulk_confirm_above": -1}, format="json"), 400, "invalid"
    )
    assert_error(api.patch("/api/v1/teams/red", {"name": ""}, format="json"), 400, "invalid")


def test_a_team_admin_manages_local_members_but_not_sso_ones():
    api = api_of(team_member("admin", "red"))
    user_with_role("viewer", "vic")
    sso = user_with_role("viewer", "sam")
    Membership.objects.create(team=team("red"), user=sso, role="viewer", source="sso")
    response = api.put("/api/v1/teams/red/members/vic", {"role": "operator"}, format="json")
    assert response.json() == {"username": "vic", "role": "operator", "source": "local"}
    members = api.get("/api/v1/teams/red/members").json()["items"]
    assert {(m["username"], m["role"], m["source"]) for m in members} == {
        ("admin-red", "admin", "local"),
        ("sam", "viewer", "sso"),
        ("vic", "operator", "local"),
    }
    assert_error(
        api.put("/api/v1/teams/red/members/sam", {"role": "admin"}, format="json"), 400, "invalid"
    )
    assert_error(api.delete("/api/v1/teams/red/members/sam"), 400, "invalid")
    assert_error(
        api.put("/api/v1/teams/red/members/nobody", {"role": "admin"}, format="json"),
        400,
        "invalid",
    )
    assert_error(
        api.put("/api/v1/teams/red/members/vic", {"role": "king"}, format="json"), 400, "invalid"
    )
    assert api.delete("/api/v1/teams/red/members/vic").status_code == 204
    assert not Membership.objects.filter(user__username="vic").exists()
    assert AuditEntry.objects.filter(action="team.member", team__slug="red").count() == 2
