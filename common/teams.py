"""Team services: the guards every destructive action passes (freeze, reason, bulk
confirmation), the team's settings and freeze, and its members. All changes are audited
in their own transaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from common import limits
from common.access import (
    allowed_unfrozen,
    forget,
    site_wide,
    team_id_of,
    team_roles,
    visible_teams,
)
from common.audit import Actor, audit_record
from common.errors import ConfirmationRequired, Forbidden, Frozen, InvalidInput, NotFound
from common.models import Membership, Role, Team, default_team_id

SETTINGS = ("name", "reason_required", "bulk_confirm_above")


def _team_id(team: Team | int) -> int:
    return team.pk if isinstance(team, Team) else team


# --- guards ------------------------------------------------------------------------------------


def ensure_writable(team: Team | int | None) -> None:
    """Raise `Frozen` when the team is in an incident freeze. Reads the row, so a freeze
    another process set is seen at once."""
    if team is None:
        return
    row = (
        Team.objects.filter(pk=_team_id(team), frozen=True).values("slug", "frozen_reason").first()
    )
    if row is not None:
        _frozen(row["slug"], row["frozen_reason"])


def ensure_writable_as_read(team: Team) -> None:
    """`ensure_writable` for a team row the caller read in this request (joined to the row
    it acts on): its freeze as read then, no query."""
    if team.frozen:
        _frozen(team.slug, team.frozen_reason)


def _frozen(slug: str, reason: str) -> None:
    why = f": {reason}" if reason else ""
    raise Frozen(
        f'team "{slug}" is frozen{why}; nothing of it may change until an admin lifts the freeze',
        {"team": slug},
    )


# Sources of actions nobody started by hand: the worker, the replay policy and queued input
# the worker starts when a run ends (accepted before any freeze). The guards skip them.
WORKER_SOURCES = frozenset({"system", "replay", "input"})


def by_operator(actor: Actor) -> bool:
    """Whether the action was started by a person or a client (not by the worker)."""
    return actor.source not in WORKER_SOURCES


def check_reason(reason: str) -> None:
    """Raise `InvalidInput` when a reason (a cancel's, an interrupt's, a freeze's) is
    longer than AWAKEN_MAX_COMMENT_CHARS (common/limits.py)."""
    limits.check_chars(reason, limits.comment_chars(), "reason", "the reason")


def ensure_reason(team: Team | int | None, reason: str, what: str) -> None:
    """Raise `InvalidInput` when the team requires a reason to `what` and none is given,
    or when the reason is too long (`check_reason`)."""
    check_reason(reason)
    if team is None or (reason or "").strip():
        return
    row = Team.objects.filter(pk=_team_id(team), reason_required=True).values("slug").first()
    if row is not None:
        raise InvalidInput(f'team "{row["slug"]}" requires a reason to {what}', {"field": "reason"})


def confirm_threshold(team_ids: Iterable[int]) -> int | None:
    """The lowest bulk-confirmation threshold of these teams (None without teams)."""
    values = list(
        Team.objects.filter(pk__in=set(team_ids)).values_list("bulk_confirm_above", flat=True)
    )
    return min(values) if values else None


def ensure_confirmed(team_ids: Iterable[int], count: int, confirmed: bool) -> None:
    """Raise `ConfirmationRequired` when `count` items exceed a team's threshold and the
    caller did not confirm; details carry the count and the threshold."""
    if confirmed:
        return
    threshold = confirm_threshold(team_ids)
    if threshold is not None and count > threshold:
        raise ConfirmationRequired(
            f"this acts on {count} items, more than {threshold}: confirm to go on",
            {"count": count, "threshold": threshold},
        )


def ensure_may(user: Any, perm: str, obj: Any, what: str) -> None:
    """Raise `Forbidden` unless `user` may `perm` on `obj` (its team's role). When only
    the team's freeze stands in the way (the role allows it otherwise), raise `Frozen`
    instead: the answer is 409 team_frozen, saying why, not 403."""
    if user is None or user.has_perm(perm, obj):
        return
    ensure_not_frozen_only(user, perm, obj)
    raise Forbidden(f"you may not {what}")


def ensure_not_frozen_only(user: Any, perm: str, obj: Any) -> None:
    """For a refused object check: raise `Frozen` when the user's role would allow `perm`
    on `obj` and only its team's freeze refuses it (409 saying why rather than 403)."""
    team_id = team_id_of(obj)
    if team_id is not None and allowed_unfrozen(user, perm, team_id):
        ensure_writable(team_id)


def ensure_may_check(user: Any, perm: str, obj: Any, noun: str) -> None:
    """A health check writes the checked row (an endpoint, an MCP server): a team's row by
    those who may `perm` in its team, a shared row (no team) by site-wide holders only."""
    ensure_writable(obj.team_id)
    if obj.team_id is None:
        if not site_wide(user, perm):
            raise Forbidden(f"only site-wide admins check a shared {noun}")
    else:
        ensure_may(user, perm, obj, f"check this {noun}")


def shared_or_visible(rows: QuerySet[Any], user: Any, perm: str) -> QuerySet[Any]:
    """The shared rows (no team) and those of the teams where `user` may `perm`."""
    teams = visible_teams(user, perm)
    return rows if teams is None else rows.filter(Q(team__in=teams) | Q(team__isnull=True))


# --- settings and freeze -----------------------------------------------------------------------


@transaction.atomic
def team_update(*, team: Team, actor: Actor, **changes: Any) -> Team:
    unknown = set(changes) - set(SETTINGS)
    if unknown:
        raise InvalidInput(f"unknown team setting(s): {', '.join(sorted(unknown))}")
    team = Team.objects.select_for_update().get(pk=team.pk)
    ensure_writable(team)  # a frozen team's settings wait for the freeze to be lifted
    if "name" in changes:
        name = str(changes["name"] or "").strip()
        if not name or len(name) > 200:
            raise InvalidInput("the name must be 1 to 200 characters")
        changes["name"] = name
    if "bulk_confirm_above" in changes:
        value = changes["bulk_confirm_above"]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100_000:
            raise InvalidInput("bulk_confirm_above must be a whole number from 0 to 100000")
    if "reason_required" in changes and not isinstance(changes["reason_required"], bool):
        raise InvalidInput("reason_required must be true or false")
    before = {key: getattr(team, key) for key in changes}
    if before == changes:
        return team
    for key, value in changes.items():
        setattr(team, key, value)
    team.save(update_fields=list(changes))
    audit_record(
        actor=actor,
        action="team.settings",
        target_type="team",
        target_id=team.slug,
        team=team,
        before=before,
        after=changes,
    )
    return team


@transaction.atomic
def team_freeze(*, team: Team, actor: Actor, reason: str) -> Team:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("say why the team is frozen", {"field": "reason"})
    check_reason(reason)
    team = Team.objects.select_for_update().get(pk=team.pk)
    if team.frozen:
        raise InvalidInput(f'team "{team.slug}" is already frozen')
    team.frozen, team.frozen_reason = True, reason
    team.frozen_at, team.frozen_by = timezone.now(), actor.name[:200]
    team.save(update_fields=["frozen", "frozen_reason", "frozen_at", "frozen_by"])
    audit_record(
        actor=actor,
        action="team.freeze",
        target_type="team",
        target_id=team.slug,
        team=team,
        comment=reason,
    )
    return team


@transaction.atomic
def team_unfreeze(*, team: Team, actor: Actor, reason: str = "") -> Team:
    reason = (reason or "").strip()
    check_reason(reason)
    team = Team.objects.select_for_update().get(pk=team.pk)
    if not team.frozen:
        raise InvalidInput(f'team "{team.slug}" is not frozen')
    before = {"frozen_reason": team.frozen_reason, "frozen_by": team.frozen_by}
    team.frozen, team.frozen_reason, team.frozen_at, team.frozen_by = False, "", None, ""
    team.save(update_fields=["frozen", "frozen_reason", "frozen_at", "frozen_by"])
    audit_record(
        actor=actor,
        action="team.unfreeze",
        target_type="team",
        target_id=team.slug,
        team=team,
        before=before,
        comment=reason,
    )
    return team


# --- members -----------------------------------------------------------------------------------


@transaction.atomic
def membership_set(
    *, team: Team, user: Any, role: str, actor: Actor, source: str = Membership.Source.LOCAL
) -> Membership:
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; one of {', '.join(Role.values)}")
    membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
    before = None if membership is None else membership.role
    if membership is None:
        membership = Membership.objects.create(team=team, user=user, role=role, source=source)
    elif membership.role != role or membership.source != source:
        membership.role, membership.source = role, source
        membership.save(update_fields=["role", "source"])
    if before != role:
        audit_record(
            actor=actor,
            action="team.member",
            target_type="team",
            target_id=team.slug,
            team=team,
            before={"user": user.get_username(), "role": before},
            after={"user": user.get_username(), "role": role},
        )
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership, actor: Actor) -> None:
    team, user, role = membership.team, membership.user, membership.role
    membership.delete()
    audit_record(
        actor=actor,
        action="team.member",
        target_type="team",
        target_id=team.slug,
        team=team,
        before={"user": user.get_username(), "role": role},
        after={"user": user.get_username(), "role": None},
    )


# --- what a user sees of teams ---------------------------------------------------------------

VIEW_TEAM = "common.view_team"
CHANGE_TEAM = "common.change_team"


def teams_visible(user: Any) -> QuerySet[Team]:
    """The teams `user` may look at: the ones they are a member of; every team for
    superusers and site-wide role holders."""
    teams = Team.objects.order_by("name", "slug")
    if site_wide(user, VIEW_TEAM):
        return teams
    return teams.filter(pk__in=list(team_roles(user)))


def team_visible(user: Any, slug: str) -> Team:
    """The team `slug` if `user` may see it; NotFound otherwise (not confirming it exists)."""
    team = teams_visible(user).filter(slug=slug).first()
    if team is None:
        raise NotFound(f"team {slug!r} not found")
    return team


def role_in(user: Any, team: Team) -> str | None:
    """`user`'s membership role in `team` (None: none; a site-wide role may still apply)."""
    return team_roles(user).get(team.pk)


def may_manage(user: Any, team: Team) -> bool:
    return bool(user.has_perm(CHANGE_TEAM, team))


def ensure_manage(user: Any, team: Team) -> None:
    ensure_may(user, CHANGE_TEAM, team, f'manage team "{team.slug}"')


def member_set_local(*, team: Team, username: str, role: str, actor: Actor) -> Membership:
    """Give `username` `role` in `team` as a local member; an SSO member's role comes
    from the identity provider and is refused here, and so is any change while the team
    is frozen (its members stay as they were during the incident)."""
    ensure_writable(team)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise InvalidInput(f"no user named {username!r}", {"field": "username"})
    current = Membership.objects.filter(team=team, user=user).first()
    if current is not None and current.source == Membership.Source.SSO:
        raise InvalidInput(
            f"{username}'s role in {team.slug} comes from the identity provider at each login"
        )
    membership = membership_set(team=team, user=user, role=role, actor=actor)
    forget(user)
    return membership


def member_remove_local(*, team: Team, username: str, actor: Actor) -> None:
    ensure_writable(team)
    membership = (
        Membership.objects.select_related("team", "user")
        .filter(team=team, user__username=username)
        .first()
    )
    if membership is None:
        raise NotFound(f"{username!r} is not a member of team {team.slug!r}")
    if membership.source == Membership.Source.SSO:
        raise InvalidInput(
            f"{username}'s membership of {team.slug} comes from the identity provider"
        )
    membership_remove(membership=membership, actor=actor)


def team_for_new(user: Any, perm: str, slug: str, what: str) -> Team:
    """The team a new object of `user`'s goes to, where they may `perm`: the team `slug`
    names, else their only such team; a site-wide role without `slug`: the default team.
    A slug of a team they cannot see is refused as an unknown one is (InvalidInput,
    "no team"); a team they see but may not `perm` in is Forbidden (Frozen when only its
    freeze refuses); several teams and no slug is InvalidInput naming them."""
    slug = (slug or "").strip()
    if slug:
        team = teams_visible(user).filter(slug=slug).first()
        if team is None:
            raise InvalidInput(f"no team {slug!r}", {"team": [slug]})
    elif site_wide(user, perm):
        team = Team.objects.get(pk=default_team_id())
    else:
        allowed = [team_id for team_id in team_roles(user) if allowed_unfrozen(user, perm, team_id)]
        if not allowed:
            raise Forbidden(f"you may not {what} in any team")
        if len(allowed) > 1:
            slugs = sorted(Team.objects.filter(pk__in=allowed).values_list("slug", flat=True))
            raise InvalidInput(
                f"you may {what} in several teams ({', '.join(slugs)}): name one in `team`",
                {"team": slugs},
            )
        team = Team.objects.get(pk=allowed[0])
    ensure_may(user, perm, team, f'{what} in team "{team.slug}"')
    return team
