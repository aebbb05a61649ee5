"""Replays (docs/replays.md), in process: picking, versions, dry tools, recorded http_get,
ticket policies, no inbox and no notifications, the concurrency limits, the sweep's
repair, cancel and audit; and the acceptance scenario (a draft denying send_email)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from agents.models import Note
from agents.providers import scripted
from agents.tools.builtin import web
from common.audit import Actor
from common.errors import IllegalTransition, InvalidInput
from common.models import AuditEntry
from runs.decisions.selectors.inbox import inbox_count
from runs.models import Message, Run, Ticket
from runs.operations.models.notifications import NotificationDelivery, NotificationRule
from runs.replays.models.replays import ReplayItem, ReplaySet
from runs.replays.selectors.compare import run_compare, runs_for_compare
from runs.replays.selectors.replays import replay_rows, replay_summary
from runs.replays.services.replay_flow import initial_messages
from runs.replays.services.replays import (
    replay_cancel,
    replay_create,
    replay_preview_count,
    replay_request,
)
from runs.runtime.types import ToolResult
from runs.services.execution import run_advance, runs_sweep
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import call, publish, scripted_agent, superuser
from tests.runs.helpers import drive
from tests.runs.notify_helpers import channel, notify_configured_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

ADMIN = Actor(label="ada", source="ui")
ASK_MAIL = {"default_behavior": "allow", "rules": [{"tool": "send_email", "behavior": "ask"}]}
DENY_MAIL = {"default_behavior": "allow", "rules": [{"tool": "send_email", "behavior": "deny"}]}
MAIL_AND_NOTE = [
    {
        "text": "on it",
        "tool_calls": [
            call("send_email", {"to": ["a@example.com"], "subject": "Hi", "body": "b"}),
            call("write_note", {"title": "noted", "body": "n"}),
        ],
    },
    {"text": "all done"},
]


@pytest.fixture
def every_event() -> None:
    """A channel every notification goes to (so one that a replay queued would show)."""
    NotificationRule.objects.create(channel=channel("https://h.example.com/"))


def mail_agent(**kwargs: Any) -> Any:
    return scripted_agent(
        MAIL_AND_NOTE, tools=["send_email", "write_note"], permission=ASK_MAIL, **kwargs
    )


def past_runs(agent: Any, count: int, *, reject_every: int = 0) -> list[Run]:
    """`count` finished runs of `agent`, each with its own input; their send_email
    ticket approved (rejected for every `reject_every`-th)."""
    runs = []
    for index in range(count):
        run = drive(run_start(agent=agent, messages=f"request {index}"))
        for ticket in Ticket.objects.filter(run=run, status=Ticket.Status.PENDING):
            rejected = reject_every and index % reject_every == reject_every - 1
            decision_submit(ticket=ticket, action="reject" if rejected else "approve")
        runs.append(drive(run))
        assert runs[-1].status == Run.Status.DONE
    return runs


def create(agent: Any, **body: Any) -> ReplaySet:
    return replay_create(request=replay_request({"agent_id": agent.slug, **body}), actor=ADMIN)


def replay_runs(replay_set: ReplaySet) -> list[Run]:
    return list(
        Run.objects.filter(replay_item__replay_set=replay_set).order_by("replay_item__position")
    )


def running_count(replay_set: ReplaySet | None = None) -> int:
    runs = Run.objects.filter(run_mode="replay").exclude(status=Run.Status.DONE)
    if replay_set is not None:
        runs = runs.filter(replay_item__replay_set=replay_set)
    return runs.count()


def play(replay_set: ReplaySet, *, watch: int | None = None) -> ReplaySet:
    """Play the workers until the set is finished; with `watch`, check that never more
    than `watch` replays of it are not done."""
    for _ in range(500):
        if watch is not None:
            assert running_count(replay_set) <= watch
        due = Run.objects.filter(run_mode="replay", due=True).order_by("priority", "created_at")
        run = due.first()
        if run is None:
            break
        run_advance(run_id=run.pk, worker="test-worker")
    replay_set.refresh_from_db()
    return replay_set


# --- picking ---------------------------------------------------------------------------------


def test_filters_limit_and_order_pick_the_newest_runs_replayed_oldest_first():
    agent = scripted_agent([{"text": "ok"}])
    done = [drive(run_start(agent=agent, messages=f"m{i}")) for i in range(5)]
    cancelled = run_start(agent=agent, messages="never mind")
    from runs.services.runs import run_cancel

    run_cancel(run=cancelled)
    other = scripted_agent([{"text": "ok"}])
    drive(run_start(agent=other, messages="not mine"))
    request = replay_request({"agent_id": agent.slug, "limit": 3})
    assert replay_preview_count(request) == (6, 3)
    assert replay_preview_count(
        replay_request({"agent_id": agent.slug, "filters": {"outcome": "cancelled"}})
    ) == (1, 1)
    assert replay_preview_count(
        replay_request({"agent_id": agent.slug, "filters": {"outcome": "completed"}})
    ) == (5, 5)
    later = timezone.now() + dt.timedelta(hours=1)
    assert replay_preview_count(
        replay_request({"agent_id": agent.slug, "filters": {"created_after": later.isoformat()}})
    ) == (0, 0)
    replay_set = create(agent, limit=3, filters={"outcome": "completed"}, concurrency=8)
    items = list(replay_set.items.order_by("position"))
    assert [item.original_run_id for item in items] == [run.pk for run in done[2:]]
    play(replay_set)
    assert replay_set.status == ReplaySet.Status.DONE and replay_set.finished_at
    replays = replay_runs(replay_set)
    assert [r.run_mode for r in replays] == ["replay"] * 3
    assert {r.priority for r in replays} == {255}
    assert [initial_messages(r)[0].text() for r in replays] == ["m2", "m3", "m4"]
    assert all(r.thread_id != o.thread_id for r, o in zip(replays, done[2:], strict=True))


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ({"agent_id": "nope"}, "agent"),
        ({"limit": 201}, "limit"),
        ({"limit": 0}, "limit"),
        ({"concurrency": 9}, "concurrency"),
        ({"version": "newest"}, "version"),
        ({"version": "7"}, "version 7"),
        ({"version": 0}, "version"),
        ({"version": "0"}, "version"),
        ({"version": False}, "version"),
        ({"version": True}, "version"),
        ({"version": -1}, "version"),
        ({"version": 1.5}, "version"),
        ({"version": [1]}, "version"),
        ({"version": 10**12}, "version"),
        ({"ticket_policy": "maybe"}, "ticket_policy"),
        ({"http_mode": "cached"}, "http_mode"),
        ({"filters": {"outcome": "weird"}}, "outcome"),
        ({"filters": {"created_after": "yesterday"}}, "created_after"),
        ({"filters": {"outcome": "failed"}}, "matches"),
    ],
)
def test_bad_requests_are_refused_and_change_nothing(body: dict[str, Any], word: str):
    agent = scripted_agent([{"text": "ok"}])
    drive(run_start(agent=agent, messages="hi"))
    with pytest.raises(InvalidInput) as raised:
        create(agent, **{"agent_id": agent.slug, **body})
    assert word in raised.value.message
    assert not ReplaySet.objects.exists()
    assert not Run.objects.filter(run_mode="replay").exists()


# --- versions ----------------------------------------------------------------------------------


def test_versions_latest_number_and_draft():
    agent = scripted_agent([{"text": "ok"}])
    drive(run_start(agent=agent, messages="hi"))
    v2 = publish(agent)
    assert create(agent, version="latest").version == v2
    assert create(agent, version="1").version.number == 1
    assert create(agent, version=1).version.number == 1
    assert create(agent, version=None).version == v2  # null: the latest
    agent.system_prompt = "Be brief."
    agent.save()
    draft = create(agent, version="draft")
    assert draft.version.draft and draft.version.spec["system_prompt"] == "Be brief."
    play(draft)
    assert replay_runs(draft)[0].agent_version_id == draft.version.pk


# --- dry tools and recorded http ------------------------------------------------------------


def test_side_effects_are_dry_in_replays():
    agent = scripted_agent(MAIL_AND_NOTE, tools=["send_email", "write_note"])
    original = drive(run_start(agent=agent, messages="mail them"))
    assert Note.objects.count() == 1 and len(mail.outbox) == 1
    replay_set = play(create(agent))
    replay = replay_runs(replay_set)[0]
    assert replay.status == Run.Status.DONE and replay.status_reason == original.status_reason
    assert Note.objects.count() == 1 and len(mail.outbox) == 1  # nothing more
    results = {
        e["result"]["tool_name"]: e["result"]
        for e in replay.events.filter(event_type="tool_call_done").values_list("payload", flat=True)
    }
    assert results["write_note"]["data"] == {
        "dry_run": True,
        "would": "write note",
        "title": "noted",
        "body": "n",
    }
    assert results["send_email"]["data"]["would"] == "send email"
    assert results["send_email"]["data"]["to"] == ["a@example.com"]


def test_http_get_recorded_answers_from_the_original_and_live_calls(monkeypatch):
    fetched: list[str] = []

    def fake_fetch(self: Any, url: str, *args: Any) -> ToolResult:
        fetched.append(url)
        return ToolResult.success("http_get", {"url": url, "status": 200, "body": "live"})

    monkeypatch.setattr(web.HttpGetTool, "_fetch", fake_fetch)
    script = [
        {"text": "", "tool_calls": [call("http_get", {"url": "https://example.com/a"})]},
        {"text": "read"},
    ]
    agent = scripted_agent(script, tools=["http_get"])
    drive(run_start(agent=agent, messages="read it"))
    assert fetched == ["https://example.com/a"]
    recorded = play(create(agent, http_mode="recorded"))
    answer = replay_runs(recorded)[0].events.get(event_type="tool_call_done").payload
    assert answer["result"]["data"]["body"] == "live" and fetched == ["https://example.com/a"]
    live = play(create(agent, http_mode="live"))
    assert replay_runs(live)[0].status == Run.Status.DONE
    assert len(fetched) == 2
    # another URL than the original's: no recorded answer
    agent.model.script = [
        {"text": "", "tool_calls": [call("http_get", {"url": "https://example.com/b"})]},
        {"text": "read"},
    ]
    agent.model.save()
    agent.refresh_from_db()
    other = play(create(agent, version="draft", http_mode="recorded"))
    answer = replay_runs(other)[0].events.get(event_type="tool_call_done").payload
    assert answer["result"]["message"] == "no recorded answer for https://example.com/b"
    assert len(fetched) == 2


def test_recorded_http_get_answers_keep_their_key_order_so_compare_shows_no_difference(
    monkeypatch,
):
    """The event log (jsonb on PostgreSQL) sorts an answer's keys; the replay answers in
    the order the original read, so the model reads the same text and compare agrees."""
    answer = {
        "url": "https://example.com/data",
        "status": 200,
        "headers": {"content-type": "application/json", "content-length": "17"},
        "body": '{"zeta":1,"a":2}',
        "truncated": False,
    }
    monkeypatch.setattr(
        web.HttpGetTool, "_fetch", lambda self, url, *args: ToolResult.success("http_get", answer)
    )
    script = [
        {"text": "", "tool_calls": [call("http_get", {"url": "https://example.com/data"})]},
        {"text": "read"},
    ]
    agent = scripted_agent(script, tools=["http_get"])
    original = drive(run_start(agent=agent, messages="read it"))
    monkeypatch.setattr(web.HttpGetTool, "_fetch", lambda *args: pytest.fail("fetched live"))
    replay = replay_runs(play(create(agent, http_mode="recorded")))[0]
    assert replay.status == Run.Status.DONE

    def tool_text(run: Run) -> str:
        row = Message.objects.get(produced_by_run=run, role=Message.Role.TOOL)
        return str(row.content[0]["text"])

    assert tool_text(original) == json.dumps(answer, ensure_ascii=False)
    assert tool_text(replay) == tool_text(original)
    runs = runs_for_compare([original.pk, replay.pk])
    compared = run_compare(runs[original.pk], runs[replay.pk])
    assert compared["different_steps"] == [], [
        (row["label"], row["a"], row["b"]) for row in compared["steps"] if row["different"]
    ]


# --- tickets -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("approve_all", ["approve", "approve", "approve"]),
        ("reject_all", ["reject", "reject", "reject"]),
        ("as_recorded", ["approve", "reject", "approve"]),
    ],
)
def test_ticket_policies_decide_in_the_checkpoint_nobody_sees_them(policy, expected, every_event):
    agent = mail_agent()
    past_runs(agent, 3, reject_every=2)
    assert NotificationDelivery.objects.filter(event="ticket.opened").count() == 3
    sent_before = len(mail.outbox)
    deliveries_before = NotificationDelivery.objects.count()
    replay_set = create(agent, ticket_policy=policy, concurrency=1)
    # the first replay's ticket is decided in the transaction that opens it
    first = replay_runs(replay_set)[0]
    run_advance(run_id=first.pk, worker="test-worker")
    assert not Ticket.objects.filter(run__run_mode="replay", status="pending").exists()
    assert inbox_count() == 0
    play(replay_set)
    tickets = Ticket.objects.filter(run__run_mode="replay").select_related("decision")
    tickets = tickets.order_by("run__replay_item__position")
    assert [t.decision.action for t in tickets] == expected
    assert {t.decision.actor_label for t in tickets} == {"replay policy"}
    assert {t.status for t in tickets} == {"decided"}
    assert not Run.objects.filter(run_mode="replay", open_tickets__gt=0).exists()
    assert NotificationDelivery.objects.count() == deliveries_before
    assert len(mail.outbox) == sent_before  # approved or not, the mail is dry
    rows = replay_rows(replay_set)
    assert [row.tickets for row in rows] == [1, 1, 1]


def test_as_recorded_without_a_recorded_decision_rejects():
    agent = scripted_agent(MAIL_AND_NOTE, tools=["send_email", "write_note"])
    drive(run_start(agent=agent, messages="go"))  # no ticket: nothing recorded
    agent.permission = ASK_MAIL
    agent.save()
    replay_set = play(create(agent, version="draft", ticket_policy="as_recorded"))
    ticket = Ticket.objects.get(run__replay_item__replay_set=replay_set)
    assert ticket.decision.action == "reject"
    assert "no recorded decision" in ticket.decision.comment


def test_failed_replays_notify_nobody(every_event):
    agent = scripted_agent([{"text": "ok"}])
    drive(run_start(agent=agent, messages="hi"))
    agent.model.script = [{"error": "model down"}]
    agent.model.save()
    failed = drive(run_start(agent=agent, messages="and again"))
    before = NotificationDelivery.objects.count()
    assert NotificationDelivery.objects.filter(event="run.failed").count() == 1
    replay_set = play(create(agent, version="latest", filters={"outcome": "completed"}))
    replay = replay_runs(replay_set)[0]
    assert failed.is_failed and replay.is_failed
    assert NotificationDelivery.objects.count() == before
    assert replay_set.status == ReplaySet.Status.DONE


# --- concurrency -------------------------------------------------------------------------------


def test_concurrency_of_a_set_and_of_all_sets(settings):
    settings.AWAKEN_REPLAY_CONCURRENCY = 3
    agent = scripted_agent([{"text": "ok"}])
    for index in range(6):
        drive(run_start(agent=agent, messages=f"m{index}"))
    first = create(agent, concurrency=2)
    assert running_count(first) == 2  # started with the set
    second = create(agent, concurrency=2)
    assert running_count(second) == 1  # 3 in all
    assert running_count() == 3
    # one replay ends: its transaction starts the next pending item (oldest set first)
    run = replay_runs(first)[0]
    drive(run)
    assert ReplayItem.objects.get(replay_run=run).status == ReplayItem.Status.DONE
    assert running_count() == 3 and running_count(first) == 2
    play(first, watch=2)
    play(second, watch=2)
    assert first.status == second.status == ReplaySet.Status.DONE
    assert ReplayItem.objects.filter(status="done").count() == 12


def test_sweep_repairs_lost_starts_and_lost_ends(settings):
    settings.AWAKEN_REPLAY_CONCURRENCY = 1
    agent = scripted_agent([{"text": "ok"}])
    for index in range(3):
        drive(run_start(agent=agent, messages=f"m{index}"))
    replay_set = create(agent, concurrency=1)
    first = replay_runs(replay_set)[0]
    # a start that did not happen (e.g. the limit was lowered, then raised again)
    ReplayItem.objects.filter(replay_run=first).update(status="done", replay_run=None)
    Run.objects.filter(pk=first.pk).delete()
    assert running_count(replay_set) == 0
    assert runs_sweep()["replays_repaired"] == 1
    assert running_count(replay_set) == 1
    # an item whose replay ended without it knowing
    second = replay_runs(replay_set)[0]
    drive(second)
    ReplayItem.objects.filter(replay_run=second).update(status="running")
    ReplayItem.objects.filter(replay_set=replay_set, status="running").exclude(
        replay_run=second
    ).update(status="pending", replay_run=None)
    Run.objects.filter(replay_item__replay_set=replay_set).exclude(pk=second.pk).exclude(
        status="done"
    ).delete()
    assert runs_sweep()["replays_repaired"] >= 2  # the stale item, and the next start
    play(replay_set)
    assert replay_set.status == ReplaySet.Status.DONE


def test_cancel_skips_pending_and_cancels_running():
    agent = scripted_agent([{"text": "ok"}])
    for index in range(4):
        drive(run_start(agent=agent, messages=f"m{index}"))
    replay_set = create(agent, concurrency=2)
    cancelled = replay_cancel(replay_set=replay_set, actor=ADMIN)
    assert cancelled.status == ReplaySet.Status.CANCELLED and cancelled.finished_at
    statuses = list(replay_set.items.order_by("position").values_list("status", flat=True))
    assert statuses == ["done", "done", "skipped", "skipped"]
    assert {r.status_reason for r in replay_runs(replay_set)} == {"cancelled"}
    with pytest.raises(IllegalTransition):
        replay_cancel(replay_set=replay_set, actor=ADMIN)
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"replay.create", "replay.cancel"} <= actions


def test_audit_of_creation_names_the_version_and_the_filters():
    agent = scripted_agent([{"text": "ok"}])
    drive(run_start(agent=agent, messages="hi"))
    replay_set = create(agent, filters={"outcome": "completed"}, limit=5)
    entry = AuditEntry.objects.get(action="replay.create")
    assert entry.target_id == str(replay_set.pk)
    assert entry.after["runs"] == 1 and entry.after["filters"]["outcome"] == "completed"
    assert entry.actor_label == "ada"


# --- the acceptance scenario -------------------------------------------------------------------


def demo_agent(**kwargs: Any) -> Any:
    """An agent on the scripted model's demo policy (no script): it emails when asked to
    email, notes when asked to note, asking before each email (ASK_MAIL)."""
    return scripted_agent([], tools=["send_email", "write_note"], permission=ASK_MAIL, **kwargs)


ASKS = [
    f"email bob{index}@example.com the invoice" if index % 5 < 3 else f"note the order {index}"
    for index in range(20)
]


def test_twenty_runs_replayed_on_a_draft_denying_send_email(settings, monkeypatch):
    monkeypatch.setattr(scripted, "DEMO_WORD_DELAY", 0)
    settings.AWAKEN_REPLAY_CONCURRENCY = 2
    agent = demo_agent()
    originals = []
    for text in ASKS:
        run = drive(run_start(agent=agent, messages=text))
        for ticket in Ticket.objects.filter(run=run, status=Ticket.Status.PENDING):
            decision_submit(ticket=ticket, action="approve")
        originals.append(drive(run))
    assert {run.status_reason for run in originals} == {"natural"}
    notes, sent = Note.objects.count(), len(mail.outbox)
    assert notes == 8 and sent == 12
    agent.permission = DENY_MAIL
    agent.save()
    replay_set = create(
        agent, version="draft", limit=20, ticket_policy="as_recorded", concurrency=2
    )
    play(replay_set, watch=2)
    assert replay_set.status == ReplaySet.Status.DONE
    assert Note.objects.count() == notes and len(mail.outbox) == sent  # nothing written
    rows = replay_rows(replay_set)
    assert [row.original.pk for row in rows] == [run.pk for run in originals]
    # the runs that emailed end blocked on the draft: their outcome changed
    assert [row.changed for row in rows] == ["email" in text for text in ASKS]
    for row in rows:  # the draft offers no send_email: the model cannot email
        assert "send_email" not in row.replay_summary["tools_used"]
        assert row.replay_summary["outcome"] == "completed"
    assert all(row.tickets == 0 for row in rows)  # the draft raises no ticket
    assert [row.original_summary["tickets"] for row in rows] == [
        int("email" in text) for text in ASKS
    ]
    summary = replay_summary(replay_set, rows)
    assert summary["changed"] == 12 and summary["done"] == 20 and summary["total"] == 20
    assert summary["progress_percent"] == 100
    assert superuser().has_perm("replays.replay_runs")
