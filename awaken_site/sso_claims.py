"""What a signed-in user becomes from the provider's claims (docs/sso.md): the profile,
the site-wide role groups, the `sso` team memberships and is_staff, set at every login;
local memberships are kept. Users are matched by the `sub` claim (awaken_site/sso.py)."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.core.validators import validate_email
from django.db import transaction

from common.access import forget
from common.audit import Actor, audit_record
from common.models import Membership, Role, Team
from common.roles import ROLES
from common.teams import membership_remove, membership_set

SSO_ACTOR = Actor(label="sso", source="system")
USERNAME_PREFIX = "sso:"
MAX_SUB = 150 - len(USERNAME_PREFIX)
MAX_GROUP_VALUES = 500  # more is not a real user's group list
MAX_GROUP_VALUE = 200
_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_RANK: dict[str, int] = {Role.VIEWER.value: 1, Role.OPERATOR.value: 2, Role.ADMIN.value: 3}


def parse_groups(values: Any) -> tuple[set[str], dict[str, str]]:
    """(site-wide roles, {team slug: role}) from the groups claim. `<prefix><role>` is a
    site-wide role, `<prefix><team>:<role>` a team role (the highest wins); anything else,
    including values that are not strings, is ignored."""
    prefix = settings.OIDC_GROUP_PREFIX
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list | tuple):
        return set(), {}
    site: set[str] = set()
    teams: dict[str, str] = {}
    for value in values[:MAX_GROUP_VALUES]:
        if not isinstance(value, str) or len(value) > MAX_GROUP_VALUE:
            continue
        if not value.startswith(prefix):
            continue
        rest = value[len(prefix) :]
        if rest in _RANK:
            site.add(rest)
            continue
        slug, sep, role = rest.rpartition(":")
        if not sep or role not in _RANK or not _SLUG.fullmatch(slug):
            continue
        if _RANK[role] > _RANK.get(teams.get(slug, ""), 0):
            teams[slug] = role
    return site, teams


def clean_text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    return value.replace("\x00", "").strip()[:limit]


def update_profile(user: Any, claims: dict[str, Any]) -> None:
    email = clean_text(claims.get("email"), 254)
    try:
        validate_email(email)
    except forms.ValidationError:
        email = ""
    first = clean_text(claims.get("given_name"), 150)
    last = clean_text(claims.get("family_name"), 150)
    if not first and not last:
        first, _, last = clean_text(claims.get("name"), 301).partition(" ")
        first, last = first[:150], last.strip()[:150]
    changed = (user.email, user.first_name, user.last_name) != (email, first, last)
    user.email, user.first_name, user.last_name = email, first, last
    if changed and user.pk:
        user.save(update_fields=["email", "first_name", "last_name"])


def _role_group(name: str) -> Group:
    """The role group (made by the roles migrations; recreated with its permissions if
    missing)."""
    group, created = Group.objects.get_or_create(name=name)
    if created:
        for app_label, codename in ROLES[name]:
            permission = Permission.objects.filter(
                content_type__app_label=app_label, codename=codename
            ).first()
            if permission is not None:
                group.permissions.add(permission)
    return group


def _sync_groups(user: Any, wanted: set[str]) -> None:
    current = set(user.groups.filter(name__in=list(_RANK)).values_list("name", flat=True))
    if current == wanted:
        return
    user.groups.remove(*Group.objects.filter(name__in=list(current - wanted)))
    user.groups.add(*[_role_group(name) for name in sorted(wanted - current)])
    audit_record(
        actor=SSO_ACTOR,
        action="user.roles",
        target_type="user",
        target_id=user.get_username(),
        before={"roles": sorted(current)},
        after={"roles": sorted(wanted)},
    )


def _team_for(slug: str) -> Team | None:
    team = Team.objects.filter(slug=slug).first()
    if team is None and settings.OIDC_CREATE_TEAMS:
        team, created = Team.objects.get_or_create(slug=slug, defaults={"name": slug})
        if created:
            audit_record(
                actor=SSO_ACTOR,
                action="team.create",
                target_type="team",
                target_id=slug,
                team=team,
                after={"slug": slug, "name": slug},
            )
    return team


def _sync_memberships(user: Any, wanted: dict[str, str]) -> None:
    existing = {m.team.slug: m for m in Membership.objects.filter(user=user).select_related("team")}
    for slug, membership in existing.items():
        if membership.source == Membership.Source.SSO and slug not in wanted:
            membership_remove(membership=membership, actor=SSO_ACTOR)
    for slug, role in sorted(wanted.items()):
        current = existing.get(slug)
        if current is not None and current.source == Membership.Source.LOCAL:
            continue  # granted here, not by the provider: kept as it is
        if current is not None and current.role == role:
            continue
        team = current.team if current is not None else _team_for(slug)
        if team is not None:
            membership_set(
                team=team, user=user, role=role, actor=SSO_ACTOR, source=Membership.Source.SSO
            )


@transaction.atomic
def sync_user(user: Any, claims: dict[str, Any]) -> Any:
    """Make the user's profile, role groups, sso memberships and is_staff match the claims."""
    update_profile(user, claims)
    site_roles, team_roles = parse_groups(claims.get(settings.OIDC_GROUPS_CLAIM))
    _sync_groups(user, site_roles)
    _sync_memberships(user, team_roles)
    is_staff = (
        user.is_superuser
        or Role.ADMIN in site_roles
        or Membership.objects.filter(user=user, role=Role.ADMIN).exists()
    )
    if user.is_staff != is_staff:
        user.is_staff = is_staff
        user.save(update_fields=["is_staff"])
    forget(user)
    return user


def valid_sub(claims: dict[str, Any]) -> str | None:
    sub = claims.get("sub")
    if not isinstance(sub, str) or not 0 < len(sub) <= MAX_SUB or "\x00" in sub:
        return None
    return sub
