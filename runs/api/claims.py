"""The API's shapes of ticket claims and assignment (runs/decisions/services/claims.py): the
ticket's live claim as fields of TicketSerializer, and the claim and assign bodies."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.decisions.services.claims import CLAIM_MINUTES, MAX_CLAIM_MINUTES, live_claim
from runs.models import Ticket


class _LiveClaimField(serializers.Field):
    """A read-only field of the whole ticket: part of its claim while it has not lapsed,
    else null."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Ticket) -> Any:
        claim = live_claim(value)
        return None if claim is None else self.part(claim)

    def part(self, claim: Any) -> Any:
        raise NotImplementedError


@extend_schema_field({"type": "string", "nullable": True})
class ClaimantField(_LiveClaimField):
    def part(self, claim: Any) -> Any:
        return claim.by


@extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
class ClaimedUntilField(_LiveClaimField):
    def part(self, claim: Any) -> Any:
        return serializers.DateTimeField().to_representation(claim.until)


class ClaimRequestSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_CLAIM_MINUTES,
        default=CLAIM_MINUTES,
        help_text="How long the claim lasts unless renewed (claim again to renew).",
    )


class AssignRequestSerializer(serializers.Serializer):
    user = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        max_length=150,
        help_text="Username of an active user who may decide tickets; null: nobody.",
    )
