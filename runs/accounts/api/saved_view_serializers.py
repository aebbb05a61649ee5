"""Request and response shapes of /saved-views."""

from __future__ import annotations

from rest_framework import serializers

from runs.accounts.models.saved_views import SavedView


class SavedViewSerializer(serializers.ModelSerializer):
    class Meta:
        model = SavedView
        fields = ["id", "page", "name", "query", "created_at"]
        read_only_fields = ["id", "created_at"]


class SavedViewQuerySerializer(serializers.Serializer):
    page = serializers.ChoiceField(choices=SavedView.Page.values, required=False)


class SavedViewPageSerializer(serializers.Serializer):
    items = SavedViewSerializer(many=True)
