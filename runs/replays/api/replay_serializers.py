"""Replay sets in the API (docs/replays.md): the request that starts one, and the set
with its items' original and replay summaries."""

from __future__ import annotations

from rest_framework import serializers

from runs.replays.models.replays import ReplayItem, ReplaySet
from runs.replays.services.replays import MAX_CONCURRENCY, MAX_LIMIT, OUTCOMES


class ReplayFiltersSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(
        choices=list(OUTCOMES), required=False, default="any", help_text="Outcome of the originals."
    )
    created_after = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Originals created at or after."
    )
    created_before = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Originals created before."
    )


class ReplayCreateSerializer(serializers.Serializer):
    """Documents the body; the service checks it (runs.replays.services.replays.replay_request)."""

    agent_id = serializers.CharField(help_text="The agent's slug.")
    version = serializers.CharField(
        required=False,
        default="latest",
        help_text='"latest" (published; also when absent or null), "draft" (the unpublished '
        "draft) or a published number (1, 2, …); 0, false or anything else is a 400.",
    )
    filters = ReplayFiltersSerializer(required=False)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_LIMIT, help_text="At most this many (newest)."
    )
    ticket_policy = serializers.ChoiceField(
        choices=ReplaySet.TicketPolicy.values, required=False, default="as_recorded"
    )
    http_mode = serializers.ChoiceField(
        choices=ReplaySet.HttpMode.values, required=False, default="recorded"
    )
    concurrency = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_CONCURRENCY, default=2
    )


class ReplayRunSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField(allow_null=True)
    outcome = serializers.CharField(
        help_text="completed, blocked, failed, cancelled, waiting, running, queued or gone."
    )
    status = serializers.CharField(required=False)
    status_reason = serializers.CharField(required=False, allow_blank=True)
    steps = serializers.IntegerField(required=False)
    tokens = serializers.IntegerField(required=False)
    cost_usd = serializers.CharField(required=False, allow_null=True)
    duration_seconds = serializers.FloatField(required=False, allow_null=True)
    tickets = serializers.IntegerField(
        required=False, help_text="Tickets raised (for a replay: that a person would have had)."
    )
    tools_used = serializers.ListField(child=serializers.CharField(), required=False)
    tool_problems = serializers.ListField(child=serializers.CharField(), required=False)
    final_output = serializers.CharField(required=False, allow_null=True, allow_blank=True)


class ReplayItemSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    status = serializers.ChoiceField(choices=ReplayItem.Status.values)
    note = serializers.CharField(allow_blank=True)
    original = ReplayRunSummarySerializer()
    replay = ReplayRunSummarySerializer(allow_null=True)
    changed = serializers.BooleanField(
        allow_null=True, help_text="The outcome or the tools used differ (null until it ended)."
    )
    compare_url = serializers.CharField(allow_null=True)


class ReplayTotalsSerializer(serializers.Serializer):
    steps = serializers.IntegerField()
    tokens = serializers.IntegerField()
    cost_usd = serializers.CharField(allow_null=True)
    tickets = serializers.IntegerField()
    average_steps = serializers.FloatField(allow_null=True)
    average_tokens = serializers.FloatField(allow_null=True)
    average_duration_seconds = serializers.FloatField(allow_null=True)
    completed = serializers.IntegerField()


class ReplayProgressSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    pending = serializers.IntegerField()
    running = serializers.IntegerField()
    done = serializers.IntegerField()
    skipped = serializers.IntegerField()
    progress_percent = serializers.IntegerField()
    changed = serializers.IntegerField()
    original = ReplayTotalsSerializer()
    replay = ReplayTotalsSerializer()


class ReplaySetSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    agent_id = serializers.CharField()
    version = serializers.IntegerField(help_text="Version number (a draft: the last published).")
    draft = serializers.BooleanField()
    filters = serializers.DictField()
    ticket_policy = serializers.CharField()
    http_mode = serializers.CharField()
    concurrency = serializers.IntegerField()
    status = serializers.ChoiceField(choices=ReplaySet.Status.values)
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = ReplayProgressSerializer()


class ReplaySetDetailSerializer(ReplaySetSerializer):
    items = ReplayItemSerializer(many=True)


class ReplaySetPageSerializer(serializers.Serializer):
    items = ReplaySetSerializer(many=True)
