"""Schedules (runs/operations/services/schedules.py, docs/schedules.md): next times in a time zone
across clock changes, exactly-once firing, pause / resume / run now, thread policies,
catch-up after downtime, validation, and the admin."""

from __future__ import annotations

import datetime as dt
import threading
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.urls import reverse

from common.audit import Actor
from common.errors import IllegalTransition, InvalidInput
from common.models import AuditEntry
from runs.models import Run, Schedule
from runs.operations.services import schedules as svc
from runs.operations.services.schedule_rules import INTERVAL_MAX
from runs.services.submission import priority_error
from tests.factories import AgentFactory, scripted_agent, user_with_role
from tests.runs.helpers import drive
from tests.runs.helpers import schedule_form as form_data

pytestmark = pytest.mark.django_db

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")
ADMIN = Actor(label="tester", source="ui")
XSS = "<img src=x onerror=alert(1)>"


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def make(
    *,
    name: str = "nightly",
    kind: str = "interval",
    interval: int | None = 600,
    cron: str = "",
    tz: str = "UTC",
    next_run_at: dt.datetime | None = None,
    **fields,
) -> Schedule:
    """A saved schedule of a scripted agent that answers "ok", due at `next_run_at`."""
    if "agent" not in fields:
        fields["agent"] = scripted_agent([{"text": "ok"}])
    schedule = Schedule(
        name=name,
        kind=kind,
        interval_seconds=interval if kind == "interval" else None,
        cron=cron,
        timezone=tz,
        message=fields.pop("message", "summarise the night"),
        **fields,
    )
    svc.schedule_plan(schedule)
    if next_run_at is not None:
        schedule.next_run_at = next_run_at
    schedule.save()
    return schedule


def runs_of(schedule: Schedule) -> list[Run]:
    return list(Run.objects.filter(schedule=schedule).order_by("created_at"))


def fresh(schedule: Schedule) -> Schedule:
    return Schedule.objects.get(pk=schedule.pk)


def series(expression: str, zone: ZoneInfo, after: dt.datetime, count: int) -> list[str]:
    schedule = Schedule(kind="cron", cron=expression, timezone=zone.key)
    times = []
    for _ in range(count):
        after = svc.next_after(schedule, after)
        times.append(after.strftime("%m-%d %H:%M"))
    return times


# --- next times -----------------------------------------------------------------------------


def test_a_cron_schedule_keeps_its_wall_clock_time_across_the_spring_clock_change():
    # 09:00 in Berlin: 08:00 UTC in winter (CET), 07:00 UTC from 30 March 2025 (CEST)
    assert series("0 9 * * *", BERLIN, at(2025, 3, 28, 12), 3) == [
        "03-29 08:00",
        "03-30 07:00",
        "03-31 07:00",
    ]


def test_a_time_the_clocks_skip_fires_as_much_later_and_a_repeated_time_once():
    # 02:30 does not exist on 30 March 2025 in Berlin: it fires at 03:30 CEST (01:30 UTC)
    assert series("30 2 * * *", BERLIN, at(2025, 3, 29, 12), 2) == ["03-30 01:30", "03-31 00:30"]
    # 02:30 occurs twice on 26 October 2025: it fires at the first (CEST, 00:30 UTC) only
    assert series("30 2 * * *", BERLIN, at(2025, 10, 25, 12), 2) == ["10-26 00:30", "10-27 01:30"]


def test_an_hourly_cron_keeps_its_rhythm_in_real_time_when_the_clocks_go_back():
    assert series("0 * * * *", BERLIN, at(2025, 10, 25, 22, 30), 5) == [
        "10-25 23:00",
        "10-26 00:00",  # 02:00 CEST
        "10-26 01:00",  # 02:00 CET, the repeated hour
        "10-26 02:00",
        "10-26 03:00",
    ]
    assert series("*/30 * * * *", BERLIN, at(2025, 3, 30, 0, 10), 4) == [
        "03-30 00:30",
        "03-30 01:00",  # 03:00 CEST: 02:00 and 02:30 do not exist that night
        "03-30 01:30",
        "03-30 02:00",
    ]


