"""Failure groups (docs/failure-groups.md): a failing run is counted in its group in the
transaction that ends it; resolve / ignore / reopen are audited operator actions; a new
group (or a resolved one failing again) is notified once; the page, the dashboard and the
runs list filtered to a group; the backfill command."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse

from common.audit import Actor
from common.errors import Frozen
from common.models import AuditEntry
from runs import selectors
from runs.models import Run
from runs.operations.models.failures import FailureGroup, FailureGroupRun
from runs.operations.models.notifications import NotificationDelivery
from runs.operations.services.failures import (
    failure_group_set_state,
    failure_record,
    failures_backfill,
)
from runs.operations.services.retention import prune_runs
from runs.services.execution import run_advance
from runs.services.submission_flow import run_start
from tests.factories import done_run, scripted_agent, team, team_member, user_with_role
from tests.runs.helpers import drive
from tests.runs.notify_helpers import channel, notify_configured_fixture, rule  # noqa: F401

pytestmark = pytest.mark.django_db

ACTOR = Actor(label="olga", source="ui")


def failing(message: str, agent: Any = None, **agent_fields: Any) -> Run:
    agent = agent or scripted_agent([{"error": message}], **agent_fields)
    run = drive(run_start(agent=agent, messages="go"))
    assert run.is_failed, run.status_reason
    return run


def group_of(run: Run) -> FailureGroup:
    return FailureGroup.objects.get(pk=FailureGroupRun.objects.get(run_id=run.pk).group_id)


# --- the run-fail path -----------------------------------------------------------------------------


def test_a_failing_run_opens_a_group_and_the_same_failure_counts_in_it():
    first = failing("provider error 503: upstream 'req_8f3a' failed")
    group = group_of(first)
    assert (group.count, group.state, group.error_type) == (1, "open", "error")
    assert group.title == "provider error <…>: upstream <…> failed"
    assert group.sample_message == "provider error 503: upstream 'req_8f3a' failed"
    assert group.source == "provider:scripted"
    assert group.agent_ids == [first.agent_id]
    assert group.team_id == first.agent.team_id
    assert group.last_run_id == first.pk

    again = failing("provider error 502: upstream 'req_91bc' failed")  # another agent
    group.refresh_from_db()
    assert group_of(again).pk == group.pk
    assert group.count == 2 and group.last_run_id == again.pk
    assert group.first_seen == first.finished_at and group.last_seen == again.finished_at
    assert group.sample_message.endswith("'req_8f3a' failed")  # the first one's
    assert group.agent_ids == sorted([first.agent_id, again.agent_id])

    repeat = failing("", agent=first.agent)  # its script fails the same way again
    group.refresh_from_db()
    assert group_of(repeat).pk == group.pk
    assert group.count == 3
    assert group.agent_ids == sorted([first.agent_id, again.agent_id])

    different = failing("cannot reach provider")
    assert group_of(different).pk != group.pk
    assert FailureGroup.objects.count() == 2


def test_each_team_has_its_own_groups():
    ours = failing("provider error 503")
    theirs = failing("provider error 503", team=team("other"))
    assert group_of(ours).pk != group_of(theirs).pk
    assert group_of(theirs).team.slug == "other"


def test_runs_that_end_well_or_are_cancelled_are_not_grouped():
    done_run()
    assert not FailureGroup.objects.exists() and not FailureGroupRun.objects.exists()


def test_a_crashing_worker_segment_is_grouped_too(monkeypatch):
    def boom(self: Any) -> Any:
        raise RuntimeError("kaput 42")

    monkeypatch.setattr("runs.services.execution.Segment.execute", boom)
    runs = []
    for _ in range(2):
        run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
        run_advance(run_id=run.pk, worker="w")
        runs.append(Run.objects.get(pk=run.pk))
    group = group_of(runs[0])
    assert group_of(runs[1]).pk == group.pk
    assert group.count == 2
    assert group.title == "internal error: RuntimeError: kaput <…>"


def test_a_resolved_group_that_fails_again_is_open_again_and_an_ignored_one_keeps_counting():
    run = failing("provider error 503")
    group = group_of(run)
    failure_group_set_state(group=group, action="resolve", actor=ACTOR)
    failing("provider error 504", agent=run.agent)
    group.refresh_from_db()
    assert (group.state, group.count) == ("open", 2)
    assert group.regressed_at is not None and group.regressed_at == group.state_changed_at
    assert group.state_changed_by_label == "a new failure"

    failure_group_set_state(group=group, action="ignore", actor=ACTOR)
    failing("provider error 505", agent=run.agent)
    group.refresh_from_db()
    assert (group.state, group.count) == ("ignored", 3)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_failures_of_a_new_kind_make_one_group_counted_exactly():
    """PostgreSQL: eight transactions upsert the same new group at once; ON CONFLICT makes
    the later ones wait for the first and add to its row (SQLite serializes writers)."""
    rule(channel("https://hooks.example.com/x"), events=["failure_group.new"])
    runs = [failing(f"provider error 50{n}") for n in range(8)]
    NotificationDelivery.objects.all().delete()
    FailureGroupRun.objects.all().delete()
    FailureGroup.objects.all().delete()
    barrier = threading.Barrier(len(runs))
    errors: list[BaseException] = []

    def record(run: Run) -> None:
        try:
            with transaction.atomic():
                barrier.wait()
                failure_record(run, run.error_payload)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=record, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    (group,) = FailureGroup.objects.all()
    assert group.count == 8 and FailureGroupRun.objects.filter(group=group).count() == 8
    assert sorted(group.agent_ids) == sorted(run.agent_id for run in runs)
    assert NotificationDelivery.objects.filter(event="failure_group.new").count() == 1


# --- notifications ------------------------------------------------------------------------------


def test_a_new_group_is_notified_once_and_again_only_when_it_regresses():
    rule(channel("https://hooks.example.com/x"), events=["failure_group.new"])
    first = failing("provider error 503")
    failing("provider error 502", agent=first.agent)
    failing("provider error 501", agent=first.agent)
    (delivery,) = NotificationDelivery.objects.all()
    group = group_of(first)
    assert (delivery.event, delivery.subject) == ("failure_group.new", f"failure_group:{group.pk}")
    body = delivery.payload
    assert body["failure_group"]["title"] == "provider error <…>"
    assert body["failure_group"]["regression"] is False
    assert f"failure_group={group.pk}" in body["failure_group"]["runs_url"]
    assert body["run"]["id"] == str(first.pk) and body["run"]["error"] == "provider error 503"

    failure_group_set_state(group=group, action="ignore", actor=ACTOR)
    failing("provider error 500", agent=first.agent)
    assert NotificationDelivery.objects.count() == 1  # ignored: counted, not notified

    failure_group_set_state(group=group, action="resolve", actor=ACTOR)
    failing("provider error 499", agent=first.agent)
    regression = NotificationDelivery.objects.exclude(pk=delivery.pk).get()
    assert regression.payload["failure_group"]["regression"] is True
    assert regression.subject.startswith(f"failure_group:{group.pk}@")


def test_a_failed_run_still_gets_its_run_failed_notification():
    rule(channel("https://hooks.example.com/x"))  # every event
    run = failing("provider error 503")
    events = sorted(NotificationDelivery.objects.values_list("event", flat=True))
    assert events == ["failure_group.new", "run.failed"]
    assert NotificationDelivery.objects.get(event="run.failed").subject == f"run:{run.pk}"


# --- triage -------------------------------------------------------------------------------------


def test_resolve_ignore_reopen_are_audited_and_a_repeat_changes_nothing(operator_user):
    group = group_of(failing("provider error 503"))
    actor = Actor(user=operator_user, label=operator_user.username, source="ui")
    for action, state in [("resolve", "resolved"), ("ignore", "ignored"), ("reopen", "open")]:
        group = failure_group_set_state(group=group, action=action, actor=actor)
        assert group.state == state and group.state_changed_by == operator_user
    failure_group_set_state(group=group, action="reopen", actor=actor)
    entries = list(AuditEntry.objects.filter(target_type="failure_group").order_by("pk"))
    assert [e.action for e in entries] == [
        "failure_group.resolve",
        "failure_group.ignore",
        "failure_group.reopen",
    ]
    assert entries[0].before == {"state": "open"}
    assert entries[0].after["state"] == "resolved"
    assert entries[0].team_id == group.team_id and entries[0].actor == operator_user


def test_a_frozen_teams_groups_do_not_change():
    group = group_of(failing("provider error 503"))
    group.team.frozen = True
    group.team.frozen_reason = "incident"
    group.team.save()
    with pytest.raises(Frozen):
        failure_group_set_state(group=group, action="resolve", actor=ACTOR)
    group.refresh_from_db()
    assert group.state == "open"


# --- the page --------------------------------------------------------------------------------------


def page(client: Any, **params: str) -> str:
    response = client.get(reverse("runs:failures"), params)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def test_the_page_shows_each_group_once_with_its_count_and_links(operator_client):
    first = failing("provider error 503: <b>bold</b>")
    failing("provider error 502: <b>bold</b>", agent=first.agent)
    group = group_of(first)
    html = page(operator_client)
    assert html.count(f'id="failure-{group.pk}"') == 1
    assert "2 runs" in html
    assert f"?failure_group={group.pk}" in html
    assert first.agent.slug in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert 'value="resolve"' in html and 'value="ignore"' in html
    assert "Failed" in html and "at provider scripted" in html


def test_an_operator_resolves_a_group_from_the_page(operator_client):
    group = group_of(failing("provider error 503"))
    url = reverse("runs:failure-state", args=[group.pk])
    response = operator_client.post(url, {"action": "resolve", "from_state": "open"})
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:failures") + "?state=open"
    group.refresh_from_db()
    assert group.state == "resolved"
    assert AuditEntry.objects.filter(action="failure_group.resolve", source="ui").count() == 1
    assert f'id="failure-{group.pk}"' not in page(operator_client)  # open ones only
    resolved = page(operator_client, state="resolved")
    assert f'id="failure-{group.pk}"' in resolved and 'value="reopen"' in resolved


def test_a_viewer_sees_the_groups_but_may_not_change_them(client):
    group = group_of(failing("provider error 503"))
    client.force_login(user_with_role("viewer", "vic"))
    html = page(client)
    assert f'id="failure-{group.pk}"' in html and 'value="resolve"' not in html
    response = client.post(reverse("runs:failure-state", args=[group.pk]), {"action": "resolve"})
    assert response.status_code == 403
    group.refresh_from_db()
    assert group.state == "open"


def test_a_team_member_sees_and_changes_only_their_teams_groups(client):
    theirs = group_of(failing("provider error 503", team=team("blue")))
    ours = group_of(failing("provider error 503", team=team("red")))
    client.force_login(team_member("operator", "red"))
    html = page(client)
    assert f'id="failure-{ours.pk}"' in html and f'id="failure-{theirs.pk}"' not in html
    response = client.post(reverse("runs:failure-state", args=[theirs.pk]), {"action": "ignore"})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.state == "open"


def test_a_frozen_teams_buttons_are_disabled_and_a_post_is_refused(operator_client):
    group = group_of(failing("provider error 503"))
    group.team.frozen = True
    group.team.frozen_reason = "incident 7"
    group.team.save()
    html = page(operator_client)
    assert "incident 7" in html and 'value="resolve" class="primary" disabled' in html
    url = reverse("runs:failure-state", args=[group.pk])
    response = operator_client.post(url, {"action": "resolve", "from_state": "open"})
    assert response.status_code == 409
    assert "frozen" in response.content.decode()
    group.refresh_from_db()
    assert group.state == "open"


def test_a_bad_state_filter_is_named(operator_client):
    response = operator_client.get(reverse("runs:failures"), {"state": "nope"})
    assert response.status_code == 400
    assert "is not one of" in response.content.decode()


# --- where the groups show elsewhere -----------------------------------------------------------------


def test_the_runs_list_filtered_to_a_group_shows_its_runs_only(operator_client):
    first = failing("provider error 503")
    second = failing("provider error 502", agent=first.agent)
    other = failing("cannot reach provider")
    group = group_of(first)
    response = operator_client.get(reverse("runs:run-list"), {"failure_group": str(group.pk)})
    html = response.content.decode()
    assert response.status_code == 200
    assert str(first.pk) in html and str(second.pk) in html and str(other.pk) not in html


def test_the_runs_of_a_group_page_by_its_links_newest_first():
    runs = [failing(f"provider error 50{n}") for n in range(3)]
    failing("cannot reach provider")
    group = str(group_of(runs[0]).pk)
    filters = selectors.RunFilters(failure_group=group)
    first = selectors.run_list(filters=filters, size=2)
    assert [r.pk for r in first.items] == [runs[2].pk, runs[1].pk]
    second = selectors.run_list(filters=filters, cursor=first.next_cursor, size=2)
    assert [r.pk for r in second.items] == [runs[0].pk] and second.next_cursor is None
    back = selectors.run_list(filters=filters, cursor=second.prev_cursor, size=2)
    assert [r.pk for r in back.items] == [runs[2].pk, runs[1].pk]
    mine = selectors.RunFilters(failure_group=group, agent_ids=[runs[1].agent_id])
    assert [r.pk for r in selectors.run_list(filters=mine).items] == [runs[1].pk]


def test_the_dashboard_lists_a_repeated_failure_once_with_its_count(operator_client):
    first = failing("cannot reach provider at http://10.0.0.1:9/x: refused")
    failing("cannot reach provider at http://10.0.0.1:9/y: refused", agent=first.agent)
    html = operator_client.get(reverse("runs:dashboard")).content.decode()
    assert html.count('class="small failure"') == 1
    assert "2×" in html and f"failure_group={group_of(first).pk}" in html


def test_retention_removes_a_pruned_runs_link_and_the_group_keeps_its_count():
    old, recent = failing("provider error 503"), failing("provider error 502")
    long_ago = old.finished_at - dt.timedelta(days=100)
    Run.objects.filter(pk=old.pk).update(created_at=long_ago, finished_at=long_ago)
    result = prune_runs(older_than=dt.timedelta(days=30), pause=0)
    assert result.runs == 1 and not Run.objects.filter(pk=old.pk).exists()
    assert not FailureGroupRun.objects.filter(run_id=old.pk).exists()
    assert group_of(recent).count == 2


# --- the backfill ------------------------------------------------------------------------------------


def test_the_backfill_groups_failed_runs_of_before_once():
    first = failing("provider error 503")
    second = failing("provider error 502", agent=first.agent)
    third = failing("cannot reach provider")
    FailureGroupRun.objects.all().delete()
    FailureGroup.objects.all().delete()

    totals = failures_backfill(batch=2)
    assert totals["runs"] == 3 and totals["batches"] == 2
    group = group_of(first)
    assert group_of(second).pk == group.pk and group_of(third).pk != group.pk
    assert group.count == 2 and group.first_seen == first.finished_at
    assert group.last_run_id == second.pk

    call_command("group_failures", verbosity=0)  # again: nothing more
    group.refresh_from_db()
    assert group.count == 2 and FailureGroup.objects.count() == 2
    assert not NotificationDelivery.objects.exists()
