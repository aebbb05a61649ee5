"""Request and response shapes of /teams (settings, freeze, members) and of a cancel's
reason."""

from __future__ import annotations

from rest_framework import serializers

from common.models import Role

NEW_THREAD_TEAM_HELP = (
    "Slug of the team the thread belongs to (its members see it): one where you may start "
    "runs. Optional when you may start runs in one team only (that one), or site-wide (the "
    "default team); required when you may in several."
)


class CancelRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Why the run is cancelled; required when the run's team requires a reason. "
        "At most AWAKEN_MAX_COMMENT_CHARS characters (2,000 by default).",
    )


class TeamSerializer(serializers.Serializer):
    slug = serializers.CharField(read_only=True)
    name = serializers.CharField(max_length=200)
    reason_required = serializers.BooleanField(
        help_text="Rejecting a ticket and cancelling a run need a reason."
    )
    bulk_confirm_above = serializers.IntegerField(
        min_value=0,
        max_value=100_000,
        help_text="Bulk decisions on more tickets than this need confirm: true (0: always).",
    )
    frozen = serializers.BooleanField(read_only=True)
    frozen_reason = serializers.CharField(read_only=True)
    frozen_at = serializers.DateTimeField(read_only=True, allow_null=True)
    frozen_by = serializers.CharField(read_only=True)
    role = serializers.CharField(
        read_only=True, allow_null=True, help_text="Your role in the team (null: site-wide)."
    )


class TeamSettingsSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, max_length=200)
    reason_required = serializers.BooleanField(required=False)
    bulk_confirm_above = serializers.IntegerField(required=False, min_value=0, max_value=100_000)


class TeamListSerializer(serializers.Serializer):
    items = TeamSerializer(many=True)


class FreezeSerializer(serializers.Serializer):
    reason = serializers.CharField(
        help_text="Why the team is frozen: at most AWAKEN_MAX_COMMENT_CHARS characters "
        "(2,000 by default)."
    )


class UnfreezeSerializer(serializers.Serializer):
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="At most AWAKEN_MAX_COMMENT_CHARS characters (2,000 by default).",
    )


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(read_only=True)
    role = serializers.ChoiceField(choices=Role.values)
    source = serializers.CharField(
        read_only=True, help_text="local, or sso: the identity provider sets it at each login."
    )


class MemberRoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.values)


class MemberListSerializer(serializers.Serializer):
    items = MemberSerializer(many=True)