def test_new_york_weekday_mornings():
    new_york = ZoneInfo("America/New_York")
    # Friday 7 March 2025 is EST (UTC-5); Monday 10 March is EDT (UTC-4)
    assert series("30 8 * * 1-5", new_york, at(2025, 3, 7, 12), 2) == [
        "03-07 13:30",
        "03-10 12:30",
    ]


def test_an_interval_schedule_fires_every_n_seconds_from_when_it_was_enabled():
    schedule = Schedule(kind="interval", interval_seconds=10, timezone="UTC", message="go")
    now = at(2025, 1, 10, 12, 0, 0) + dt.timedelta(microseconds=700)
    assert svc.first_slot(schedule, now) == at(2025, 1, 10, 12, 0, 10)
    due = svc.due_at(schedule, at(2025, 1, 10, 12, 0, 10), at(2025, 1, 10, 12, 0, 11))
    assert (due.missed, due.following) == (0, at(2025, 1, 10, 12, 0, 20))


def test_the_grace_is_half_the_period_between_five_seconds_and_a_minute():
    def grace(seconds: int) -> float:
        schedule = Schedule(kind="interval", interval_seconds=seconds)
        return svc.grace(schedule, at(2025, 1, 1)).total_seconds()

    assert [grace(2), grace(10), grace(30), grace(3600)] == [5, 5, 15, 60]
    cron = Schedule(kind="cron", cron="*/5 * * * *", timezone="UTC")
    assert svc.grace(cron, at(2025, 1, 1)).total_seconds() == 60


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"cron": "61 * * * *"}, "cron", "Invalid cron expression '61 * * * *'"),
        ({"cron": "0 0 * * * *"}, "cron", "has 6"),
        ({"cron": ""}, "cron", "Enter a cron expression"),
        ({"cron": "0 0 31 2 *"}, "cron", "never matches a date"),
        ({"timezone": "Mars/Olympus"}, "timezone", "Unknown time zone 'Mars/Olympus'"),
        ({"kind": "interval", "interval_seconds": None}, "interval_seconds", "number of seconds"),
        ({"message": "   "}, "message", "The message is empty"),
    ],
)
def test_invalid_schedules_are_refused_with_a_message_on_the_field(fields, field, message):
    schedule = Schedule(
        kind="cron", cron="*/5 * * * *", timezone="Europe/Berlin", message="go", **{}
    )
    for name, value in fields.items():
        setattr(schedule, name, value)
    with pytest.raises(InvalidInput) as raised:
        svc.schedule_validate(schedule)
    assert message in raised.value.details[field][0]
    assert message in raised.value.message


def test_the_configuration_rules_refuse_a_name_taken_a_bad_choice_a_priority_and_a_huge_interval():
    taken = make(name="taken")
    schedule = Schedule(
        name="taken",
        agent=taken.agent,
        kind="interval",
        interval_seconds=INTERVAL_MAX + 1,
        timezone="UTC",
        message="go",
        thread_policy="sometimes",
        catch_up="always",
        priority=256,
    )
    errors = svc.schedule_config_errors(schedule)
    assert errors == {
        "name": "A schedule named 'taken' exists already: choose another name.",
        "interval_seconds": f"An interval is at most {INTERVAL_MAX} seconds (about 68 years).",
        "thread_policy": "Thread policy must be one of new, same, not 'sometimes'.",
        "catch_up": "Catch up must be one of skip, once, not 'always'.",
        "priority": priority_error(256),  # the submission's one priority rule
    }
    assert "name" not in svc.schedule_config_errors(taken)  # its own name is not taken
    with pytest.raises(InvalidInput, match="exists already"):
        svc.schedule_save(schedule, ADMIN)


def test_pausing_a_paused_schedule_or_resuming_a_running_one_changes_and_records_nothing():
    schedule = make()
    planned = schedule.next_run_at
    assert svc.schedule_resume(schedule, ADMIN, now=at(2031, 1, 1)).next_run_at == planned
    svc.schedule_pause(schedule, ADMIN)
    again = svc.schedule_pause(fresh(schedule), ADMIN)
    assert again.enabled is False and fresh(schedule).enabled is False
    actions = AuditEntry.objects.filter(target_id=str(schedule.pk)).values_list("action", flat=True)
    assert list(actions) == ["schedule.pause"]


