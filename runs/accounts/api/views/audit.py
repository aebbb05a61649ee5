"""The audit log."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, validated
from common.api.errors import error_responses
from common.models import AuditEntry
from runs import permissions as perms
from runs.accounts.selectors.audit import scope_audit
from runs.api import request_serializers as sq
from runs.api import serializers as s
from runs.api.pagination import check_cursor
from runs.selectors import keyset_page


def audit_entries(query: dict[str, Any], user: Any) -> QuerySet[AuditEntry]:
    """The entries a validated AuditQuerySerializer selects (the list and its CSV export),
    of the teams where `user` may read the audit log."""
    entries = scope_audit(AuditEntry.objects.all(), user)
    if query.get("action"):
        entries = entries.filter(action__startswith=query["action"])
    if query.get("actor"):
        entries = entries.filter(Q(actor_label=query["actor"]) | Q(actor__username=query["actor"]))
    if query.get("run"):
        entries = entries.filter(run_id=query["run"])
    return entries


class AuditListView(ApiView):
    required_perms = {"GET": perms.AUDIT}

    @extend_schema(
        operation_id="audit_list",
        summary="The audit log, newest first",
        description="Runs started and continued, cancels, retries, decisions (ticket.*), "
        "threads created, API tokens created and revoked.",
        tags=["audit"],
        parameters=[sq.AuditQuerySerializer],
        responses={200: s.AuditPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(sq.AuditQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=False)
        page = keyset_page(audit_entries(query, request.user), cursor, query["limit"])
        items = s.AuditEntrySerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})
