"""A ticket's live claim (runs/selectors/claims.py) as fields of TicketSerializer. The
claim and assign bodies are runs/decisions/api/claim_serializers.py."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.models import Ticket
from runs.selectors.claims import live_claim


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
