"""Every API error is `{"error": {"code", "message", "details"}}` with the right status."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from common.errors import ServiceError
from common.jsonsafe import MAX_JSON_DEPTH

logger = logging.getLogger(__name__)


class TooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


class ApiNotFound(exceptions.NotFound):
    pass


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    if details is None:
        details = {}
    elif not isinstance(details, dict):
        details = {"errors": details}
    return {"error": {"code": code, "message": message, "details": details}}


def _message(detail: Any) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            inner = _message(value)
            return inner if key == "non_field_errors" else f"{key}: {inner}"
        return "Invalid input."
    if isinstance(detail, list):
        return _message(detail[0]) if detail else "Invalid input."
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    headers: dict[str, str] = {}
    if isinstance(exc, ServiceError):
        return Response(error_body(exc.code, exc.message, exc.details), status=exc.status)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = TooLarge(
            f"The request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)."
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, exceptions.APIException):
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
        if isinstance(exc, exceptions.ValidationError):
            details = exc.detail if isinstance(exc.detail, dict) else {"errors": exc.detail}
            body = error_body("invalid", _message(exc.detail), details)
        elif isinstance(exc, exceptions.Throttled):
            body = error_body(
                "throttled",
                "Too many requests; slow down.",
                {"retry_after": int(exc.wait) if exc.wait is not None else None},
            )
        else:
            code = exc.get_codes()
            body = error_body(
                code if isinstance(code, str) else exc.default_code, _message(exc.detail)
            )
        return Response(body, status=exc.status_code, headers=headers)
    # Anything else is a bug: log it, tell Django (the test client re-raises), answer JSON.
    request = context.get("request")
    logger.error("unhandled API error", exc_info=exc)
    signals.got_request_exception.send(sender=None, request=getattr(request, "_request", None))
    return Response(
        error_body("server_error", "Internal server error."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


# --- OpenAPI --------------------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable: invalid, parse_error, not_found, …")
    message = serializers.CharField(help_text="Human-readable explanation.")
    details = serializers.DictField(
        help_text="More about it: field errors, the winning decision on a conflict, …"
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


ERROR_TEXT = {
    400: f"`parse_error` (malformed JSON, nested more than {MAX_JSON_DEPTH} levels, or holding "
    "NUL or a lone surrogate) or `invalid` (validation; details per field).",
    401: "`not_authenticated` (no credentials) or `authentication_failed` (bad, expired or "
    "revoked token).",
    403: "`permission_denied`: your role may not do this.",
    404: "`not_found`: unknown id.",
    405: "`method_not_allowed`.",
    409: "`conflict` (illegal transition) or `already_decided` (details.decision is the "
    "winning decision).",
    413: "`too_large`: the body exceeds DATA_UPLOAD_MAX_MEMORY_SIZE.",
    415: "`unsupported_media_type`: send application/json.",
    429: "`throttled`: too many requests for this token (details.retry_after, seconds).",
}


def error_responses(*codes: int, body: bool = False) -> dict[int, OpenApiResponse]:
    """The error responses of an operation: 400, 401, 403, 405, 429 always, plus `codes`;
    with a JSON body also 413 and 415."""
    wanted = {400, 401, 403, 405, 429, *codes}
    if body:
        wanted |= {413, 415}
    return {
        code: OpenApiResponse(response=ErrorSerializer, description=ERROR_TEXT[code])
        for code in sorted(wanted)
    }
