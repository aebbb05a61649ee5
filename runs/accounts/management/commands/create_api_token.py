"""Create a personal API token for a user and print it (once)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from common.api.tokens import token_create
from common.audit import Actor
from common.errors import ServiceError


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it once (only its hash is stored)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="What the token is for (default: cli).")
        parser.add_argument(
            "--expires-days", type=int, default=None, help="Expire after this many days."
        )

    def handle(
        self, *args: Any, username: str, name: str, expires_days: int | None, **options: Any
    ) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        expires_at = None
        if expires_days is not None:
            if expires_days < 1:
                raise CommandError("--expires-days must be at least 1")
            expires_at = timezone.now() + dt.timedelta(days=expires_days)
        try:
            _, raw = token_create(
                user=user, name=name, expires_at=expires_at, actor=Actor(label="cli", source="cli")
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(raw)
