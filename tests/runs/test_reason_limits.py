"""A reason (a cancel's, an interrupt's, a freeze's and its lifting's) and a bulk decision's
comment follow AWAKEN_MAX_COMMENT_CHARS (common/limits.py) on every surface: with the
setting raised, a reason longer than the default is kept whole (not refused, not cut);
with it lowered, one character more is refused with the limits' wording and nothing
changes."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from common.audit import Actor
from common.errors import InvalidInput
from common.models import AuditEntry, Team
from common.teams import team_freeze, team_unfreeze
from runs.models import Run
from tests.api.helpers import assert_error
from tests.factories import bearer, team, team_member, token_for, waiting_run
from tests.runs.bulk_helpers import note, waiting_on

pytestmark = pytest.mark.django_db

RAISED = 3_000  # above the default (2,000)
LONG = "r" * 2_500
ACTOR = Actor(label="olga", source="ui")


def refused_wording(length: int, limit: int) -> str:
    return f"the reason is {length:,} characters long; at most {limit:,} are allowed"


def cancel_comments(run: Run) -> list[str]:
    return list(
        AuditEntry.objects.filter(action="run.cancel", target_id=str(run.pk)).values_list(
            "comment", flat=True
        )
    )


def test_a_freeze_reason_follows_the_setting(settings: Any) -> None:
    red = team("red")
    settings.AWAKEN_MAX_COMMENT_CHARS = RAISED
    frozen = team_freeze(team=red, actor=ACTOR, reason=LONG)
    assert frozen.frozen_reason == LONG
    team_unfreeze(team=red, actor=ACTOR, reason=LONG)
    assert AuditEntry.objects.get(action="team.unfreeze").comment == LONG
    settings.AWAKEN_MAX_COMMENT_CHARS = 60
    with pytest.raises(InvalidInput) as refused:
        team_freeze(team=red, actor=ACTOR, reason="f" * 61)
    assert refused.value.message == refused_wording(61, 60)
    assert refused.value.details["field"] == "reason"
    assert not Team.objects.get(pk=red.pk).frozen
    team_freeze(team=red, actor=ACTOR, reason="incident")
    with pytest.raises(InvalidInput, match="the reason is 61 characters long"):
        team_unfreeze(team=red, actor=ACTOR, reason="u" * 61)
    assert Team.objects.get(pk=red.pk).frozen


def test_the_teams_api_follows_the_setting(settings: Any) -> None:
    settings.AWAKEN_MAX_COMMENT_CHARS = RAISED
    api = bearer(token_for(team_member("admin", "red")))
    frozen = api.post("/api/v1/teams/red/freeze", {"reason": LONG}, format="json")
    assert frozen.status_code == 200, frozen.content[:300]
    assert frozen.json()["frozen_reason"] == LONG
    too_long = {"reason": "u" * (RAISED + 1)}
    error = assert_error(
        api.post("/api/v1/teams/red/unfreeze", too_long, format="json"), 400, "invalid"
    )
    assert error["message"] == refused_wording(RAISED + 1, RAISED)
    assert error["details"]["reason"] == [
        f"Ensure this field has no more than {RAISED} characters."
    ]
    assert Team.objects.get(slug="red").frozen
    lifted = api.post("/api/v1/teams/red/unfreeze", {"reason": LONG}, format="json")
    assert lifted.status_code == 200, lifted.content[:300]
    assert AuditEntry.objects.get(action="team.unfreeze").comment == LONG


def test_a_cancel_reason_over_the_api_follows_the_setting(settings: Any, operator_api: Any) -> None:
    settings.AWAKEN_MAX_COMMENT_CHARS = RAISED
    run = waiting_run()
    url = f"/api/v1/runs/{run.pk}/cancel"
    error = assert_error(
        operator_api.post(url, {"reason": "c" * (RAISED + 1)}, format="json"), 400, "invalid"
    )
    assert error["message"] == refused_wording(RAISED + 1, RAISED)
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING
    response = operator_api.post(url, {"reason": LONG}, format="json")
    assert response.status_code == 200, response.content[:300]
    assert cancel_comments(run) == [LONG]


def test_an_interrupt_reason_over_the_api_follows_the_setting(
    settings: Any, operator_api: Any
) -> None:
    settings.AWAKEN_MAX_COMMENT_CHARS = RAISED
    run = waiting_run()
    url = f"/api/v1/threads/{run.thread_id}/interrupt"
    error = assert_error(
        operator_api.post(url, {"reason": "i" * (RAISED + 1)}, format="json"), 400, "invalid"
    )
    assert error["message"] == refused_wording(RAISED + 1, RAISED)
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING
    response = operator_api.post(url, {"reason": LONG}, format="json")
    assert response.status_code == 200, response.content[:300]
    assert cancel_comments(run) == [LONG]


def test_a_cancel_reason_on_the_pages_is_kept_whole(settings: Any, operator_client: Any) -> None:
    settings.AWAKEN_MAX_COMMENT_CHARS = RAISED
    run = waiting_run()
    operator_client.post(reverse("runs:run-cancel", args=[run.pk]), {"reason": LONG})
    assert cancel_comments(run) == [LONG]
    other = waiting_run("dinner")
    operator_client.post(reverse("runs:thread-interrupt", args=[other.thread_id]), {"reason": LONG})
    assert cancel_comments(other) == [LONG]


def test_a_too_long_cancel_reason_on_the_pages_is_refused(
    settings: Any, operator_client: Any
) -> None:
    """Not cut to fit (the old fixed 2,000 characters) and then taken."""
    run = waiting_run()
    operator_client.post(reverse("runs:run-cancel", args=[run.pk]), {"reason": "p" * 2_001})
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING
    assert cancel_comments(run) == []


def test_a_bulk_decisions_comment_follows_the_setting(settings: Any, operator_api: Any) -> None:
    settings.AWAKEN_MAX_COMMENT_CHARS = RAISED
    (ticket,) = waiting_on("noter", note("lunch"))
    body = {"ticket_ids": [str(ticket.pk)], "action": "reject", "comment": LONG}
    response = operator_api.post("/api/v1/tickets/bulk-decision", body, format="json")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["results"][0]["outcome"] != "error", response.json()
