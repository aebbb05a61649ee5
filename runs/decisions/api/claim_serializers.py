"""The bodies of claiming and assigning a ticket (runs/decisions/api/views/claims.py)."""

from __future__ import annotations

from rest_framework import serializers

from runs.selectors.claims import CLAIM_MINUTES, MAX_CLAIM_MINUTES


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
