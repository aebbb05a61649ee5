"""Create a user with one of the roles (viewer, operator, admin) from the terminal."""

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
from common.roles import ROLES

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
        "endpoints in /admin/). Prints a generated password once unless --password-stdin."
    )
    stealth_options = ("stdin",)  # call_command(..., stdin=stream) in tests

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="The username.")
        parser.add_argument(
            "--role", required=True, choices=list(ROLES), help="viewer, operator or admin."
        )
        parser.add_argument("--email", default=None, help="The user's email address.")
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
        **options: Any,
    ) -> None:
        name = name.strip()
        if not name:
            raise CommandError("the username must not be empty")
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
            generated = None
            if password is None and created:
                generated = password = secrets.token_urlsafe(18)
            if password is not None:
                try:
                    validate_password(password, user)
                except ValidationError as exc:
                    raise CommandError("password refused: " + " ".join(exc.messages)) from exc
                user.set_password(password)
            before = None if created else sorted(_roles_of(user))
            user.is_staff = role == "admin" or user.is_superuser  # /admin/ needs is_staff
            user.save()
            user.groups.remove(*Group.objects.filter(name__in=list(ROLES)).exclude(name=role))
            user.groups.add(role_group(role))
            audit_record(
                actor=Actor(label="cli", source="cli"),
                action="user.create" if created else "user.role",
                target_type="user",
                target_id=user.get_username(),
                before=None if created else {"roles": before},
                after={"role": role, "email": user.email},
            )

        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} {role} user {name!r}")
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
    return list(user.groups.filter(name__in=list(ROLES)).values_list("name", flat=True))
