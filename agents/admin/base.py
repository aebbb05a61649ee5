"""Shared admin machinery: every configuration change is audited."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.forms.models import model_to_dict

from common.audit import Actor, audit_record, request_actor

ENCRYPTED_SUFFIX = "_encrypted"


def _snapshot(obj: Any) -> dict[str, Any]:
    """The editable fields, and for each write-only secret (`<name>_encrypted`, not
    editable, so not in model_to_dict) only whether one is stored: `<name>_stored`."""
    data = model_to_dict(obj)
    for field in obj._meta.concrete_fields:
        if field.name.endswith(ENCRYPTED_SUFFIX):
            stored = bool(getattr(obj, field.attname))
            data[f"{field.name.removesuffix(ENCRYPTED_SUFFIX)}_stored"] = stored
    return {
        key: (list(value) if isinstance(value, (set, tuple)) else value)
        for key, value in data.items()
    }


class AuditedAdmin(admin.ModelAdmin):
    """Every configuration change made in the admin lands in the audit log, in the same
    transaction as the change."""

    def _actor(self, request: Any) -> Actor:
        return request_actor(request, "admin")

    def _kind(self) -> str:
        return self.model._meta.model_name or "object"

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        before = _snapshot(self.model.objects.get(pk=obj.pk)) if change and obj.pk else None
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            audit_record(
                actor=self._actor(request),
                action=f"{self._kind()}.{'update' if change else 'create'}",
                target_type=self._kind(),
                target_id=obj.pk,
                before=before,
                after=_snapshot(obj),
            )

    def delete_model(self, request: Any, obj: Any) -> None:
        with transaction.atomic():
            audit_record(
                actor=self._actor(request),
                action=f"{self._kind()}.delete",
                target_type=self._kind(),
                target_id=obj.pk,
                before=_snapshot(obj),
            )
            super().delete_model(request, obj)