def test_a_valid_schedule_passes():
    schedule = Schedule(kind="cron", cron="*/5 9-17 * * 1-5", timezone="Asia/Kolkata", message="x")
    svc.schedule_validate(schedule)
    assert svc.schedule_errors(schedule) == {}


# --- firing ---------------------------------------------------------------------------------


def test_a_due_schedule_starts_a_scheduled_run_and_moves_to_its_next_slot():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot, priority=7)
    counts = svc.schedules_fire_due(now=slot + dt.timedelta(seconds=0.4))
    assert counts["started"] == 1
    (run,) = runs_of(schedule)
    assert (run.run_mode, run.schedule_id, run.priority) == ("scheduled", schedule.pk, 7)
    assert run.thread.title == "summarise the night"
    schedule = fresh(schedule)
    assert schedule.next_run_at == slot + dt.timedelta(minutes=10)
    assert schedule.last_run_at == slot
    assert schedule.last_run_id == run.pk
    assert schedule.last_outcome == f"started run {run.pk}"
    entry = AuditEntry.objects.get(action="run.start", target_id=str(run.pk))
    assert (entry.actor_label, entry.source) == ("schedule nightly", "schedule")
    assert entry.after["run_mode"] == "scheduled"
    assert drive(run).final_output == "ok"


def test_a_slot_not_yet_due_does_not_fire():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot)
    assert svc.schedules_fire_due(now=slot - dt.timedelta(seconds=1))["due"] == 0
    assert runs_of(schedule) == []


def test_two_tickers_firing_the_same_slot_start_one_run():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot)
    now = slot + dt.timedelta(seconds=0.5)
    stale_a, stale_b = fresh(schedule), fresh(schedule)  # both read the row before firing
    assert svc.schedule_fire(stale_a, now) is not None
    assert svc.schedule_fire(stale_b, now) is None  # the guarded update finds the slot moved
    assert svc.schedules_fire_due(now=now) == {
        "due": 0,
        "started": 0,
        "skipped": 0,
        "failed": 0,
        "taken": 0,
    }
    assert len(runs_of(schedule)) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_threads_racing_for_one_slot_start_one_run():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot)
    barrier = threading.Barrier(8)
    results: list[dict[str, int]] = []

    def tick() -> None:
        try:
            barrier.wait()
            results.append(svc.schedules_fire_due(now=slot + dt.timedelta(seconds=1)))
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert sum(r["started"] for r in results) == 1, results
    assert len(runs_of(schedule)) == 1


def test_a_paused_schedule_does_not_fire_and_resuming_plans_from_now():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot)
    paused = svc.schedule_pause(schedule, ADMIN)
    assert (paused.enabled, paused.next_run_at) == (False, None)
    assert svc.schedules_fire_due(now=slot + dt.timedelta(days=2))["due"] == 0
    assert svc.schedule_fire(schedule, slot + dt.timedelta(seconds=1)) is None  # stale copy
    assert runs_of(schedule) == []
    resume_at = at(2025, 1, 12, 8, 0, 3)
    resumed = svc.schedule_resume(schedule, ADMIN, now=resume_at)
    assert resumed.enabled and resumed.next_run_at == resume_at + dt.timedelta(minutes=10)
    svc.schedules_fire_due(now=resumed.next_run_at)
    assert len(runs_of(schedule)) == 1
    actions = list(
        AuditEntry.objects.filter(target_id=str(schedule.pk)).values_list("action", flat=True)
    )
    assert sorted(actions) == ["schedule.pause", "schedule.resume"]


def test_run_now_starts_a_run_and_leaves_the_slots_alone_even_when_paused():
    slot = at(2030, 1, 10, 12, 0)
    schedule = make(next_run_at=slot)
    run = svc.schedule_run_now(schedule, ADMIN)
    assert (run.run_mode, run.schedule_id) == ("scheduled", schedule.pk)
    current = fresh(schedule)
    assert (current.next_run_at, current.last_run_at, current.last_run_id) == (slot, None, run.pk)
    entry = AuditEntry.objects.get(action="schedule.run_now")
    assert (entry.actor_label, entry.run_id, entry.after["run"]) == ("tester", run.pk, str(run.pk))
    svc.schedule_pause(schedule, ADMIN)
    assert svc.schedule_run_now(fresh(schedule), ADMIN).pk != run.pk
    assert len(runs_of(schedule)) == 2


