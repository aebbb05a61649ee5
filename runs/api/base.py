"""The base of every API view: JSON in and out, bearer token or session auth, per-action
Django permissions, per-token throttling, request ids, and helpers for ids and queries."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import permissions
from rest_framework.views import APIView

from runs.services.audit import request_id
from runs.services.errors import NotFound

from .auth import ActionPermission


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


def validated(serializer_class: Any, data: Any, **kwargs: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
