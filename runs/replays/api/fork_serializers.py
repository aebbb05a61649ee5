"""Request and response shapes of forks in the API: POST /runs/{id}/fork and
GET /runs/{id}/forks (docs/forks.md)."""

from __future__ import annotations

from rest_framework import serializers

from runs.api.serializers import RunSummarySerializer
from runs.replays.services.forks import FORK_VERSIONS

VERSION_HELP = (
    "`original`: the agent version the run used; `latest`: the agent's latest published "
    "version; `draft`: a snapshot of the agent's current draft (400 when it does not "
    "validate)."
)


class ForkEditSerializer(serializers.Serializer):
    seq = serializers.IntegerField(
        min_value=1,
        help_text="Seq of the message to change: the last user message or a tool result "
        "(a `tool` message) of the copied conversation.",
    )
    text = serializers.CharField(
        trim_whitespace=False,
        help_text="Its new text: at most AWAKEN_MAX_MESSAGE_CHARS characters (32,000 by default).",
    )


class RunForkSerializer(serializers.Serializer):
    step = serializers.IntegerField(
        min_value=0,
        help_text="Step boundary: 0 (before the first step: the run's input) to the run's "
        "`steps` (after its last step).",
    )
    version = serializers.ChoiceField(
        choices=list(FORK_VERSIONS), default="original", help_text=VERSION_HELP
    )
    edit = ForkEditSerializer(
        required=False, allow_null=True, help_text="Change one message of the copy."
    )


class ForkEditRecordSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "tool"])
    before = serializers.CharField(allow_blank=True)
    after = serializers.CharField()


class ForkSummarySerializer(RunSummarySerializer):
    """A run forked from another: its summary and where it was forked."""

    forked_from = serializers.UUIDField(source="forked_from_id", help_text="The original run.")
    fork_step = serializers.IntegerField(help_text="Step boundary of the original.")
    fork_edit = ForkEditRecordSerializer(allow_null=True, help_text="The message changed.")
    agent_version = serializers.IntegerField(
        source="agent_version.number", help_text="Pinned agent version number."
    )
    agent_version_draft = serializers.BooleanField(
        source="agent_version.draft", help_text="Pinned to a snapshot of the agent's draft."
    )


class ForkListSerializer(serializers.Serializer):
    items = ForkSummarySerializer(many=True)
