"""Create a user with one of the roles (viewer, operator, admin) from the terminal: site-wide
(a role group), or in one team (`--team SLUG`, a team membership)."""

from __future__ import annotations

import secrets
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email
from django.db import transaction

from common.audit import Actor, audit_record
from common.models import Membership, Role, Team
from common.roles import ROLES
from common.teams import membership_set

CLI = Actor(label="cli", source="cli")

EXISTS = 2  # exit status when the user exists and --update-role was not given


def role_group(role: str) -> Group:
    """The role's group with the permissions `common.roles.ROLES` grants it (the migrations
    create it; recreated here if it is missing)."""
    group, _ = Group.objects.get_or_create(name=role)
    wanted = [
        Permission.objects.get(content_type__app_label=app_label, codename=codename)
        for app_label, codename in ROLES[role]
    ]
    group.permissions.add(*wanted)
    return group


class Command(BaseCommand):
    help = (
        "Create a user with a role: viewer (reads), operator (also starts, cancels, retries "
        "runs and decides tickets) or admin (also configures agents, models, providers and "
        "endpoints in /admin/), site-wide or, with --team, in one team only. Prints a "
        "generated password once unless --password-stdin."
    )
    stealth_options = ("stdin",)  # call_command(..., stdin=stream) in tests

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="The username.")
        parser.add_argument(
            "--role", required=True, choices=list(ROLES), help="viewer, operator or admin."
        )
        parser.add_argument("--email", default=None, help="The user's email address.")
        parser.add_argument(
            "--team",
            default=None,
            help="Give the role in this team only (its slug) instead of site-wide; with "
            "--update-role it replaces the user's role in that team, not elsewhere.",
        )
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read the password from the first line of standard input instead of "
            "generating one.",
        )
        parser.add_argument(
            "--update-role",
            action="store_true",
            help="If the user exists, give it this role (replacing its other role) instead "
            "of failing; its password changes only with --password-stdin.",
        )

    def handle(
        self,
        *args: Any,
        name: str,
        role: str,
        email: str | None,
        password_stdin: bool,
        update_role: bool,
        team: str | None = None,
        **options: Any,
    ) -> None:
        name = name.strip()
        if not name:
            raise CommandError("the username must not be empty")
        team_row = _team(team) if team is not None else None
        if email is not None:
            try:
                validate_email(email)
            except ValidationError as exc:
                raise CommandError(f"--email {email!r} is not a valid email address") from exc
        password = self._read_password(options.get("stdin")) if password_stdin else None

        User = get_user_model()
        with transaction.atomic():
            user = User.objects.select_for_update().filter(username=name).first()
            if user is not None and not update_role:
                raise CommandError(
                    f"user {name!r} already exists; pass --update-role to give it the {role} role",
                    returncode=EXISTS,
                )
            created = user is None
            if user is None:
                user = User(username=name, email=email or "")
            elif email is not None:
                user.email = email
            generated = _set_password(user, password, created)
            before = None if created else sorted(_roles_of(user))
            user.save()
            _give_role(user, role, team_row)
            user.is_staff = _needs_admin_site(user)  # /admin/ needs is_staff
            user.save(update_fields=["is_staff"])
            after = {"role": role, "email": user.email}
            audit_record(
                actor=CLI,
                action="user.create" if created else "user.role",
                target_type="user",
                target_id=user.get_username(),
                team=team_row,
                before=None if created else {"roles": before},
                after=after if team_row is None else {**after, "team": team_row.slug},
            )

        verb = "created" if created else "updated"
        where = f" in team {team_row.slug!r}" if team_row is not None else ""
        self.stdout.write(f"{verb} {role} user {name!r}{where}")
        if generated is not None:
            self.stdout.write(f"password: {generated}  (shown once; it is not stored in clear)")

    def _read_password(self, stdin: Any) -> str:
        stream = stdin if stdin is not None else sys.stdin
        line = stream.readline()
        password = line.rstrip("\r\n")
        if not password:
            raise CommandError("--password-stdin: standard input had no password on its first line")
        return password


def _roles_of(user: Any) -> list[str]:
    """The user's site-wide roles, and its team roles as "role@team"."""
    site = user.groups.filter(name__in=list(ROLES)).values_list("name", flat=True)
    teams = Membership.objects.filter(user=user).values_list("role", "team__slug")
    return [*site, *(f"{role}@{slug}" for role, slug in teams)]


def _team(slug: str) -> Team:
    row = Team.objects.filter(slug=slug.strip()).first()
    if row is None:
        known = ", ".join(Team.objects.values_list("slug", flat=True)) or "none yet"
        raise CommandError(f"no team {slug!r} (teams: {known}); create it in /admin/ first")
    return row


def _needs_admin_site(user: Any) -> bool:
    """Admins, site-wide or of a team, configure in /admin/ (it needs is_staff)."""
    return bool(
        user.is_superuser
        or user.groups.filter(name=Role.ADMIN).exists()
        or Membership.objects.filter(user=user, role=Role.ADMIN).exists()
    )


def _set_password(user: Any, password: str | None, created: bool) -> str | None:
    """Set the given password once Django's validators accept it; a new user without one
    gets a generated password, returned to be shown once."""
    generated = None
    if password is None and created:
        generated = password = secrets.token_urlsafe(18)
    if password is not None:
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError("password refused: " + " ".join(exc.messages)) from exc
        user.set_password(password)
    return generated


def _give_role(user: Any, role: str, team: Team | None) -> None:
    """The role site-wide (replacing the user's other site-wide role), or in the team."""
    if team is None:
        user.groups.remove(*Group.objects.filter(name__in=list(ROLES)).exclude(name=role))
        user.groups.add(role_group(role))
    else:
        membership_set(team=team, user=user, role=role, actor=CLI)
