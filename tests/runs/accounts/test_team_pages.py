"""Team pages: /teams/ lists your teams with your role, /teams/<slug>/ shows members,
settings, freeze and recent audit entries; a team's admins change it there, others read;
a team you are not in is a 404; a frozen team shows a banner on its pages and the inbox."""

from __future__ import annotations

import pytest

from common.audit import Actor
from common.models import AuditEntry, Membership, Team
from common.teams import team_freeze
from tests.factories import team, team_member, user_with_role

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


def test_the_teams_page_lists_the_users_teams_with_their_role(client):
    team("blue")
    client.force_login(team_member("operator", "red"))
    html = client.get("/teams/").content.decode()
    assert 'data-team="red"' in html and "operator" in html
    assert 'data-team="blue"' not in html
    assert 'href="/teams/"' in html  # the navigation link


def test_a_site_wide_viewer_sees_every_team(client):
    team("blue"), team("red")
    client.force_login(user_with_role("viewer"))
    html = client.get("/teams/").content.decode()
    assert 'data-team="blue"' in html and 'data-team="red"' in html


def test_another_teams_page_and_actions_are_404(client):
    team("blue")
    client.force_login(team_member("admin", "red"))
    assert client.get("/teams/blue/").status_code == 404
    assert client.post("/teams/blue/freeze", {"reason": "x"}).status_code == 404
    assert not Team.objects.get(slug="blue").frozen


def test_an_operator_sees_the_team_read_only_and_may_not_change_it(client):
    client.force_login(team_member("operator", "red"))
    html = client.get("/teams/red/").content.decode()
    assert "read-only" in html
    assert "Freeze the team" not in html and "Save settings" not in html
    assert client.post("/teams/red/freeze", {"reason": "x"}).status_code == 403
    assert (
        client.post("/teams/red/settings", {"name": "X", "bulk_confirm_above": "1"}).status_code
        == 403
    )
    assert not Team.objects.get(slug="red").frozen


def test_an_admin_changes_settings_freezes_and_lifts_the_freeze(client):
    client.force_login(team_member("admin", "red"))
    client.post(
        "/teams/red/settings",
        {"name": "Red ops", "reason_required": "on", "bulk_confirm_above": "4"},
    )
    red = Team.objects.get(slug="red")
    assert (red.name, red.reason_required, red.bulk_confirm_above) == ("Red ops", True, 4)
    page = client.post("/teams/red/freeze", {"reason": ""}, follow=True).content.decode()
    assert "say why the team is frozen" in page
    client.post("/teams/red/freeze", {"reason": XSS})
    html = client.get("/teams/red/").content.decode()
    assert "Lift the freeze" in html
    assert XSS not in html and "&lt;script&gt;" in html
    assert "team-frozen" in html  # the banner
    client.post("/teams/red/unfreeze", {})
    assert not Team.objects.get(slug="red").frozen
    actions = set(AuditEntry.objects.filter(team=red).values_list("action", flat=True))
    assert actions == {"team.settings", "team.freeze", "team.unfreeze"}
    assert "team.freeze" in client.get("/teams/red/").content.decode()  # recent audit


def test_an_admin_manages_local_members_and_sso_members_are_shown_as_such(client):
    client.force_login(team_member("admin", "red"))
    user_with_role("viewer", "vic")
    sam = user_with_role("viewer", "sam")
    Membership.objects.create(team=team("red"), user=sam, role="viewer", source="sso")
    client.post("/teams/red/members", {"username": "vic", "role": "operator"})
    assert Membership.objects.get(user__username="vic").role == "operator"
    html = client.get("/teams/red/").content.decode()
    assert "role set by the identity provider" in html
    assert "/teams/red/members/sam/remove" not in html
    page = client.post("/teams/red/members", {"username": "sam", "role": "admin"}, follow=True)
    assert "comes from the identity provider" in page.content.decode()
    client.post("/teams/red/members/vic/remove")
    assert not Membership.objects.filter(user__username="vic").exists()


def test_the_frozen_banner_shows_on_the_inbox_for_the_teams_members_only(client):
    team_freeze(team=team("red"), actor=Actor(label="alice", source="ui"), reason="db incident")
    client.force_login(team_member("operator", "red"))
    html = client.get("/inbox/").content.decode()
    assert "Team Red is frozen since" in html and "by alice: db incident" in html
    client.force_login(team_member("operator", "blue"))
    assert "is frozen since" not in client.get("/inbox/").content.decode()
