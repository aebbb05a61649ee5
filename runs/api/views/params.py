"""The API's run, ticket and thread views' pieces of the schema: path parameters, the
Idempotency-Key header, and a decision's examples and responses."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse

from common.api.errors import error_responses
from runs.api import serializers as s


def path_uuid(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.UUID, OpenApiParameter.PATH, description=description)


RUN_ID = path_uuid("run_id", "Run id.")
TICKET_ID = path_uuid("ticket_id", "Global ticket id (the `id` of a ticket).")
THREAD_ID = path_uuid("thread_id", "Thread id.")
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Same as idempotency_key in the body (the body wins).",
)

DECISION_EXAMPLES = [
    OpenApiExample(
        "Approve", value={"action": "approve", "ticket_id": "perm_call_1"}, request_only=True
    ),
    OpenApiExample(
        "Edit",
        value={"action": "edit", "ticket_id": "perm_call_1", "arguments": {"title": "milk"}},
        request_only=True,
    ),
    OpenApiExample(
        "Reject",
        value={"action": "reject", "ticket_id": "perm_call_1", "comment": "not now"},
        request_only=True,
    ),
    OpenApiExample(
        "Respond",
        value={"action": "respond", "ticket_id": "call_7", "payload": "Yes, Tuesday"},
        request_only=True,
    ),
    OpenApiExample(
        "Upstream body",
        value={"toolCallId": "call_1", "action": "resume", "payload": {"approved": True}},
        request_only=True,
    ),
]


DECISION_RESPONSES = {
    201: OpenApiResponse(
        s.DecisionResultSerializer,
        description="Decided; the run resumes when it was its last open ticket.",
    ),
    200: OpenApiResponse(
        s.DecisionResultSerializer, description="The same decision_id again: the first result."
    ),
    **error_responses(404, 409, body=True),
}
