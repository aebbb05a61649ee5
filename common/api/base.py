"""The base of every API view: JSON in and out, bearer token or session auth, per-action
Django permissions, per-token throttling, request ids, and helpers for ids and queries."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from django.db import models
from django.db.models import QuerySet
from rest_framework import permissions
from rest_framework.views import APIView

from common.audit import request_id
from common.errors import NotFound

from .auth import ActionPermission

M = TypeVar("M", bound=models.Model)


class ApiView(APIView):
    permission_classes = [permissions.IsAuthenticated, ActionPermission]
    # {"GET": "runs.view_run", "POST": "runs.start_run"}
    required_perms: dict[str, str] = {}

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        view = super().as_view(**initkwargs)
        view.login_required = False  # LoginRequiredMiddleware: DRF authenticates itself
        return view

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        response["X-Request-ID"] = request_id(request)
        return response


def parse_uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError) as exc:
        raise NotFound(f"{what} {value} not found") from exc


def get_or_not_found(
    queryset: QuerySet[M], what: str, value: Any, *, by: str = "pk", **details: Any
) -> M:
    """The row of `queryset` whose `by` field is `value`, or NotFound ("<what> <value> not
    found", with `details`); ids that cannot be UUIDs are not found rather than invalid."""
    if by == "pk" and isinstance(queryset.model._meta.pk, models.UUIDField):
        value_for_query: Any = parse_uuid(value, what)
    else:
        value_for_query = value
    row = queryset.filter(**{by: value_for_query}).first()
    if row is None:
        raise NotFound(f"{what} {value} not found", details or None)
    return row


def validated(serializer_class: Any, data: Any, **kwargs: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
