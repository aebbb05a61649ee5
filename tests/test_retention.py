"""Retention: which run trees go, what goes with them, what stays, the archive, batches,
the audit entry, the command and the beat task; on PostgreSQL, the lock timeout."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import threading
import time
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.utils import timezone

from agents.models import Note
from common.audit import Actor
from common.models import AuditEntry
from runs.models import Decision, Message, Run, RunEvent, Thread, Ticket, ToolCall
from runs.operations.services import retention, retention_links
from runs.operations.services.retention import RetentionError, prune_runs
from runs.operations.tasks import prune_old_runs
from runs.services import stats
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, call, scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

OLD = 40  # days
KEEP = dt.timedelta(days=30)


def age(run: Run, days: float) -> Run:
    """Move a run (and its child runs) into the past, as time would."""
    moment = timezone.now() - dt.timedelta(days=days)
    Run.objects.filter(pk=run.pk).update(
        created_at=moment - dt.timedelta(minutes=1),
        finished_at=moment if run.finished_at or run.status == Run.Status.DONE else None,
    )
    run.refresh_from_db()
    return run


def done_run(text: str = "hi there", thread: Thread | None = None, days: float = OLD) -> Run:
    agent = scripted_agent([{"text": text}])
    run = drive(run_start(agent=agent, messages="hello", thread=thread))
    assert run.status == Run.Status.DONE
    return age(run, days)


def approved_run(days: float = OLD) -> Run:
    """A run with a tool call, its ticket, the decision, a note and audit entries."""
    agent = scripted_agent(
        [
            {"text": "noting", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
            {"text": "all done"},
        ],
        permission=APPROVAL,
    )
    run = drive(run_start(agent=agent, messages="write it down", actor=Actor(label="ann")))
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="approve", comment="ok", actor=Actor(label="ann"))
    run = drive(run)
    assert run.status == Run.Status.DONE and Note.objects.filter(run=run).exists()
    return age(run, days)


def add_run(
    like: Run,
    *,
    status: str = Run.Status.DONE,
    days: float = OLD,
    parent: Run | None = None,
    retry_of: Run | None = None,
    thread: Thread | None = None,
) -> Run:
    """A run row with one event, without executing it (children, retries, odd states)."""
    moment = timezone.now() - dt.timedelta(days=days)
    if thread is None:
        thread = Thread.objects.create(parent_thread_id=parent.thread_id if parent else None)
    run = Run.objects.create(
        thread=thread,
        agent_id=like.agent_id,
        agent_version_id=like.agent_version_id,
        parent_run=parent,
        retry_of=retry_of,
        origin="subagent" if parent else "user",
        status=status,
        status_reason="natural" if status == Run.Status.DONE else "",
        created_at=moment - dt.timedelta(minutes=1),
        finished_at=moment if status == Run.Status.DONE else None,
        last_event_seq=1,
    )
    RunEvent.objects.create(run=run, seq=1, event_type="run_start", payload={"x": 1})
    return run


def exists(run: Run) -> bool:
    return Run.objects.filter(pk=run.pk).exists()


def snapshot() -> dict[str, int]:
    models = (Run, Thread, Message, RunEvent, ToolCall, Ticket, Decision, AuditEntry, Note)
    return {model.__name__: model.objects.count() for model in models}


def prune(**kwargs: Any) -> retention.PruneResult:
    return prune_runs(**{"older_than": KEEP, "pause": 0, **kwargs})


def test_only_old_done_trees_go_and_take_their_rows_with_them():
    gone = approved_run()
    gone_thread = gone.thread_id
    gone_tool_calls = ToolCall.objects.filter(run=gone).count()
    assert gone_tool_calls and Decision.objects.filter(ticket__run=gone).exists()
    audit_ids = list(AuditEntry.objects.filter(run=gone).values_list("pk", flat=True))
    assert audit_ids
    recent = done_run(days=1)
    waiting = add_run(gone, status=Run.Status.WAITING)
    running = add_run(gone, status=Run.Status.RUNNING)
    busy_parent = add_run(gone)
    busy_child = add_run(gone, parent=busy_parent, status=Run.Status.RUNNING)
    old_parent = add_run(gone)
    old_child = add_run(gone, parent=old_parent)
    old_grandchild = add_run(gone, parent=old_child)
    retried = add_run(gone)
    add_run(gone, retry_of=retried, status=Run.Status.WAITING, days=1)
    unfinished_retry = add_run(gone, days=OLD - 1)  # a done retry whose own retry waits
    add_run(gone, retry_of=unfinished_retry, status=Run.Status.CREATED)
    before = snapshot()

    result = prune()

    removed = [gone, old_parent, old_child, old_grandchild]
    assert not any(exists(run) for run in removed)
    kept = [recent, waiting, running, busy_parent, busy_child, retried, unfinished_retry]
    assert all(exists(run) for run in kept)
    assert result.runs == 4 and result.skipped == 3  # busy_parent, retried, unfinished_retry
    assert result.complete and result.contended == 0 and result.batches == 1
    assert not Thread.objects.filter(pk=gone_thread).exists()
    assert not Message.objects.filter(thread_id=gone_thread).exists()
    assert not RunEvent.objects.filter(run_id__in=[r.pk for r in removed]).exists()
    assert not ToolCall.objects.filter(run_id=gone.pk).exists()
    assert not Ticket.objects.filter(run_id=gone.pk).exists()
    # the record stays, unlinked
    assert AuditEntry.objects.filter(pk__in=audit_ids, run__isnull=True).count() == len(audit_ids)
    assert Note.objects.filter(run__isnull=True).count() == 1
    after = snapshot()
    assert before["Run"] - after["Run"] == result.runs
    assert before["Thread"] - after["Thread"] == result.threads == 4
    assert before["Message"] - after["Message"] == result.messages > 0
    assert before["RunEvent"] - after["RunEvent"] == result.events > 0
    assert before["ToolCall"] - after["ToolCall"] == result.tool_calls == gone_tool_calls
    assert before["Ticket"] - after["Ticket"] == result.tickets == 1
    assert before["Decision"] - after["Decision"] == result.decisions == 1
    assert after["AuditEntry"] == before["AuditEntry"] + 1  # the prune's own entry
    assert after["Note"] == before["Note"]


def test_a_thread_with_a_newer_run_keeps_its_messages():
    first = done_run("first answer")
    second = done_run("second answer", thread=first.thread, days=1)
    thread = first.thread
    messages = list(Message.objects.filter(thread=thread).values_list("pk", flat=True))
    produced = Message.objects.filter(produced_by_run=first).count()
    assert produced

    result = prune()

    assert not exists(first) and exists(second)
    assert result.threads == 0 and result.messages == 0
    assert list(Message.objects.filter(thread=thread).values_list("pk", flat=True)) == messages
    assert Message.objects.filter(produced_by_run__isnull=True, thread=thread).count() >= produced
    thread.refresh_from_db()
    assert thread.latest_run_id == second.pk

    # once the newer run is old too, the thread and its messages go with it
    age(second, OLD)
    result = prune()
    assert result.runs == 1 and result.threads == 1 and result.messages == len(messages)
    assert not Thread.objects.filter(pk=thread.pk).exists()


def test_a_thread_goes_when_its_runs_span_batches():
    first = done_run("one")
    second = done_run("two", thread=first.thread)
    Run.objects.filter(pk=second.pk).update(created_at=first.created_at + dt.timedelta(seconds=1))
    batches: list[retention.BatchResult] = []

    result = prune(batch_size=1, progress=batches.append)

    assert [(b.runs, b.threads) for b in batches] == [(1, 0), (1, 1)]
    assert result.threads == 1 and not Thread.objects.filter(pk=first.thread_id).exists()


def test_dry_run_changes_nothing_and_counts_what_goes(tmp_path):
    runs = [approved_run(), done_run()]
    done_run(thread=runs[1].thread)  # two runs on one thread
    add_run(runs[0], parent=add_run(runs[0]))
    add_run(runs[0], status=Run.Status.WAITING)
    before = snapshot()

    dry = prune(dry_run=True, batch_size=2, archive_dir=tmp_path / "archive")

    assert snapshot() == before
    assert not AuditEntry.objects.filter(action="runs.prune").exists()
    assert dry.archive_path is None and not (tmp_path / "archive").exists()
    real = prune(batch_size=2)
    names = ("runs", "threads", "messages", "events", "tool_calls", "tickets", "decisions")
    assert [getattr(dry, n) for n in names] == [getattr(real, n) for n in names]
    assert dry.runs == 5 and dry.skipped == real.skipped == 0


def test_the_archive_holds_every_removed_row_once(tmp_path):
    approved = approved_run()
    other = done_run("bye")
    newer = done_run("kept", thread=other.thread, days=1)
    events = {
        str(run.pk): list(RunEvent.objects.filter(run=run).order_by("seq").values("seq", "payload"))
        for run in (approved, other)
    }
    messages = list(
        Message.objects.filter(thread=approved.thread).order_by("seq").values("seq", "content")
    )
    decision = Decision.objects.get(ticket__run=approved)

    result = prune(archive_dir=tmp_path)

    assert result.runs == 2 and exists(newer)
    [path] = tmp_path.iterdir()
    assert path == result.archive_path and path.name.startswith("runs-")
    assert path.name.endswith(".jsonl.gz")
    with gzip.open(path, "rt") as handle:
        lines = [json.loads(line) for line in handle]
    by_run = {line["run"]["id"]: line for line in lines}
    assert set(by_run) == {str(approved.pk), str(other.pk)}
    for run_id, line in by_run.items():
        assert [{"seq": e["seq"], "payload": e["payload"]} for e in line["events"]] == (
            events[run_id]
        )
    line = by_run[str(approved.pk)]
    assert line["run"]["status"] == "done" and line["run"]["final_output"] == "all done"
    assert line["thread"]["id"] == str(approved.thread_id)
    assert [{"seq": m["seq"], "content": m["content"]} for m in line["messages"]] == messages
    assert [t["tool_name"] for t in line["tool_calls"]] == ["write_note"]
    assert [t["tool_name"] for t in line["tickets"]] == ["write_note"]
    assert [(d["id"], d["action"], d["comment"]) for d in line["decisions"]] == [
        (str(decision.pk), "approve", "ok")
    ]
    # the kept thread's messages stay in the database, not in the archive
    assert by_run[str(other.pk)]["thread"] is None and by_run[str(other.pk)]["messages"] == []


def test_no_archive_file_when_nothing_goes(tmp_path):
    done_run(days=1)
    result = prune(archive_dir=tmp_path)
    assert result.runs == 0 and result.archive_path is None
    assert list(tmp_path.iterdir()) == []


def test_batches_follow_the_batch_size_and_the_budget():
    first = done_run()
    for _ in range(4):
        add_run(first)
    seen: list[int] = []

    out_of_time = prune(batch_size=2, max_seconds=0)
    assert (out_of_time.runs, out_of_time.batches, out_of_time.complete) == (0, 0, False)
    partial = prune(batch_size=2, max_batches=1, progress=lambda b: seen.append(b.runs))
    assert (partial.runs, partial.batches, partial.complete) == (2, 1, False)
    assert Run.objects.count() == 3

    rest = prune(batch_size=2, progress=lambda b: seen.append(b.runs))
    assert (rest.runs, rest.batches, rest.complete) == (3, 2, True)
    assert seen == [2, 2, 1]
    assert Run.objects.count() == 0


def test_each_invocation_is_audited():
    done_run()
    result = prune(actor=Actor(label="ops", source="cli"))
    entry = AuditEntry.objects.get(action="runs.prune")
    assert (entry.actor_label, entry.source, entry.target_type) == ("ops", "cli", "retention")
    assert entry.target_id == result.cutoff.isoformat(timespec="seconds")
    assert entry.run_id is None
    assert entry.after["runs"] == 1 and entry.after["threads"] == 1
    assert entry.after["complete"] is True and "error" not in entry.after

    prune()  # nothing left: still recorded, by the system
    latest = AuditEntry.objects.filter(action="runs.prune").first()
    assert latest.source == "system" and latest.after["runs"] == 0


def test_counters_forget_the_runs_before_they_are_deleted(monkeypatch):

    parent = done_run()
    child = add_run(parent, parent=parent)
    calls: list[tuple[set[Any], int]] = []
    real = stats.removal

    def forget(run_ids: list[Any]) -> Any:
        assert connection.in_atomic_block
        calls.append((set(run_ids), Run.objects.filter(pk__in=run_ids).count()))
        return real(run_ids)

    monkeypatch.setattr(stats, "removal", forget)
    prune()
    assert calls == [({parent.pk, child.pk}, 2)]


def test_a_batch_that_meets_busy_rows_is_retried_and_archived_once(tmp_path, monkeypatch):
    done_run()
    done_run()
    real = stats.removal
    attempts: list[int] = []

    def flaky(ids: list[Any]) -> None:
        attempts.append(len(ids))
        if len(attempts) == 1:
            raise retention._Busy("test: busy")
        return real(ids)

    monkeypatch.setattr(stats, "removal", flaky)
    result = prune(archive_dir=tmp_path)
    assert attempts == [2, 2] and result.runs == 2 and result.contended == 0
    with gzip.open(result.archive_path, "rt") as handle:
        assert len(handle.readlines()) == 2


def test_a_child_started_while_the_batch_plans_keeps_the_tree(monkeypatch):
    root = done_run()
    child = add_run(root, parent=root, status=Run.Status.RUNNING)
    real = retention._plan
    calls: list[int] = []

    def plan_before_the_child(roots: Any, cutoff: Any) -> Any:
        # The first plan reads the tree as it was just before the child was started
        # (another transaction's child cannot be made here: SQLite has one connection).
        calls.append(1)
        if len(calls) > 1:
            return real(roots, cutoff)
        Run.objects.filter(pk=child.pk).update(parent_run=None)
        planned = real(roots, cutoff)
        Run.objects.filter(pk=child.pk).update(parent_run=root)
        return planned

    monkeypatch.setattr(retention, "_plan", plan_before_the_child)
    result = prune()
    assert len(calls) == 2  # the locked re-check sent the first plan back
    assert (result.runs, result.skipped, result.contended) == (0, 1, 0)
    assert exists(root) and exists(child)


def test_a_batch_that_stays_busy_is_left_for_later(monkeypatch):
    done_run()
    monkeypatch.setattr(retention, "LOCK_RETRIES", 2)
    monkeypatch.setattr(retention.time, "sleep", lambda seconds: None)

    def busy(ids: list[Any]) -> None:
        raise retention._Busy("test: busy")

    monkeypatch.setattr(stats, "removal", busy)
    result = prune()
    assert (result.runs, result.contended, result.complete) == (0, 1, False)
    assert Run.objects.count() == 1


def test_a_failure_is_audited_and_raised(monkeypatch):
    done_run()

    def broken(ids: list[Any]) -> None:
        raise RuntimeError("counters are down")

    monkeypatch.setattr(stats, "removal", broken)
    with pytest.raises(RuntimeError):
        prune()
    assert Run.objects.count() == 1
    entry = AuditEntry.objects.get(action="runs.prune")
    assert entry.after["runs"] == 0 and "counters are down" in entry.after["error"]


def test_an_unknown_link_into_the_deleted_tables_stops_retention(monkeypatch):
    done_run()
    handled = retention_links.HANDLED - {("runs.RunEvent", "run")}
    monkeypatch.setattr(retention_links, "HANDLED", handled)
    with pytest.raises(retention_links.RetentionUnsafe, match=r"runs\.RunEvent\.run"):
        prune()
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"older_than": dt.timedelta(0)}, "positive"),
        ({"batch_size": 0}, "batch size"),
        ({"pause": -1}, "pause"),
    ],
)
def test_bad_input_is_refused(kwargs, message):
    with pytest.raises(RetentionError, match=message):
        prune(**kwargs)


def test_the_command_prints_batches_and_a_summary(tmp_path):
    done_run()
    add_run(done_run())
    out = StringIO()
    call_command(
        "prune_runs",
        "--older-than-days",
        "30",
        "--batch-size",
        "1",
        "--pause",
        "0",
        "--archive-dir",
        str(tmp_path),
        stdout=out,
    )
    text = out.getvalue()
    assert "batch 1: removed 1 runs" in text and "batch 3: removed 1 runs" in text
    assert "removed 3 runs finished before" in text and "3 batches" in text
    assert f"archive: {tmp_path}" in text
    assert Run.objects.count() == 0
    assert AuditEntry.objects.get(action="runs.prune").source == "cli"


def test_the_command_dry_run_says_what_would_go():
    done_run()
    out = StringIO()
    call_command("prune_runs", "--older-than-days", "30", "--dry-run", stdout=out)
    assert "dry run: would remove 1 runs" in out.getvalue()
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--older-than-days", "0"],
        ["--older-than-days", "30", "--batch-size", "0"],
        ["--older-than-days", "30", "--archive-dir", "FILE/sub"],
    ],
)
def test_the_command_refuses_bad_input_with_exit_code_2(args, tmp_path):
    (tmp_path / "FILE").write_text("not a directory")
    args = [a.replace("FILE", str(tmp_path / "FILE")) for a in args]
    done_run()
    with pytest.raises(CommandError) as error:
        call_command("prune_runs", *args, stdout=StringIO())
    assert error.value.returncode == 2
    assert Run.objects.count() == 1


def test_the_beat_task_does_nothing_while_disabled(settings):
    done_run()
    settings.AWAKEN_RETENTION_DAYS = 0
    assert prune_old_runs() is None
    assert Run.objects.count() == 1
    assert not AuditEntry.objects.filter(action="runs.prune").exists()

    settings.AWAKEN_RETENTION_DAYS = 60
    assert prune_old_runs()["runs"] == 0
    settings.AWAKEN_RETENTION_DAYS = 30
    counts = prune_old_runs()
    assert counts["runs"] == 1 and counts["complete"] is True
    assert Run.objects.count() == 0
    assert AuditEntry.objects.filter(action="runs.prune").first().source == "system"


def test_the_beat_schedule_runs_retention_daily():
    entry = django_settings.CELERY_BEAT_SCHEDULE["runs-prune"]
    assert entry["task"] == "runs.prune_old_runs" == prune_old_runs.name
    assert entry["schedule"].hour == {3} and entry["schedule"].minute == {17}


# --- PostgreSQL -----------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # each batch commits for real
def test_each_batch_sets_its_own_lock_timeout(monkeypatch):
    done_run()
    seen: list[str] = []
    real = stats.removal

    def record(ids: list[Any]) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SHOW lock_timeout")
            seen.append(cursor.fetchone()[0])
        return real(ids)

    monkeypatch.setattr(stats, "removal", record)
    prune(lock_timeout_ms=150)
    assert seen == ["150ms"]
    with connection.cursor() as cursor:  # SET LOCAL: gone with the batch's transaction
        cursor.execute("SHOW lock_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_batch_gives_up_on_a_locked_row_instead_of_waiting():
    run = done_run()
    locked = threading.Event()
    release = threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Thread.objects.select_for_update().get(pk=run.thread_id)
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        result = prune(lock_timeout_ms=100)
        took = time.monotonic() - started
    finally:
        release.set()
        holder.join(30)
    # LOCK_RETRIES tries of 100 ms each plus the back-off pauses, far from the 30 s hold
    assert (result.runs, result.contended, result.complete) == (0, 1, False), result
    assert took < 5, took
    assert exists(run)
    assert prune().runs == 1  # free again: the next invocation takes it


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_thousand_run_batches_stay_short(capsys):
    """Seeds old runs (two events, one message each), prunes them in batches of 1,000 and
    reports the seconds per batch: `pytest -s -k thousand_run` prints them."""
    template = done_run()
    count = 3000
    moment = timezone.now() - dt.timedelta(days=OLD)
    threads = Thread.objects.bulk_create([Thread(created_at=moment) for _ in range(count)])
    runs = Run.objects.bulk_create(
        [
            Run(
                thread=thread,
                agent_id=template.agent_id,
                agent_version_id=template.agent_version_id,
                status=Run.Status.DONE,
                status_reason="natural",
                created_at=moment,
                finished_at=moment,
                last_event_seq=2,
            )
            for thread in threads
        ]
    )
    RunEvent.objects.bulk_create(
        [
            RunEvent(
                run=run, seq=seq, event_type="step_end", payload={"seq": seq, "pad": "x" * 200}
            )
            for run in runs
            for seq in (1, 2)
        ]
    )
    Message.objects.bulk_create(
        [
            Message(thread=thread, seq=1, role="user", content=[{"type": "text", "text": "hi"}])
            for thread in threads
        ]
    )
    batches: list[retention.BatchResult] = []
    result = prune(batch_size=1000, progress=batches.append)
    assert result.runs == count + 1 and result.events >= 2 * count
    with capsys.disabled():
        print(
            "\nretention: "
            + ", ".join(f"{b.runs} runs/{b.events} events in {b.seconds:.3f} s" for b in batches)
        )
    # generous: two shared cores; the figure of interest is printed above
    assert max(b.seconds for b in batches) < 2.0
