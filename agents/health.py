"""The health of providers and endpoints: the outcome of the last check or real call."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Q
from django.utils import timezone

from agents.models import Health, HealthFields

ERROR_LIMIT = 2000


def health_record(
    model: type[HealthFields],
    pk: Any,
    *,
    error: str | None,
    at: dt.datetime | None = None,
    only_if_changed: bool = False,
) -> bool:
    """Healthy when `error` is None, else failing with it — unless a newer outcome was
    recorded meanwhile (guarded update). `only_if_changed` skips rewriting a healthy row.
    Returns whether the row changed."""
    at = at or timezone.now()
    rows = model._default_manager.filter(pk=pk).filter(
        Q(health_checked_at__isnull=True) | Q(health_checked_at__lte=at)
    )
    if error is None:
        if only_if_changed:
            rows = rows.exclude(health=Health.HEALTHY)
        changes = {"health": Health.HEALTHY, "health_error": ""}
    else:
        changes = {"health": Health.FAILING, "health_error": error[:ERROR_LIMIT]}
    return bool(rows.update(**changes, health_checked_at=at))
