"""Request and response shapes of POST /tickets/bulk-decision."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from runs.api.serializers import DecisionSerializer, TicketSerializer
from runs.decisions.services.bulk import MAX_BULK
from runs.selectors.waiting import MAX_MINUTES


class TicketPolicySerializer(serializers.Serializer):
    agent_id = serializers.CharField(required=False, allow_blank=True, max_length=63)
    tool = serializers.CharField(required=False, allow_blank=True, max_length=200)
    arguments_pattern = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=1000,
        help_text='Permission-pattern syntax: title ~ "lunch*", command =~ "(?i)rm", npm *, '
        'or a whole pattern such as write_note(title ~ "lunch*").',
    )
    waiting_longer_than_minutes = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_MINUTES
    )


class BulkDecisionRequestSerializer(serializers.Serializer):
    filter = TicketPolicySerializer(
        required=False, help_text="Decide the pending tickets that match (oldest first)."
    )
    ticket_ids = serializers.ListField(
        child=serializers.UUIDField(),
        required=False,
        min_length=1,
        max_length=MAX_BULK,
        help_text="Or decide exactly these tickets (e.g. a dry run's).",
    )
    action = serializers.ChoiceField(choices=["approve", "reject"])
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="At most AWAKEN_MAX_COMMENT_CHARS characters (2,000 by default).",
    )
    dry_run = serializers.BooleanField(
        required=False, default=False, help_text="Only list the tickets that would be decided."
    )
    confirm = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Required when the decision acts on more tickets than the lowest "
        "bulk_confirm_above of their teams; without it the answer is 400 "
        "confirmation_required (details: count, threshold) and nothing changes.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("filter" in attrs) == ("ticket_ids" in attrs):
            raise serializers.ValidationError("give either filter or ticket_ids")
        return attrs


BULK_OUTCOMES = ["decided", "conflict", "error", "matched"]


class BulkResultSerializer(serializers.Serializer):
    ticket_id = serializers.CharField(help_text="Global ticket id.")
    outcome = serializers.ChoiceField(
        choices=BULK_OUTCOMES,
        help_text="matched: a dry run's ticket; conflict: decided by someone else first.",
    )
    decision = DecisionSerializer(
        required=False, help_text="Decided: this decision; conflict: the one that came first."
    )
    message = serializers.CharField(required=False, help_text="Conflict or error: why.")
    ticket = TicketSerializer(required=False, help_text="A dry run's ticket.")


class BulkDecisionResponseSerializer(serializers.Serializer):
    matched = serializers.IntegerField(help_text="Tickets matched (or named).")
    more = serializers.BooleanField(
        help_text=f"More tickets match than the {MAX_BULK} taken: decide, then ask again."
    )
    results = BulkResultSerializer(many=True)