def test_thread_policy_new_starts_each_run_on_its_own_thread():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot, thread_policy="new")
    svc.schedules_fire_due(now=slot)
    svc.schedules_fire_due(now=slot + dt.timedelta(minutes=10))
    first, second = runs_of(schedule)
    assert first.thread_id != second.thread_id
    assert fresh(schedule).thread_id is None


def test_thread_policy_same_continues_one_thread_and_skips_while_its_run_is_open():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot, thread_policy="same")
    svc.schedules_fire_due(now=slot)
    (first,) = runs_of(schedule)
    assert fresh(schedule).thread_id == first.thread_id
    # the first run has not run yet (no worker here): the next slot is skipped
    svc.schedules_fire_due(now=slot + dt.timedelta(minutes=10))
    assert len(runs_of(schedule)) == 1
    current = fresh(schedule)
    assert current.last_outcome == "skipped: previous run still open"
    assert current.last_run_at == slot + dt.timedelta(minutes=10)
    assert current.next_run_at == slot + dt.timedelta(minutes=20)
    with pytest.raises(IllegalTransition, match="previous run still open"):
        svc.schedule_run_now(current, ADMIN)
    drive(first)
    svc.schedules_fire_due(now=slot + dt.timedelta(minutes=20))
    first, second = runs_of(schedule)
    assert second.thread_id == first.thread_id
    assert list(second.thread.messages.order_by("seq").values_list("role", flat=True)) == [
        "user",
        "assistant",
        "user",
    ]


def test_catch_up_skip_records_the_missed_slots_and_starts_nothing():
    now = at(2025, 1, 10, 12, 0)
    slot = now - dt.timedelta(hours=3, minutes=10)  # down for three hours
    schedule = make(interval=3600, next_run_at=slot, catch_up="skip")
    assert svc.schedules_fire_due(now=now)["skipped"] == 1
    assert runs_of(schedule) == []
    current = fresh(schedule)
    assert current.last_outcome == "skipped 4 missed"
    assert current.last_run_at == now - dt.timedelta(minutes=10)
    assert current.next_run_at == now + dt.timedelta(minutes=50)


def test_catch_up_once_starts_one_run_for_everything_missed():
    now = at(2025, 1, 10, 12, 5)
    schedule = make(
        kind="cron", cron="*/15 * * * *", next_run_at=at(2025, 1, 10, 10, 0), catch_up="once"
    )
    svc.schedules_fire_due(now=now)
    svc.schedules_fire_due(now=now + dt.timedelta(seconds=1))
    (run,) = runs_of(schedule)
    current = fresh(schedule)
    # 10:00, 10:15, … 12:00: nine slots passed while nothing ticked
    assert current.last_outcome == f"caught up 9 missed: started run {run.pk}"
    assert current.last_run_at == at(2025, 1, 10, 12, 0)
    assert current.next_run_at == at(2025, 1, 10, 12, 15)


def test_a_slot_fired_within_its_grace_is_on_time_not_caught_up():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(interval=10, next_run_at=slot, catch_up="skip")
    svc.schedules_fire_due(now=slot + dt.timedelta(seconds=4.9))  # grace: 5 s
    assert len(runs_of(schedule)) == 1
    late = make(name="late", interval=10, next_run_at=slot, catch_up="skip")
    svc.schedules_fire_due(now=slot + dt.timedelta(seconds=5.1))
    assert runs_of(late) == [] and fresh(late).last_outcome == "skipped 1 missed"


def test_a_run_that_cannot_start_is_recorded_and_the_schedule_moves_on():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot, agent=AgentFactory(published=False))
    assert svc.schedules_fire_due(now=slot)["failed"] == 1
    current = fresh(schedule)
    assert current.last_outcome.startswith("failed: agent")
    assert "no published version" in current.last_outcome
    assert current.next_run_at == slot + dt.timedelta(minutes=10)
    assert runs_of(schedule) == []


