"""Request and response shapes of POST /tickets/{id}/rule-proposal (rules from decisions)."""

from __future__ import annotations

from rest_framework import serializers

from agents.services.rules_from_decisions import MAX_PATTERN_CHARS
from runs.api.serializers import AnyField

BEHAVIORS = ["allow", "ask", "deny"]


class RuleProposalRequestSerializer(serializers.Serializer):
    behavior = serializers.ChoiceField(
        choices=BEHAVIORS, help_text="What the rule does with such calls."
    )
    pattern = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_PATTERN_CHARS,
        help_text="The rule's tool pattern; absent or blank: the proposed one.",
    )
    save = serializers.BooleanField(
        default=False, help_text="Also add the rule to the agent's draft (not published)."
    )


class PatternOptionSerializer(serializers.Serializer):
    pattern = serializers.CharField()
    label = serializers.CharField(help_text="What it matches, in words.")
    argument = serializers.CharField(
        allow_null=True, help_text="The argument it constrains; null: any call of the tool."
    )


class RuleCheckSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="1-based position in the draft's rules.")
    tool = serializers.CharField(help_text="The rule's pattern.")
    behavior = serializers.ChoiceField(choices=BEHAVIORS)
    matched = serializers.BooleanField()
    detail = serializers.CharField(help_text="Why it matches or not.")


VERDICT_OUTCOMES = ["runs", "asks", "blocked", "invalid"]


class DraftVerdictSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=VERDICT_OUTCOMES)
    summary = serializers.CharField()
    reason = serializers.CharField(allow_blank=True, help_text="Which rule decides and why.")


class RulePreviewSerializer(DraftVerdictSerializer):
    verdict = serializers.CharField(help_text="Whether the new rule decides the call.")
    decides = serializers.BooleanField(help_text="The new rule is the one that decides.")
    already = serializers.BooleanField(help_text="The draft has this rule already.")
    position = serializers.IntegerField(
        allow_null=True, help_text="The rule's position in the draft with it."
    )
    error = serializers.CharField(allow_blank=True, help_text="Why the rule is invalid.")
    notes = serializers.ListField(child=serializers.CharField())
    checks = RuleCheckSerializer(many=True)
    current = DraftVerdictSerializer(help_text="The draft as it is, without the rule.")


class DraftSavedSerializer(serializers.Serializer):
    added = serializers.BooleanField(help_text="False: the draft had the rule already.")
    position = serializers.IntegerField()
    draft_status = serializers.ChoiceField(choices=["never_published", "matches", "changed"])
    draft_status_label = serializers.CharField()
    latest_version = serializers.IntegerField(allow_null=True)


class RuleProposalSerializer(serializers.Serializer):
    ticket_id = serializers.UUIDField()
    agent_id = serializers.CharField(help_text="The agent whose draft the rule is for.")
    tool_name = serializers.CharField()
    arguments = AnyField(allow_null=True)
    behavior = serializers.ChoiceField(choices=BEHAVIORS)
    rule = AnyField(help_text='The rule: {"tool": pattern, "behavior": ...}.')
    options = PatternOptionSerializer(many=True, help_text="Proposed patterns, suggested first.")
    skipped = serializers.DictField(
        child=serializers.CharField(), help_text="Argument -> why no pattern names it."
    )
    preview = RulePreviewSerializer()
    saved = DraftSavedSerializer(allow_null=True, help_text="With save: the draft's new state.")
