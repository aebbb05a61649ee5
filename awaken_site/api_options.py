"""The REST API's framework settings (runs.api, /api/v1/): Django REST framework's
authentication, throttling, parsing and errors, and drf-spectacular's schema. settings.py
sets REST_FRAMEWORK and SPECTACULAR_SETTINGS from these."""

from __future__ import annotations

from typing import Any


def rest_framework(throttle_rate: str) -> dict[str, Any]:
    """API tokens or the browser session; `throttle_rate` requests per token."""
    return {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "common.api.auth.ApiTokenAuthentication",
            "rest_framework.authentication.SessionAuthentication",
        ],
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "DEFAULT_THROTTLE_CLASSES": ["common.api.auth.TokenRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"api_token": throttle_rate},
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
        "DEFAULT_PARSER_CLASSES": ["common.api.parsers.LimitedJSONParser"],
        "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
        "EXCEPTION_HANDLER": "common.api.errors.exception_handler",
        "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    }


SPECTACULAR: dict[str, Any] = {
    "TITLE": "Awaken Ops API",
    "DESCRIPTION": (
        "Start runs, follow their events (JSON pages or Server-Sent Events), decide tickets, "
        "read threads, agents and the audit log. Authenticate with `Authorization: Bearer "
        "<token>` (a personal token from the 'API tokens' page) or the browser session. "
        'Errors are `{"error": {"code", "message", "details"}}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runs.api.serializers.RUN_STATUSES",
        "TicketStatusEnum": "runs.api.serializers.TICKET_STATUSES",
        "WaitingReasonEnum": "runs.api.serializers.WAITING_REASONS",
        "DecisionActionEnum": "runs.api.serializers.OUR_DECISION_ACTIONS",
        "DecisionRequestActionEnum": "runs.api.serializers.DECISION_ACTIONS",
        "BulkOutcomeEnum": "runs.decisions.api.bulk_serializers.BULK_OUTCOMES",
        "RuleVerdictOutcomeEnum": "runs.decisions.api.rule_serializers.VERDICT_OUTCOMES",
        "ReplaySetStatusEnum": ["running", "done", "cancelled"],
        "ReplayItemStatusEnum": ["pending", "running", "done", "skipped"],
        "TeamRoleEnum": "common.models.Role.values",
    },
}