def test_a_schedule_broken_behind_the_form_stops_instead_of_failing_every_second():
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(next_run_at=slot)
    Schedule.objects.filter(pk=schedule.pk).update(kind="cron", cron="99 * * * *")
    svc.schedules_fire_due(now=slot)
    current = fresh(schedule)
    assert current.next_run_at is None
    assert current.last_outcome.startswith("stopped: Invalid cron expression")


def test_the_celery_task_fires_due_schedules():
    from runs.operations.tasks import fire_schedules

    schedule = make(next_run_at=at(2020, 1, 1))
    assert fire_schedules.name == "runs.fire_schedules"
    assert fire_schedules()["skipped"] == 1  # years late, catch-up skip
    assert fresh(schedule).next_run_at > at(2025, 1, 1)


def test_beat_ticks_every_second(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["runs-schedules"]
    assert (entry["task"], entry["schedule"]) == ("runs.fire_schedules", 1.0)


# --- the admin ------------------------------------------------------------------------------


@pytest.fixture
def admin_client(client):
    user = user_with_role("admin", "ada")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    client.force_login(user)
    return client


@pytest.fixture
def staff_operator_client(client):
    user = user_with_role("operator", "opal")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    client.force_login(user)
    return client


def test_an_admin_creates_a_schedule_and_its_next_run_is_planned_and_audited(admin_client):
    agent = scripted_agent([{"text": "ok"}])
    response = admin_client.post(reverse("admin:runs_schedule_add"), form_data(agent))
    assert response.status_code == 302, response.content.decode()[:3000]
    schedule = Schedule.objects.get(name="morning report")
    assert schedule.next_run_at is not None and schedule.next_run_at.astimezone(
        BERLIN
    ).time() == dt.time(9, 0)
    assert schedule.created_by.username == "ada"
    entry = AuditEntry.objects.get(action="schedule.create")
    assert (entry.actor_label, entry.source, entry.after["cron"]) == ("ada", "admin", "0 9 * * 1-5")
    # a change recomputes the next run; pausing through the form clears it
    url = reverse("admin:runs_schedule_change", args=[schedule.pk])
    data = form_data(agent, kind="interval", interval_seconds=30, cron="")
    data.pop("enabled")
    assert admin_client.post(url, data).status_code == 302
    assert fresh(schedule).next_run_at is None
    data["enabled"] = "on"
    assert admin_client.post(url, data).status_code == 302
    assert fresh(schedule).next_run_at is not None
    assert AuditEntry.objects.filter(action="schedule.update").count() == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "0 25 * * *"}, "Invalid cron expression"),
        ({"cron": "*/5 * * *"}, "has 4"),
        ({"timezone": "Europe/Atlantis"}, "Unknown time zone"),
        ({"kind": "interval", "cron": ""}, "needs a number of seconds"),
    ],
)
def test_the_admin_form_refuses_an_invalid_schedule_with_a_message(admin_client, fields, message):
    agent = scripted_agent([{"text": "ok"}])
    response = admin_client.post(reverse("admin:runs_schedule_add"), form_data(agent, **fields))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Schedule.objects.exists()
    assert not AuditEntry.objects.exists()


def test_the_admin_form_refuses_an_agent_never_published(admin_client):
    agent = AgentFactory(slug="draft-only", published=False)
    response = admin_client.post(reverse("admin:runs_schedule_add"), form_data(agent))
    assert response.status_code == 200
    assert "has no published version" in response.content.decode()


def test_the_changelist_and_change_form_show_next_and_last_runs_escaped(admin_client):
    slot = at(2025, 1, 10, 12, 0)
    schedule = make(name=f"nightly {XSS}", next_run_at=slot, message=f"hi {XSS}")
    svc.schedules_fire_due(now=slot)
    (run,) = runs_of(schedule)
    run_url = reverse("runs:run-detail", args=[run.pk])
    page = admin_client.get(reverse("admin:runs_schedule_changelist")).content.decode()
    assert f'<a href="{run_url}">{run.pk}</a>' in page
    assert "every 10 min" in page
    assert "2025-01-10 12:10:00 UTC" in page  # the next run
    assert XSS not in page and "&lt;img src=x" in page
    page = admin_client.get(
        reverse("admin:runs_schedule_change", args=[schedule.pk])
    ).content.decode()
    assert page.count(f'href="{run_url}"') == 2  # last run, and in the last runs
    assert "Run now" in page
    assert XSS not in page


