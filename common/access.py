"""Who sees and may do what, team by team.

A user holds roles two ways: a role group (viewer, operator, admin) grants the role
site-wide, in every team; a `Membership` grants it in one team. Superusers may do
everything. `TeamRoleBackend` answers `user.has_perm(perm, obj)` for an object of a team
(a team, agent, thread, run, ticket … anything `team_id_of` finds a team for) from the
role the user holds there, and `user.has_perm(perm)` (no object: "may do it somewhere")
from the union of their team roles. A frozen team allows only reading (and its admins
lifting the freeze) whatever the role.

Lists are scoped with `visible_teams` / `scope`: None means every team."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.db.models import QuerySet

from common.models import Membership, Team
from common.roles import READ_ONLY_PERMS, ROLE_PERMS

VIEW_RUN = "runs.view_run"
_ROLES_CACHE = "_awaken_team_roles"
_FROZEN_CACHE = "_awaken_frozen_teams"
_SITE = ModelBackend()


def _active(user: Any) -> bool:
    return bool(user is not None and user.is_active and not user.is_anonymous)


def team_roles(user: Any) -> dict[int, str]:
    """team id -> the user's role there (cached on the user object, like Django's
    permission cache: a request or a socket sees one answer)."""
    if not _active(user):
        return {}
    cached = getattr(user, _ROLES_CACHE, None)
    if cached is None:
        cached = dict(Membership.objects.filter(user=user).values_list("team_id", "role"))
        setattr(user, _ROLES_CACHE, cached)
    return cached


def frozen_teams(user: Any) -> frozenset[int]:
    cached = getattr(user, _FROZEN_CACHE, None)
    if cached is None:
        cached = frozenset(Team.objects.filter(frozen=True).values_list("pk", flat=True))
        setattr(user, _FROZEN_CACHE, cached)
    return cached


def forget(user: Any) -> None:
    """Drop what was cached on `user` (after its memberships changed)."""
    for name in (
        _ROLES_CACHE,
        _FROZEN_CACHE,
        "_perm_cache",
        "_user_perm_cache",
        "_group_perm_cache",
    ):
        if hasattr(user, name):
            delattr(user, name)


def team_id_of(obj: Any) -> int | None:
    """The team an object belongs to: a Team, a team id, anything with `team_id`, or
    with an `agent` or a `run` (whose agent) that has one."""
    if isinstance(obj, Team):
        return obj.pk
    if isinstance(obj, int):
        return obj
    team_id = getattr(obj, "team_id", None)
    if team_id is not None:
        return team_id
    for owner in ("agent", "run"):
        if getattr(obj, f"{owner}_id", None) is not None:
            return team_id_of(getattr(obj, owner))
    return None


def site_wide(user: Any, perm: str) -> bool:
    """The user may do `perm` in every team: a superuser, or a role group that grants it."""
    return _active(user) and (user.is_superuser or _SITE.has_perm(user, perm))


def visible_teams(user: Any, perm: str = VIEW_RUN) -> frozenset[int] | None:
    """The teams in which `user` may `perm`; None when that is every team."""
    if site_wide(user, perm):
        return None
    return frozenset(team for team, role in team_roles(user).items() if perm in ROLE_PERMS[role])


def scope(queryset: QuerySet, user: Any, path: str, perm: str = VIEW_RUN) -> QuerySet:
    """`queryset` cut to the rows whose team (reached through `path`, e.g.
    "agent__team_id") the user may `perm` in."""
    teams = visible_teams(user, perm)
    if teams is None:
        return queryset
    return queryset.filter(**{f"{path}__in": teams})


def allowed_unfrozen(user: Any, perm: str, obj: Any = None) -> bool:
    """Whether `user`'s roles allow `perm` on `obj` (without `obj`: somewhere) were the
    team not frozen: the pages show a frozen team's actions disabled, with the reason,
    to those whose role would allow them, and answer them 409 rather than 403."""
    if not _active(user):
        return False
    if site_wide(user, perm):
        return True
    roles = team_roles(user)
    if obj is None:
        return any(perm in ROLE_PERMS[role] for role in roles.values())
    owner = team_id_of(obj)
    return owner in roles and perm in ROLE_PERMS[roles[owner]]


def frozen_team_of(user: Any, obj: Any) -> Team | None:
    """The team of `obj` when it is in an incident freeze (one query, only then)."""
    owner = team_id_of(obj)
    if owner is None or owner not in frozen_teams(user):
        return None
    return Team.objects.filter(pk=owner, frozen=True).first()


def frozen_teams_among(user: Any, objs: Any) -> dict[int, Team]:
    """The teams of `objs` that are in an incident freeze, by id (one query, only when
    one of them is)."""
    owners = [team for team in {team_id_of(obj) for obj in objs} if team in frozen_teams(user)]
    if not owners:
        return {}
    return {team.pk: team for team in Team.objects.filter(pk__in=owners, frozen=True)}


class TeamRoleBackend(BaseBackend):
    """Permissions from team memberships (and, for an object, from the role groups too:
    Django's ModelBackend answers nothing for objects). Authenticates no one."""

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not _active(user_obj):
            return set()
        roles = team_roles(user_obj)
        frozen = frozen_teams(user_obj)
        if obj is None:
            granted: set[str] = set()
            for team, role in roles.items():
                granted |= (
                    ROLE_PERMS[role] & READ_ONLY_PERMS if team in frozen else ROLE_PERMS[role]
                )
            return granted
        owner = team_id_of(obj)
        if owner is None:
            return set()
        granted = set(_SITE.get_all_permissions(user_obj))
        if owner in roles:
            granted |= ROLE_PERMS[roles[owner]]
        return granted & READ_ONLY_PERMS if owner in frozen else granted

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return perm in self.get_all_permissions(user_obj, obj)
