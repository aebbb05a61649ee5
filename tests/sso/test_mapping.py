"""Claims mapping: the groups claim sets team memberships (source sso), site-wide role
groups and is_staff at every login; local memberships are kept."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from awaken_site.sso import SSOBackend
from awaken_site.sso_claims import parse_groups, sync_user
from common.models import AuditEntry, Membership, Role, Team
from tests.factories import role_group, team

pytestmark = pytest.mark.django_db


def _sso_user(sub: str = "u1") -> Any:
    return User.objects.create_user(f"sso:{sub}")


def _roles(user: Any) -> dict[str, tuple[str, str]]:
    return {
        m.team.slug: (m.role, m.source)
        for m in Membership.objects.filter(user=user).select_related("team")
    }


def _groups(user: Any) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_team_roles_make_sso_memberships_and_missing_teams():
    team("alpha")
    user = _sso_user()
    sync_user(user, {"sub": "u1", "groups": ["awaken:alpha:operator", "awaken:gamma:viewer"]})
    assert _roles(user) == {"alpha": ("operator", "sso"), "gamma": ("viewer", "sso")}
    assert Team.objects.get(slug="gamma").name == "gamma"
    assert not user.is_staff and _groups(user) == set()
    audit = AuditEntry.objects.filter(action="team.member", actor_label="sso")
    assert {e.target_id for e in audit} == {"alpha", "gamma"}
    assert AuditEntry.objects.filter(action="team.create", target_id="gamma").exists()
    fresh = User.objects.get(pk=user.pk)
    alpha, gamma = Team.objects.get(slug="alpha"), Team.objects.get(slug="gamma")
    assert fresh.has_perm("runs.start_run", alpha)
    assert not fresh.has_perm("runs.start_run", gamma)
    assert fresh.has_perm("runs.view_run", gamma)


def test_unknown_teams_are_ignored_when_teams_are_not_created(settings):
    settings.OIDC_CREATE_TEAMS = False
    team("alpha")
    user = _sso_user()
    sync_user(user, {"sub": "u1", "groups": ["awaken:alpha:admin", "awaken:nowhere:admin"]})
    assert _roles(user) == {"alpha": ("admin", "sso")}
    assert not Team.objects.filter(slug="nowhere").exists()
    assert User.objects.get(pk=user.pk).is_staff  # an admin somewhere may open Django admin


def test_each_login_replaces_sso_memberships_and_keeps_local_ones():
    user = _sso_user()
    Membership.objects.create(team=team("local-team"), user=user, role=Role.VIEWER)
    sync_user(user, {"sub": "u1", "groups": ["awaken:alpha:admin", "awaken:beta:viewer"]})
    assert User.objects.get(pk=user.pk).is_staff
    sync_user(
        user,
        {"sub": "u1", "groups": ["awaken:beta:operator", "awaken:local-team:admin"]},
    )
    assert _roles(user) == {
        "beta": ("operator", "sso"),
        "local-team": ("viewer", "local"),  # granted here: the claims do not change it
    }
    assert not User.objects.get(pk=user.pk).is_staff
    removed = (
        AuditEntry.objects.filter(action="team.member", target_id="alpha").order_by("pk").last()
    )
    assert removed.after == {"user": "sso:u1", "role": None}
    sync_user(user, {"sub": "u1"})  # no groups claim at all: every sso role goes
    assert _roles(user) == {"local-team": ("viewer", "local")}


def test_site_wide_roles_are_set_to_exactly_the_claimed_ones():
    user = _sso_user()
    user.groups.add(role_group("viewer"))
    other, _ = user.groups.model.objects.get_or_create(name="newsletter")
    user.groups.add(other)
    sync_user(user, {"sub": "u1", "groups": ["awaken:admin", "awaken:operator"]})
    assert _groups(user) == {"admin", "operator", "newsletter"}
    fresh = User.objects.get(pk=user.pk)
    assert fresh.is_staff and fresh.has_perm("runs.start_run", team("any-team"))
    assert AuditEntry.objects.filter(action="user.roles", target_id="sso:u1").exists()
    sync_user(user, {"sub": "u1", "groups": ["awaken:viewer"]})
    assert _groups(user) == {"viewer", "newsletter"}
    assert not User.objects.get(pk=user.pk).is_staff


def test_the_highest_role_for_a_team_wins():
    user = _sso_user()
    sync_user(user, {"sub": "u1", "groups": ["awaken:alpha:admin", "awaken:alpha:viewer"]})
    assert _roles(user) == {"alpha": ("admin", "sso")}


@pytest.mark.parametrize(
    "value",
    [
        "awaken:alpha:root",  # unknown role
        "awaken:superuser",
        "alpha:operator",  # no prefix
        "other:alpha:operator",
        "awaken:Alpha:operator",  # not a slug
        "awaken:../x:admin",
        "awaken:<b>x</b>:admin",
        "awaken:a b:admin",
        "awaken::admin",
        "awaken:x\x00:admin",
        "awaken:" + "a" * 64 + ":admin",  # longer than a team slug
        "awaken:alpha:operator:extra",
        "awaken:alpha:" + "x" * 300,
        42,
        None,
        ["awaken:alpha:admin"],
        {"awaken:alpha": "admin"},
    ],
)
def test_values_that_are_not_awaken_roles_are_ignored(value):
    assert parse_groups([value]) == (set(), {})
    user = _sso_user()
    sync_user(user, {"sub": "u1", "groups": [value, "awaken:beta:viewer"]})
    assert _roles(user) == {"beta": ("viewer", "sso")}
    assert set(Team.objects.values_list("slug", flat=True)) <= {"beta", "default"}


@pytest.mark.parametrize("claim", [None, 7, {"a": 1}, "", [], "awaken:operator junk"])
def test_a_malformed_groups_claim_grants_nothing(claim):
    user = _sso_user()
    sync_user(user, {"sub": "u1", "groups": claim})
    assert _roles(user) == {} and _groups(user) == set()


def test_a_single_string_claim_and_a_custom_claim_name_and_prefix(settings):
    settings.OIDC_GROUPS_CLAIM = "roles"
    settings.OIDC_GROUP_PREFIX = "ops-"
    assert parse_groups("ops-alpha:viewer") == (set(), {"alpha": "viewer"})
    user = _sso_user()
    sync_user(user, {"sub": "u1", "roles": ["ops-operator"], "groups": ["awaken:admin"]})
    assert _groups(user) == {"operator"}


def test_profile_comes_from_the_claims_and_hostile_text_is_tamed():
    user = _sso_user()
    sync_user(
        user,
        {"sub": "u1", "email": "ada@example.com", "given_name": "Ada", "family_name": "L"},
    )
    user.refresh_from_db()
    assert (user.email, user.first_name, user.last_name) == ("ada@example.com", "Ada", "L")
    sync_user(user, {"sub": "u1", "email": "not an email", "name": "<b>Bo\x00b</b> " + "x" * 400})
    user.refresh_from_db()
    assert user.email == ""
    assert user.first_name == "<b>Bob</b>" and len(user.last_name) == 150


def test_users_are_matched_by_subject_not_by_email():
    local = User.objects.create_user("ada", email="ada@example.com", password="pw")
    backend = SSOBackend()
    claims = {"sub": "ada-sub", "email": "ada@example.com"}
    assert not backend.filter_users_by_claims(claims).exists()
    created = backend.create_user(claims)
    assert created.username == "sso:ada-sub" and created.pk != local.pk
    assert not created.has_usable_password()
    assert list(backend.filter_users_by_claims(claims)) == [created]


@pytest.mark.parametrize("sub", [None, "", 5, "x" * 147, "a\x00b"])
def test_a_missing_or_hostile_subject_is_refused(sub):
    assert SSOBackend().verify_claims({"sub": sub}) is False