def test_admin_actions_pause_resume_and_run_now(admin_client):
    schedule = make()
    changelist = reverse("admin:runs_schedule_changelist")

    def act(action: str):
        return admin_client.post(
            changelist, {"action": action, "_selected_action": [str(schedule.pk)]}, follow=True
        )

    act("pause")
    assert (fresh(schedule).enabled, fresh(schedule).next_run_at) == (False, None)
    act("resume")
    assert fresh(schedule).enabled and fresh(schedule).next_run_at is not None
    page = act("run_now").content.decode()
    (run,) = runs_of(schedule)
    assert f'started run <a href="{reverse("runs:run-detail", args=[run.pk])}">' in page
    button = reverse("admin:runs_schedule_run_now", args=[schedule.pk])
    assert admin_client.post(button).status_code == 302
    assert len(runs_of(schedule)) == 2
    actions = AuditEntry.objects.filter(target_type="schedule").values_list("action", flat=True)
    assert sorted(actions) == [
        "schedule.pause",
        "schedule.resume",
        "schedule.run_now",
        "schedule.run_now",
    ]


def test_an_operator_cannot_reach_the_schedules_admin(operator_client):
    schedule = make()
    for url in [
        reverse("admin:runs_schedule_changelist"),
        reverse("admin:runs_schedule_change", args=[schedule.pk]),
    ]:
        response = operator_client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_staff_viewer_may_look_but_not_change_pause_or_run(client):
    user = user_with_role("viewer", "vic")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    client.force_login(user)
    schedule = make()
    assert client.get(reverse("admin:runs_schedule_changelist")).status_code == 200
    page = client.get(reverse("admin:runs_schedule_change", args=[schedule.pk])).content.decode()
    assert "Run now" not in page
    assert client.get(reverse("admin:runs_schedule_add")).status_code == 403
    agent = scripted_agent([{"text": "ok"}])
    assert client.post(reverse("admin:runs_schedule_add"), form_data(agent)).status_code == 403
    for action in ("pause", "run_now"):
        client.post(
            reverse("admin:runs_schedule_changelist"),
            {"action": action, "_selected_action": [str(schedule.pk)]},
        )
    button = reverse("admin:runs_schedule_run_now", args=[schedule.pk])
    assert client.post(button).status_code == 403
    assert fresh(schedule).enabled and runs_of(schedule) == []
    assert not AuditEntry.objects.filter(target_type="schedule").exists()


def test_a_staff_operator_adds_changes_pauses_and_runs_now_but_may_not_delete(
    staff_operator_client,
):
    client = staff_operator_client
    agent = scripted_agent([{"text": "ok"}])
    assert client.get(reverse("admin:runs_schedule_add")).status_code == 200
    assert client.post(reverse("admin:runs_schedule_add"), form_data(agent)).status_code == 302
    schedule = Schedule.objects.get(name="morning report")
    change = reverse("admin:runs_schedule_change", args=[schedule.pk])
    page = client.get(change).content.decode()
    assert "Run now" in page
    delete = reverse("admin:runs_schedule_delete", args=[schedule.pk])
    assert delete not in page  # deleting is an admin's
    changelist = reverse("admin:runs_schedule_changelist")
    assert "delete_selected" not in client.get(changelist).content.decode()
    for action in ("pause", "run_now"):
        client.post(changelist, {"action": action, "_selected_action": [str(schedule.pk)]})
    assert not fresh(schedule).enabled and len(runs_of(schedule)) == 1
    button = reverse("admin:runs_schedule_run_now", args=[schedule.pk])
    assert client.post(button).status_code == 302
    assert len(runs_of(schedule)) == 2
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    actions = AuditEntry.objects.filter(target_type="schedule").values_list("action", flat=True)
    assert sorted(actions) == [
        "schedule.create",
        "schedule.pause",
        "schedule.run_now",
        "schedule.run_now",
    ]
