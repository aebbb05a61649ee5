"""POST /integrations/slack/actions: Slack's interaction requests (button presses, modal
submissions), verified by their signature, not by a session or a CSRF token
(runs/decisions/services/slack_actions.py, docs/approvals-slack-email.md)."""

from __future__ import annotations

import json
import logging

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from common.audit import request_id
from runs.decisions.services.slack_actions import (
    Interaction,
    Unverified,
    handle,
    verified_channel,
)

logger = logging.getLogger(__name__)
MAX_BODY = 1_000_000  # Slack's payloads are far smaller


@csrf_exempt
@login_not_required
@require_POST
def slack_actions(request: HttpRequest) -> HttpResponse:
    body = request.body[: MAX_BODY + 1]
    if len(body) > MAX_BODY:
        return JsonResponse({"error": "request too large"}, status=413)
    try:
        channel = verified_channel(body, request.headers)
    except Unverified as exc:
        logger.info("refused a Slack request: %s", exc)
        return JsonResponse({"error": f"not a verified Slack request: {exc}"}, status=401)
    try:
        payload = json.loads(request.POST.get("payload", ""))
    except ValueError:
        return JsonResponse({"error": "the body has no JSON `payload` field"}, status=400)
    if not isinstance(payload, dict):
        return JsonResponse({"error": "`payload` must be a JSON object"}, status=400)
    answer = handle(Interaction(channel, payload, request_id(request)))
    if answer is None:
        return HttpResponse(status=200)
    return JsonResponse(answer)
